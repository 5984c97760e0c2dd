package caddymodule

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/golang-jwt/jwt/v5"
	dto "github.com/prometheus/client_model/go"
)

const testClientSecret = "client-secret-of-the-app-0123456789"

// emulatorClaims are the claims of a token the service emulator issues.
func emulatorClaims() jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss":     "service-emulator",
		"sub":     "7",
		"aud":     "client-id",
		"domain":  "acme",
		"context": map[string]any{"organization_id": 1, "user_id": 7},
		"iat":     now.Add(-time.Minute).Unix(),
		"exp":     now.Add(time.Hour).Unix(),
		"jti":     "jti-1",
	}
}

func hsToken(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(testClientSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func claimsWith(kv ...any) jwt.MapClaims {
	c := emulatorClaims()
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(c, kv[i].(string))
		} else {
			c[kv[i].(string)] = kv[i+1]
		}
	}
	return c
}

func provisionAuth(t testing.TB, a *ServiceAuth) *ServiceAuth {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := a.Provision(ctx); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if err := a.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return a
}

// recordingNext is the next handler: it remembers the request it got.
type recordingNext struct {
	called bool
	req    *http.Request
}

func (n *recordingNext) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	n.called = true
	n.req = r
	w.WriteHeader(http.StatusOK)
	return nil
}

// prepare gives req the replacer and vars Caddy puts in every request.
func prepare(req *http.Request) (*http.Request, *caddy.Replacer) {
	repl := caddy.NewReplacer()
	ctx := context.WithValue(req.Context(), caddy.ReplacerCtxKey, repl)
	ctx = context.WithValue(ctx, caddyhttp.VarsCtxKey, map[string]any{})
	return req.WithContext(ctx), repl
}

func serveAuth(t testing.TB, a *ServiceAuth, req *http.Request) (*httptest.ResponseRecorder, *recordingNext, *caddy.Replacer, error) {
	t.Helper()
	req, repl := prepare(req)
	rec := httptest.NewRecorder()
	next := &recordingNext{}
	err := a.ServeHTTP(rec, req, next)
	return rec, next, repl, err
}

func hsAuth() *ServiceAuth {
	return &ServiceAuth{
		HS256Secret: testClientSecret,
		Audience:    []string{"client-id"},
		Issuer:      "service-emulator",
		FromQuery:   "jwtToken",
		ClaimHeaders: map[string]string{
			"X-Service-User-Id":         "sub",
			"X-Service-Organization-Id": "context.organization_id",
			"X-Service-Domain":          "domain",
		},
	}
}

