package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/servicegate/servicegate/subscription"
	"github.com/servicegate/servicegate/token"
)

// subscriptionService is an httptest stand-in of the service's subscription query,
// answering with whatever the test last set.
type subscriptionService struct {
	*httptest.Server
	mu      sync.Mutex
	status  int
	body    string
	auth    []string // Authorization headers received
	paths   []string
	queries atomic.Int64
}

func newSubscriptionService(t *testing.T, status int, body string) *subscriptionService {
	t.Helper()
	s := &subscriptionService{status: status, body: body}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.queries.Add(1)
		s.mu.Lock()
		status, body := s.status, s.body
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.paths = append(s.paths, r.URL.Path)
		s.mu.Unlock()
		if body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	return s
}

// answer changes what the service answers from now on.
func (s *subscriptionService) answer(status int, body string) {
	s.mu.Lock()
	s.status, s.body = status, body
	s.mu.Unlock()
}

func (s *subscriptionService) lastAuth() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.auth) == 0 {
		return ""
	}
	return s.auth[len(s.auth)-1]
}

// provisionSubscription provisions h the way Caddy does and cleans it up
// when the test ends. It returns the metrics registry of its config.
func provisionSubscription(t testing.TB, h *ServiceSubscription) caddy.Context {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := h.Provision(ctx); err != nil {
		t.Fatalf("provision: %v", err)
	}
	t.Cleanup(func() { _ = h.Cleanup() })
	return ctx
}

// subscriptionRequest is a request as Caddy hands it to a handler: with
// request variables and a replacer in its context.
func subscriptionRequest(auth, accept string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/api/projects", nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	*r = *r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	caddyhttp.NewTestReplacer(r)
	return r
}

// subscriptionUpstream is the next handler: it records that the request got through.
type subscriptionUpstream struct{ calls atomic.Int64 }

func (u *subscriptionUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	u.calls.Add(1)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("app"))
	return nil
}

// subscriptionCounter reads a counter.
func subscriptionCounter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// subscriptionWithErrorRoutes puts a server with handle_errors routes in r's context.
func subscriptionWithErrorRoutes(r *http.Request) *http.Request {
	srv := &caddyhttp.Server{Errors: &caddyhttp.HTTPErrorConfig{Routes: caddyhttp.RouteList{{}}}}
	return r.WithContext(context.WithValue(r.Context(), caddyhttp.ServerCtxKey, srv))
}

