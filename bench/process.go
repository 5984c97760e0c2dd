package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ports are the loopback ports of one run, all from one base.
type ports struct {
	upstream              int
	plainAdmin, plainHTTP int
	plainHTTPS            int
	chainAdmin, chainHTTP int
	chainHTTPS, emulator  int
	// The Caddy standing in for the service (the emulator site of the
	// chains that need one), in a process of its own.
	serviceAdmin, serviceHTTPS int
	redis                      int // the redis-server of the chains that need one
	redisReplica               int // its replica, for the chains that need one
	plainRedis                 int // the plain side's own, for the chains that need one
	testAdmin, testHTTP, testS int
	// The queue chains' drains: the app (in the bench's process), and the
	// sites of each side that reach it.
	drainApp, plainDrain, chainDrain int
}

func newPorts(base int) ports {
	return ports{
		upstream:   base + 1,
		plainAdmin: base + 19, plainHTTP: base + 80, plainHTTPS: base + 443,
		chainAdmin: base + 29, chainHTTP: base + 90, chainHTTPS: base + 453, emulator: base + 91,
		serviceAdmin: base + 39, serviceHTTPS: base + 454,
		redis: base + 93, redisReplica: base + 94, plainRedis: base + 92,
		testAdmin: base + 109, testHTTP: base + 180, testS: base + 143,
		drainApp: base + 3, plainDrain: base + 81, chainDrain: base + 95,
	}
}

// checkFree fails early, and says which port, when another program already
// listens on one of the ports.
func (p ports) checkFree() error {
	for _, port := range []int{p.upstream, p.plainAdmin, p.plainHTTP, p.chainAdmin, p.chainHTTP, p.emulator, p.serviceAdmin, p.redis, p.redisReplica, p.plainRedis, p.testAdmin, p.testHTTP, p.drainApp, p.plainDrain, p.chainDrain} {
		ln, err := net.Listen("tcp", loopback(port))
		if err != nil {
			return fmt.Errorf("port %d on 127.0.0.1 is in use (another bench run? choose other ports with -port-base): %w", port, err)
		}
		ln.Close()
	}
	return nil
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// benchEnv is what every chain needs from the run.
type benchEnv struct {
	opts     *options
	root     string
	out      string
	ports    ports
	caddyBin string
	// noRedis, when set, says why the chains that need redis-server are
	// skipped (it is not installed).
	noRedis string
	pinning *pinning // with -pin
}

// proc is a child process whose output goes to a log file in bench/out.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

func startProc(name, logPath string, env []string, bin string, args ...string) (*proc, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	// Its own process group, so that a Ctrl-C on the bench does not reach
	// it before the bench has stopped it in order; and ended by the
	// kernel if the bench dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	running.Store(p, struct{}{})
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		running.Delete(p)
		close(p.done)
	}()
	return p, nil
}

// running holds the child processes not yet ended, for stopAll.
var running sync.Map

// stopAll stops every child process still running: on an interrupt the
// bench leaves nothing listening behind it.
func stopAll() {
	var wg sync.WaitGroup
	running.Range(func(k, _ any) bool {
		wg.Add(1)
		go func() { defer wg.Done(); k.(*proc).stop() }()
		return true
	})
	wg.Wait()
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process to end and kills it when it has not within 10 s.
func (p *proc) stop() {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// peakRSS is the process's peak resident set size in bytes (VmHWM).
func (p *proc) peakRSS() (int64, error) {
	return readVmHWM(p.cmd.Process.Pid)
}

func readVmHWM(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseVmHWM(f)
}

func parseVmHWM(r interface{ Read([]byte) (int, error) }) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "VmHWM:") {
			continue
		}
		fields := strings.Fields(strings.TrimPrefix(line, "VmHWM:"))
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmHWM line %q", line)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected VmHWM line %q: %w", line, err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no VmHWM line in /proc/<pid>/status")
}

// cpuTime is the CPU time (user and system) the process has used so far.
func (p *proc) cpuTime() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	return parseProcCPU(string(b))
}