func TestAuthAnswers(t *testing.T) {
	a := provisionAuth(t, hsAuth())
	valid := hsToken(t, emulatorClaims())
	cases := []struct {
		name        string
		target      string
		header      []string // Authorization values
		wantStatus  int      // 200 means passed on
		wantWWWAuth string
		wantReason  string
	}{
		{"valid", "/", []string{"Bearer " + valid}, 200, "", ""},
		{"scheme in lower case", "/", []string{"bearer " + valid}, 200, "", ""},
		{"no token", "/", nil, 401, `Bearer realm="service"`, "no bearer token"},
		{"basic scheme", "/", []string{"Basic dXNlcjpwYXNz"}, 401, `Bearer realm="service"`, "no bearer token"},
		{"empty bearer", "/", []string{"Bearer "}, 401, `Bearer realm="service", error="invalid_token", error_description="malformed token"`, "malformed token"},
		{"expired", "/", []string{"Bearer " + hsToken(t, claimsWith("exp", time.Now().Add(-time.Hour).Unix()))}, 401,
			`Bearer realm="service", error="invalid_token", error_description="token expired"`, "token expired"},
		{"wrong audience", "/", []string{"Bearer " + hsToken(t, claimsWith("aud", "other"))}, 401,
			`Bearer realm="service", error="invalid_token", error_description="wrong audience"`, "wrong audience"},
		{"garbage", "/", []string{"Bearer not-a-token"}, 401,
			`Bearer realm="service", error="invalid_token", error_description="malformed token"`, "malformed token"},
		{"huge", "/", []string{"Bearer " + strings.Repeat("a", 17<<10)}, 401,
			`Bearer realm="service", error="invalid_token", error_description="token too large"`, "token too large"},
		{"two Authorization headers", "/", []string{"Bearer " + valid, "Bearer " + valid}, 400,
			`Bearer realm="service", error="invalid_request", error_description="more than one Authorization header"`, "more than one Authorization header"},
		{"query token", "/?jwtToken=" + valid, nil, 200, "", ""},
		{"bad query token", "/?jwtToken=abc", nil, 401,
			`Bearer realm="service", error="invalid_token", error_description="malformed token"`, "malformed token"},
		{"query token twice", "/?jwtToken=" + valid + "&jwtToken=" + valid, nil, 400,
			`Bearer realm="service", error="invalid_request", error_description="the token query parameter appears more than once"`, "the token query parameter appears more than once"},
		{"header wins over query", "/?jwtToken=abc", []string{"Bearer " + valid}, 200, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, c.target, nil)
			for _, h := range c.header {
				req.Header.Add("Authorization", h)
			}
			req.Header.Set("X-Service-User-Id", "spoofed")
			rec, next, repl, err := serveAuth(t, a, req)
			if err != nil {
				t.Fatalf("ServeHTTP error %v (no handle_errors routes: the handler writes the answer)", err)
			}
			if next.called != (c.wantStatus == 200) {
				t.Fatalf("next called = %v, want status %d", next.called, c.wantStatus)
			}
			if rec.Code != c.wantStatus {
				t.Fatalf("status %d, want %d", rec.Code, c.wantStatus)
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != c.wantWWWAuth {
				t.Fatalf("WWW-Authenticate %q, want %q", got, c.wantWWWAuth)
			}
			if got, _ := repl.GetString(authErrorVar); got != c.wantReason {
				t.Fatalf("{%s} = %q, want %q", authErrorVar, got, c.wantReason)
			}
			if c.wantStatus == 200 {
				if got := next.req.Header.Get("X-Service-User-Id"); got != "7" {
					t.Fatalf("X-Service-User-Id = %q, want 7", got)
				}
				return
			}
			if v := req.Header.Values("X-Service-User-Id"); len(v) != 0 {
				t.Fatalf("spoofed header kept on a refused request: %q", v)
			}
			var body errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error.Message == "" {
				t.Fatalf("body %q is not a JSON refusal", rec.Body.String())
			}
			assertSentence(t, body.Error.Message)
			if strings.Contains(rec.Body.String(), valid) {
				t.Fatal("refusal body holds the token")
			}
		})
	}
}