func TestSubscriptionAnswers(t *testing.T) {
	tests := []struct {
		name       string
		onError    string
		status     int
		body       string
		accept     string
		wantStatus int
		wantNext   bool
		wantLoc    string
		wantInBody string
		wantAuthz  string // WWW-Authenticate
	}{
		{name: "active", status: 200, body: `{"expires":"2099-01-01 00:00:00"}`, wantStatus: 200, wantNext: true},
		{name: "active RFC 3339", status: 200, body: `{"expires":"2099-01-01T00:00:00Z"}`, wantStatus: 200, wantNext: true},
		{name: "ended", status: 200, body: `{"expires":"2001-01-01 00:00:00"}`, wantStatus: 402, wantInBody: "has ended"},
		{name: "unpaid JSON", status: 402, body: `{"subscribe_link":"https://service.example/checkout?a=1&b=2"}`,
			wantStatus: 402, wantLoc: "https://service.example/checkout?a=1&b=2",
			wantInBody: `"subscribe_link":"https://service.example/checkout?a=1\u0026b=2"`},
		{name: "unpaid camelCase", status: 402, body: `{"subscribeLink":"https://service.example/c"}`,
			wantStatus: 402, wantLoc: "https://service.example/c", wantInBody: `"subscribe_link":"https://service.example/c"`},
		{name: "unpaid HTML", status: 402, body: `{"subscribe_link":"https://service.example/checkout?a=1&b=<2>"}`,
			accept: "text/html,application/xhtml+xml,*/*;q=0.8", wantStatus: 402,
			wantLoc: "https://service.example/checkout?a=1&b=<2>", wantInBody: `<a href="https://service.example/checkout?a=1&amp;b=&lt;2&gt;">`},
		{name: "unpaid with a javascript link is garbage", status: 402, body: `{"subscribe_link":"javascript:alert(1)"}`, wantStatus: 503},
		{name: "unpaid with a javascript link, allow", onError: "allow", status: 402, body: `{"subscribe_link":"javascript:alert(1)"}`, wantStatus: 200, wantNext: true},
		{name: "not found 400", status: 400, body: `{"message":"app identifier not found"}`, wantStatus: 403, wantInBody: "no subscription for your organization"},
		{name: "not found 404", status: 404, wantStatus: 403, wantInBody: "no subscription for your organization"},
		{name: "token refused", status: 401, wantStatus: 401, wantAuthz: `Bearer realm="service", error="invalid_token"`},
		{name: "5xx deny", status: 502, wantStatus: 503},
		{name: "5xx allow", onError: "allow", status: 502, wantStatus: 200, wantNext: true},
		{name: "5xx stale without a previous answer", onError: "stale", status: 500, wantStatus: 503},
		{name: "garbage 200", status: 200, body: `{"expires":"soon"}`, wantStatus: 503},
		{name: "unexpected status", status: 418, wantStatus: 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := newSubscriptionService(t, tt.status, tt.body)
			h := &ServiceSubscription{AppIdentifier: "my-app", BaseURL: svc.URL, OnError: tt.onError}
			if tt.onError == "stale" {
				h.StaleGrace = caddy.Duration(time.Hour)
			}
			provisionSubscription(t, h)
			next := new(subscriptionUpstream)
			rec := httptest.NewRecorder()
			if err := h.ServeHTTP(rec, subscriptionRequest("Bearer tok-"+subscriptionTestToken(tt.name), tt.accept), next); err != nil {
				t.Fatalf("ServeHTTP: %v", err)
			}
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if got := next.calls.Load() == 1; got != tt.wantNext {
				t.Fatalf("reached the app: %v, want %v", got, tt.wantNext)
			}
			if loc := rec.Header().Get("Location"); loc != tt.wantLoc {
				t.Errorf("Location %q, want %q", loc, tt.wantLoc)
			}
			if !strings.Contains(rec.Body.String(), tt.wantInBody) {
				t.Errorf("body %s does not hold %s", rec.Body, tt.wantInBody)
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != tt.wantAuthz {
				t.Errorf("WWW-Authenticate %q, want %q", got, tt.wantAuthz)
			}
			if !tt.wantNext {
				ct := rec.Header().Get("Content-Type")
				if tt.accept != "" && tt.wantStatus == 402 {
					if !strings.HasPrefix(ct, "text/html") {
						t.Errorf("Content-Type %q, want HTML", ct)
					}
				} else if ct != "application/json; charset=utf-8" {
					t.Errorf("Content-Type %q, want JSON", ct)
				} else {
					var b errorBody
					if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Error.Message == "" {
						t.Errorf("body %s is not a JSON refusal", rec.Body)
					}
					assertSentence(t, b.Error.Message)
				}
				if strings.Contains(rec.Body.String(), "tok-") {
					t.Errorf("body %s holds the token", rec.Body)
				}
			}
			if got := svc.lastAuth(); got != "Bearer tok-"+subscriptionTestToken(tt.name) {
				t.Errorf("service got Authorization %q", got)
			}
		})
	}
}

