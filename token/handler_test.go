package token

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// passed is a next handler that records the request it was given.
type passed struct{ r *http.Request }

func (p *passed) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	p.r = r
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// TestHandlerWithoutCaddy runs the check as a Go app would, with the
// defaults of HandlerConfig: refusals written as JSON, claims in headers,
// the token's query parameter stripped, outcomes reported.
func TestHandlerWithoutCaddy(t *testing.T) {
	k := testKinds(t)[0]
	var outcomes []Outcome
	h, err := NewHandler(HandlerConfig{
		Verifier:     NewVerifier(k.keys, Options{Now: fixedNow}),
		Cache:        NewCache[*Entry](10, fixedNow),
		FromQuery:    "jwtToken",
		StripQuery:   true,
		ClaimHeaders: map[string]string{"x-user": "sub", "X-Org": "context.organization_id"},
		Report:       func(_ *http.Request, o Outcome, _ Refusal) { outcomes = append(outcomes, o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	good := sign(t, k.method, k.sign, baseClaims())

	serve := func(target string, header http.Header) (*httptest.ResponseRecorder, *http.Request) {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, target, nil)
		for name, vals := range header {
			r.Header[name] = vals
		}
		next := new(passed)
		w := httptest.NewRecorder()
		if err := h.Serve(w, r, next); err != nil {
			t.Fatal(err)
		}
		return w, next.r
	}

	w, got := serve("/api?jwtToken="+good+"&page=2", http.Header{"X_user": {"forged"}})
	if w.Code != http.StatusNoContent || got == nil {
		t.Fatalf("valid token: status %d, passed on %v", w.Code, got != nil)
	}
	if got.Header.Get("X-User") != "7" || got.Header.Get("X-Org") != "1" || got.Header["X_user"] != nil {
		t.Errorf("claim headers %v", got.Header)
	}
	if got.URL.RawQuery != "page=2" {
		t.Errorf("query passed on %q, want the token's parameter stripped", got.URL.RawQuery)
	}

	w, got = serve("/api", http.Header{"Authorization": {"Bearer " + good}})
	if w.Code != http.StatusNoContent || got == nil {
		t.Fatalf("remembered token: status %d", w.Code)
	}

	w, _ = serve("/api", nil)
	if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != `Bearer realm="service"` ||
		!strings.Contains(w.Body.String(), `"message":"`+MessageNoToken+`"`) {
		t.Errorf("no token: %d %q %s", w.Code, w.Header().Get("WWW-Authenticate"), w.Body)
	}

	bad := sign(t, k.method, k.other, baseClaims())
	w, _ = serve("/api", http.Header{"Authorization": {"Bearer " + bad}})
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Header().Get("WWW-Authenticate"), `error="invalid_token"`) ||
		strings.Contains(w.Body.String(), bad) {
		t.Errorf("bad signature: %d %q %s", w.Code, w.Header().Get("WWW-Authenticate"), w.Body)
	}

	w, _ = serve("/api", http.Header{"Authorization": {"Bearer a", "Bearer b"}})
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Header().Get("WWW-Authenticate"), `error="invalid_request"`) {
		t.Errorf("two Authorization headers: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}

	want := []Outcome{Verified, Remembered, NoToken, InvalidToken, BadRequest}
	if len(outcomes) != len(want) {
		t.Fatalf("outcomes %v, want %v", outcomes, want)
	}
	for i := range want {
		if outcomes[i] != want[i] {
			t.Fatalf("outcomes %v, want %v", outcomes, want)
		}
	}
}

func TestClaimsOrganization(t *testing.T) {
	tests := []struct {
		claims Claims
		want   string
	}{
		{Claims{"domain": "acme", "context": map[string]any{"organization_id": 1.0}}, "acme"},
		{Claims{"domain": "", "context": map[string]any{"organization_id": 42.0}}, "42"},
		{Claims{"domain": true, "context": map[string]any{"organization_id": "x"}}, "x"},
		{Claims{"domain": map[string]any{}}, ""},
		{Claims{}, ""},
	}
	for _, tt := range tests {
		if got := tt.claims.Organization(DefaultOrganizationClaims); got != tt.want {
			t.Errorf("%v: organization %q, want %q", tt.claims, got, tt.want)
		}
	}
}

func TestChallengeAndRealm(t *testing.T) {
	if got := Challenge(""); got != `Bearer realm="service"` {
		t.Errorf("default challenge %q", got)
	}
	if got := Challenge("acme app"); got != `Bearer realm="acme app"` {
		t.Errorf("challenge %q", got)
	}
	for realm, want := range map[string]bool{"": true, "acme app": true, `a"b`: false, `a\b`: false, "a\tb": false, "a\x7fb": false} {
		if ValidRealm(realm) != want {
			t.Errorf("ValidRealm(%q) = %v, want %v", realm, !want, want)
		}
	}
}

// TestRememberedTokenAllocatesNothing serves a remembered token with two
// claim headers: the values the request is given come from a shared
// chunk, and no two requests are given the same ones.
func TestRememberedTokenAllocatesNothing(t *testing.T) {
	k := testKinds(t)[0]
	h, err := NewHandler(HandlerConfig{
		Verifier:     NewVerifier(k.keys, Options{Now: fixedNow}),
		Cache:        NewCache[*Entry](10, fixedNow),
		ClaimHeaders: map[string]string{"X-User": "sub", "X-Org": "context.organization_id"},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/api", nil)
	r.Header.Set("Authorization", "Bearer "+sign(t, k.method, k.sign, baseClaims()))
	w := httptest.NewRecorder()
	next := new(passed)
	serve := func() {
		if err := h.Serve(w, r, next); err != nil {
			t.Fatal(err)
		}
	}
	serve() // verified and remembered
	first := next.r.Header["X-User"]
	if n := testing.AllocsPerRun(200, serve); n != 0 {
		t.Errorf("a remembered token: %v allocations per request, want 0", n)
	}
	if again := next.r.Header["X-User"]; len(first) != 1 || len(again) != 1 || &first[0] == &again[0] || first[0] != "7" || again[0] != "7" {
		t.Errorf("two requests were given the same values, or wrong ones: %q %q", first, again)
	}
}

// TestHandlerDropsTrailersWithClaimHeaders: with claim headers, a request
// passed on brings the next handler no trailer, whatever its name; without
// them, its trailers are left alone.
func TestHandlerDropsTrailersWithClaimHeaders(t *testing.T) {
	k := testKinds(t)[0]
	good := sign(t, k.method, k.sign, baseClaims())
	for _, claims := range []map[string]string{{"X-User": "sub"}, nil} {
		h, err := NewHandler(HandlerConfig{Verifier: NewVerifier(k.keys, Options{Now: fixedNow}), ClaimHeaders: claims})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodPost, "/api", strings.NewReader("body"))
		r.Header.Set("Authorization", "Bearer "+good)
		r.ContentLength = -1
		// As net/http leaves them once the body has ended.
		r.Trailer = http.Header{"X-User": {"forged"}, "X-Checksum": {"abc"}}
		next := new(passed)
		if err := h.Serve(httptest.NewRecorder(), r, next); err != nil || next.r == nil {
			t.Fatalf("not passed on: %v", err)
		}
		_, _ = io.ReadAll(next.r.Body)
		if want := len(claims) == 0; (len(next.r.Trailer) == 2) != want || len(claims) > 0 && len(next.r.Trailer) != 0 {
			t.Errorf("claim headers %v: the next handler got trailers %v", claims, next.r.Trailer)
		}
	}
}