func TestAuthTrustedOutput(t *testing.T) {
	a := provisionAuth(t, hsAuth())
	cases := []struct {
		name     string
		claims   jwt.MapClaims
		org      string
		headers  map[string]string // "" means absent
		userVars map[string]string
	}{
		{"emulator token", emulatorClaims(), "acme",
			map[string]string{"X-Service-User-Id": "7", "X-Service-Organization-Id": "1", "X-Service-Domain": "acme"},
			map[string]string{"id": "7", "sub": "7", "domain": "acme", "context.organization_id": "1", "jti": "jti-1", "aud": "client-id"}},
		{"no domain", claimsWith("domain", nil), "1",
			map[string]string{"X-Service-Domain": "", "X-Service-Organization-Id": "1"},
			map[string]string{"domain": ""}},
		{"empty domain", claimsWith("domain", ""), "1", nil, nil},
		{"domain not a string", claimsWith("domain", true), "1", nil, nil},
		{"float organization id", claimsWith("domain", nil, "context", map[string]any{"organization_id": 42.0}), "42",
			map[string]string{"X-Service-Organization-Id": "42"}, map[string]string{"context.organization_id": "42"}},
		{"no organization", claimsWith("domain", nil, "context", nil), "",
			map[string]string{"X-Service-Organization-Id": ""}, nil},
		{"numeric sub", claimsWith("sub", 12345678901), "acme",
			map[string]string{"X-Service-User-Id": "12345678901"}, map[string]string{"id": "12345678901"}},
		{"aud array", claimsWith("aud", []string{"client-id", "x"}), "acme", nil, map[string]string{"aud": "client-id,x"}},
		{"sub with a line break", claimsWith("sub", "7\r\nX-Admin: 1"), "acme", map[string]string{"X-Service-User-Id": ""}, nil},
		{"sub with a control character", claimsWith("sub", "7\x01"), "acme", map[string]string{"X-Service-User-Id": ""}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok := hsToken(t, c.claims)
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header["X_service_domain"] = []string{"spoofed"}
			req.Header["x-service-organization-id"] = []string{"spoofed"}
			req.Header.Set("X-Service-Organization-Id", "spoofed")
			_, next, repl, err := serveAuth(t, a, req)
			if err != nil || !next.called {
				t.Fatalf("not passed on: %v", err)
			}
			for name, want := range c.headers {
				if got := next.req.Header.Values(name); (want == "" && len(got) != 0) || (want != "" && (len(got) != 1 || got[0] != want)) {
					t.Errorf("header %s = %q, want %q", name, got, want)
				}
			}
			for name := range next.req.Header {
				if strings.EqualFold(strings.ReplaceAll(name, "_", "-"), "X-Service-Domain") && name != "X-Service-Domain" {
					t.Errorf("spoofed header %s kept", name)
				}
				if name == "x-service-organization-id" {
					t.Errorf("spoofed header %s kept", name)
				}
			}
			if got, _ := repl.GetString(organizationVarName); got != c.org {
				t.Errorf("{%s} = %q, want %q", organizationVarName, got, c.org)
			}
			for k, want := range c.userVars {
				if got, _ := repl.GetString(authUserPrefix + k); got != want {
					t.Errorf("{%s%s} = %q, want %q", authUserPrefix, k, got, want)
				}
			}
			v, ok := verifiedFrom(next.req)
			if !ok || v.Token != tok || v.Organization != c.org {
				t.Fatalf("verified = %+v, %v", v, ok)
			}
			if strings.Contains(repl.ReplaceAll("{http.vars.servicegate.verified}", ""), tok) {
				t.Fatal("the verified variable renders the token")
			}
		})
	}
}

