package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"net/http/httptest"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/servicegate/servicegate/emulator"
)

const (
	oauthTestClientID = "demo-client"
	oauthTestSecret   = "demo-client-secret"
)

// oauthRig is a service emulator behind a counting wrapper, an app that
// echoes what it received, and a cookie-keeping client that does not
// follow redirects.
type oauthRig struct {
	t   *testing.T
	svc *httptest.Server
	app *httptest.Server

	tokenRequests atomic.Int64 // every POST /oauth/token
	refreshes     atomic.Int64 // refresh_token grants
	refuseRefresh atomic.Bool  // answer refresh grants 400 invalid_grant
	failTokens    atomic.Bool  // answer every token request 500
	refreshDelay  atomic.Int64 // time.Duration before a refresh is answered
	skew          atomic.Int64 // time.Duration the handlers' clock is ahead
	clockSet      bool         // the running handlers read skew

	client *http.Client
}

// moveClock sets the clock of the running service_oauth handlers d ahead
// of the real one. The first call gives their managers a clock that reads
// skew, before any request needs it moved.
func (rig *oauthRig) moveClock(d time.Duration) {
	rig.t.Helper()
	rig.skew.Store(int64(d))
	if rig.clockSet {
		return
	}
	handlers := runningHandlers[*ServiceOAuth](rig.t)
	if len(handlers) == 0 {
		rig.t.Fatal("no service_oauth handler is running")
	}
	for _, m := range handlers {
		m.manager.Now = func() time.Time { return time.Now().Add(time.Duration(rig.skew.Load())) }
	}
	rig.clockSet = true
}

// runningHandlers are the provisioned handlers of type T in the routes of
// the running Caddy's HTTP servers, subroutes included.
func runningHandlers[T caddyhttp.MiddlewareHandler](t *testing.T) []T {
	t.Helper()
	app, err := caddy.ActiveContext().App("http")
	if err != nil {
		t.Fatal(err)
	}
	var found []T
	var walk func(caddyhttp.RouteList)
	walk = func(routes caddyhttp.RouteList) {
		for _, route := range routes {
			for _, h := range route.Handlers {
				if sub, ok := h.(*caddyhttp.Subroute); ok {
					walk(sub.Routes)
				} else if h, ok := h.(T); ok {
					found = append(found, h)
				}
			}
		}
	}
	for _, srv := range app.(*caddyhttp.App).Servers {
		walk(srv.Routes)
	}
	return found
}

// appEcho is what the app behind the gateway saw.
type appEcho struct {
	Path          string `json:"path"`
	Authorization string `json:"authorization"`
	User          string `json:"user"`
	Domain        string `json:"domain"`
	Cookie        string `json:"cookie"`
}

