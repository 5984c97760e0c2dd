package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

func TestLimitsE2ESlowApps(t *testing.T) {
	app := newLimitsApp(t)
	startLimitsCaddy(t, app)
	tests := []struct {
		path  string
		want  int
		inMsg string
	}{
		{"/small/slow", 504, "The app did not answer within 300ms"},
		{"/small/hang", 504, "The app did not answer within 300ms"},
		{"/stream/trickle", 502, "The app's answer is too large: it is larger than 64 KB"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			status, header, body := send(t, tt.path, []byte(`{"jobType":"build-file"}`), true)
			if status != tt.want {
				t.Fatalf("status %d, want %d: %.200q", status, tt.want, body)
			}
			wantJSONError(t, header, body, tt.inMsg)
			if header.Get("X-App") != "" {
				t.Fatal("a header of the failed answer reached the client")
			}
			waitFor(t, app.cancelled, "the app seeing its request cancelled")
		})
	}
}

// TestLimitsE2ESlowUpload sends the start of a job, then nothing: the
// client gets 408 at the timeout, and the app never sees the request.
func TestLimitsE2ESlowUpload(t *testing.T) {
	app := newLimitsApp(t)
	startLimitsCaddy(t, app)
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		pw.Write([]byte(`{"jobType":"parse-file",`))
	}()
	req, err := http.NewRequest(http.MethodPost, e2eURL("/small/echo"), pr)
	if err != nil {
		t.Fatal(err)
	}
	res, err := limitsClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408: %q", res.StatusCode, body)
	}
	wantJSONError(t, res.Header, body, "The file did not arrive within 300ms")
	if app.received.Load() != 0 {
		t.Fatal("an unfinished request reached the app")
	}
}

func TestLimitsE2EErrorRoutes(t *testing.T) {
	app := newLimitsApp(t)
	startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	service_limits {
		max_request_size 1KiB
		max_response_size 1KiB
	}
	reverse_proxy %s
	handle_errors {
		respond "{err.status_code}: {err.message}"
	}
}
`, strings.TrimPrefix(app.URL, "http://")))
	status, _, body := send(t, "/echo", pattern(2048), false)
	if status != 413 || !strings.HasPrefix(string(body), "413: The file is too large for this app") {
		t.Fatalf("request over the limit: %d %q", status, body)
	}
	status, _, body = send(t, "/answer?size=2048", nil, true)
	if status != 502 || !strings.HasPrefix(string(body), "502: The app's answer is too large") {
		t.Fatalf("answer over the limit: %d %q", status, body)
	}
}

// limitsGoroutines counts the goroutines running service_limits code.
func limitsGoroutines() (int, string) {
	buf := make([]byte, 1<<20)
	dump := string(buf[:runtime.Stack(buf, true)])
	n := 0
	for _, g := range strings.Split(dump, "\n\n") {
		if strings.Contains(g, "(*ServiceLimits)") || strings.Contains(g, "modulecall.(*Handler)") {
			n++
		}
	}
	return n, dump
}

// TestLimitsE2EClientGone hangs up while the app works: the app sees its
// request cancelled, and no goroutine is left behind.
func TestLimitsE2EClientGone(t *testing.T) {
	app := newLimitsApp(t)
	startLimitsCaddy(t, app)
	if status, _, _ := send(t, "/stream/echo", []byte(`{}`), true); status != 200 {
		t.Fatalf("warm-up: status %d", status)
	}
	baseline := runtime.NumGoroutine()

	for _, path := range []string{"/stream/slow", "/stream/hang"} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e2eURL(path), strings.NewReader(`{}`))
		done := make(chan error, 1)
		go func() {
			res, err := limitsClient().Do(req)
			if err == nil {
				_, err = io.ReadAll(res.Body)
				res.Body.Close()
			}
			done <- err
		}()
		waitFor(t, app.started, "the app getting the request")
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: client got %v, want its own cancellation", path, err)
		}
		waitFor(t, app.cancelled, "the app seeing its request cancelled")
	}

	deadline := time.Now().Add(15 * time.Second)
	for {
		n, dump := limitsGoroutines()
		total := runtime.NumGoroutine()
		if n == 0 && total <= baseline {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines in service_limits, %d in all (%d before):\n%s", n, total, baseline, dump)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