func TestSubscriptionNoToken(t *testing.T) {
	svc := newSubscriptionService(t, 200, `{"expires":"2099-01-01 00:00:00"}`)
	h := &ServiceSubscription{AppIdentifier: "my-app", BaseURL: svc.URL, Realm: "my app"}
	provisionSubscription(t, h)
	for _, auth := range []string{"", "Basic dXNlcjpwYXNz", "Bearer ", "Bearer"} {
		rec := httptest.NewRecorder()
		next := new(subscriptionUpstream)
		if err := h.ServeHTTP(rec, subscriptionRequest(auth, ""), next); err != nil {
			t.Fatal(err)
		}
		if rec.Code != 401 || next.calls.Load() != 0 {
			t.Fatalf("%q: status %d, app reached %d times", auth, rec.Code, next.calls.Load())
		}
		if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer realm="my app"` {
			t.Fatalf("WWW-Authenticate %q", got)
		}
	}
	if svc.queries.Load() != 0 {
		t.Fatalf("%d queries without a token", svc.queries.Load())
	}
}

func TestSubscriptionWithErrorRoutes(t *testing.T) {
	svc := newSubscriptionService(t, 402, `{"subscribe_link":"https://service.example/pay"}`)
	h := &ServiceSubscription{AppIdentifier: "my-app", BaseURL: svc.URL}
	provisionSubscription(t, h)

	// 402 is written by the handler even when handle_errors exists.
	rec := httptest.NewRecorder()
	r := subscriptionWithErrorRoutes(subscriptionRequest("Bearer a", ""))
	if err := h.ServeHTTP(rec, r, new(subscriptionUpstream)); err != nil {
		t.Fatalf("402 returned %v, want it written", err)
	}
	if rec.Code != 402 || !strings.Contains(rec.Body.String(), "https://service.example/pay") {
		t.Fatalf("status %d body %s", rec.Code, rec.Body)
	}
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if v, _ := repl.GetString("http.service.subscribe_link"); v != "https://service.example/pay" {
		t.Fatalf("{http.service.subscribe_link} = %q", v)
	}

	// Other refusals go to handle_errors.
	svc.answer(404, "")
	rec = httptest.NewRecorder()
	err := h.ServeHTTP(rec, subscriptionWithErrorRoutes(subscriptionRequest("Bearer b", "")), new(subscriptionUpstream))
	var he caddyhttp.HandlerError
	if !errors.As(err, &he) || he.StatusCode != 403 {
		t.Fatalf("error %v, want a 403 HandlerError", err)
	}
}

func TestSubscriptionCachesPerTokenWithoutServiceAuth(t *testing.T) {
	svc := newSubscriptionService(t, 200, `{"expires":"2099-01-01 00:00:00"}`)
	h := &ServiceSubscription{AppIdentifier: "my-app", BaseURL: svc.URL}
	ctx := provisionSubscription(t, h)
	for _, tok := range []string{"a", "b", "a", "b", "a"} {
		rec := httptest.NewRecorder()
		if err := h.ServeHTTP(rec, subscriptionRequest("bearer "+tok, ""), new(subscriptionUpstream)); err != nil || rec.Code != 200 {
			t.Fatalf("status %d, %v", rec.Code, err)
		}
	}
	if n := svc.queries.Load(); n != 2 {
		t.Fatalf("%d queries, want one per token", n)
	}
	if got := subscriptionCounter(t, subscriptionQueriesBy.byOutcome[subscriptionQueryOf(subscription.Active)]); got < 2 {
		t.Fatalf("queries_total{answer=active} = %v", got)
	}
	families, err := ctx.GetMetricsRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, f := range families {
		registered[f.GetName()] = true
	}
	for _, name := range []string{
		"servicegate_subscription_cache_hits_total", "servicegate_subscription_cache_misses_total",
		"servicegate_subscription_queries_total", "servicegate_subscription_query_duration_seconds",
	} {
		if !registered[name] {
			t.Errorf("metric %s not registered", name)
		}
	}
}

func TestSubscriptionCachesPerVerifiedOrganization(t *testing.T) {
	svc := newSubscriptionService(t, 402, `{"subscribe_link":"https://service.example/pay"}`)
	h := &ServiceSubscription{AppIdentifier: "my-app", BaseURL: svc.URL}
	provisionSubscription(t, h)
	serve := func(token, org string) int {
		r := subscriptionRequest("Bearer unverified-header-token", "")
		setVerified(r, &Verified{Token: token, Organization: org})
		rec := httptest.NewRecorder()
		if err := h.ServeHTTP(rec, r, new(subscriptionUpstream)); err != nil {
			t.Fatal(err)
		}
		return rec.Code
	}
	// Two members of one organization: one query.
	if serve("t1", "acme") != 402 || serve("t2", "acme") != 402 {
		t.Fatal("not 402")
	}
	if n := svc.queries.Load(); n != 1 {
		t.Fatalf("%d queries for one organization, want 1", n)
	}
	if got := svc.lastAuth(); got != "Bearer t1" {
		t.Fatalf("query sent with %q, want the verified token", got)
	}
	// Another organization is asked separately.
	svc.answer(200, `{"expires":"2099-01-01 00:00:00"}`)
	if serve("t3", "globex") != 200 {
		t.Fatal("globex not let through")
	}
	// A verified token without an organization is keyed by the token.
	// Asked twice: the second answer comes from the cache.
	if first, second := serve("t4", ""), serve("t4", ""); first != 200 || second != 200 {
		t.Fatal("token-keyed request not let through")
	}
	if n := svc.queries.Load(); n != 3 {
		t.Fatalf("%d queries, want 3", n)
	}
}

func TestSubscriptionSharedQueryRefusingAnotherMembersToken(t *testing.T) {
	// The service refuses the token "revoked" and accepts "good"; the
	// first query is held until a second member of the organization has
	// joined it.
	arrived, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	var queries atomic.Int64
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries.Add(1)
		first.Do(func() {
			close(arrived)
			<-release
		})
		if r.Header.Get("Authorization") == "Bearer revoked" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"expires":"2099-01-01 00:00:00"}`))
	}))
	defer svc.Close()
	h := &ServiceSubscription{AppIdentifier: "my-app", BaseURL: svc.URL}
	provisionSubscription(t, h)
	serve := func(token string) int {
		r := subscriptionRequest("", "")
		setVerified(r, &Verified{Token: token, Organization: "acme"})
		rec := httptest.NewRecorder()
		if err := h.ServeHTTP(rec, r, new(subscriptionUpstream)); err != nil {
			t.Error(err)
		}
		return rec.Code
	}
	revoked := make(chan int)
	go func() { revoked <- serve("revoked") }()
	<-arrived
	good := make(chan int)
	go func() { good <- serve("good") }()
	// Give the second request time to join the query under way; if it
	// has not, it asks on its own and the outcome is the same.
	time.Sleep(100 * time.Millisecond)
	close(release)
	if code := <-revoked; code != http.StatusUnauthorized {
		t.Errorf("the refused token got %d, want 401", code)
	}
	if code := <-good; code != http.StatusOK {
		t.Errorf("a valid token sharing the query of a refused one got %d, want 200", code)
	}
}

