package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	dto "github.com/prometheus/client_model/go"
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
func countOf(outcome limitsOutcome) float64 {
	var m dto.Metric
	if err := limitsRequests.WithLabelValues(outcome.String()).Write(&m); err != nil {
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
			before := countOf(outcomeRequestTooLarge)
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
			if countOf(outcomeRequestTooLarge) != before+1 {
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
			before := countOf(outcomeResponseTooLarge)
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
			if countOf(outcomeResponseTooLarge) != before+1 {
				t.Fatal("response_too_large not counted")
			}
		})
	}
}

// TestLimitsOutcomes covers what the app (the next handler) may do besides
// answering: take too long, cut its answer off, fail, or lose its client.
func TestLimitsOutcomes(t *testing.T) {
	appDown := caddyhttp.Error(http.StatusBadGateway, errors.New("dial tcp: connection refused"))
	tests := []struct {
		name        string
		next        func(w http.ResponseWriter, r *http.Request) error
		clientGone  bool
		wantStatus  int    // status written to the client, 0 for none
		wantErr     int    // status of the returned caddyhttp.HandlerError, 0 for none
		wantInMsg   string // part of the JSON message
		wantOutcome limitsOutcome
	}{
		{
			name: "slow app",
			next: func(w http.ResponseWriter, r *http.Request) error {
				<-r.Context().Done() // reverse_proxy stops when the context ends
				return caddyhttp.Error(http.StatusGatewayTimeout, r.Context().Err())
			},
			wantStatus: 504, wantInMsg: "The app did not answer within 50ms", wantOutcome: outcomeTimeout,
		},
		{
			name: "app hangs after headers",
			next: func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("X-App", "1")
				w.WriteHeader(http.StatusOK)
				w.Write([]byte(`{"data":`))
				<-r.Context().Done()
				panic(http.ErrAbortHandler)
			},
			wantStatus: 504, wantInMsg: "did not answer within", wantOutcome: outcomeTimeout,
		},
		{
			name: "answer cut off",
			next: func(w http.ResponseWriter, r *http.Request) error {
				w.WriteHeader(http.StatusOK)
				w.Write([]byte(`{"data":`))
				panic(http.ErrAbortHandler)
			},
			wantStatus: 502, wantInMsg: "cut off", wantOutcome: outcomeResponseIncomplete,
		},
		{
			name: "app unreachable",
			next: func(w http.ResponseWriter, r *http.Request) error {
				return appDown
			},
			wantErr: 502, wantOutcome: outcomeError,
		},
		{
			name: "error after a partial answer",
			next: func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("X-App", "1")
				w.Write([]byte(`{"partial`))
				return appDown
			},
			wantErr: 502, wantOutcome: outcomeError,
		},
		{
			name: "client gone",
			next: func(w http.ResponseWriter, r *http.Request) error {
				<-r.Context().Done()
				return caddyhttp.Error(499, r.Context().Err())
			},
			clientGone: true, wantErr: 499, wantOutcome: outcomeClientGone,
		},
	}
	l := newTestLimits(t, &ServiceLimits{Timeout: caddy.Duration(50 * time.Millisecond)})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.clientGone {
				time.AfterFunc(10*time.Millisecond, cancel)
			}
			req := httptest.NewRequest(http.MethodPost, "/file-format", strings.NewReader(`{}`)).WithContext(ctx)
			rec := httptest.NewRecorder()
			before := countOf(tt.wantOutcome)
			err := l.ServeHTTP(rec, req, caddyhttp.HandlerFunc(tt.next))
			if tt.wantErr != 0 {
				var he caddyhttp.HandlerError
				if !errors.As(err, &he) || he.StatusCode != tt.wantErr {
					t.Fatalf("err %v, want a handler error with status %d", err, tt.wantErr)
				}
				if rec.Body.Len() != 0 || rec.Header().Get("X-App") != "" {
					t.Fatalf("wrote %q %v to the client along with an error", rec.Body.String(), rec.Header())
				}
			} else {
				if err != nil {
					t.Fatalf("ServeHTTP: %v", err)
				}
				if rec.Code != tt.wantStatus {
					t.Fatalf("status %d, want %d", rec.Code, tt.wantStatus)
				}
				if msg := errorMessage(t, rec.Body.Bytes()); !strings.Contains(msg, tt.wantInMsg) {
					t.Fatalf("message %q does not say %q", msg, tt.wantInMsg)
				}
				if rec.Header().Get("X-App") != "" {
					t.Fatal("a header of the failed answer reached the client")
				}
			}
			if countOf(tt.wantOutcome) != before+1 {
				t.Fatalf("%s not counted", tt.wantOutcome)
			}
		})
	}
}

