package cluster

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/cluster/redistest"
	"github.com/servicegate/servicegate/emulator"
	"github.com/servicegate/servicegate/oauth"
)

const oauthRedirect = "https://app.example/oauth/callback"

// oauthClock is a clock the tests move by hand, shared by the emulator,
// the Managers and the stores.
type oauthClock struct{ ns atomic.Int64 }

func (c *oauthClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *oauthClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// oauthRig is an emulator of the service counting refresh requests, and
// Managers for two instances sharing one Redis.
type oauthRig struct {
	srv       *redistest.Server
	clock     *oauthClock
	tokenURL  string
	http      *http.Client
	refreshes atomic.Int32
}

func newOAuthRig(t *testing.T) *oauthRig {
	t.Helper()
	r := &oauthRig{srv: startRedis(t), clock: new(oauthClock)}
	r.clock.ns.Store(time.Now().UnixNano())
	emu, err := emulator.New(emulator.Config{
		ClientID:      "demo-client",
		ClientSecret:  "demo-secret",
		RedirectURIs:  []string{oauthRedirect},
		Organizations: []emulator.Organization{{Domain: "acme.example", ID: 1}},
		TokenLifetime: 2 * time.Minute,
		Now:           r.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/oauth/token" {
			body, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(strings.NewReader(string(body)))
			if strings.Contains(string(body), "refresh_token") && !strings.Contains(string(body), "authorization_code") {
				r.refreshes.Add(1)
				time.Sleep(100 * time.Millisecond) // long enough for the others to find the lock taken
			}
		}
		emu.ServeHTTP(w, req)
	}))
	t.Cleanup(hs.Close)
	r.tokenURL, r.http = hs.URL, hs.Client()
	return r
}

// instance is the Manager of one instance: its own Redis client.
func (r *oauthRig) instance(t *testing.T, o Options) *oauth.Manager {
	t.Helper()
	c := newClient(t, r.srv, o)
	sessions := c.OAuthStore(OAuthSessions, r.clock.Now)
	return &oauth.Manager{
		Client: &oauth.Client{AuthURL: r.tokenURL, ClientID: "demo-client", ClientSecret: "demo-secret",
			Scopes: []string{"project"}, HTTP: r.http},
		Store:  sessions,
		Logins: c.OAuthStore(OAuthLogins, r.clock.Now),
		Locker: sessions,
		Now:    r.clock.Now,
	}
}

