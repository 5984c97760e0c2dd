package oauth

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/emulator"
)

const testRedirect = "https://app.example/oauth/callback"

// clock is a clock tests move by hand.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := new(clock)
	c.ns.Store(testNow.UnixNano())
	return c
}
func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// rig is a Manager in front of an emulator of the service, with a count of
// refresh requests and switches to make them fail.
type rig struct {
	m         *Manager
	clock     *clock
	store     *MemoryStore
	refreshes atomic.Int64
	refuse    atomic.Bool
	fail      atomic.Bool
	delay     atomic.Int64
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{clock: newClock()}
	emu, err := emulator.New(emulator.Config{
		ClientID:      "demo-client",
		ClientSecret:  "demo-secret",
		RedirectURIs:  []string{testRedirect},
		Organizations: []emulator.Organization{{Domain: "acme.example", ID: 1}},
		Now:           r.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/oauth/token" {
			body, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(strings.NewReader(string(body)))
			if r.fail.Load() {
				http.Error(w, "down", http.StatusBadGateway)
				return
			}
			if strings.Contains(string(body), `"grant_type":"refresh_token"`) {
				r.refreshes.Add(1)
				time.Sleep(time.Duration(r.delay.Load()))
				if r.refuse.Load() {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					_, _ = io.WriteString(w, `{"error":"invalid_grant"}`)
					return
				}
			}
		}
		emu.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.store = NewMemoryStore(100, r.clock.Now)
	r.m = &Manager{
		Client: &Client{AuthURL: srv.URL, ClientID: "demo-client", ClientSecret: "demo-secret", Scopes: []string{"project"}, HTTP: srv.Client()},
		Store:  r.store,
		Now:    r.clock.Now,
	}
	return r
}

// approve runs the user's part: the authorization request, approved, and
// the code and state the service sends back.
func (r *rig) approve(t *testing.T, authorizeURL, decision string) (code, state string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, authorizeURL+"&decision="+decision, nil)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc.String(), testRedirect) {
		t.Fatalf("authorization answered %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return loc.Query().Get("code"), loc.Query().Get("state")
}

func (r *rig) login(t *testing.T) (string, Session) {
	t.Helper()
	ctx := context.Background()
	state, authorize, err := r.m.Begin(ctx, testRedirect, "/reports")
	if err != nil {
		t.Fatal(err)
	}
	code, back := r.approve(t, authorize, "approve")
	if back != state {
		t.Fatal("the service did not return the state")
	}
	id, s, err := r.m.Complete(ctx, back, state, code)
	if err != nil {
		t.Fatal(err)
	}
	return id, s
}

func TestManagerLogin(t *testing.T) {
	r := newRig(t)
	id, s := r.login(t)
	if len(id) != 43 || s.ReturnTo != "/reports" || s.UserID != "7" || s.Organization != "acme.example" ||
		!s.Expiry.Equal(testNow.Add(emulator.DefaultTokenLifetime)) || !s.Expires.Equal(testNow.Add(DefaultSessionLifetime)) {
		t.Fatalf("id %q session %+v", id, s)
	}
	got, err := r.m.Session(context.Background(), id)
	if err != nil || got.AccessToken != s.AccessToken || got.ReturnTo != "" {
		t.Fatalf("session: %+v %v", got, err)
	}
	if r.store.Len() != 1 {
		t.Fatalf("the store holds %d entries, want the session only (the login is used up)", r.store.Len())
	}
}

func TestManagerSeparateLoginStore(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	logins := NewMemoryStore(2, r.clock.Now)
	r.m.Logins = logins
	id, _ := r.login(t)
	// Many logins that are never finished push only each other out.
	for range 10 {
		if _, _, err := r.m.Begin(ctx, testRedirect, "/"); err != nil {
			t.Fatal(err)
		}
	}
	if logins.Len() != 2 || r.store.Len() != 1 {
		t.Fatalf("logins %d sessions %d, want 2 and 1", logins.Len(), r.store.Len())
	}
	if _, err := r.m.Session(ctx, id); err != nil {
		t.Fatalf("the session did not survive the logins: %v", err)
	}
}

func TestManagerBadState(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	state, authorize, err := r.m.Begin(ctx, testRedirect, "/")
	if err != nil {
		t.Fatal(err)
	}
	code, _ := r.approve(t, authorize, "approve")
	other, _, _ := r.m.Begin(ctx, testRedirect, "/")
	// A state of the right form that differs from the real one in its
	// first character (which is random, so it may itself be "x").
	forged := "x" + state[1:]
	if forged == state {
		forged = "y" + state[1:]
	}
	tests := []struct{ name, state, bound string }{
		{"no state", "", ""},
		{"not this browser's", state, other},
		{"no cookie", state, ""},
		{"unknown", NewID(), ""},
		{"unknown but bound", forged, forged},
	}
	for _, tt := range tests {
		if _, _, err := r.m.Complete(ctx, tt.state, tt.bound, code); !errors.Is(err, ErrBadState) {
			t.Errorf("%s: %v, want ErrBadState", tt.name, err)
		}
	}
	if _, _, err := r.m.Complete(ctx, state, state, code); err != nil {
		t.Fatalf("the good state after the bad ones: %v", err)
	}
	if _, _, err := r.m.Complete(ctx, state, state, code); !errors.Is(err, ErrBadState) {
		t.Fatalf("reused state: %v, want ErrBadState", err)
	}

	// A login left longer than LoginLifetime has expired.
	late, authorize, _ := r.m.Begin(ctx, testRedirect, "/")
	code, _ = r.approve(t, authorize, "approve")
	r.clock.Advance(DefaultLoginLifetime)
	if _, _, err := r.m.Complete(ctx, late, late, code); !errors.Is(err, ErrBadState) {
		t.Fatalf("expired login: %v, want ErrBadState", err)
	}
}

func TestManagerAbandonAndRefusedCode(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	state, _, _ := r.m.Begin(ctx, testRedirect, "/settings")
	if back, ok := r.m.Abandon(ctx, state, "nope"); ok || back != "" {
		t.Fatal("abandoned a login with the wrong browser's state")
	}
	if back, ok := r.m.Abandon(ctx, state, state); !ok || back != "/settings" {
		t.Fatalf("abandon: %q %v", back, ok)
	}
	if _, ok := r.m.Abandon(ctx, state, state); ok {
		t.Fatal("abandoned the same login twice")
	}

	state, _, _ = r.m.Begin(ctx, testRedirect, "/")
	_, _, err := r.m.Complete(ctx, state, state, "made-up-code")
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Code != "invalid_grant" {
		t.Fatalf("made-up code: %v, want a refusal", err)
	}
	if strings.Contains(err.Error(), "demo-secret") || strings.Contains(err.Error(), "made-up-code") {
		t.Fatalf("the error shows a secret: %v", err)
	}
}

func TestManagerRefresh(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	id, s := r.login(t)

	r.clock.Advance(emulator.DefaultTokenLifetime - 2*time.Minute)
	if got, _ := r.m.Session(ctx, id); got.AccessToken != s.AccessToken || r.refreshes.Load() != 0 {
		t.Fatal("refreshed two minutes before expiry")
	}
	r.clock.Advance(90 * time.Second) // 30 s left: refresh
	got, err := r.m.Session(ctx, id)
	if err != nil || got.AccessToken == s.AccessToken || r.refreshes.Load() != 1 || got.UserID != "7" ||
		!got.Expires.Equal(s.Expires) {
		t.Fatalf("refresh: %v, %d refreshes, %+v", err, r.refreshes.Load(), got)
	}
	if again, _ := r.m.Session(ctx, id); again.AccessToken != got.AccessToken || r.refreshes.Load() != 1 {
		t.Fatal("the refreshed pair was not kept")
	}

	// The token endpoint failing: the token still valid for a few seconds
	// serves; an expired one does not.
	r.fail.Store(true)
	r.clock.Advance(emulator.DefaultTokenLifetime - 30*time.Second)
	if still, err := r.m.Session(ctx, id); err != nil || still.AccessToken != got.AccessToken {
		t.Fatalf("endpoint down, token still valid: %v", err)
	}
	r.clock.Advance(time.Minute)
	if _, err := r.m.Session(ctx, id); err == nil || errors.Is(err, ErrSessionEnded) || errors.Is(err, ErrNoSession) {
		t.Fatalf("endpoint down, token expired: %v, want an error to retry", err)
	}
	r.fail.Store(false)
	if _, err := r.m.Session(ctx, id); err != nil {
		t.Fatalf("endpoint back: %v", err)
	}

	// A refused refresh ends the session.
	r.refuse.Store(true)
	r.clock.Advance(emulator.DefaultTokenLifetime)
	if _, err := r.m.Session(ctx, id); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("refused refresh: %v, want ErrSessionEnded", err)
	}
	if _, err := r.m.Session(ctx, id); !errors.Is(err, ErrNoSession) {
		t.Fatalf("after the refused refresh: %v, want ErrNoSession", err)
	}
}

