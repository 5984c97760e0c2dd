package webhook

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/servicegate/servicegate/respond"
	"github.com/servicegate/servicegate/signature"
)

// nextFunc is the handler after a Handler in these tests.
type nextFunc func(http.ResponseWriter, *http.Request) error

func (f nextFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) error { return f(w, r) }

// TestHandlerWithoutCaddy: a Handler configured with a Checker alone
// answers its refusals as JSON, passes verified deliveries on byte for
// byte or hands them to Enqueue, and reports one outcome per delivery.
func TestHandlerWithoutCaddy(t *testing.T) {
	v, err := signature.NewVerifier("app-wide")
	if err != nil {
		t.Fatal(err)
	}
	var queued []byte
	enqueue := func(w http.ResponseWriter, _ *http.Request, body []byte) error {
		queued = bytes.Clone(body)
		w.WriteHeader(http.StatusAccepted)
		return nil
	}
	tests := []struct {
		name    string
		maxSize int64
		enqueue bool
		sig     string
		status  int
		outcome Outcome
	}{
		{"verified, to the app", 0, false, hmacHex("app-wide", delivery), http.StatusNoContent, Accepted},
		{"verified, to the queue", 0, true, hmacHex("app-wide", delivery), http.StatusAccepted, Accepted},
		{"not signed", 0, false, "", http.StatusUnauthorized, MissingSignature},
		{"another secret", 0, false, hmacHex("guess", delivery), http.StatusUnauthorized, BadSignature},
		{"over max size", 16, false, hmacHex("app-wide", delivery), http.StatusRequestEntityTooLarge, TooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reported []Outcome
			cfg := HandlerConfig{Checker: &Checker{AppWide: v}, MaxSize: tt.maxSize, Report: func(o Outcome) { reported = append(reported, o) }}
			if tt.enqueue {
				cfg.Enqueue = enqueue
			}
			h, err := NewHandler(cfg)
			if err != nil {
				t.Fatal(err)
			}
			queued = nil
			var got []byte
			next := nextFunc(func(w http.ResponseWriter, r *http.Request) error {
				got, _ = io.ReadAll(r.Body)
				w.WriteHeader(http.StatusNoContent)
				return nil
			})
			req := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(delivery))
			if tt.sig != "" {
				req.Header.Set(HeaderSignature, tt.sig)
			}
			rec := httptest.NewRecorder()
			if err := h.Serve(rec, req, next); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tt.status || len(reported) != 1 || reported[0] != tt.outcome {
				t.Fatalf("status %d, outcomes %v; want %d, [%v]", rec.Code, reported, tt.status, tt.outcome)
			}
			switch {
			case tt.status == http.StatusNoContent && !bytes.Equal(got, delivery):
				t.Fatalf("the app got %q, want the delivery", got)
			case tt.status == http.StatusAccepted && (got != nil || !bytes.Equal(queued, delivery)):
				t.Fatalf("the app got %q and the queue %q, want the delivery in the queue only", got, queued)
			case tt.status >= 400:
				var eb respond.ErrorBody
				if got != nil || json.Unmarshal(rec.Body.Bytes(), &eb) != nil || eb.Error.Message == "" {
					t.Fatalf("refusal %q reached the app (%q) or is not {\"error\":{\"message\":…}}", rec.Body, got)
				}
			}
		})
	}
}

func TestHandlerNeedsAChecker(t *testing.T) {
	if h, err := NewHandler(HandlerConfig{}); err == nil || h != nil {
		t.Fatalf("NewHandler without a Checker returned %v, %v", h, err)
	}
}

// Every outcome has a name of its own, as metrics label it.
func TestOutcomeNames(t *testing.T) {
	seen := map[string]bool{}
	for o := range NumOutcomes {
		name := o.String()
		if name == "" || seen[name] {
			t.Fatalf("outcome %d is named %q, empty or taken", o, name)
		}
		seen[name] = true
	}
	if got := NumOutcomes.String(); got != "outcome 9" {
		t.Fatalf("an outcome out of range is named %q", got)
	}
}
