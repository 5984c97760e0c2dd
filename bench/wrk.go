package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// wrkStats is what one wrk run reports through the done() hook of its
// script. Latencies are in microseconds.
type wrkStats struct {
	Requests   int64   `json:"requests"`
	DurationUS int64   `json:"duration_us"`
	Status     int64   `json:"status_errors"`
	Connect    int64   `json:"connect_errors"`
	Read       int64   `json:"read_errors"`
	Write      int64   `json:"write_errors"`
	Timeout    int64   `json:"timeouts"`
	P50        float64 `json:"p50_us"`
	P99        float64 `json:"p99_us"`
}

func (s wrkStats) rps() float64 {
	if s.DurationUS <= 0 {
		return 0
	}
	return float64(s.Requests) / (float64(s.DurationUS) / 1e6)
}

func (s wrkStats) socketErrors() int64 { return s.Connect + s.Read + s.Write + s.Timeout }

// check refuses a run whose numbers do not measure the chain: any answer
// other than 2xx/3xx (a refusal is cheaper than a proxied request) or more
// than 0.1% socket errors.
func (s wrkStats) check() error {
	switch {
	case s.Requests == 0:
		return fmt.Errorf("wrk completed no request")
	case s.Status > 0:
		return fmt.Errorf("wrk got %d answers that were not 2xx/3xx out of %d", s.Status, s.Requests)
	case s.socketErrors()*1000 > s.Requests:
		return fmt.Errorf("wrk saw %d socket errors (connect %d, read %d, write %d, timeout %d) in %d requests",
			s.socketErrors(), s.Connect, s.Read, s.Write, s.Timeout, s.Requests)
	}
	return nil
}

// wrkDone is the done() hook appended to every script: one line of JSON
// that parseWrk finds in wrk's output.
const wrkDone = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCHJSON {\"requests\":%d,\"duration_us\":%d,\"status_errors\":%d,\"connect_errors\":%d,\"read_errors\":%d,\"write_errors\":%d,\"timeouts\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f}\n",
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
`

// writeWrkScript writes the Lua script that makes wrk send rq: the body is
// read from a file next to the script, so any bytes go through unchanged.
func writeWrkScript(dir, name string, rq request) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "wrk.method = %s\n", luaQuote(rq.method))
	if rq.body != nil {
		bodyPath := filepath.Join(dir, name+".body")
		if err := os.WriteFile(bodyPath, rq.body, 0o644); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "local f = assert(io.open(%s, \"rb\"))\nwrk.body = f:read(\"*a\")\nf:close()\n", luaQuote(bodyPath))
	}
	for _, h := range rq.headers {
		fmt.Fprintf(&b, "wrk.headers[%s] = %s\n", luaQuote(h[0]), luaQuote(h[1]))
	}
	b.WriteString(wrkDone)
	path := filepath.Join(dir, name+".lua")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// luaQuote writes s as a Lua string literal.
func luaQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\%03d", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// runWrk runs wrk once against url with script and keeps its output in
// logPath.
func runWrk(o *options, script, url, logPath string, d time.Duration) (wrkStats, error) {
	secs := int(d.Round(time.Second) / time.Second)
	if secs < 1 {
		secs = 1
	}
	args := []string{
		"-t", strconv.Itoa(o.threads), "-c", strconv.Itoa(o.connections),
		"-d", strconv.Itoa(secs) + "s", "--timeout", "10s", "--latency", "-s", script, url,
	}
	cmd := exec.Command("wrk", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	// wrk stops itself after -d; the timer is a guard against a hang.
	timer := time.AfterFunc(d+60*time.Second, func() { _ = cmd.Process.Kill() })
	err := cmd.Run()
	timer.Stop()
	_ = os.WriteFile(logPath, out.Bytes(), 0o644)
	if err != nil {
		return wrkStats{}, fmt.Errorf("wrk %s: %w (output in %s)", strings.Join(args, " "), err, logPath)
	}
	s, err := parseWrk(out.Bytes())
	if err != nil {
		return wrkStats{}, fmt.Errorf("%w (output in %s)", err, logPath)
	}
	return s, nil
}

// parseWrk finds the BENCHJSON line in wrk's output.
func parseWrk(out []byte) (wrkStats, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, "BENCHJSON ")
		if !ok {
			continue
		}
		var s wrkStats
		if err := json.Unmarshal([]byte(rest), &s); err != nil {
			return wrkStats{}, fmt.Errorf("unreadable wrk summary %q: %w", rest, err)
		}
		return s, nil
	}
	return wrkStats{}, fmt.Errorf("no summary line in wrk's output")
}
