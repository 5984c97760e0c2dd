package caddymodule

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/emulator"
)

// caddyProcess is a real Caddy process: this test binary run as Caddy.
type caddyProcess struct {
	cmd *exec.Cmd
	log *os.File
}

func startCaddyProcess(t *testing.T, caddyfile string, env ...string) *caddyProcess {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(conf, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "caddy.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "run", "--config", conf, "--adapter", "caddyfile")
	// env, last, overrides the defaults (a data directory that outlives
	// the process, say).
	cmd.Env = append(append(os.Environ(), envRunCaddy+"=1", "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &caddyProcess{cmd: cmd, log: logf}
	t.Cleanup(p.kill)
	return p
}

// kill ends the process with SIGKILL: no cleanup, no graceful shutdown.
func (p *caddyProcess) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
	p.log.Close()
}

func (p *caddyProcess) logText() string {
	b, _ := os.ReadFile(p.log.Name())
	return string(b)
}

// waitListening waits for addr to accept connections.
func waitListening(t *testing.T, url string, p *caddyProcess) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Caddy did not start listening: %v\n%s", err, p.logText())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// queueProcessCaddyfile is the config of a Caddy process whose /webhooks
// queues deliveries to app, with global (more global options) and queue
// (more queue settings); /ready tells it listens.
func queueProcessCaddyfile(port int, app *queueApp, global, queue string) string {
	return fmt.Sprintf(`{
	admin off
	persist_config off
	skip_install_trust
	auto_https off
	%s
}
http://127.0.0.1:%d {
	route /webhooks {
		service_webhook {
			secret demo-app-secret
			queue {
				to http://%s
				%s
			}
		}
	}
	respond /ready 200
}
`, global, port, app.addr, queue)
}

// TestWebhookQueueSurvivesSIGKILL: a Caddy killed with SIGKILL while it
// delivers 1,000 acknowledged deliveries to a slow app loses none of them
// once restarted.
func TestWebhookQueueSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Caddy processes: skipped in -short mode")
	}
	const total = 1000
	app, slow := slowQueueApp(t, 20*time.Millisecond)
	port := freePort()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	caddyfile := queueProcessCaddyfile(port, app, "", "dir "+t.TempDir()+"\nconcurrency 4")

	first := startCaddyProcess(t, caddyfile)
	waitListening(t, base+"/ready", first)

	// 1,000 deliveries from 16 senders, every one acknowledged.
	if failed := sendQueuedMany(base+"/webhooks", total, 16, 10, queuedDelivery); failed != 0 {
		t.Fatalf("%d deliveries were not acknowledged", failed)
	}
	before := app.total()
	first.kill() // SIGKILL mid-delivery: the app is slow, most are still queued
	if before >= total {
		t.Fatalf("all %d were delivered before the kill; the test proves nothing", before)
	}

	slow.Store(false)
	second := startCaddyProcess(t, caddyfile)
	waitListening(t, base+"/ready", second)
	waitUntil(t, "every acknowledged delivery after the restart", func() bool { return app.distinct() == total })
	t.Logf("%d of %d were delivered before the kill; all %d after the restart (%d acknowledged twice: in flight at the kill)",
		before, total, total, app.total()-total)
}

// slowQueueApp is a queue app, up, that takes delay over each delivery
// until slow is set false.
func slowQueueApp(t *testing.T, delay time.Duration) (app *queueApp, slow *atomic.Bool) {
	app, slow = newQueueApp(t), new(atomic.Bool)
	slow.Store(true)
	app.answer = func(*http.Request) int {
		if slow.Load() {
			time.Sleep(delay)
		}
		return http.StatusOK
	}
	app.up(t)
	return app, slow
}

// sendQueuedMany sends total signed deliveries to url from senders
// goroutines, delivery i from organization i%orgs with the body body(i),
// and counts those not acknowledged with 202.
func sendQueuedMany(url string, total, senders, orgs int, body func(i int) string) int64 {
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				if status, _ := sendQueuedTo(url, fmt.Sprintf("org%d.example", i%orgs), body(i)); status != http.StatusAccepted {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return failed.Load()
}

// sendQueuedTo posts one signed delivery to url.
func sendQueuedTo(url, org, body string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Service-Domain", org)
	req.Header.Set("X-Service-Signature", emulator.SignDelivery([]byte(body), "demo-app-secret"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// rssKiB reads a process's resident set (VmRSS) and its peak (VmHWM).
func rssKiB(t *testing.T, pid int) (rss, peak int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			rss = n
		case "VmHWM:":
			peak = n
		}
	}
	return rss, peak
}

// TestWebhookQueueBurstStaysOnDisk: a burst of 10,000 deliveries toward an
// app that takes 100 a second is acknowledged at the speed of the disk,
// with the bodies on disk, not in memory. The acknowledgement rate is
// logged (BENCHMARKS.md compares it with the queue off); only the memory
// bound is asserted.
func TestWebhookQueueBurstStaysOnDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Caddy process and sends 10,000 deliveries: skipped in -short mode")
	}
	const total = 10000
	app := newQueueApp(t)
	var mu sync.Mutex
	app.answer = func(*http.Request) int { // 100 a second, one at a time
		mu.Lock()
		time.Sleep(10 * time.Millisecond)
		mu.Unlock()
		return http.StatusOK
	}
	app.up(t)
	port := freePort()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	p := startCaddyProcess(t, queueProcessCaddyfile(port, app, "", "dir "+t.TempDir()))
	waitListening(t, base+"/ready", p)
	startRSS, _ := rssKiB(t, p.cmd.Process.Pid)

	padding := strings.Repeat("x", 900) // about 1 KB a delivery
	start := time.Now()
	failed := sendQueuedMany(base+"/webhooks", total, 32, 50, func(i int) string {
		return fmt.Sprintf(`{"events":[{"event":"project.translated","project":{"id":"%d"},"pad":"%s"}]}`, i, padding)
	})
	elapsed := time.Since(start)
	_, peak := rssKiB(t, p.cmd.Process.Pid)
	if failed != 0 {
		t.Fatalf("%d of %d deliveries were not acknowledged", failed, total)
	}
	grew := (peak - startRSS) / 1024
	t.Logf("%d deliveries acknowledged in %s (%.0f/s) while the app took %d; Caddy RSS %d MiB at start, peak %d MiB (+%d MiB)",
		total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), app.total(), startRSS/1024, peak/1024, grew)
	// 10,000 bodies of about 1 KB are 10 MB; held in memory with their
	// headers and bookkeeping they would be several times that. The bound
	// leaves room for the runtime and the store's mapped pages (about 30
	// MiB measured), and for the race detector's shadow memory when the
	// test binary, and so the Caddy it runs, is built with it (about 90).
	bound := int64(100)
	if raceEnabled {
		bound = 150
	}
	if grew > bound {
		t.Errorf("Caddy's RSS grew by %d MiB during the burst (bound %d MiB); the bodies belong on disk", grew, bound)
	}
}
