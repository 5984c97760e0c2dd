package caddymodule

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// upstream is an httptest app that records the last request it got.
type upstream struct {
	*httptest.Server
	mu     sync.Mutex
	header http.Header
	query  string
	uri    string // the request URI as the app got it
	hits   int
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.header, u.query, u.uri = r.Header.Clone(), r.URL.RawQuery, r.RequestURI
		u.hits++
		u.mu.Unlock()
		_, _ = io.WriteString(w, "app")
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) last() (http.Header, string, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.header, u.query, u.hits
}

func authSite(u *upstream, extra string) string {
	return `
localhost:{port} {
	route /api/* {
		service_auth {
			hs256_secret {env.SERVICEGATE_E2E_CLIENT_SECRET}
			audience client-id
			issuer service-emulator
			from_query jwtToken
			claim_header X-Service-User-Id sub
			claim_header X-Service-Organization context.organization_id
			` + extra + `
		}
		reverse_proxy ` + strings.TrimPrefix(u.URL, "http://") + ` {
			header_up X-Org-Key {http.service.organization}
			header_up X-User-From-Placeholder {http.auth.user.id}
		}
	}
}
`
}

func get(t *testing.T, client *http.Client, path string, header map[string]string) (*http.Response, string) {
	t.Helper()
	return request(t, client, http.MethodGet, path, header, nil)
}

// request makes a request of the test Caddy and returns its answer and body.
func request(t *testing.T, client *http.Client, method, path string, header map[string]string, body []byte) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, e2eURL(path), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestE2EAuthValidTokenPassesTrustedHeaders(t *testing.T) {
	t.Setenv("SERVICEGATE_E2E_CLIENT_SECRET", testClientSecret)
	u := newUpstream(t)
	tester := startCaddy(t, authSite(u, ""))
	tok := hsToken(t, emulatorClaims())
	resp, body := get(t, tester.Client, "/api/projects", map[string]string{
		"Authorization":          "Bearer " + tok,
		"X-Service-User-Id":      "999",
		"X-Service-Organization": "evil-corp",
	})
	if resp.StatusCode != http.StatusOK || body != "app" {
		t.Fatalf("status %d body %q, want 200 from the app", resp.StatusCode, body)
	}
	h, _, _ := u.last()
	for name, want := range map[string]string{
		"X-Service-User-Id":       "7",
		"X-Service-Organization":  "1",
		"X-Org-Key":               "acme",
		"X-User-From-Placeholder": "7",
	} {
		if got := h.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("upstream %s = %q, want %q", name, got, want)
		}
	}
}