func TestSubscriptionStaleGrace(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := base
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }

	svc := newSubscriptionService(t, 200, `{"expires":"2030-01-01 01:00:00"}`)
	// A cache size of its own: a new cache reads the clock of the config
	// that makes it.
	h := &ServiceSubscription{AppIdentifier: "my-app", BaseURL: svc.URL, OnError: "stale", StaleGrace: caddy.Duration(10 * time.Minute), CacheSize: 7}
	h.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	provisionSubscription(t, h)
	serve := func() int {
		rec := httptest.NewRecorder()
		if err := h.ServeHTTP(rec, subscriptionRequest("Bearer x", ""), new(subscriptionUpstream)); err != nil {
			t.Fatal(err)
		}
		return rec.Code
	}
	if serve() != 200 {
		t.Fatal("active not let through")
	}
	svc.answer(503, "")
	advance(time.Hour) // expires passed; the service is down
	if got := serve(); got != 200 {
		t.Fatalf("status %d within grace, want 200", got)
	}
	advance(10*time.Minute - time.Second)
	if got := serve(); got != 200 {
		t.Fatalf("status %d at the end of grace, want 200", got)
	}
	advance(time.Second)
	if got := serve(); got != 503 {
		t.Fatalf("status %d after grace, want 503", got)
	}
	// The service is back and says unpaid: that is not an error.
	svc.answer(402, `{"subscribe_link":"https://service.example/pay"}`)
	if got := serve(); got != 402 {
		t.Fatalf("status %d, want 402", got)
	}
}

