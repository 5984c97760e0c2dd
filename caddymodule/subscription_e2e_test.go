package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/subscription"
)

func init() {
	caddy.RegisterModule(testVerifyOrganization{})
	httpcaddyfile.RegisterHandlerDirective("subscription_test_verify", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		h.Next()
		return testVerifyOrganization{}, nil
	})
}

// testVerifyOrganization stands in for service_auth in end-to-end tests: it
// hands the bearer token and the X-Test-Organization header on as if they
// had been verified. It exists only in the test binary.
type testVerifyOrganization struct{}

func (testVerifyOrganization) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.subscription_test_verify",
		New: func() caddy.Module { return new(testVerifyOrganization) },
	}
}

func (testVerifyOrganization) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	setVerified(r, &Verified{Token: subscription.BearerToken(r.Header.Get("Authorization")), Organization: r.Header.Get("X-Test-Organization")})
	return next.ServeHTTP(w, r)
}

// subscriptionTokenService is the service stand-in of the end-to-end tests: it answers
// by the token it is sent, so that each token is an organization in a
// known state, and answers 503 for everything while down.
type subscriptionTokenService struct {
	*httptest.Server
	down    atomic.Bool
	delay   time.Duration
	queries atomic.Int64
	mu      sync.Mutex
	answers map[string]struct {
		status int
		body   string
	}
}

func newSubscriptionTokenService(t *testing.T) *subscriptionTokenService {
	t.Helper()
	s := &subscriptionTokenService{answers: map[string]struct {
		status int
		body   string
	}{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.queries.Add(1)
		if s.delay > 0 {
			time.Sleep(s.delay)
		}
		if r.URL.Path != "/api/v2/applications/my-app/subscription" || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		if s.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		s.mu.Lock()
		a, ok := s.answers[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		s.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *subscriptionTokenService) set(token string, status int, body string) {
	s.mu.Lock()
	s.answers[token] = struct {
		status int
		body   string
	}{status, body}
	s.mu.Unlock()
}

// subscriptionApp is the app behind Caddy: it counts the requests that reach it.
func subscriptionApp(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	n := new(atomic.Int64)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = io.WriteString(w, "app says hello")
	}))
	t.Cleanup(app.Close)
	return app, n
}