func TestAuthCacheRemembersTokens(t *testing.T) {
	a := provisionAuth(t, hsAuth())
	tok := hsToken(t, emulatorClaims())
	var first *Verified
	for i := range 3 {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Service-User-Id", "spoofed")
		_, next, repl, err := serveAuth(t, a, req)
		if err != nil || !next.called {
			t.Fatalf("request %d not passed on: %v", i, err)
		}
		v, _ := verifiedFrom(next.req)
		if i == 0 {
			first = v
		} else if v != first {
			t.Fatalf("request %d: a fresh entry, want the remembered one", i)
		}
		if got := next.req.Header.Values("X-Service-User-Id"); len(got) != 1 || got[0] != "7" {
			t.Fatalf("request %d: X-Service-User-Id = %q", i, got)
		}
		if got, _ := repl.GetString(authUserID); got != "7" {
			t.Fatalf("request %d: user id %q", i, got)
		}
		// A later handler changing the header in place must not change
		// what the next request gets.
		next.req.Header["X-Service-User-Id"][0] = "changed"
	}
	if a.cache.Len() != 1 {
		t.Fatalf("cache holds %d entries, want 1", a.cache.Len())
	}

	zero := 0
	off := hsAuth()
	off.CacheSize = &zero
	off = provisionAuth(t, off)
	if off.cache != nil {
		t.Fatal("cache_size 0 left a cache")
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if _, next, _, _ := serveAuth(t, off, req); !next.called {
		t.Fatal("valid token refused without a cache")
	}
}

func TestAuthStripQuery(t *testing.T) {
	tok := hsToken(t, emulatorClaims())
	for _, strip := range []bool{false, true} {
		a := hsAuth()
		a.StripQuery = strip
		a = provisionAuth(t, a)
		req := httptest.NewRequest(http.MethodGet, "/page?a=1&jwtToken="+tok+"&b=x%20y", nil)
		_, next, _, err := serveAuth(t, a, req)
		if err != nil || !next.called {
			t.Fatalf("strip=%v: not passed on: %v", strip, err)
		}
		want := "a=1&jwtToken=" + tok + "&b=x%20y"
		if strip {
			want = "a=1&b=x%20y"
		}
		if next.req.URL.RawQuery != want {
			t.Fatalf("strip=%v: query %q, want %q", strip, next.req.URL.RawQuery, want)
		}
		if strip && strings.Contains(next.req.RequestURI, tok) {
			t.Fatal("RequestURI still holds the token")
		}
	}
}

// TestAuthStripQueryRemovesEveryQueryToken: with strip_query the
// from_query parameter never reaches the app, also when the token used
// came from the Authorization header and the query one was never checked.
func TestAuthStripQueryRemovesEveryQueryToken(t *testing.T) {
	tok := hsToken(t, emulatorClaims())
	cases := []struct {
		name, query, want string
	}{
		{"forged beside a header token", "a=1&jwtToken=FORGED&b=2", "a=1&b=2"},
		{"name escaped", "jwt%54oken=FORGED&b=2", "b=2"},
		{"only the parameter", "jwtToken=FORGED", ""},
		{"empty value", "a=1&jwtToken", "a=1"},
		{"no such parameter", "a=1&b=x%20y&jwtTokens=kept", "a=1&b=x%20y&jwtTokens=kept"},
	}
	for _, strip := range []bool{false, true} {
		a := hsAuth()
		a.StripQuery = strip
		a = provisionAuth(t, a)
		for _, c := range cases {
			req := httptest.NewRequest(http.MethodGet, "/page?"+c.query, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			_, next, _, err := serveAuth(t, a, req)
			if err != nil || !next.called {
				t.Fatalf("strip=%v %s: not passed on: %v", strip, c.name, err)
			}
			want := c.query
			if strip {
				want = c.want
			}
			if got := next.req.URL.RawQuery; got != want {
				t.Errorf("strip=%v %s: query %q, want %q", strip, c.name, got, want)
			}
			if strip && strings.Contains(next.req.RequestURI, "FORGED") {
				t.Errorf("strip=%v %s: RequestURI %q still holds the query token", strip, c.name, next.req.RequestURI)
			}
		}
	}
}

func TestAuthPublicKeyAndProvisioning(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	dir := t.TempDir()
	pemPath := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(pemPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SERVICEGATE_TEST_KEY_PATH", pemPath)
	a := provisionAuth(t, &ServiceAuth{PublicKey: "{env.SERVICEGATE_TEST_KEY_PATH}"})
	es, _ := jwt.NewWithClaims(jwt.SigningMethodES256, emulatorClaims()).SignedString(key)
	confused, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, emulatorClaims()).SignedString(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	for tok, want := range map[string]int{es: 200, confused: 401} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		if rec, _, _, _ := serveAuth(t, a, req); rec.Code != want {
			t.Errorf("status %d, want %d", rec.Code, want)
		}
	}

	t.Setenv("SERVICEGATE_TEST_SECRET", testClientSecret)
	secretFile := filepath.Join(dir, "secret")
	_ = os.WriteFile(secretFile, []byte(testClientSecret), 0o600)
	for _, secret := range []string{"{env.SERVICEGATE_TEST_SECRET}", "{file." + secretFile + "}"} {
		a := provisionAuth(t, &ServiceAuth{HS256Secret: secret})
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", "Bearer "+hsToken(t, emulatorClaims()))
		if _, next, _, _ := serveAuth(t, a, req); !next.called {
			t.Errorf("secret %s: valid token refused", secret)
		}
	}

	neg := -1
	bad := []struct {
		name string
		a    ServiceAuth
	}{
		{"no key", ServiceAuth{}},
		{"two keys", ServiceAuth{HS256Secret: "s", JWKSURL: "https://x/jwks"}},
		{"empty env secret", ServiceAuth{HS256Secret: "{env.SERVICEGATE_TEST_UNSET_VARIABLE}"}},
		{"empty env issuer", ServiceAuth{HS256Secret: "s", Issuer: "{env.SERVICEGATE_TEST_UNSET_VARIABLE}"}},
		{"empty env audience", ServiceAuth{HS256Secret: "s", Audience: []string{"{env.SERVICEGATE_TEST_UNSET_VARIABLE}"}}},
		{"missing key file", ServiceAuth{PublicKey: filepath.Join(dir, "absent.pem")}},
		{"not a PEM", ServiceAuth{PublicKey: secretFile}},
		{"jwks not http", ServiceAuth{JWKSURL: "ftp://x/jwks"}},
		{"negative cache", ServiceAuth{HS256Secret: "s", CacheSize: &neg}},
		{"quote in realm", ServiceAuth{HS256Secret: "s", Realm: `a"b`}},
		{"bad header name", ServiceAuth{HS256Secret: "s", ClaimHeaders: map[string]string{"X User": "sub"}}},
		{"header name with a colon", ServiceAuth{HS256Secret: "s", ClaimHeaders: map[string]string{"X-User:": "sub"}}},
		{"header name not ASCII", ServiceAuth{HS256Secret: "s", ClaimHeaders: map[string]string{"X-Üser": "sub"}}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			a := c.a
			err := a.Provision(ctx)
			if err == nil {
				err = a.Validate()
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), testClientSecret) {
				t.Fatal("error holds the secret")
			}
		})
	}
}

