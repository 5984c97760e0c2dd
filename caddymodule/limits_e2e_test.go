package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// limitsApp is a module app behind service_limits: it counts the requests
// that reach it, keeps the last body it received, and reports when a
// request's context ends while it waits.
type limitsApp struct {
	*httptest.Server
	received  atomic.Int64
	lastBody  atomic.Pointer[[]byte]
	lastCL    atomic.Int64
	started   chan struct{} // a waiting request arrived
	cancelled chan struct{} // a waiting request saw its context end
}

// pattern is a body of n bytes that shows where each byte came from.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

func newLimitsApp(t *testing.T) *limitsApp {
	app := &limitsApp{started: make(chan struct{}, 16), cancelled: make(chan struct{}, 16)}
	wait := func(r *http.Request) {
		// net/http notices a closed connection only once the body is read
		io.Copy(io.Discard, r.Body)
		app.started <- struct{}{}
		select {
		case <-r.Context().Done():
			app.cancelled <- struct{}{}
		case <-time.After(20 * time.Second):
		}
	}
	mux := http.NewServeMux()
	// echo: the job as received, answered with its size
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		app.received.Add(1)
		app.lastBody.Store(&body)
		app.lastCL.Store(r.ContentLength)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"data":{"received":%d}}`, len(body))
	})
	// answer?size=N&declared=1: an answer of N bytes, in 4 KB pieces
	// flushed one by one unless its length is declared
	mux.HandleFunc("/answer", func(w http.ResponseWriter, r *http.Request) {
		app.received.Add(1)
		n, _ := strconv.Atoi(r.URL.Query().Get("size"))
		body := pattern(n)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-App", "answer")
		if r.URL.Query().Get("declared") == "1" {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		}
		w.WriteHeader(http.StatusOK)
		for len(body) > 0 {
			piece := body[:min(4096, len(body))]
			body = body[len(piece):]
			if _, err := w.Write(piece); err != nil {
				return
			}
			if r.URL.Query().Get("declared") != "1" {
				http.NewResponseController(w).Flush()
			}
		}
	})
	// slow: never answers
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		app.received.Add(1)
		wait(r)
	})
	// hang: headers and the start of an answer, then nothing
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		app.received.Add(1)
		w.Header().Set("X-App", "hang")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"data":{"strings":[`)
		http.NewResponseController(w).Flush()
		wait(r)
	})
	// trickle: 1 KB every 5ms, far past any limit, until the proxy hangs up
	mux.HandleFunc("/trickle", func(w http.ResponseWriter, r *http.Request) {
		app.received.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("X-App", "trickle")
		piece := pattern(1024)
		for i := 0; i < 1024; i++ {
			_, err := w.Write(piece)
			if err == nil {
				err = http.NewResponseController(w).Flush()
			}
			if err != nil {
				app.cancelled <- struct{}{} // hung up on
				return
			}
			select {
			case <-r.Context().Done():
				app.cancelled <- struct{}{}
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	app.Server = httptest.NewServer(mux)
	t.Cleanup(app.Close)
	return app
}

// startLimitsCaddy starts Caddy with service_limits in front of app:
// /small/* with 64 KiB limits and a 300ms timeout, /stream/* with 64 KiB
// limits and a 30s timeout, /default/* with the defaults.
func startLimitsCaddy(t *testing.T, app *limitsApp) {
	upstream := strings.TrimPrefix(app.URL, "http://")
	startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	handle_path /small/* {
		service_limits {
			max_request_size 64KiB
			max_response_size 64KiB
			timeout 300ms
		}
		reverse_proxy %[1]s
	}
	handle_path /stream/* {
		service_limits {
			max_request_size 64KiB
			max_response_size 64KiB
			timeout 30s
		}
		reverse_proxy %[1]s
	}
	handle_path /default/* {
		service_limits
		reverse_proxy %[1]s
	}
}
`, upstream))
}

// limitsClient opens a new connection for every request, so that no idle
// connection outlives a test.
func limitsClient() *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

// send posts body to path, with its length declared or chunked, and returns
// the status, header and body of the answer.
func send(t *testing.T, path string, body []byte, declared bool) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if !declared {
		rd = io.NopCloser(rd) // hides the length: the client sends it chunked
	}
	req, err := http.NewRequest(http.MethodPost, e2eURL(path), rd)
	if err != nil {
		t.Fatal(err)
	}
	if !declared {
		req.ContentLength = -1
	}
	req.Header.Set("Content-Type", "application/json")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr, Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading the answer to %s: %v", path, err)
	}
	return res.StatusCode, res.Header, got
}

// wantJSONError checks an answer is the JSON error the service shows, with
// a message holding want.
func wantJSONError(t *testing.T, header http.Header, body []byte, want string) {
	t.Helper()
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q, want JSON", ct)
	}
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("answer %.200q is not the JSON error: %v", body, err)
	}
	if !strings.Contains(e.Error.Message, want) {
		t.Fatalf("message %q does not say %q", e.Error.Message, want)
	}
}

func TestLimitsE2ERequestSizes(t *testing.T) {
	app := newLimitsApp(t)
	startLimitsCaddy(t, app)
	const max = 64 << 10
	tests := []struct {
		size     int
		declared bool
		want     int
		inMsg    string
	}{
		{max - 1, true, 200, ""},
		{max, true, 200, ""},
		{max + 1, true, 413, "the request is 64.1 KB and the app accepts at most 64 KB"},
		{1 << 20, true, 413, "the request is 1 MB and the app accepts at most 64 KB"},
		{max - 1, false, 200, ""},
		{max, false, 200, ""},
		{max + 1, false, 413, "the request is larger than 64 KB"},
		{1 << 20, false, 413, "the request is larger than 64 KB"},
		{0, false, 200, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d bytes, declared %v", tt.size, tt.declared), func(t *testing.T) {
			before := app.received.Load()
			sent := pattern(tt.size)
			status, header, body := send(t, "/small/echo", sent, tt.declared)
			if status != tt.want {
				t.Fatalf("status %d, want %d: %.200q", status, tt.want, body)
			}
			if tt.want != 200 {
				wantJSONError(t, header, body, tt.inMsg)
				if app.received.Load() != before {
					t.Fatal("a refused request reached the app")
				}
				return
			}
			if app.received.Load() != before+1 {
				t.Fatal("the app did not get the request")
			}
			if got := *app.lastBody.Load(); !bytes.Equal(got, sent) {
				t.Fatalf("the app got %d bytes, not the %d sent", len(got), len(sent))
			}
			if cl := app.lastCL.Load(); cl != int64(tt.size) {
				t.Fatalf("the app saw Content-Length %d, want %d", cl, tt.size)
			}
		})
	}
}

func TestLimitsE2EDefaults(t *testing.T) {
	app := newLimitsApp(t)
	startLimitsCaddy(t, app)
	const max = 5 << 20
	tests := []struct {
		size     int
		declared bool
		want     int
		inMsg    string
	}{
		{max, false, 200, ""},
		{max, true, 200, ""},
		{max + 1, false, 413, "the request is larger than 5 MB"},
		{6_500_000, true, 413, "the request is 6.2 MB and the app accepts at most 5 MB"},
	}
	for _, tt := range tests {
		before := app.received.Load()
		t.Logf("%d bytes, declared %v", tt.size, tt.declared)
		status, header, body := send(t, "/default/echo", pattern(tt.size), tt.declared)
		if status != tt.want {
			t.Fatalf("%d bytes: status %d, want %d", tt.size, status, tt.want)
		}
		if tt.want == 413 {
			wantJSONError(t, header, body, tt.inMsg)
			if app.received.Load() != before {
				t.Fatal("a refused request reached the app")
			}
		}
	}
	// and an answer at the default response limit, then one over it
	status, _, body := send(t, fmt.Sprintf("/default/answer?size=%d", max), nil, true)
	if status != 200 || !bytes.Equal(body, pattern(max)) {
		t.Fatalf("5 MiB answer: status %d, %d bytes", status, len(body))
	}
	status, header, body := send(t, fmt.Sprintf("/default/answer?size=%d&declared=1", max+1), nil, true)
	if status != 502 {
		t.Fatalf("5 MiB + 1 answer: status %d", status)
	}
	wantJSONError(t, header, body, "it is 5.1 MB and the service accepts at most 5 MB")
}

func TestLimitsE2EResponseSizes(t *testing.T) {
	app := newLimitsApp(t)
	startLimitsCaddy(t, app)
	const max = 64 << 10
	tests := []struct {
		size     int
		declared bool
		want     int
		inMsg    string
	}{
		{max - 1, false, 200, ""},
		{max, false, 200, ""},
		{max + 1, false, 502, "it is larger than 64 KB and the service accepts at most 64 KB"},
		{1 << 20, false, 502, "it is larger than 64 KB"},
		{max - 1, true, 200, ""},
		{max, true, 200, ""},
		{max + 1, true, 502, "it is 64.1 KB and the service accepts at most 64 KB"},
		{1 << 20, true, 502, "it is 1 MB"},
		{0, false, 200, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d bytes, declared %v", tt.size, tt.declared), func(t *testing.T) {
			path := fmt.Sprintf("/stream/answer?size=%d", tt.size)
			if tt.declared {
				path += "&declared=1"
			}
			status, header, body := send(t, path, []byte(`{"jobType":"parse-file"}`), true)
			if status != tt.want {
				t.Fatalf("status %d, want %d", status, tt.want)
			}
			if tt.want == 502 {
				wantJSONError(t, header, body, tt.inMsg)
				if header.Get("X-App") != "" {
					t.Fatal("a header of the refused answer reached the client")
				}
				return
			}
			if !bytes.Equal(body, pattern(tt.size)) {
				t.Fatalf("got %d bytes, not the %d the app sent", len(body), tt.size)
			}
			if header.Get("X-App") != "answer" || header.Get("Content-Length") != strconv.Itoa(tt.size) {
				t.Fatalf("header %v", header)
			}
		})
	}
}

// waitFor fails the test unless ch delivers within a generous bound (a
// guard against hanging, not a measure of speed).