func TestE2EAuthRefusesWithoutToken(t *testing.T) {
	t.Setenv("SERVICEGATE_E2E_CLIENT_SECRET", testClientSecret)
	u := newUpstream(t)
	tester := startCaddy(t, authSite(u, `realm "my-app"`))
	cases := []struct {
		name, auth, wantChallenge string
	}{
		{"no token", "", `Bearer realm="my-app"`},
		{"expired token", "Bearer " + hsToken(t, claimsWith("exp", 1)), `Bearer realm="my-app", error="invalid_token", error_description="token expired"`},
		{"wrong secret", "Bearer " + otherSecretToken(t), `Bearer realm="my-app", error="invalid_token", error_description="invalid signature"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := map[string]string{"X-Service-User-Id": "999"}
			if c.auth != "" {
				hdr["Authorization"] = c.auth
			}
			resp, body := get(t, tester.Client, "/api/projects", hdr)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != c.wantChallenge {
				t.Fatalf("WWW-Authenticate %q, want %q", got, c.wantChallenge)
			}
			var eb errorBody
			if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Error.Message == "" {
				t.Fatalf("body %q is not a JSON refusal", body)
			}
		})
	}
	if _, _, hits := u.last(); hits != 0 {
		t.Fatalf("the app got %d refused requests", hits)
	}
}

func TestE2EAuthTokenInQuery(t *testing.T) {
	t.Setenv("SERVICEGATE_E2E_CLIENT_SECRET", testClientSecret)
	u := newUpstream(t)
	tester := startCaddy(t, authSite(u, "strip_query"))
	tok := hsToken(t, emulatorClaims())
	resp, _ := get(t, tester.Client, "/api/page?lang=de&jwtToken="+tok+"&x=1", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	h, q, _ := u.last()
	if q != "lang=de&x=1" {
		t.Fatalf("upstream query %q, want the token stripped", q)
	}
	if got := h.Get("X-Service-User-Id"); got != "7" {
		t.Fatalf("X-Service-User-Id = %q", got)
	}
}

// TestE2EAuthStripQueryRemovesUnusedQueryToken: a forged query token
// beside a valid Authorization header never reaches the app under
// strip_query.
func TestE2EAuthStripQueryRemovesUnusedQueryToken(t *testing.T) {
	t.Setenv("SERVICEGATE_E2E_CLIENT_SECRET", testClientSecret)
	u := newUpstream(t)
	tester := startCaddy(t, authSite(u, "strip_query"))
	tok := hsToken(t, emulatorClaims())
	for _, path := range []string{"/api/page?lang=de&jwtToken=FORGED&x=1", "/api/page?lang=de&jwt%54oken=FORGED&x=1"} {
		resp, _ := get(t, tester.Client, path, map[string]string{"Authorization": "Bearer " + tok})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d, want 200", path, resp.StatusCode)
		}
		u.mu.Lock()
		uri := u.uri
		u.mu.Unlock()
		if uri != "/api/page?lang=de&x=1" {
			t.Fatalf("%s: the app got %q, want the query token stripped", path, uri)
		}
	}
}

// TestE2EAuthSecretReloadEndsRememberedTokens: after a config reload with
// a new hs256_secret, a token remembered under the old one is refused.
func TestE2EAuthSecretReloadEndsRememberedTokens(t *testing.T) {
	u := newUpstream(t)
	t.Setenv("SERVICEGATE_E2E_CLIENT_SECRET", testClientSecret)
	tester := startCaddy(t, authSite(u, ""))
	old := hsToken(t, emulatorClaims())
	for i := range 2 { // verified, then remembered
		if resp, _ := get(t, tester.Client, "/api/x", map[string]string{"Authorization": "Bearer " + old}); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d under the first secret: status %d", i, resp.StatusCode)
		}
	}
	// A new config text: Caddy skips a reload whose config is unchanged,
	// even when the environment behind a placeholder changed.
	const rotated = "the-rotated-client-secret-0123456789"
	t.Setenv("SERVICEGATE_E2E_ROTATED_SECRET", rotated)
	tester = startCaddy(t, strings.Replace(authSite(u, ""), "SERVICEGATE_E2E_CLIENT_SECRET", "SERVICEGATE_E2E_ROTATED_SECRET", 1))
	if resp, _ := get(t, tester.Client, "/api/x", map[string]string{"Authorization": "Bearer " + old}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("token of the replaced secret: status %d, want 401", resp.StatusCode)
	}
	fresh, err := jwt.NewWithClaims(jwt.SigningMethodHS256, emulatorClaims()).SignedString([]byte(rotated))
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, tester.Client, "/api/x", map[string]string{"Authorization": "Bearer " + fresh}); resp.StatusCode != http.StatusOK {
		t.Fatalf("token of the new secret: status %d, want 200", resp.StatusCode)
	}
}

func TestE2EAuthHandleErrorsReshapesRefusal(t *testing.T) {
	t.Setenv("SERVICEGATE_E2E_CLIENT_SECRET", testClientSecret)
	u := newUpstream(t)
	tester := startCaddy(t, `
localhost:{port} {
	service_auth {
		hs256_secret {env.SERVICEGATE_E2E_CLIENT_SECRET}
	}
	reverse_proxy `+strings.TrimPrefix(u.URL, "http://")+`
	handle_errors {
		respond "custom {err.status_code}: {http.auth.service.error}"
	}
}
`)
	resp, body := get(t, tester.Client, "/", map[string]string{"Authorization": "Bearer " + hsToken(t, claimsWith("exp", 1))})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", resp.StatusCode)
	}
	if body != "custom 401: token expired" {
		t.Fatalf("body %q, want the handle_errors answer", body)
	}
	if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, `Bearer realm="service", error="invalid_token"`) {
		t.Fatalf("WWW-Authenticate %q lost under handle_errors", got)
	}
}

func otherSecretToken(t *testing.T) string {
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, emulatorClaims()).SignedString([]byte("not-the-client-secret-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