func TestSubscriptionDynamicBaseURL(t *testing.T) {
	svc := newSubscriptionService(t, 200, `{"expires":"2099-01-01 00:00:00"}`)
	// The organization becomes a host label; localhost resolves in tests
	// through the literal base below, so the organization goes in the path
	// prefix position of a placeholder test instead.
	h := &ServiceSubscription{AppIdentifier: "my-app", BaseURL: strings.Replace(svc.URL, "127.0.0.1", "{http.vars.org_host}", 1)}
	provisionSubscription(t, h)
	tests := []struct {
		host string
		want int
	}{
		{"127.0.0.1", 200},
		{"", 403},
		{"evil.example/x?", 403},
		{"user@evil.example", 403},
		{"evil.example#", 403},
	}
	for _, tt := range tests {
		r := subscriptionRequest("Bearer t", "")
		caddyhttp.SetVar(r.Context(), "org_host", tt.host)
		rec := httptest.NewRecorder()
		if err := h.ServeHTTP(rec, r, new(subscriptionUpstream)); err != nil {
			t.Fatal(err)
		}
		if rec.Code != tt.want {
			t.Errorf("org host %q: status %d, want %d", tt.host, rec.Code, tt.want)
		}
	}
	if n := svc.queries.Load(); n != 1 {
		t.Fatalf("%d queries, want only the valid one", n)
	}
}

func TestSubscriptionProvisionAndValidate(t *testing.T) {
	t.Setenv("SERVICEGATE_TEST_APP", "env-app")
	h := &ServiceSubscription{AppIdentifier: "{env.SERVICEGATE_TEST_APP}", BaseURL: "https://api.service.example"}
	provisionSubscription(t, h)
	if h.app != "env-app" || h.dynamicBase {
		t.Fatalf("app %q dynamic %v", h.app, h.dynamicBase)
	}
	if h.policy.NegativeTTL != 30*time.Second || h.policy.Timeout != 10*time.Second || h.onError != "deny" {
		t.Fatalf("defaults %+v %s", h.policy, h.onError)
	}

	bad := []ServiceSubscription{
		{BaseURL: "https://api.service.example"},
		{AppIdentifier: "a"},
		{AppIdentifier: "a", BaseURL: "ftp://api.service.example"},
		{AppIdentifier: "a", BaseURL: "https://user:pw@api.service.example"},
		{AppIdentifier: "a", BaseURL: "https://api.service.example", OnError: "maybe"},
		{AppIdentifier: "a", BaseURL: "https://api.service.example", OnError: "stale"},
		{AppIdentifier: "a", BaseURL: "https://api.service.example", TimeZone: "Mars/Olympus"},
		{AppIdentifier: "a", BaseURL: "https://api.service.example", Realm: `x"y`},
		{AppIdentifier: "a", BaseURL: "https://api.service.example", Realm: "x\x01y"},
		{AppIdentifier: "a", BaseURL: "https://api.service.example", Realm: "x\ty"},
		{AppIdentifier: "a", BaseURL: "https://api.service.example", CacheSize: -1},
		{AppIdentifier: "{env.SERVICEGATE_TEST_UNSET_VARIABLE}", BaseURL: "https://api.service.example"},
	}
	for _, h := range bad {
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		err := h.Provision(ctx)
		if err == nil {
			_ = h.Cleanup()
			t.Errorf("%+v provisioned, want an error", h)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("error %q repeats the password", err)
		}
		cancel()
	}
}

// subscriptionTestToken makes a token of bearer syntax from a test's name.
func subscriptionTestToken(name string) string {
	return strings.Map(func(r rune) rune {
		if token.IsB64Token(string(r)) {
			return r
		}
		return '-'
	}, name)
}

