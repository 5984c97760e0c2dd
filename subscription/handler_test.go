package subscription

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servicegate/servicegate/token"
)

func TestBearerToken(t *testing.T) {
	tests := map[string]string{
		"Bearer abc":        "abc",
		"bearer abc":        "abc",
		"BEARER  abc ":      "abc",
		"Bearer":            "",
		"Bearer ":           "",
		"Basic abc":         "",
		"Bearerabc":         "",
		"":                  "",
		"Token x Bearer":    "",
		"Bearer \v":         "",
		"Bearer a b":        "",
		"Bearer a\x00":      "",
		"Bearer ===":        "",
		"Bearer ab+/_~.-==": "ab+/_~.-==",
	}
	for in, want := range tests {
		if got := BearerToken(in); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzBearerToken(f *testing.F) {
	f.Add("Bearer abc")
	f.Add("bearer ")
	f.Add("Basic x")
	f.Fuzz(func(t *testing.T, header string) {
		tok := BearerToken(header)
		if tok != "" && !strings.Contains(header, tok) {
			t.Fatalf("token %q not from %q", tok, header)
		}
		if tok != strings.TrimSpace(tok) {
			t.Fatalf("token %q has surrounding space", tok)
		}
		if tok != "" && !token.IsB64Token(tok) {
			t.Fatalf("token %q is not of bearer token syntax", tok)
		}
	})
}

func FuzzValidBaseValue(f *testing.F) {
	f.Add("acme")
	f.Add("evil.example/x")
	f.Add("a@b")
	f.Fuzz(func(t *testing.T, s string) {
		if !ValidBaseValue(s) {
			return
		}
		if strings.ContainsAny(s, "/?#@:[] \\%") || s == "" {
			t.Fatalf("%q accepted", s)
		}
	})
}

// nextHandler records whether the request was passed on.
type nextHandler struct{ called bool }

func (n *nextHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) error {
	n.called = true
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// TestHandlerWithoutCaddy runs the check as a Go app would, with the
// defaults of HandlerConfig, and a clock of its own for on_error "stale".
func TestHandlerWithoutCaddy(t *testing.T) {
	var mu sync.Mutex
	status, body := http.StatusPaymentRequired, `{"subscribe_link":"https://service.example/pay"}`
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(svc.Close)
	answer := func(s int, b string) { mu.Lock(); status, body = s, b; mu.Unlock() }
	clock := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }

	client, err := NewClient("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.CloseIdleConnections)
	var events []Event
	h, err := NewHandler(HandlerConfig{
		App:        "my-app",
		BaseURL:    svc.URL,
		Policy:     Policy{Timeout: 5 * time.Second},
		OnError:    Stale,
		StaleGrace: time.Minute,
		Cache:      NewCache(10, now),
		Client:     client,
		Now:        now,
		Report:     func(ev Event, _ Detail) { events = append(events, ev) },
	})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(auth string) (*httptest.ResponseRecorder, bool) {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "/api", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w, next := httptest.NewRecorder(), new(nextHandler)
		if err := h.Serve(w, r, next); err != nil {
			t.Fatal(err)
		}
		return w, next.called
	}

	if w, _ := serve(""); w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != `Bearer realm="service"` {
		t.Errorf("no token: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	w, passed := serve("Bearer t1")
	if w.Code != http.StatusPaymentRequired || passed || w.Header().Get("Location") != "https://service.example/pay" ||
		!strings.Contains(w.Body.String(), `"subscribe_link":"https://service.example/pay"`) {
		t.Errorf("unpaid: %d %q %s", w.Code, w.Header().Get("Location"), w.Body)
	}

	answer(http.StatusOK, `{"expires":"2030-01-01 00:10:00"}`)
	if _, passed := serve("Bearer t2"); !passed {
		t.Error("active subscription not passed on")
	}
	answer(http.StatusServiceUnavailable, "")
	mu.Lock()
	clock = clock.Add(10*time.Minute + 30*time.Second) // expired, within the grace
	mu.Unlock()
	if _, passed := serve("Bearer t2"); !passed {
		t.Error("service down within the grace: not passed on")
	}
	mu.Lock()
	clock = clock.Add(time.Minute) // past the grace
	mu.Unlock()
	if w, passed := serve("Bearer t2"); passed || w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "30" {
		t.Errorf("service down past the grace: %d, passed on %v", w.Code, passed)
	}
	if !slices.Contains(events, StaleTrusted) || !slices.Contains(events, QueryFailed) || !slices.Contains(events, Refused) {
		t.Errorf("events %v", events)
	}
}

func TestOnErrorValidate(t *testing.T) {
	tests := []struct {
		o     OnError
		grace time.Duration
		ok    bool
	}{
		{"", 0, true}, {Deny, 0, true}, {Allow, 0, true}, {Stale, time.Minute, true},
		{Stale, 0, false}, {Deny, time.Minute, false}, {"maybe", 0, false},
	}
	for _, tt := range tests {
		if err := tt.o.Validate(tt.grace); (err == nil) != tt.ok {
			t.Errorf("OnError(%q).Validate(%v) = %v", tt.o, tt.grace, err)
		}
	}
}
