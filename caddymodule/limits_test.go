package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/servicegate/servicegate/modulecall"
)

// newTestLimits provisions a service_limits handler as Caddy would.
func newTestLimits(t testing.TB, l *ServiceLimits) *ServiceLimits {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := l.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	return l
}

// unsized hides the length of a body, as a chunked request does.
type unsized struct{ io.Reader }

func (unsized) Close() error { return nil }

// errorMessage decodes a {"error":{"message":…}} answer.
func errorMessage(t testing.TB, body []byte) string {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" {
		t.Fatalf("answer %q is not a JSON error: %v", body, err)
	}
	return e.Error.Message
}

// countOf reads the service_limits counter of outcome.
func countOf(outcome modulecall.Outcome) float64 {
	var m dto.Metric
	if err := limitsRequests.WithLabelValues(limitsOutcomeNames[outcome]).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func TestLimitsProvisionDefaults(t *testing.T) {
	l := newTestLimits(t, &ServiceLimits{})
	if l.MaxRequestSize != 5242880 || l.MaxResponseSize != 5242880 || time.Duration(l.Timeout) != 2*time.Minute {
		t.Fatalf("defaults %d, %d, %v; want 5 MiB, 5 MiB, 2m", l.MaxRequestSize, l.MaxResponseSize, time.Duration(l.Timeout))
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, l := range []ServiceLimits{
		{MaxRequestSize: -1},
		{MaxResponseSize: -1},
		{Timeout: caddy.Duration(-time.Second)},
	} {
		if err := l.Validate(); err == nil {
			t.Errorf("%+v validated", l)
		}
	}
}

// TestLimitsRequests runs request bodies around the limit, with and without
// a declared length, through the handler.
func TestLimitsRequests(t *testing.T) {
	const max = 1000
	tests := []struct {
		name       string
		size       int
		declared   bool
		wantStatus int
		wantInMsg  string
	}{
		{"empty", 0, true, 200, ""},
		{"under, declared", max - 1, true, 200, ""},
		{"at, declared", max, true, 200, ""},
		{"over, declared", max + 1, true, 413, "the request is 1001 bytes and the app accepts at most 1000 bytes"},
		{"far over, declared", 6_500_000, true, 413, "the request is 6.2 MB"},
		{"under, unsized", max - 1, false, 200, ""},
		{"at, unsized", max, false, 200, ""},
		{"over, unsized", max + 1, false, 413, "the request is larger than 1000 bytes"},
		{"empty, unsized", 0, false, 200, ""},
	}
	l := newTestLimits(t, &ServiceLimits{MaxRequestSize: max})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sent := bytes.Repeat([]byte("a"), tt.size)
			req := httptest.NewRequest(http.MethodPost, "/file-format/parse", bytes.NewReader(sent))
			if !tt.declared {
				req.ContentLength = -1
				req.Body = unsized{bytes.NewReader(sent)}
			}
			var called bool
			next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				called = true
				got, err := io.ReadAll(r.Body)
				if err != nil {
					return err
				}
				if !bytes.Equal(got, sent) {
					t.Errorf("the app got %d bytes, want the %d sent", len(got), len(sent))
				}
				if r.ContentLength != int64(len(sent)) {
					t.Errorf("ContentLength %d, want %d", r.ContentLength, len(sent))
				}
				if tt.size > 0 && r.Header.Get("Content-Length") != strconv.Itoa(tt.size) {
					t.Errorf("Content-Length header %q, want %d", r.Header.Get("Content-Length"), tt.size)
				}
				w.Write([]byte(`{"data":{}}`))
				return nil
			})
			before := countOf(modulecall.RequestTooLarge)
			rec := httptest.NewRecorder()
			if err := l.ServeHTTP(rec, req, next); err != nil {
				t.Fatalf("ServeHTTP: %v", err)
			}
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d", rec.Code, tt.wantStatus)
			}
			if tt.wantStatus == 200 {
				if !called || rec.Body.String() != `{"data":{}}` {
					t.Fatalf("app called %v, answer %q", called, rec.Body.String())
				}
				return
			}
			if called {
				t.Fatal("a refused request reached the app")
			}
			if msg := errorMessage(t, rec.Body.Bytes()); !strings.Contains(msg, tt.wantInMsg) {
				t.Fatalf("message %q does not say %q", msg, tt.wantInMsg)
			}
			if countOf(modulecall.RequestTooLarge) != before+1 {
				t.Fatal("request_too_large not counted")
			}
		})
	}
}

