package emulator

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable clock for tests.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const (
	testClientID = "demo-client"
	testSecret   = "demo-client-secret"
	testRedirect = "http://localhost:8080/callback"
)

var testStart = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testConfig(c *clock) Config {
	return Config{
		ClientID:     testClientID,
		ClientSecret: testSecret,
		RedirectURIs: []string{testRedirect, "http://localhost:8080/other?keep=1"},
		Organizations: []Organization{
			{Domain: "acme.example", ID: 1, ActiveUntil: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
			{Domain: "unpaid.example", ID: 2, SubscribeLink: "https://service.example/checkout/2"},
			{Domain: "missing.example", ID: 3},
		},
		Now: c.Now,
	}
}

func newTestServer(t testing.TB) (*Server, *clock) {
	t.Helper()
	c := &clock{now: testStart}
	s, err := New(testConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// do runs one request through s.ServeHTTP.
func do(s *Server, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, r)
	return rec
}

func authorizeURL(params map[string]string) string {
	v := url.Values{}
	for k, val := range params {
		v.Set(k, val)
	}
	return "/oauth/authorize?" + v.Encode()
}

// approve runs the authorization request with decision=approve and returns
// the code from the redirect.
func approve(t testing.TB, s *Server, extra map[string]string) string {
	t.Helper()
	params := map[string]string{"client_id": testClientID, "redirect_uri": testRedirect,
		"response_type": "code", "scope": "project", "decision": "approve"}
	for k, v := range extra {
		params[k] = v
	}
	rec := do(s, httptest.NewRequest(http.MethodGet, authorizeURL(params), nil))
	if rec.Code != http.StatusFound {
		t.Fatalf("authorize: status %d, body %s", rec.Code, rec.Body)
	}
	loc, err := url.Parse(rec.Header().Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	code := loc.Query().Get("code")
	if code == "" {
		t.Fatalf("no code in %s", loc)
	}
	return code
}

func tokenRequestOf(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/oauth/token", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func jsonBody(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// exchange posts a token request and decodes the answer.
func exchange(t testing.TB, s *Server, req map[string]string) (int, map[string]any) {
	t.Helper()
	rec := do(s, tokenRequestOf(jsonBody(t, req)))
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("token answer %d is not JSON: %q", rec.Code, rec.Body)
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", cc)
	}
	return rec.Code, out
}

func codeGrantRequest(code string) map[string]string {
	return map[string]string{"grant_type": "authorization_code", "client_id": testClientID,
		"client_secret": testSecret, "redirect_uri": testRedirect, "code": code}
}

func refreshGrantRequest(refresh string) map[string]string {
	return map[string]string{"grant_type": "refresh_token", "client_id": testClientID,
		"client_secret": testSecret, "refresh_token": refresh}
}

func TestNewRefusesBadConfig(t *testing.T) {
	c := &clock{now: testStart}
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"no client id", func(cfg *Config) { cfg.ClientID = "" }},
		{"no client secret", func(cfg *Config) { cfg.ClientSecret = "" }},
		{"no redirect URI", func(cfg *Config) { cfg.RedirectURIs = nil }},
		{"relative redirect URI", func(cfg *Config) { cfg.RedirectURIs = []string{"/callback"} }},
		{"redirect URI with fragment", func(cfg *Config) { cfg.RedirectURIs = []string{"http://a.example/cb#x"} }},
		{"organization without domain", func(cfg *Config) { cfg.Organizations[0].Domain = "" }},
		{"organization without id", func(cfg *Config) { cfg.Organizations[0].ID = 0 }},
		{"duplicate domain", func(cfg *Config) { cfg.Organizations[1].Domain = "acme.example" }},
		{"duplicate id", func(cfg *Config) { cfg.Organizations[1].ID = 1 }},
		{"active and unpaid", func(cfg *Config) { cfg.Organizations[0].SubscribeLink = "https://x.example" }},
		{"negative code lifetime", func(cfg *Config) { cfg.CodeLifetime = -time.Second }},
		{"token lifetime under a second", func(cfg *Config) { cfg.TokenLifetime = time.Millisecond }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(c)
			tt.change(&cfg)
			if _, err := New(cfg); err == nil {
				t.Fatal("New accepted the config")
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	s, err := New(Config{ClientID: "c", ClientSecret: "s", RedirectURIs: []string{"https://app.example/cb"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.AppIdentifier != "demo-app" || s.cfg.Issuer != "service-emulator" ||
		s.cfg.TokenLifetime != 2*time.Hour || s.cfg.CodeLifetime != time.Minute || s.cfg.UserID != 7 {
		t.Fatalf("defaults: %+v", s.cfg)
	}
}

func TestHandleLeavesOtherPathsAlone(t *testing.T) {
	s, _ := newTestServer(t)
	for _, path := range []string{"/", "/oauth", "/oauth/authorize/x", "/api/v2/applications//subscription",
		"/api/v2/applications/a/b/subscription", "/api/v2/projects"} {
		rec := httptest.NewRecorder()
		if s.Handle(rec, httptest.NewRequest(http.MethodGet, path, nil)) {
			t.Errorf("%s: handled, want left alone", path)
		}
		if rec.Code != http.StatusOK || rec.Body.Len() != 0 || len(rec.Header()) != 0 {
			t.Errorf("%s: the response was touched", path)
		}
	}
	if rec := do(s, httptest.NewRequest(http.MethodGet, "/nothing", nil)); rec.Code != http.StatusNotFound {
		t.Errorf("ServeHTTP of an unknown path: %d, want 404", rec.Code)
	}
}