func newOAuthRig(t *testing.T, redirectURIs ...string) *oauthRig {
	t.Helper()
	if len(redirectURIs) == 0 {
		redirectURIs = []string{e2eURL("/oauth/callback")}
	}
	emu, err := emulator.New(emulator.Config{
		ClientID:      oauthTestClientID,
		ClientSecret:  oauthTestSecret,
		RedirectURIs:  redirectURIs,
		Organizations: []emulator.Organization{{Domain: "acme.example", ID: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rig := &oauthRig{t: t}
	rig.svc = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" {
			rig.tokenRequests.Add(1)
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			if rig.failTokens.Load() {
				http.Error(w, "down", http.StatusInternalServerError)
				return
			}
			if strings.Contains(string(body), `"refresh_token"`) && strings.Contains(string(body), `"grant_type":"refresh_token"`) {
				rig.refreshes.Add(1)
				time.Sleep(time.Duration(rig.refreshDelay.Load()))
				if rig.refuseRefresh.Load() {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"revoked"}`)
					return
				}
			}
		}
		emu.ServeHTTP(w, r)
	}))
	t.Cleanup(rig.svc.Close)
	rig.app = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(appEcho{
			Path:          r.URL.RequestURI(),
			Authorization: r.Header.Get("Authorization"),
			User:          strings.Join(r.Header.Values("X-Service-User-Id"), ","),
			Domain:        strings.Join(r.Header.Values("X-Service-Domain"), ","),
			Cookie:        strings.Join(r.Header.Values("Cookie"), "|"),
		})
	}))
	t.Cleanup(rig.app.Close)
	rig.client = newOAuthClient(t)
	return rig
}

func newOAuthClient(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{
		Jar:           jar,
		Timeout:       20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// site is a Caddyfile site with service_oauth (plus extra sub-directives)
// in front of the app.
func (rig *oauthRig) site(extra string) string {
	return fmt.Sprintf(`http://localhost:{port} {
	service_oauth {
		client_id %s
		client_secret %s
		auth_url %s
		scopes project tm
		cookie_secure off
		%s
	}
	reverse_proxy %s
}
`, oauthTestClientID, oauthTestSecret, rig.svc.URL, extra, strings.TrimPrefix(rig.app.URL, "http://"))
}

// get sends a GET as a browser (html true) or an API client.
func (rig *oauthRig) get(client *http.Client, rawURL string, html bool, header ...string) (*http.Response, string) {
	rig.t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		rig.t.Fatal(err)
	}
	if html {
		req.Header.Set("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		rig.t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		rig.t.Fatal(err)
	}
	return resp, string(body)
}

// logout signs out as the sign-out page's button does: a POST, from a
// page of origin.
func (rig *oauthRig) logout(client *http.Client, origin string) (*http.Response, string) {
	rig.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e2eURL("/oauth/logout"), nil)
	if err != nil {
		rig.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	req.Header.Set("Origin", origin)
	resp, err := client.Do(req)
	if err != nil {
		rig.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// expectRedirect checks a redirect answer and returns its Location.
func (rig *oauthRig) expectRedirect(resp *http.Response, body, what string) string {
	rig.t.Helper()
	if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther {
		rig.t.Fatalf("%s: status %d, want a redirect; body %s", what, resp.StatusCode, body)
	}
	loc := resp.Header.Get("Location")
	if loc == "" {
		rig.t.Fatalf("%s: redirect without Location", what)
	}
	return loc
}

// startLogin asks for path as a browser and returns the authorization
// request it is sent to.
func (rig *oauthRig) startLogin(client *http.Client, path string) *url.URL {
	rig.t.Helper()
	resp, body := rig.get(client, e2eURL(path), true)
	loc := rig.expectRedirect(resp, body, "unauthenticated browser request")
	u, err := url.Parse(loc)
	if err != nil {
		rig.t.Fatal(err)
	}
	if !strings.HasPrefix(loc, rig.svc.URL+"/oauth/authorize?") {
		rig.t.Fatalf("sent to %s, want the service's authorize endpoint", loc)
	}
	return u
}

// consent answers the authorization request as the user would and
// returns the callback address the service sends the browser to.
func (rig *oauthRig) consent(client *http.Client, authorize *url.URL, decision string) string {
	rig.t.Helper()
	q := authorize.Query()
	q.Set("decision", decision)
	u := *authorize
	u.RawQuery = q.Encode()
	resp, body := rig.get(client, u.String(), true)
	return rig.expectRedirect(resp, body, "consent")
}

// login runs the whole flow for path and returns where the gateway sent
// the browser back to.
func (rig *oauthRig) login(client *http.Client, path string) string {
	rig.t.Helper()
	callback := rig.consent(client, rig.startLogin(client, path), "approve")
	resp, body := rig.get(client, callback, true)
	return rig.expectRedirect(resp, body, "callback")
}

// through asks for path through the gateway and decodes what the app saw.
func (rig *oauthRig) through(client *http.Client, path string, html bool, header ...string) appEcho {
	rig.t.Helper()
	resp, body := rig.get(client, e2eURL(path), html, header...)
	if resp.StatusCode != http.StatusOK {
		rig.t.Fatalf("GET %s: status %d, want 200 from the app; body %s", path, resp.StatusCode, body)
	}
	var echo appEcho
	if err := json.Unmarshal([]byte(body), &echo); err != nil {
		rig.t.Fatalf("GET %s: not the app's answer: %s", path, body)
	}
	return echo
}

// oauthEventCount reads servicegate_oauth_events_total for one event.
func oauthEventCount(event string) float64 {
	return testutil.ToFloat64(oauthEventsTotal.WithLabelValues(event))
}

func TestServiceOAuthLoginE2E(t *testing.T) {
	rig := newOAuthRig(t)
	startCaddy(t, rig.site(""))
	started, completed, badState := oauthEventCount("login_started"), oauthEventCount("login_completed"), oauthEventCount("login_bad_state")

	authorize := rig.startLogin(rig.client, "/reports?year=2026")
	q := authorize.Query()
	if q.Get("client_id") != oauthTestClientID || q.Get("response_type") != "code" || q.Get("scope") != "project tm" ||
		q.Get("redirect_uri") != e2eURL("/oauth/callback") || len(q.Get("state")) != 43 {
		t.Fatalf("authorization request %s", authorize)
	}
	callback := rig.consent(rig.client, authorize, "approve")
	resp, body := rig.get(rig.client, callback, true)
	if got := rig.expectRedirect(resp, body, "callback"); got != "/reports?year=2026" {
		t.Fatalf("sent back to %q, want the page the user asked for", got)
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "servicegate_session" {
			session = c
		}
	}
	if session == nil || len(session.Value) != 43 || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Secure {
		t.Fatalf("session cookie %+v, want a 256-bit id, HttpOnly, SameSite=Lax, not Secure (cookie_secure off)", session)
	}
	if strings.Contains(strings.Join(resp.Header.Values("Set-Cookie"), ";"), "ey") {
		t.Fatal("a token reached the browser in a cookie")
	}

	// The app gets the token and the session's names, never the
	// inbound copies of those headers or the session cookie.
	echo := rig.through(rig.client, "/reports?year=2026", false,
		"X-Service-User-Id", "666", "X-Service-Domain", "evil.example", "Authorization", "Bearer forged",
		"Cookie", "theme=dark")
	if !strings.HasPrefix(echo.Authorization, "Bearer ey") || echo.Authorization == "Bearer forged" {
		t.Fatalf("app saw Authorization %q", echo.Authorization)
	}
	if echo.User != "7" || echo.Domain != "acme.example" {
		t.Fatalf("app saw user %q domain %q, want 7 and acme.example", echo.User, echo.Domain)
	}
	if strings.Contains(echo.Cookie, "servicegate_session") || !strings.Contains(echo.Cookie, "theme=dark") {
		t.Fatalf("app saw cookies %q: want the app's own, not the session's", echo.Cookie)
	}
	if rig.tokenRequests.Load() != 1 {
		t.Fatalf("%d token requests, want the one code exchange", rig.tokenRequests.Load())
	}

	// The same callback a second time is refused: the state is used. A
	// browser already signed in is sent on to /, another gets the page.
	resp, body = rig.get(rig.client, callback, true)
	if loc := rig.expectRedirect(resp, body, "used callback, signed in"); loc != "/" {
		t.Fatalf("used callback, signed in: sent to %q", loc)
	}
	resp, body = rig.get(newOAuthClient(t), callback, true)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "not valid here") {
		t.Fatalf("replayed callback: %d %s", resp.StatusCode, body)
	}
	if rig.tokenRequests.Load() != 1 {
		t.Fatalf("%d token requests after the replays, want 1", rig.tokenRequests.Load())
	}
	if oauthEventCount("login_started") != started+1 || oauthEventCount("login_completed") != completed+1 ||
		oauthEventCount("login_bad_state") != badState+2 {
		t.Fatalf("events: started +%v completed +%v bad state +%v, want +1 +1 +2", oauthEventCount("login_started")-started,
			oauthEventCount("login_completed")-completed, oauthEventCount("login_bad_state")-badState)
	}
}

func TestServiceOAuthAPIClientGets401E2E(t *testing.T) {
	rig := newOAuthRig(t)
	startCaddy(t, rig.site(""))
	resp, body := rig.get(rig.client, e2eURL("/api/items"), false)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Location") != "" ||
		!strings.Contains(body, `"error":{"message":"Sign in`) {
		t.Fatalf("API client without session: %d Location %q body %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	// A browser posting a form is sent to sign in, and back to / after.
	req, _ := http.NewRequest(http.MethodPost, e2eURL("/form"), strings.NewReader("a=b"))
	req.Header.Set("Accept", "text/html")
	resp, err := rig.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), rig.svc.URL) {
		t.Fatalf("browser POST without session: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestServiceOAuthStateE2E(t *testing.T) {
	rig := newOAuthRig(t)
	startCaddy(t, rig.site(""))

	tests := []struct {
		name   string
		tamper func(callback string) (client *http.Client, target string)
	}{
		{"callback in another browser", func(cb string) (*http.Client, string) { return newOAuthClient(t), cb }},
		{"state changed", func(cb string) (*http.Client, string) {
			u, _ := url.Parse(cb)
			q := u.Query()
			q.Set("state", strings.Repeat("A", 43))
			u.RawQuery = q.Encode()
			return rig.client, u.String()
		}},
		{"state missing", func(cb string) (*http.Client, string) {
			u, _ := url.Parse(cb)
			q := u.Query()
			q.Del("state")
			u.RawQuery = q.Encode()
			return rig.client, u.String()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := rig.tokenRequests.Load()
			callback := rig.consent(rig.client, rig.startLogin(rig.client, "/x"), "approve")
			client, target := tt.tamper(callback)
			resp, body := rig.get(client, target, true)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Sign-in link expired") {
				t.Fatalf("status %d body %s, want 400 and the expired-link page", resp.StatusCode, body)
			}
			for _, c := range resp.Cookies() {
				if c.Name == "servicegate_session" && c.Value != "" {
					t.Fatal("a session was given for a bad state")
				}
			}
			if rig.tokenRequests.Load() != before {
				t.Fatal("the code was exchanged for a bad state")
			}
		})
	}
}

func TestServiceOAuthDeclinedE2E(t *testing.T) {
	rig := newOAuthRig(t)
	startCaddy(t, rig.site(""))
	declined := oauthEventCount("login_declined")
	callback := rig.consent(rig.client, rig.startLogin(rig.client, "/settings"), "decline")
	if !strings.Contains(callback, "error=access_denied") {
		t.Fatalf("the emulator sent %s", callback)
	}
	resp, body := rig.get(rig.client, callback, true)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "You declined") ||
		!strings.Contains(body, `<a href="/settings">Try again</a>`) {
		t.Fatalf("declined: %d %s", resp.StatusCode, body)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("declined page Content-Type %q", resp.Header.Get("Content-Type"))
	}
	if rig.tokenRequests.Load() != 0 {
		t.Fatal("a declined login made a token request")
	}
	if oauthEventCount("login_declined") != declined+1 {
		t.Fatal("the declined login was not counted")
	}
	// Trying again starts a new login.
	rig.startLogin(rig.client, "/settings")
}

func TestServiceOAuthUnregisteredRedirectE2E(t *testing.T) {
	rig := newOAuthRig(t)
	startCaddy(t, rig.site("redirect_uri /elsewhere"))
	authorize := rig.startLogin(rig.client, "/")
	if got := authorize.Query().Get("redirect_uri"); got != e2eURL("/elsewhere") {
		t.Fatalf("redirect_uri %q", got)
	}
	q := authorize.Query()
	q.Set("decision", "approve")
	authorize.RawQuery = q.Encode()
	resp, body := rig.get(rig.client, authorize.String(), true)
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
		t.Fatalf("unregistered redirect_uri: %d Location %q, want the service to refuse without redirecting", resp.StatusCode, resp.Header.Get("Location"))
	}
	if !strings.Contains(body, "redirect_uri") {
		t.Fatalf("service page %s", body)
	}
}

func TestServiceOAuthCodeExchangeFailureE2E(t *testing.T) {
	rig := newOAuthRig(t)
	startCaddy(t, rig.site(""))
	tests := []struct {
		name       string
		code       string
		down       bool
		wantStatus int
		wantText   string
	}{
		{"unknown code", "not-a-code", false, http.StatusForbidden, "did not accept this sign-in"},
		// The token endpoint answers 500: the page says it answered,
		// never that it could not be reached.
		{"token endpoint failing", "", true, http.StatusBadGateway, "The service answered 500 when asked to finish signing you in."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rig.failTokens.Store(tt.down)
			defer rig.failTokens.Store(false)
			callback := rig.consent(rig.client, rig.startLogin(rig.client, "/"), "approve")
			if tt.code != "" {
				u, _ := url.Parse(callback)
				q := u.Query()
				q.Set("code", tt.code)
				u.RawQuery = q.Encode()
				callback = u.String()
			}
			resp, body := rig.get(rig.client, callback, true)
			if resp.StatusCode != tt.wantStatus || !strings.Contains(body, tt.wantText) {
				t.Fatalf("status %d body %s", resp.StatusCode, body)
			}
			if strings.Contains(body, oauthTestSecret) {
				t.Fatal("the page shows the client secret")
			}
			if resp, body := rig.get(rig.client, e2eURL("/"), false); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("after a failed exchange: %d %s, want no session", resp.StatusCode, body)
			}
		})
	}
}

func TestServiceOAuthOpenRedirectE2E(t *testing.T) {
	rig := newOAuthRig(t)
	startCaddy(t, rig.site(""))
	tests := []struct{ path, want string }{
		{"//evil.example/x", "/"},
		{"///evil.example", "/"},
		// Go's client sends the backslash escaped, which a browser
		// does not read as a slash: safe to return to.
		{"/\\evil.example", "/%5Cevil.example"},
		{"/ok/page?a=1", "/ok/page?a=1"},
	}
	for _, tt := range tests {
		if got := rig.login(newOAuthClient(t), tt.path); got != tt.want {
			t.Fatalf("login from %q returned to %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestServiceOAuthRefreshE2E(t *testing.T) {
	rig := newOAuthRig(t)
	startCaddy(t, rig.site(""))
	rig.login(rig.client, "/")
	first := rig.through(rig.client, "/", false).Authorization

	// 30 minutes on, the two-hour token is still good: no refresh.
	rig.moveClock(30 * time.Minute)
	if got := rig.through(rig.client, "/", false).Authorization; got != first || rig.refreshes.Load() != 0 {
		t.Fatalf("refreshed a token far from expiry (%d refreshes)", rig.refreshes.Load())
	}
	// Within a minute of its expiry, the token is refreshed first.
	rig.moveClock(2*time.Hour - 30*time.Second)
	second := rig.through(rig.client, "/", false).Authorization
	if second == first || !strings.HasPrefix(second, "Bearer ey") || rig.refreshes.Load() != 1 {
		t.Fatalf("after expiry: same token %v, %d refreshes", second == first, rig.refreshes.Load())
	}
	if got := rig.through(rig.client, "/", false).Authorization; got != second || rig.refreshes.Load() != 1 {
		t.Fatal("the refreshed token was not kept")
	}
}

func TestServiceOAuthConcurrentRefreshE2E(t *testing.T) {
	rig := newOAuthRig(t)
	startCaddy(t, rig.site(""))
	rig.login(rig.client, "/")
	rig.refreshDelay.Store(int64(200 * time.Millisecond))
	rig.moveClock(3 * time.Hour)

	const n = 20
	tokens := make([]string, n)
	errs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, e2eURL("/"), nil)
			resp, err := rig.client.Do(req)
			if err != nil {
				errs[i] = err.Error()
				return
			}
			defer resp.Body.Close()
			var echo appEcho
			if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&echo) != nil {
				errs[i] = fmt.Sprintf("status %d", resp.StatusCode)
				return
			}
			tokens[i] = echo.Authorization
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != "" {
			t.Fatalf("request %d: %s", i, errs[i])
		}
		if tokens[i] != tokens[0] {
			t.Fatalf("request %d went on with another token than request 0", i)
		}
	}
	if got := rig.refreshes.Load(); got != 1 {
		t.Fatalf("%d refresh requests for %d concurrent requests of one session, want 1", got, n)
	}
}

func TestServiceOAuthRefusedRefreshE2E(t *testing.T) {
	rig := newOAuthRig(t)
	startCaddy(t, rig.site(""))
	rig.login(rig.client, "/")
	rig.refuseRefresh.Store(true)
	rig.moveClock(3 * time.Hour)

	// A browser is sent to sign in again, and the cookie is dropped.
	resp, body := rig.get(rig.client, e2eURL("/page"), true)
	loc := rig.expectRedirect(resp, body, "browser after a refused refresh")
	if !strings.HasPrefix(loc, rig.svc.URL+"/oauth/authorize?") {
		t.Fatalf("sent to %s", loc)
	}
	cleared := false
	for _, c := range resp.Cookies() {
		if c.Name == "servicegate_session" && c.MaxAge < 0 {
			cleared = true
		}
	}
	if !cleared {
		t.Fatalf("session cookie not cleared: %v", resp.Header.Values("Set-Cookie"))
	}
	// An API client with the old session id gets 401.
	api := newOAuthClient(t)
	for _, c := range rig.client.Jar.Cookies(mustURL(t, e2eURL("/"))) {
		if c.Name == "servicegate_session" {
			t.Fatal("the jar kept the cleared cookie")
		}
	}
	if rig.refreshes.Load() != 1 {
		t.Fatalf("%d refreshes, want 1", rig.refreshes.Load())
	}
	if resp, body := rig.get(api, e2eURL("/api"), false); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API: %d %s", resp.StatusCode, body)
	}
}