func TestLimitsOtherPanicsGoOn(t *testing.T) {
	l := newTestLimits(t, &ServiceLimits{})
	defer func() {
		if v := recover(); v != "bug" {
			t.Fatalf("recovered %v, want the app's own panic", v)
		}
	}()
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{}`))
	l.ServeHTTP(httptest.NewRecorder(), req, caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		panic("bug")
	}))
	t.Fatal("the panic was swallowed")
}

// TestLimitsWithErrorRoutes checks that with handle_errors routes the
// refusals are returned as errors and nothing was written to the client.
func TestLimitsWithErrorRoutes(t *testing.T) {
	l := newTestLimits(t, &ServiceLimits{MaxRequestSize: 10, MaxResponseSize: 10, Timeout: caddy.Duration(30 * time.Millisecond)})
	srv := &caddyhttp.Server{Errors: &caddyhttp.HTTPErrorConfig{Routes: caddyhttp.RouteList{{}}}}
	tests := []struct {
		name   string
		body   string
		next   func(w http.ResponseWriter, r *http.Request) error
		status int
	}{
		{"request too large", strings.Repeat("x", 11), nil, 413},
		{"response too large", "{}", func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("X-App", "1")
			if _, err := w.Write([]byte(strings.Repeat("y", 11))); err != nil {
				panic(http.ErrAbortHandler)
			}
			return nil
		}, 502},
		{"timeout", "{}", func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("X-App", "1")
			<-r.Context().Done()
			return r.Context().Err()
		}, 504},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			req = req.WithContext(context.WithValue(req.Context(), caddyhttp.ServerCtxKey, srv))
			rec := httptest.NewRecorder()
			err := l.ServeHTTP(rec, req, caddyhttp.HandlerFunc(tt.next))
			var he caddyhttp.HandlerError
			if !errors.As(err, &he) || he.StatusCode != tt.status {
				t.Fatalf("err %v, want a handler error with status %d", err, tt.status)
			}
			if he.Err == nil || he.Err.Error() == "" {
				t.Fatal("the error carries no message for handle_errors")
			}
			if rec.Body.Len() != 0 || len(rec.Header()) != 0 || rec.Flushed {
				t.Fatalf("wrote %q %v before returning the error", rec.Body.String(), rec.Header())
			}
		})
	}
}

// fakeCheck records what the exchange check is given.
func TestLimitsContract(t *testing.T) {
	const job = `{"jobType":"file-pre-export","organization":{},"project":{},"sourceLanguage":{"id":"en"},"targetLanguages":[],"strings":[{"uniqId":"h::1","identifier":"a","text":"A"}]}`
	tests := []struct {
		name, mode, job, answer string
		wantStatus              int
		wantMessage             string // in the JSON error; "" when the answer passes as it is
		wantApp                 bool   // the job reached the app
	}{
		{"keeps the contract", "", job, `{"data":{"strings":[{"uniqId":"h::1","identifier":"a","text":"Ä"}]}}`, 200, "", true},
		{"the app's own error", "", job, `{"error":{"message":"Cannot export this file."}}`, 200, "", true},
		{"adds a string", "", job, `{"data":{"strings":[{"uniqId":"h::1","identifier":"a","text":"A"},{"uniqId":"h::9","identifier":"z","text":"Z"}]}}`, 502, `string "z" (number 2) has a uniqId that was not sent`, true},
		{"adds a string, reported", "report", job, `{"data":{"strings":[]}}`, 200, "", true},
		{"a malformed job", "", `{"jobType":"parse-file"}`, `{}`, 400, "pre-export app takes file-pre-export", false},
		{"no job at all", "", ``, `{}`, 400, "not a JSON object", false},
		{"a malformed job, reported", "report", `{"jobType":"parse-file"}`, `{"data":{}}`, 200, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reached := false
			app := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				reached = true
				io.Copy(io.Discard, r.Body)
				w.Write([]byte(tt.answer))
				return nil
			})
			l := newTestLimits(t, &ServiceLimits{Contract: "file-pre-export", Mode: tt.mode})
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/pre-export", strings.NewReader(tt.job))
			if err := l.ServeHTTP(rec, req, app); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tt.wantStatus || reached != tt.wantApp {
				t.Fatalf("status %d, app reached %v; want %d, %v (%s)", rec.Code, reached, tt.wantStatus, tt.wantApp, rec.Body)
			}
			if tt.wantMessage == "" {
				if rec.Body.String() != tt.answer {
					t.Errorf("answer %q, want the app's %q", rec.Body, tt.answer)
				}
				return
			}
			if msg := errorMessage(t, rec.Body.Bytes()); !strings.Contains(msg, tt.wantMessage) {
				t.Errorf("message %q does not hold %q", msg, tt.wantMessage)
			}
		})
	}
}

func TestLimitsHeadKeepsDeclaredLength(t *testing.T) {
	l := newTestLimits(t, &ServiceLimits{})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodHead, "/", nil)
	err := l.ServeHTTP(rec, req, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Length", "1234")
		w.WriteHeader(http.StatusOK)
		return nil
	}))
	if err != nil || rec.Code != 200 || rec.Header().Get("Content-Length") != "1234" {
		t.Fatalf("HEAD: %v %d %v", err, rec.Code, rec.Header())
	}
}

// FuzzLimitsCaddyfile feeds the Caddyfile parser any block: it must never
// panic, and what it accepts must validate with positive limits.
func FuzzLimitsCaddyfile(f *testing.F) {
	f.Add("service_limits")
	f.Add("service_limits {\n}")
	f.Add("service_limits {\nmax_request_size 5MiB\nmax_response_size 500KB\ntimeout 2m\n}")
	f.Add("service_limits {\nmax_request_size 0\n}")
	f.Add("service_limits {\nmax_request_size 99999999999EB\n}")
	f.Add("service_limits {\ntimeout -1s\n}")
	f.Add("service_limits {\ntimeout 1d\n}")
	f.Add("service_limits 5MiB")
	f.Add("service_limits {\ncontract custom-file-format\nmode report\nspill\nspill_max_size 1MiB\n}")
	f.Add("service_limits {\ncontract file-pre-export\ninline_hosts a.example *.b.example\ninline_allow_private\ninline_timeout 5s\n}")
	f.Add("service_limits {\ninline\n}")
	f.Add("service_limits {\ncontract x\n}")
	f.Fuzz(func(t *testing.T, input string) {
		var l ServiceLimits
		if err := l.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err != nil {
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("%q parsed but does not validate: %v", input, err)
		}
		if l.MaxRequestSize < 0 || l.MaxResponseSize < 0 || l.Timeout < 0 {
			t.Fatalf("%q parsed to %+v", input, l)
		}
	})
}
