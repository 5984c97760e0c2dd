package caddymodule

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/modulecall"
)

func TestLimitsOutcomes(t *testing.T) {
	appDown := caddyhttp.Error(http.StatusBadGateway, errors.New("dial tcp: connection refused"))
	tests := []struct {
		name        string
		next        func(w http.ResponseWriter, r *http.Request) error
		clientGone  bool
		wantStatus  int    // status written to the client, 0 for none
		wantErr     int    // status of the returned caddyhttp.HandlerError, 0 for none
		wantInMsg   string // part of the JSON message
		wantOutcome modulecall.Outcome
	}{
		{
			name: "slow app",
			next: func(w http.ResponseWriter, r *http.Request) error {
				<-r.Context().Done() // reverse_proxy stops when the context ends
				return caddyhttp.Error(http.StatusGatewayTimeout, r.Context().Err())
			},
			wantStatus: 504, wantInMsg: "The app did not answer within 50ms", wantOutcome: modulecall.Timeout,
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
			wantStatus: 504, wantInMsg: "did not answer within", wantOutcome: modulecall.Timeout,
		},
		{
			name: "answer cut off",
			next: func(w http.ResponseWriter, r *http.Request) error {
				w.WriteHeader(http.StatusOK)
				w.Write([]byte(`{"data":`))
				panic(http.ErrAbortHandler)
			},
			wantStatus: 502, wantInMsg: "cut off", wantOutcome: modulecall.ResponseIncomplete,
		},
		{
			name: "app unreachable",
			next: func(w http.ResponseWriter, r *http.Request) error {
				return appDown
			},
			wantErr: 502, wantOutcome: modulecall.Failed,
		},
		{
			name: "error after a partial answer",
			next: func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("X-App", "1")
				w.Write([]byte(`{"partial`))
				return appDown
			},
			wantErr: 502, wantOutcome: modulecall.Failed,
		},
		{
			name: "client gone",
			next: func(w http.ResponseWriter, r *http.Request) error {
				<-r.Context().Done()
				return caddyhttp.Error(499, r.Context().Err())
			},
			clientGone: true, wantErr: 499, wantOutcome: modulecall.ClientGone,
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