// parseProcCPU reads utime and stime from a /proc/<pid>/stat line; the
// command name in parentheses may hold spaces, so fields are counted from
// the last ')'.
func parseProcCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc/<pid>/stat: no command name")
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc/<pid>/stat: too few fields")
	}
	var ticks int64
	for _, s := range f[11:13] { // fields 14 and 15: utime, stime
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc/<pid>/stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// logTail is the end of the process's log, for error messages.
func (p *proc) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitReady waits until addr accepts connections, failing early when the
// process has exited.
func (p *proc) waitReady(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s exited before it was ready (%v); the end of %s:\n%s", p.name, p.waitErr, p.logPath, p.logTail(15))
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not listen on %s within %s; the end of %s:\n%s", p.name, addr, timeout, p.logPath, p.logTail(15))
}

func startUpstream(env *benchEnv) (*proc, error) {
	addr := loopback(env.ports.upstream)
	p, err := startProc("upstream", filepath.Join(env.out, "upstream.log"), nil, filepath.Join(env.out, "upstream"), "-addr", addr)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(addr, 10*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// caddySide is one running Caddy of a chain: the plain proxy or the chain.
type caddySide struct {
	*proc
	base  string // http://127.0.0.1:<port>
	admin string // http://127.0.0.1:<admin port>, for its CPU profile
}

// globalOptions is the global block of every bench Caddyfile: loopback
// only, no HTTPS, no saved config, quiet logs; then extra (Caddyfile
// lines, may be empty).
func globalOptions(admin, httpPort, httpsPort int, extra string) string {
	var more strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(extra), "\n") {
		if strings.TrimSpace(line) != "" {
			more.WriteString("\t" + line + "\n")
		}
	}
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	http_port %d
	https_port %d
	default_bind 127.0.0.1
	auto_https off
	skip_install_trust
	persist_config off
	grace_period 2s
	log {
		level WARN
	}
%s}
`, admin, httpPort, httpsPort, more.String())
}

// siteWithRoute is a site on port whose one route runs handlers (Caddyfile
// lines, may be empty) and then reverse_proxy to the upstream.
func siteWithRoute(port int, handlers string, upstream int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "http://:%d {\n\troute {\n", port)
	for _, line := range strings.Split(strings.TrimSpace(handlers), "\n") {
		if strings.TrimSpace(line) != "" {
			b.WriteString("\t\t" + line + "\n")
		}
	}
	fmt.Fprintf(&b, "\t\treverse_proxy %s\n\t}\n}\n", loopback(upstream))
	return b.String()
}

// startCaddy writes the Caddyfile and runs bench/out/caddy on it; a
// measured side is pinned with -pin.
func startCaddy(env *benchEnv, name, caddyfile string, httpPort, adminPort int, measured bool) (*caddySide, error) {
	cfgPath := filepath.Join(env.out, name+".Caddyfile")
	if err := os.WriteFile(cfgPath, []byte(caddyfile), 0o644); err != nil {
		return nil, err
	}
	home := filepath.Join(env.out, "home")
	vars := []string{
		"XDG_DATA_HOME=" + filepath.Join(home, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
	}
	if env.pinning != nil && measured {
		vars = append(vars, env.pinning.caddyEnv()...)
	}
	p, err := startProc("caddy ("+name+")", filepath.Join(env.out, name+".log"), vars,
		env.caddyBin, "run", "--config", cfgPath, "--adapter", "caddyfile")
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(loopback(httpPort), 20*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	if env.pinning != nil && measured {
		// Twice: a thread started while the first pass ran was
		// started by one not yet moved.
		for range 2 {
			if err := env.pinning.place(p.cmd.Process.Pid); err != nil {
				p.stop()
				return nil, err
			}
		}
	}
	return &caddySide{proc: p, base: "http://" + loopback(httpPort), admin: "http://" + loopback(adminPort)}, nil
}

// probe sends one request and checks its status, its body when want is
// not nil, and that the body has at least minLen bytes; it returns the
// length of the body, or a short description of what went wrong.
func probe(client *http.Client, rq request, base string, want []byte, minLen int) (int, error) {
	n, err := probeOnce(client, rq, base, want)
	if err == nil && n < minLen {
		err = fmt.Errorf("%s %s answered with %d bytes, fewer than the %d the upstream sends", rq.method, rq.path, n, minLen)
	}
	return n, err
}

func probeOnce(client *http.Client, rq request, base string, want []byte) (int, error) {
	req, err := rq.build(base)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		body := buf.String()
		if len(body) > 300 {
			body = body[:300] + "…"
		}
		return 0, fmt.Errorf("%s %s answered %d: %s", rq.method, rq.path, resp.StatusCode, strings.TrimSpace(body))
	}
	if want != nil && !bytes.Equal(buf.Bytes(), want) {
		return 0, fmt.Errorf("%s %s answered %d with %d bytes, not the %d bytes echoed by the upstream", rq.method, rq.path, resp.StatusCode, buf.Len(), len(want))
	}
	return buf.Len(), nil
}