func TestManagerConcurrentRefresh(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	id, s := r.login(t)
	r.delay.Store(int64(100 * time.Millisecond))
	r.clock.Advance(3 * time.Hour)
	const n = 50
	tokens := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := r.m.Session(ctx, id)
			tokens[i], errs[i] = got.AccessToken, err
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || tokens[i] != tokens[0] || tokens[i] == s.AccessToken {
			t.Fatalf("call %d: %v (same token as the first: %v)", i, errs[i], tokens[i] == tokens[0])
		}
	}
	if got := r.refreshes.Load(); got != 1 {
		t.Fatalf("%d refreshes for %d concurrent calls, want 1", got, n)
	}
}

func TestManagerSessionEnds(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	id, _ := r.login(t)
	if _, err := r.m.Session(ctx, ""); !errors.Is(err, ErrNoSession) {
		t.Fatalf("empty id: %v", err)
	}
	if _, err := r.m.Session(ctx, NewID()); !errors.Is(err, ErrNoSession) {
		t.Fatalf("unknown id: %v", err)
	}
	if err := r.m.End(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.Session(ctx, id); !errors.Is(err, ErrNoSession) {
		t.Fatalf("ended session: %v", err)
	}

	id, _ = r.login(t)
	r.clock.Advance(DefaultSessionLifetime)
	if _, err := r.m.Session(ctx, id); !errors.Is(err, ErrNoSession) {
		t.Fatalf("session past its lifetime: %v", err)
	}
	if r.store.Len() != 0 {
		t.Fatal("the expired session stayed in the store")
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := NewID()
		if len(id) != 43 || seen[id] || strings.ContainsAny(id, "+/=") {
			t.Fatalf("id %q", id)
		}
		seen[id] = true
	}
}

func BenchmarkManagerSession(b *testing.B) {
	ctx := context.Background()
	store := NewMemoryStore(10, nil)
	id := NewID()
	_ = store.Put(ctx, id, Session{Token: Token{AccessToken: "a", Expiry: time.Now().Add(time.Hour)}, Expires: time.Now().Add(time.Hour)})
	m := &Manager{Client: &Client{}, Store: store}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Session(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// busyLocker is a Locker whose every lock another instance holds.
type busyLocker struct{ tries atomic.Int64 }

func (l *busyLocker) Lock(context.Context, string, time.Duration) (func(), bool, error) {
	l.tries.Add(1)
	return nil, false, nil
}

func TestManagerLockerWaitsForAnotherInstancesRefresh(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	id, s := r.login(t)
	locker := new(busyLocker)
	r.m.Locker = locker
	r.clock.Advance(emulator.DefaultTokenLifetime - 30*time.Second) // 30 s left: refresh

	// Another instance writes the refreshed session back.
	go func() {
		time.Sleep(100 * time.Millisecond)
		next := s
		next.ReturnTo = ""
		next.AccessToken, next.Expiry = "refreshed-elsewhere", r.clock.Now().Add(time.Hour)
		_ = r.store.Put(ctx, id, next)
	}()
	got, err := r.m.Session(ctx, id)
	if err != nil || got.AccessToken != "refreshed-elsewhere" || r.refreshes.Load() != 0 || locker.tries.Load() < 2 {
		t.Fatalf("got %q, %v, %d refreshes, %d lock tries; want the other instance's session and no refresh here",
			got.AccessToken, err, r.refreshes.Load(), locker.tries.Load())
	}
}

func TestManagerLockerWaitIsBounded(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	id, s := r.login(t)
	r.m.Locker = new(busyLocker)
	r.m.RefreshWait = 150 * time.Millisecond
	r.clock.Advance(emulator.DefaultTokenLifetime - 30*time.Second)

	start := time.Now()
	got, err := r.m.Session(ctx, id)
	// The other instance never finished: the token still valid serves.
	if err != nil || got.AccessToken != s.AccessToken || r.refreshes.Load() != 0 {
		t.Fatalf("got %v, %d refreshes; want the current token", err, r.refreshes.Load())
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 2*time.Second {
		t.Fatalf("waited %v, want about RefreshWait", d)
	}
	// Expired meanwhile: an error to retry, never a sign-out.
	r.clock.Advance(time.Minute)
	if _, err := r.m.Session(ctx, id); err == nil || errors.Is(err, ErrNoSession) || errors.Is(err, ErrSessionEnded) {
		t.Fatalf("token expired, refresh elsewhere stuck: %v, want an error to retry", err)
	}
}