// TestLimitsResponses runs app answers around the limit, with and without a
// declared length.
func TestLimitsResponses(t *testing.T) {
	const max = 1000
	tests := []struct {
		name       string
		size       int
		declared   bool
		chunks     int
		wantStatus int
		wantInMsg  string
	}{
		{"under", max - 1, false, 3, 201, ""},
		{"at", max, false, 1, 201, ""},
		{"at, declared", max, true, 4, 201, ""},
		{"over", max + 1, false, 1, 502, "it is larger than 1000 bytes and the service accepts at most 1000 bytes"},
		{"over in chunks", 3 * max, false, 30, 502, "larger than 1000 bytes"},
		{"over, declared", 6_500_000, true, 1, 502, "it is 6.2 MB and the service accepts at most 1000 bytes"},
	}
	l := newTestLimits(t, &ServiceLimits{MaxResponseSize: max})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer := bytes.Repeat([]byte("b"), tt.size)
			var writeFailed bool
			next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-App", "1")
				if tt.declared {
					w.Header().Set("Content-Length", strconv.Itoa(tt.size))
				}
				w.WriteHeader(http.StatusCreated)
				step := (len(answer) + tt.chunks - 1) / tt.chunks
				for i := 0; i < len(answer); i += step {
					if _, err := w.Write(answer[i:min(i+step, len(answer))]); err != nil {
						writeFailed = true
						panic(http.ErrAbortHandler) // as reverse_proxy does
					}
				}
				return nil
			})
			before := countOf(modulecall.ResponseTooLarge)
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/pre-export", strings.NewReader(`{"jobType":"file-pre-export"}`))
			if err := l.ServeHTTP(rec, req, next); err != nil {
				t.Fatalf("ServeHTTP: %v", err)
			}
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d", rec.Code, tt.wantStatus)
			}
			if tt.wantStatus == 201 {
				if !bytes.Equal(rec.Body.Bytes(), answer) {
					t.Fatalf("the client got %d bytes, want the %d the app sent", rec.Body.Len(), len(answer))
				}
				if rec.Header().Get("X-App") != "1" || rec.Header().Get("Content-Length") != strconv.Itoa(tt.size) {
					t.Fatalf("header %v", rec.Header())
				}
				return
			}
			if rec.Header().Get("X-App") != "" {
				t.Fatal("a header of the refused answer reached the client")
			}
			if msg := errorMessage(t, rec.Body.Bytes()); !strings.Contains(msg, tt.wantInMsg) {
				t.Fatalf("message %q does not say %q", msg, tt.wantInMsg)
			}
			if !writeFailed {
				t.Fatal("the app's writes never failed")
			}
			if countOf(modulecall.ResponseTooLarge) != before+1 {
				t.Fatal("response_too_large not counted")
			}
		})
	}
}

// TestLimitsOutcomes covers what the app (the next handler) may do besides
// answering: take too long, cut its answer off, fail, or lose its client.

// TestLimitsPassesDeclaredRequestsAsTheyArrive: without a contract, a
// request of declared length within the limit reaches the app as the
// client sends it, without a copy; with a contract it is read first.
func TestLimitsPassesDeclaredRequestsAsTheyArrive(t *testing.T) {
	for _, c := range []struct {
		name     string
		limits   *ServiceLimits
		declared bool
		stream   bool
	}{
		{"declared, no contract", &ServiceLimits{MaxRequestSize: 1000}, true, true},
		{"unsized, no contract", &ServiceLimits{MaxRequestSize: 1000}, false, false},
		{"declared, contract", &ServiceLimits{MaxRequestSize: 1000, Contract: "custom-file-format", Mode: "report"}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newTestLimits(t, c.limits)
			sent := []byte(`{"jobType":"parse-file"}`)
			original := io.NopCloser(bytes.NewReader(sent))
			req := httptest.NewRequest(http.MethodPost, "/file-format/parse", nil)
			req.Body, req.ContentLength = original, int64(len(sent))
			if !c.declared {
				req.ContentLength = -1
			}
			var same bool
			next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				same = r.Body == original
				io.Copy(io.Discard, r.Body)
				w.Write([]byte(`{"error":{"message":"x"}}`))
				return nil
			})
			if err := l.ServeHTTP(httptest.NewRecorder(), req, next); err != nil {
				t.Fatal(err)
			}
			if same != c.stream {
				t.Errorf("the app read the client's own body: %v, want %v", same, c.stream)
			}
		})
	}
}