func TestServiceOAuthRefusedRefreshAPIE2E(t *testing.T) {
	rig := newOAuthRig(t)
	startCaddy(t, rig.site(""))
	rig.login(rig.client, "/")
	rig.refuseRefresh.Store(true)
	rig.moveClock(3 * time.Hour)
	resp, body := rig.get(rig.client, e2eURL("/api"), false)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Location") != "" {
		t.Fatalf("API after a refused refresh: %d %s", resp.StatusCode, body)
	}
}

func mustURL(t *testing.T, raw string) *url.URL {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestServiceOAuthLogoutE2E(t *testing.T) {
	rig := newOAuthRig(t)
	startCaddy(t, rig.site("logout_redirect /goodbye"))
	rig.login(rig.client, "/")
	var id string
	for _, c := range rig.client.Jar.Cookies(mustURL(t, e2eURL("/"))) {
		if c.Name == "servicegate_session" {
			id = c.Value
		}
	}
	if id == "" {
		t.Fatal("no session cookie after login")
	}
	// A GET (a link or an image of another site) shows the button and ends nothing.
	resp, body := rig.get(rig.client, e2eURL("/oauth/logout"), true)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<form method="post" action="/oauth/logout">`) {
		t.Fatalf("GET logout: %d %s", resp.StatusCode, body)
	}
	// A POST from another site ends nothing either.
	if resp, body := rig.logout(rig.client, "https://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site logout: %d %s", resp.StatusCode, body)
	}
	if echo := rig.through(rig.client, "/", false); echo.Authorization == "" {
		t.Fatal("the session ended without a same-site POST")
	}
	resp, body = rig.logout(rig.client, e2eBase())
	if loc := rig.expectRedirect(resp, body, "logout"); loc != "/goodbye" {
		t.Fatalf("logout sent to %q", loc)
	}
	if resp, body := rig.get(rig.client, e2eURL("/"), false); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after logout: %d %s", resp.StatusCode, body)
	}
	// The id is forgotten on the server too, not only in the browser.
	other := newOAuthClient(t)
	other.Jar.SetCookies(mustURL(t, e2eURL("/")), []*http.Cookie{{Name: "servicegate_session", Value: id}})
	if resp, body := rig.get(other, e2eURL("/"), false); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("old session id after logout: %d %s", resp.StatusCode, body)
	}
}

func TestServiceOAuthSecureCookiesByDefaultE2E(t *testing.T) {
	rig := newOAuthRig(t)
	startCaddy(t, strings.Replace(rig.site(""), "cookie_secure off", "", 1))
	resp, _ := rig.get(rig.client, e2eURL("/"), true)
	setCookie := resp.Header.Get("Set-Cookie")
	for _, attr := range []string{"servicegate_session_state=", "Path=/oauth/callback", "HttpOnly", "Secure", "SameSite=Lax"} {
		if !strings.Contains(setCookie, attr) {
			t.Fatalf("state cookie %q lacks %s", setCookie, attr)
		}
	}
}

// startCaddyWithStorage is startCaddy with Caddy's storage in dir.
func startCaddyWithStorage(t *testing.T, dir, sites string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped in -short mode")
	}
	global := strings.Replace(e2eGlobal(), "auto_https off", "auto_https off\n\tstorage file_system "+dir, 1)
	sites = strings.ReplaceAll(sites, "{port}", fmt.Sprint(e2eHTTPPort))
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: e2eAdminPort})
	loadCaddyfile(tester, global+sites)
}

func TestServiceOAuthStorageSessionsE2E(t *testing.T) {
	rig := newOAuthRig(t)
	dir := t.TempDir()
	startCaddyWithStorage(t, dir, rig.site("session_store storage"))
	rig.login(rig.client, "/")
	token := rig.through(rig.client, "/", false).Authorization

	// Entries are named by a hash and hold neither the id nor the token.
	entries, err := os.ReadDir(filepath.Join(dir, "servicegate", "oauth_sessions"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("storage holds %d session entries (%v), want 1", len(entries), err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "servicegate", "oauth_sessions", entries[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	if logins, _ := os.ReadDir(filepath.Join(dir, "servicegate", "oauth_logins")); len(logins) != 0 {
		t.Fatalf("%d logins left in storage after the login finished", len(logins))
	}
	var id string
	for _, c := range rig.client.Jar.Cookies(mustURL(t, e2eURL("/"))) {
		if c.Name == "servicegate_session" {
			id = c.Value
		}
	}
	if len(entries[0].Name()) != 64 || strings.Contains(entries[0].Name(), id) ||
		strings.Contains(string(raw), strings.TrimPrefix(token, "Bearer ")) || strings.Contains(string(raw), id) {
		t.Fatal("the storage entry shows the session id or the token")
	}

	// A new configuration (as after a restart: nothing shared in memory)
	// still knows the session.
	startCaddyWithStorage(t, dir, rig.site("session_store storage\n\t\tmax_sessions 5\n\t\ttimeout 7s"))
	if got := rig.through(rig.client, "/", false).Authorization; got != token {
		t.Fatal("the session was not found after the reload")
	}
	// Logout removes it from storage.
	rig.logout(rig.client, e2eBase())
	if entries, _ := os.ReadDir(filepath.Join(dir, "servicegate", "oauth_sessions")); len(entries) != 0 {
		t.Fatalf("%d entries left after logout", len(entries))
	}
}

func TestServiceOAuthMemorySessionsSurviveReloadE2E(t *testing.T) {
	rig := newOAuthRig(t)
	startCaddy(t, rig.site(""))
	rig.login(rig.client, "/")
	startCaddy(t, rig.site("timeout 7s"))
	if echo := rig.through(rig.client, "/", false); !strings.HasPrefix(echo.Authorization, "Bearer ey") {
		t.Fatal("the session was lost on a config reload")
	}
}
