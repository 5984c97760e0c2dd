//go:build fault

package fault

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Clients declare a 5 MiB body, send one byte of it and hold their
// connection: Caddy's memory must grow with the bytes it received, not with
// the bytes it was promised. 400 such connections may raise its RSS by
// less than 100 MB (the goal of the module limits), whether they go to
// service_limits or to service_webhook; the short run uses a quarter of
// them and a quarter of the bound.
func TestDeclaredLengthFlood(t *testing.T) {
	const declared = 5 << 20
	conns := scale(100, 400)
	bound := int64(conns) * (100 << 20) / 400
	// A well-formed signature, so that service_webhook reads the body
	// (it refuses a delivery without one before reading).
	signature := "sha256=" + strings.Repeat("ab", 32)
	tests := []struct {
		name, path, header string
	}{
		{"service_limits", "/file-format/parse", ""},
		{"service_webhook", "/webhooks", "X-Service-Signature: " + signature + "\r\nX-Service-Domain: flood.example\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := upstreamNoKeepAlive(t, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				_, _ = w.Write([]byte(`{"data":{}}`))
			})
			cd := startCaddy(t, limitsAndWebhookSite(app))
			// One honest request of each kind first, so that what is
			// measured is the flood and not Caddy's first use of a route.
			c := client(2)
			for _, path := range []string{"/file-format/parse", "/webhooks"} {
				resp, err := c.Post(siteURL(path), "application/json", strings.NewReader(`{"jobType":"parse-file"}`))
				if err != nil {
					t.Fatalf("warm-up %s: %v", path, err)
				}
				resp.Body.Close()
			}
			c.CloseIdleConnections()
			time.Sleep(200 * time.Millisecond)
			base := cd.rss()
			goroutines := cd.goroutines()
			cd.resetPeakRSS()

			head := "POST " + tt.path + " HTTP/1.1\r\nHost: " + addr(httpPort) + "\r\nContent-Type: application/json\r\n" +
				tt.header + "Content-Length: " + strconv.Itoa(declared) + "\r\n\r\n{"
			open := make([]net.Conn, 0, conns)
			defer func() {
				for _, conn := range open {
					conn.Close()
				}
			}()
			for i := 0; i < conns; i++ {
				conn, err := net.Dial("tcp", addr(httpPort))
				if err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				open = append(open, conn)
				if _, err := conn.Write([]byte(head)); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
			}
			// Every connection is held by a handler reading its body:
			// one goroutine each (a few may still be on their way).
			held, want := 0, conns*9/10
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if held = cd.goroutines() - goroutines; held >= want {
					break
				}
			}
			time.Sleep(500 * time.Millisecond)
			if held < want {
				t.Errorf("only %d more goroutines with %d connections held open (RSS now %d MiB)", held, conns, cd.rss()>>20)
			}
			peak := cd.peakRSS()
			rise := peak - base
			t.Logf("%d connections each declaring %d bytes and sending 1: caddy RSS %d MiB before, peak %d MiB, rise %d MiB (bound %d MiB)",
				conns, declared, base>>20, peak>>20, rise>>20, bound>>20)
			if rise >= bound {
				t.Errorf("caddy's RSS rose by %d MiB for %d connections that sent 1 byte each; want less than %d MiB", rise>>20, conns, bound>>20)
			}

			for _, conn := range open {
				conn.Close()
			}
			open = open[:0]
			if after := cd.settleGoroutines(goroutines+5, 15*time.Second); after > goroutines+5 {
				t.Errorf("caddy has %d goroutines after the connections closed, %d before", after, goroutines)
			}
			resp, err := c.Post(siteURL("/file-format/parse"), "application/json", strings.NewReader(`{"jobType":"parse-file"}`))
			if err != nil {
				t.Fatalf("caddy stopped serving: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("a job after the flood: %d", resp.StatusCode)
			}
		})
	}
}

// rss is VmRSS of the Caddy process, in bytes.
func (c *caddy) rss() int64 { return c.status("VmRSS") }

// resetPeakRSS sets the process's peak RSS (VmHWM) back to its current RSS,
// so that peakRSS tells the peak from here on.
func (c *caddy) resetPeakRSS() {
	c.t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", c.cmd.Process.Pid), []byte("5"), 0); err != nil {
		c.t.Fatalf("resetting caddy's peak RSS: %v", err)
	}
}

// status reads a size field (in kB) of the Caddy process's status, in bytes.
func (c *caddy) status(field string) int64 {
	c.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		c.t.Fatalf("reading caddy's status: %v", err)
	}
	m := regexp.MustCompile(field + `:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		c.t.Fatalf("no %s in caddy's status", field)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb * 1024
}