func TestAuthKeysUnavailable(t *testing.T) {
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer dead.Close()
	a := provisionAuth(t, &ServiceAuth{JWKSURL: dead.URL})
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tok, _ := jwt.NewWithClaims(jwt.SigningMethodES256, emulatorClaims()).SignedString(key)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	rec, next, _, _ := serveAuth(t, a, req)
	if next.called || rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, next %v; want 503", rec.Code, next.called)
	}
}

func TestAuthReturnsErrorForErrorRoutes(t *testing.T) {
	a := provisionAuth(t, hsAuth())
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	srv := &caddyhttp.Server{Errors: &caddyhttp.HTTPErrorConfig{Routes: caddyhttp.RouteList{{}}}}
	req = req.WithContext(context.WithValue(req.Context(), caddyhttp.ServerCtxKey, srv))
	rec, _, _, err := serveAuth(t, a, req)
	var he caddyhttp.HandlerError
	if !asHandlerError(err, &he) || he.StatusCode != http.StatusUnauthorized {
		t.Fatalf("err %v, want a 401 HandlerError", err)
	}
	if rec.Header().Get("WWW-Authenticate") != `Bearer realm="service"` {
		t.Fatalf("challenge %q not set before handing over to handle_errors", rec.Header().Get("WWW-Authenticate"))
	}
}

func asHandlerError(err error, he *caddyhttp.HandlerError) bool {
	h, ok := err.(caddyhttp.HandlerError)
	if ok {
		*he = h
	}
	return ok
}