// BenchmarkSubscriptionHit is the hot path: a cached active answer for a
// verified organization, and for a token when service_auth is absent.
func BenchmarkSubscriptionHit(b *testing.B) {
	svc := newSubscriptionService(&testing.T{}, 200, `{"expires":"2099-01-01 00:00:00"}`)
	defer svc.Close()
	h := &ServiceSubscription{AppIdentifier: "my-app", BaseURL: svc.URL}
	provisionSubscription(b, h)
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	w := httptest.NewRecorder()

	b.Run("organization", func(b *testing.B) {
		r := subscriptionRequest("", "")
		setVerified(r, &Verified{Token: "token", Organization: "acme"})
		if err := h.ServeHTTP(w, r, next); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			_ = h.ServeHTTP(w, r, next)
		}
	})
	b.Run("placeholder base URL", func(b *testing.B) {
		hd := &ServiceSubscription{AppIdentifier: "my-app", BaseURL: strings.Replace(svc.URL, "127.0.0.1", "{http.vars.org_host}", 1)}
		provisionSubscription(b, hd)
		r := subscriptionRequest("", "")
		setVerified(r, &Verified{Token: "token", Organization: "acme"})
		caddyhttp.SetVar(r.Context(), "org_host", "127.0.0.1")
		if err := hd.ServeHTTP(w, r, next); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			_ = hd.ServeHTTP(w, r, next)
		}
	})
	b.Run("token", func(b *testing.B) {
		r := subscriptionRequest("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIiwiZG9tYWluIjoiYWNtZSJ9.c2lnbmF0dXJl", "")
		if err := h.ServeHTTP(w, r, next); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			_ = h.ServeHTTP(w, r, next)
		}
	})
}

func TestSubscriptionOneQueryFor1000ConcurrentMisses(t *testing.T) {
	release := make(chan struct{})
	var queries atomic.Int64
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries.Add(1)
		<-release
		_, _ = w.Write([]byte(`{"expires":"2099-01-01 00:00:00"}`))
	}))
	defer svc.Close()
	h := &ServiceSubscription{AppIdentifier: "my-app", BaseURL: svc.URL}
	provisionSubscription(t, h)

	const callers = 1000
	var started, done sync.WaitGroup
	started.Add(callers)
	done.Add(callers)
	var through atomic.Int64
	next := new(subscriptionUpstream)
	for i := 0; i < callers; i++ {
		go func() {
			defer done.Done()
			r := subscriptionRequest("", "")
			setVerified(r, &Verified{Token: "member", Organization: "hooli"})
			started.Done()
			rec := httptest.NewRecorder()
			if err := h.ServeHTTP(rec, r, next); err == nil && rec.Code == 200 {
				through.Add(1)
			}
		}()
	}
	started.Wait()
	close(release)
	done.Wait()
	if n := queries.Load(); n != 1 {
		t.Fatalf("%d queries for %d concurrent first requests, want 1", n, callers)
	}
	if through.Load() != callers {
		t.Fatalf("%d requests let through, want %d", through.Load(), callers)
	}
}

func TestSubscriptionQueryTimeout(t *testing.T) {
	release := make(chan struct{})
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer svc.Close()
	defer close(release)
	for _, tt := range []struct {
		onError string
		want    int
	}{{"", 503}, {"allow", 200}} {
		h := &ServiceSubscription{AppIdentifier: "my-app", BaseURL: svc.URL, Timeout: caddy.Duration(50 * time.Millisecond), OnError: tt.onError}
		provisionSubscription(t, h)
		rec := httptest.NewRecorder()
		if err := h.ServeHTTP(rec, subscriptionRequest("Bearer slow-"+tt.onError, ""), new(subscriptionUpstream)); err != nil {
			t.Fatal(err)
		}
		if rec.Code != tt.want {
			t.Fatalf("on_error %q: status %d after the query timed out, want %d", tt.onError, rec.Code, tt.want)
		}
	}
}