// do sends a GET through the test Caddy.
func subscriptionGet(t *testing.T, client *http.Client, path, token string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e2eURL(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func subscriptionSite(svc, app string, extra string) string {
	return fmt.Sprintf(`
localhost:{port} {
	route /api/* {
		service_subscription {
			app_identifier my-app
			base_url %s
			%s
		}
		reverse_proxy %s
	}
}
`, svc, extra, strings.TrimPrefix(app, "http://"))
}

func TestE2ESubscriptionStates(t *testing.T) {
	svc := newSubscriptionTokenService(t)
	svc.set("active", 200, `{"expires":"2099-01-01 00:00:00"}`)
	svc.set("unpaid", 402, `{"subscribe_link":"https://service.example/checkout?app=my-app&x=<1>"}`)
	svc.set("missing", 404, ``)
	svc.set("unknown-app", 400, `{"message":"app identifier not found"}`)
	svc.set("ended", 200, `{"expires":"2020-01-01 00:00:00"}`)
	app, reached := subscriptionApp(t)
	tester := startCaddy(t, subscriptionSite(svc.URL, app.URL, "realm my-app"))
	client := tester.Client

	// Active, twice: one query.
	for i := 0; i < 2; i++ {
		resp, body := subscriptionGet(t, client, "/api/projects", "active")
		if resp.StatusCode != 200 || body != "app says hello" {
			t.Fatalf("active: %d %q", resp.StatusCode, body)
		}
	}
	if svc.queries.Load() != 1 {
		t.Fatalf("%d queries for two requests of one active token", svc.queries.Load())
	}

	// Unpaid, JSON.
	resp, body := subscriptionGet(t, client, "/api/projects", "unpaid", "Accept", "application/json")
	if resp.StatusCode != 402 || resp.Header.Get("Location") != "https://service.example/checkout?app=my-app&x=<1>" {
		t.Fatalf("unpaid: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var b struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
		SubscribeLink string `json:"subscribe_link"`
	}
	if err := json.Unmarshal([]byte(body), &b); err != nil || b.Error.Message == "" || b.SubscribeLink != "https://service.example/checkout?app=my-app&x=<1>" {
		t.Fatalf("unpaid JSON body %s (%v)", body, err)
	}

	// Unpaid, HTML for a browser; the link is escaped.
	resp, body = subscriptionGet(t, client, "/api/projects", "unpaid", "Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	if resp.StatusCode != 402 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("unpaid HTML: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(body, `href="https://service.example/checkout?app=my-app&amp;x=&lt;1&gt;"`) || strings.Contains(body, "<1>") {
		t.Fatalf("unpaid HTML body %s", body)
	}

	// Missing and unknown app: 403.
	for _, tok := range []string{"missing", "unknown-app"} {
		resp, body = subscriptionGet(t, client, "/api/projects", tok)
		if resp.StatusCode != 403 || !strings.Contains(body, "no subscription for your organization") {
			t.Fatalf("%s: %d %s", tok, resp.StatusCode, body)
		}
	}

	// Ended: 402 without a link.
	resp, body = subscriptionGet(t, client, "/api/projects", "ended")
	if resp.StatusCode != 402 || resp.Header.Get("Location") != "" || !strings.Contains(body, "ended") {
		t.Fatalf("ended: %d %s", resp.StatusCode, body)
	}

	// A token the service does not know: 401 with a challenge.
	resp, _ = subscriptionGet(t, client, "/api/projects", "stranger")
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Bearer realm="my-app", error="invalid_token"` {
		t.Fatalf("stranger: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}

	// No token at all: 401 without a query.
	before := svc.queries.Load()
	resp, _ = subscriptionGet(t, client, "/api/projects", "")
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Bearer realm="my-app"` {
		t.Fatalf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if svc.queries.Load() != before {
		t.Fatal("a request without a token was queried")
	}

	// Negative answers are cached: asking again sends no query.
	before = svc.queries.Load()
	subscriptionGet(t, client, "/api/projects", "unpaid")
	subscriptionGet(t, client, "/api/projects", "missing")
	if svc.queries.Load() != before {
		t.Fatalf("%d queries for cached negative answers", svc.queries.Load()-before)
	}
	if reached.Load() != 2 {
		t.Fatalf("the app was reached %d times, want 2 (the active requests)", reached.Load())
	}
}

func TestE2ESubscriptionHandleErrors(t *testing.T) {
	svc := newSubscriptionTokenService(t)
	svc.set("unpaid", 402, `{"subscribe_link":"https://service.example/pay"}`)
	svc.set("missing", 404, ``)
	app, _ := subscriptionApp(t)
	tester := startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	route /api/* {
		service_subscription {
			app_identifier my-app
			base_url %s
		}
		reverse_proxy %s
	}
	handle_errors {
		respond "reshaped {err.status_code}: {err.message}"
	}
}
`, svc.URL, strings.TrimPrefix(app.URL, "http://")))

	// The 402 is the handler's own answer, link included.
	resp, body := subscriptionGet(t, tester.Client, "/api/x", "unpaid")
	if resp.StatusCode != 402 || !strings.Contains(body, `"subscribe_link":"https://service.example/pay"`) {
		t.Fatalf("unpaid with handle_errors: %d %s", resp.StatusCode, body)
	}
	// Other refusals go through handle_errors.
	resp, body = subscriptionGet(t, tester.Client, "/api/x", "missing")
	if resp.StatusCode != 403 || !strings.HasPrefix(body, "reshaped 403: ") {
		t.Fatalf("missing with handle_errors: %d %s", resp.StatusCode, body)
	}
}

func TestE2ESubscriptionOutage(t *testing.T) {
	tests := []struct {
		onError      string
		closeService bool // unreachable rather than 503
		wantKnown    int  // a token active before the outage, after max_age
		wantNew      int  // a token never seen before
	}{
		{"on_error deny", true, 503, 503},
		{"on_error allow", false, 200, 200},
		{"on_error stale 1h", false, 200, 503},
	}
	for _, tt := range tests {
		t.Run(tt.onError, func(t *testing.T) {
			svc := newSubscriptionTokenService(t)
			svc.set("known", 200, `{"expires":"2099-01-01 00:00:00"}`)
			svc.set("new", 200, `{"expires":"2099-01-01 00:00:00"}`)
			app, _ := subscriptionApp(t)
			tester := startCaddy(t, subscriptionSite(svc.URL, app.URL, tt.onError+"\n\t\t\tmax_age 100ms\n\t\t\ttimeout 2s"))

			if resp, body := subscriptionGet(t, tester.Client, "/api/x", "known"); resp.StatusCode != 200 {
				t.Fatalf("before the outage: %d %s", resp.StatusCode, body)
			}
			if tt.closeService {
				svc.Close()
			} else {
				svc.down.Store(true)
			}
			time.Sleep(150 * time.Millisecond) // past max_age: the next request asks the service

			resp, body := subscriptionGet(t, tester.Client, "/api/x", "known")
			if resp.StatusCode != tt.wantKnown {
				t.Fatalf("known token in the outage: %d, want %d; %s", resp.StatusCode, tt.wantKnown, body)
			}
			if resp.StatusCode == 503 && !strings.Contains(body, "cannot be checked") {
				t.Fatalf("503 body %s", body)
			}
			resp, body = subscriptionGet(t, tester.Client, "/api/x", "new")
			if resp.StatusCode != tt.wantNew {
				t.Fatalf("new token in the outage: %d, want %d; %s", resp.StatusCode, tt.wantNew, body)
			}
			if resp.StatusCode == 402 {
				t.Fatal("an outage answered 402")
			}

			if !tt.closeService {
				// The service is back: the error was not cached.
				svc.down.Store(false)
				if resp, body := subscriptionGet(t, tester.Client, "/api/x", "new"); resp.StatusCode != 200 {
					t.Fatalf("after the outage: %d %s", resp.StatusCode, body)
				}
			}
		})
	}
}

func TestE2ESubscriptionForgetThroughAdminAPI(t *testing.T) {
	svc := newSubscriptionTokenService(t)
	svc.set("member-1", 402, `{"subscribe_link":"https://service.example/pay"}`)
	svc.set("member-2", 402, `{"subscribe_link":"https://service.example/pay"}`)
	app, _ := subscriptionApp(t)
	tester := startCaddy(t, sharedSubscriptionSite(svc.URL, strings.TrimPrefix(app.URL, "http://")))
	org := "X-Test-Organization"

	if resp, _ := subscriptionGet(t, tester.Client, "/api/x", "member-1", org, "acme"); resp.StatusCode != 402 {
		t.Fatalf("unpaid organization: %d", resp.StatusCode)
	}
	// The organization pays; the cached 402 still holds for everyone in it.
	svc.set("member-1", 200, `{"expires":"2099-01-01 00:00:00"}`)
	svc.set("member-2", 200, `{"expires":"2099-01-01 00:00:00"}`)
	if resp, _ := subscriptionGet(t, tester.Client, "/api/x", "member-2", org, "acme"); resp.StatusCode != 402 {
		t.Fatalf("cached unpaid organization: %d", resp.StatusCode)
	}
	if svc.queries.Load() != 1 {
		t.Fatalf("%d queries for one organization", svc.queries.Load())
	}

	admin := fmt.Sprintf("http://localhost:%d/service/subscription/cache", e2eAdminPort)
	req, _ := http.NewRequest(http.MethodDelete, admin+"?organization=acme", nil)
	resp, err := tester.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"organization":"acme","forgotten":1}`+"\n" {
		t.Fatalf("forget: %d %s", resp.StatusCode, body)
	}
	if resp, body := subscriptionGet(t, tester.Client, "/api/x", "member-2", org, "acme"); resp.StatusCode != 200 {
		t.Fatalf("after forgetting: %d %s", resp.StatusCode, body)
	}

	// POST with JSON works too; bad requests are refused.
	resp, err = tester.Client.Post(admin, "application/json", strings.NewReader(`{"organization":"acme"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"organization":"acme","forgotten":1}`+"\n" {
		t.Fatalf("forget by POST: %d %s", resp.StatusCode, body)
	}
	for _, r := range []*http.Request{
		subscriptionAdminRequest(t, http.MethodDelete, admin, ""),
		subscriptionAdminRequest(t, http.MethodPost, admin, `{"organization":`),
		subscriptionAdminRequest(t, http.MethodGet, admin+"?organization=acme", ""),
	} {
		resp, err := tester.Client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 && resp.StatusCode != 405 {
			t.Fatalf("%s %s: %d, want a refusal", r.Method, r.URL, resp.StatusCode)
		}
	}
}

func subscriptionAdminRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

func TestE2ESubscriptionOneQueryForConcurrentFirstRequests(t *testing.T) {
	svc := newSubscriptionTokenService(t)
	svc.delay = 200 * time.Millisecond
	svc.set("member", 200, `{"expires":"2099-01-01 00:00:00"}`)
	app, reached := subscriptionApp(t)
	tester := startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	route /api/* {
		subscription_test_verify
		service_subscription {
			app_identifier my-app
			base_url %s
		}
		reverse_proxy %s
	}
}
`, svc.URL, strings.TrimPrefix(app.URL, "http://")))

	const requests = 200
	var wg sync.WaitGroup
	var ok atomic.Int64
	for i := 0; i < requests; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, e2eURL("/api/x"), nil)
			req.Header.Set("Authorization", "Bearer member")
			req.Header.Set("X-Test-Organization", "initech")
			resp, err := tester.Client.Do(req)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if svc.queries.Load() != 1 {
		t.Fatalf("%d subscription queries for %d concurrent first requests, want 1", svc.queries.Load(), requests)
	}
	if ok.Load() != requests || reached.Load() != requests {
		t.Fatalf("%d answered 200, %d reached the app, want %d", ok.Load(), reached.Load(), requests)
	}

	// The metrics are on Caddy's admin /metrics.
	resp, err := tester.Client.Get(fmt.Sprintf("http://localhost:%d/metrics", e2eAdminPort))
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`servicegate_subscription_queries_total{answer="active"}`,
		"servicegate_subscription_cache_misses_total",
		"servicegate_subscription_cache_hits_total",
		"servicegate_subscription_query_duration_seconds_bucket",
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("admin /metrics has no %s", want)
		}
	}
}

func TestE2ESubscriptionCacheSurvivesReload(t *testing.T) {
	svc := newSubscriptionTokenService(t)
	svc.set("member", 200, `{"expires":"2099-01-01 00:00:00"}`)
	app, _ := subscriptionApp(t)
	tester := startCaddy(t, subscriptionSite(svc.URL, app.URL, "cache_size 777"))
	if resp, _ := subscriptionGet(t, tester.Client, "/api/x", "member"); resp.StatusCode != 200 {
		t.Fatalf("before the reload: %d", resp.StatusCode)
	}
	// A new config with the same cache size: the cache and its answer stay.
	tester = startCaddy(t, subscriptionSite(svc.URL, app.URL, "cache_size 777\n\t\t\ttimeout 3s"))
	if resp, _ := subscriptionGet(t, tester.Client, "/api/x", "member"); resp.StatusCode != 200 {
		t.Fatalf("after the reload: %d", resp.StatusCode)
	}
	if n := svc.queries.Load(); n != 1 {
		t.Fatalf("%d queries across a reload, want 1", n)
	}
}