func TestAuthJWKS(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pt, _ := key.PublicKey.Bytes()
	enc := base64.RawURLEncoding.EncodeToString
	set, _ := json.Marshal(map[string]any{"keys": []any{map[string]any{
		"kty": "EC", "crv": "P-256", "kid": "k1", "use": "sig", "x": enc(pt[1:33]), "y": enc(pt[33:]),
	}}})
	var fetches atomic.Int64
	ks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		_, _ = w.Write(set)
	}))
	defer ks.Close()
	a := provisionAuth(t, &ServiceAuth{JWKSURL: ks.URL})
	sign := func(kid string) string {
		tk := jwt.NewWithClaims(jwt.SigningMethodES256, emulatorClaims())
		tk.Header["kid"] = kid
		s, err := tk.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for tok, want := range map[string]int{sign("k1"): 200, sign("unknown"): 401} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		if rec, _, _, _ := serveAuth(t, a, req); rec.Code != want {
			t.Errorf("status %d, want %d", rec.Code, want)
		}
	}
	// The refresh loop and the first token's fetch may both have run; the
	// unknown kid came within jwks_min_interval and made none.
	if n := fetches.Load(); n < 1 || n > 2 {
		t.Fatalf("%d fetches of the key set, want 1 or 2", n)
	}
}

// TestAuthWithdrawnKeyStopsRememberedTokens: a token remembered under a
// key stops working once a refresh of the key set has withdrawn that key
// (the usual answer to a leaked key), while tokens of the new key work.
func TestAuthWithdrawnKeyStopsRememberedTokens(t *testing.T) {
	leaked, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	next, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwk := func(kid string, k *ecdsa.PrivateKey) map[string]any {
		pt, _ := k.PublicKey.Bytes()
		enc := base64.RawURLEncoding.EncodeToString
		return map[string]any{"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "x": enc(pt[1:33]), "y": enc(pt[33:])}
	}
	var set atomic.Pointer[[]byte]
	serve := func(keys ...map[string]any) {
		b, _ := json.Marshal(map[string]any{"keys": keys})
		set.Store(&b)
	}
	serve(jwk("leaked", leaked))
	ks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(*set.Load())
	}))
	defer ks.Close()
	a := provisionAuth(t, &ServiceAuth{JWKSURL: ks.URL})
	sign := func(kid string, k *ecdsa.PrivateKey) string {
		tk := jwt.NewWithClaims(jwt.SigningMethodES256, emulatorClaims())
		tk.Header["kid"] = kid
		s, err := tk.SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	status := func(tok string) int {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec, _, _, _ := serveAuth(t, a, req)
		return rec.Code
	}
	old := sign("leaked", leaked)
	for i := range 2 { // verified, then remembered
		if got := status(old); got != http.StatusOK {
			t.Fatalf("request %d under the key in use: status %d, want 200", i, got)
		}
	}
	if a.cache.Len() != 1 {
		t.Fatalf("cache holds %d tokens, want the one remembered", a.cache.Len())
	}

	// Adding a key leaves remembered tokens as they were.
	serve(jwk("leaked", leaked), jwk("next", next))
	if err := a.jwks.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := status(old); got != http.StatusOK {
		t.Fatalf("after a key was added: status %d, want 200", got)
	}

	serve(jwk("next", next))
	if err := a.jwks.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := status(old); got != http.StatusUnauthorized {
		t.Fatalf("remembered token of the withdrawn key: status %d, want 401", got)
	}
	fresh := sign("next", next)
	for i := range 2 {
		if got := status(fresh); got != http.StatusOK {
			t.Fatalf("request %d with the new key: status %d, want 200", i, got)
		}
	}
	if got := status(old); got != http.StatusUnauthorized {
		t.Fatalf("withdrawn key, asked again: status %d, want 401", got)
	}
}

func TestAuthCleanupStopsTheJWKSRefresh(t *testing.T) {
	ks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer ks.Close()
	// The config's context stays alive: Cleanup alone must end the loop.
	a := provisionAuth(t, &ServiceAuth{JWKSURL: ks.URL})
	if a.jwksDone == nil {
		t.Fatal("no refresh loop was started")
	}
	if err := a.Cleanup(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.jwksDone:
	default:
		t.Fatal("the JWKS refresh loop still runs after Cleanup")
	}
}