// approve runs the user's part at the service and returns the code and
// state it sends back.
func (r *oauthRig) approve(t *testing.T, authorizeURL string) (code, state string) {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(authorizeURL + "&decision=approve")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("authorization answered %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return loc.Query().Get("code"), loc.Query().Get("state")
}

// login begins a sign-in on a and completes it on b.
func (r *oauthRig) login(t *testing.T, a, b *oauth.Manager) (string, oauth.Session) {
	t.Helper()
	ctx := context.Background()
	state, authorize, err := a.Begin(ctx, oauthRedirect, "/reports")
	if err != nil {
		t.Fatal(err)
	}
	code, back := r.approve(t, authorize)
	id, s, err := b.Complete(ctx, back, state, code)
	if err != nil {
		t.Fatalf("completing on the other instance: %v", err)
	}
	return id, s
}

func TestOAuthStoreRoundTripSealedWithTTL(t *testing.T) {
	srv := startRedis(t)
	store := newClient(t, srv, Options{KeyPrefix: "sg:"}).OAuthStore(OAuthSessions, nil)
	ctx := context.Background()
	id := oauth.NewID()
	want := oauth.Session{
		Token:        oauth.Token{AccessToken: "access-secret", RefreshToken: "refresh-secret", Expiry: time.Now().Add(time.Hour).UTC()},
		UserID:       "42",
		Organization: "acme.example",
		Expires:      time.Now().Add(90 * time.Second).UTC(),
	}
	if _, ok, err := store.Get(ctx, id); ok || err != nil {
		t.Fatalf("an unknown id: ok=%v err=%v", ok, err)
	}
	if err := store.Put(ctx, id, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := store.Get(ctx, id)
	if err != nil || !ok || got.AccessToken != want.AccessToken || got.RefreshToken != want.RefreshToken ||
		got.UserID != "42" || got.Organization != "acme.example" || !got.Expires.Equal(want.Expires) {
		t.Fatalf("got %+v ok=%v err=%v, want %+v", got, ok, err, want)
	}

	keys, err := srv.Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	wantKey := "sg:oauth-session:" + oauth.EntryName(id)
	if keys != wantKey || strings.Contains(keys, id) {
		t.Fatalf("keys %q, want only %q (named by a hash of the id)", keys, wantKey)
	}
	raw, err := srv.Do("GET", wantKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"access-secret", "refresh-secret", "acme.example"} {
		if strings.Contains(raw, secret) {
			t.Fatalf("Redis holds %q in clear", secret)
		}
	}
	// The entry lives until the session's end.
	pttl, err := srv.Do("PTTL", wantKey)
	if err != nil {
		t.Fatal(err)
	}
	if ms, _ := strconv.Atoi(pttl); ms < 80_000 || ms > 90_000 {
		t.Fatalf("PTTL %s ms, want about 90000", pttl)
	}
	// A sealed entry moved under another id does not open.
	other := oauth.NewID()
	if _, err := srv.Do("SET", "sg:oauth-session:"+oauth.EntryName(other), raw); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := store.Get(ctx, other); ok || !errors.Is(err, oauth.ErrDamaged) {
		t.Fatalf("a moved entry: ok=%v err=%v, want ErrDamaged", ok, err)
	}

	if err := store.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := store.Get(ctx, id); ok || err != nil {
		t.Fatalf("after Delete: ok=%v err=%v", ok, err)
	}
	// An entry already ended is not written.
	if err := store.Put(ctx, id, oauth.Session{Expires: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if n := srv.Dbsize(t); n != 1 { // the moved entry
		t.Fatalf("%d keys, want 1", n)
	}
}

func TestOAuthLoginLivesItsLifetime(t *testing.T) {
	r := newOAuthRig(t)
	a := r.instance(t, Options{})
	a.LoginLifetime = 2 * time.Minute
	if _, _, err := a.Begin(context.Background(), oauthRedirect, "/"); err != nil {
		t.Fatal(err)
	}
	keys, err := r.srv.Do("KEYS", "servicegate:oauth-login:*")
	if err != nil || keys == "" || strings.Contains(keys, "\n") {
		t.Fatalf("login keys %q err=%v, want one", keys, err)
	}
	pttl, _ := r.srv.Do("PTTL", keys)
	if ms, _ := strconv.Atoi(pttl); ms < 110_000 || ms > 120_000 {
		t.Fatalf("the login's PTTL is %s ms, want about 120000", pttl)
	}
}

func TestOAuthSignInBegunOnOneInstanceCompletesOnAnother(t *testing.T) {
	r := newOAuthRig(t)
	a, b := r.instance(t, Options{}), r.instance(t, Options{})
	id, s := r.login(t, a, b)
	if s.UserID == "" || s.Organization != "acme.example" || s.ReturnTo != "/reports" {
		t.Fatalf("session %+v", s)
	}
	// The session is known to both, and the state cannot be used again.
	for name, m := range map[string]*oauth.Manager{"a": a, "b": b} {
		got, err := m.Session(context.Background(), id)
		if err != nil || got.AccessToken != s.AccessToken {
			t.Fatalf("instance %s: %v", name, err)
		}
	}
	if err := a.End(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Session(context.Background(), id); !errors.Is(err, oauth.ErrNoSession) {
		t.Fatalf("after logout on a, b says %v, want ErrNoSession", err)
	}
	if n := r.srv.Dbsize(t); n != 0 {
		t.Fatalf("%d keys left after logout, want 0", n)
	}
}

func TestOAuthConcurrentRefreshesMakeOneTokenRequest(t *testing.T) {
	r := newOAuthRig(t)
	managers := []*oauth.Manager{r.instance(t, Options{}), r.instance(t, Options{})}
	id, s := r.login(t, managers[0], managers[1])
	// Within a minute of the access token's end: every use refreshes.
	r.clock.Advance(90 * time.Second)

	var wg sync.WaitGroup
	tokens := make([]string, 20)
	errs := make([]error, len(tokens))
	for i := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := managers[i%2].Session(context.Background(), id)
			tokens[i], errs[i] = got.AccessToken, err
		}()
	}
	wg.Wait()
	if n := r.refreshes.Load(); n != 1 {
		t.Fatalf("%d refresh requests from two instances, want 1", n)
	}
	for i := range tokens {
		if errs[i] != nil || tokens[i] == s.AccessToken || tokens[i] != tokens[0] {
			t.Fatalf("caller %d: err=%v, refreshed token %v", i, errs[i], tokens[i] != s.AccessToken)
		}
	}
	if keys, _ := r.srv.Do("KEYS", "servicegate:oauth-lock:*"); keys != "" {
		t.Fatalf("the refresh lock was not released: %q", keys)
	}
}

func TestOAuthRedisDownNeverSignsOut(t *testing.T) {
	r := newOAuthRig(t)
	var logged atomic.Int32
	a := r.instance(t, Options{Timeout: 200 * time.Millisecond, Log: func(op Op, err error, _ int) {
		if err != nil {
			logged.Add(1)
		}
	}})
	id, _ := r.login(t, a, a)
	h, err := oauth.NewHandler(oauth.HandlerConfig{Manager: a, CallbackPath: "/oauth/callback", LogoutPath: "/oauth/logout", CookieName: "sid", RedirectURI: oauthRedirect})
	if err != nil {
		t.Fatal(err)
	}
	app := h.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "app") }))
	serve := func(cookie string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/reports", nil)
		req.Header.Set("Accept", "text/html")
		if cookie != "" {
			req.Header.Set("Cookie", "sid="+cookie)
		}
		rec := httptest.NewRecorder()
		app.ServeHTTP(rec, req)
		return rec
	}
	if rec := serve(id); rec.Code != http.StatusOK {
		t.Fatalf("with Redis up: %d", rec.Code)
	}

	r.srv.Stop()
	for i := 0; i < 3; i++ {
		start := time.Now()
		rec := serve(id)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("a session's request with Redis down: %d Retry-After %q, want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
		}
		if strings.Contains(rec.Header().Get("Set-Cookie"), "sid=") {
			t.Fatal("the session cookie was cleared while Redis was down")
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("the answer took %v: the Redis timeout does not bound it", d)
		}
	}
	if rec := serve(""); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("a new sign-in with Redis down: %d, want 503", rec.Code)
	}
	if n := logged.Load(); n != 1 {
		t.Fatalf("%d failure lines logged, want 1 (rate-limited)", n)
	}

	r.srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for serve(id).Code != http.StatusFound { // Redis lost its data on the crash: sign in again
		if time.Now().After(deadline) {
			t.Fatal("the instance did not recover when Redis came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