func FuzzAuthServeHTTP(f *testing.F) {
	valid := hsToken(f, emulatorClaims())
	f.Add("Bearer "+valid, "")
	f.Add("", "jwtToken="+valid)
	f.Add("bearer  "+valid+" ", "jwtToken=x&jwtToken=y")
	f.Add("Basic abc", "jwtToken=%zz&jwtToken")
	f.Add("Bearer a.b.c", "a=1")
	a := provisionAuth(f, hsAuth())
	f.Fuzz(func(t *testing.T, authorization, query string) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL.RawQuery = query
		if authorization != "" {
			req.Header["Authorization"] = []string{authorization}
		}
		req.Header.Set("X-Service-User-Id", "spoofed")
		rec, next, _, err := serveAuth(t, a, req)
		if err != nil {
			t.Fatalf("error %v without handle_errors routes", err)
		}
		if !next.called {
			if rec.Code != 401 && rec.Code != 400 {
				t.Fatalf("refused with status %d", rec.Code)
			}
			if len(req.Header.Values("X-Service-User-Id")) != 0 {
				t.Fatal("spoofed header kept")
			}
			return
		}
		v, ok := verifiedFrom(next.req)
		if !ok {
			t.Fatal("passed on without a verified token")
		}
		if _, err := a.verifier.Verify(context.Background(), v.Token); err != nil {
			t.Fatalf("passed on a token that does not verify: %v", err)
		}
		if got := next.req.Header.Values("X-Service-User-Id"); len(got) != 1 || got[0] != "7" {
			t.Fatalf("X-Service-User-Id = %q", got)
		}
	})
}

func TestAuthMetrics(t *testing.T) {
	a := provisionAuth(t, hsAuth())
	count := func(outcome authOutcome) float64 {
		var m dto.Metric
		if err := authRequests.WithLabelValues(outcome.String()).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	before := map[authOutcome]float64{}
	for _, o := range []authOutcome{authRemembered, authVerified, authNoToken, authInvalidToken, authBadRequest} {
		before[o] = count(o)
	}
	tok := hsToken(t, emulatorClaims())
	for _, auth := range [][]string{{"Bearer " + tok}, {"Bearer " + tok}, nil, {"Bearer x"}, {"Bearer a", "Bearer b"}} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header["Authorization"] = auth
		_, _, _, _ = serveAuth(t, a, req)
	}
	for o, want := range map[authOutcome]float64{authVerified: 1, authRemembered: 1, authNoToken: 1, authInvalidToken: 1, authBadRequest: 1} {
		if got := count(o) - before[o]; got != want {
			t.Errorf("%s counted %v times, want %v", o, got, want)
		}
	}
}

// assertSentence checks that a refusal message reads as the others do: a
// sentence for a person, capitalised and ending with a full stop.
func assertSentence(t *testing.T, message string) {
	t.Helper()
	if message == "" || message[0] < 'A' || message[0] > 'Z' || !strings.HasSuffix(message, ".") {
		t.Errorf("message %q is not a capitalised sentence ending with a full stop", message)
	}
}

func TestCaddyfileUnknownSubDirectiveErrorsAlike(t *testing.T) {
	for name, u := range map[string]caddyfile.Unmarshaler{
		"service_auth":         new(ServiceAuth),
		"service_subscription": new(ServiceSubscription),
		"service_webhook":      new(ServiceWebhook),
		"service_emulator":     new(ServiceEmulator),
	} {
		err := u.UnmarshalCaddyfile(caddyfile.NewTestDispenser(name + " {\n\tbogus 1\n}"))
		want := `unrecognized ` + name + ` sub-directive "bogus"`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %s", name, err, want)
		}
	}
}

// sameHeaderName compares header names as service_auth does when it drops
// inbound copies of its claim headers: ignoring case, with "_" equal to "-".
func sameHeaderName(a, b string) bool {
	return strings.EqualFold(strings.ReplaceAll(a, "_", "-"), strings.ReplaceAll(b, "_", "-"))
}
