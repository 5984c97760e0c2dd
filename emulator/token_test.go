package emulator

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// decodeClaims checks the token's HS256 signature with the test secret and
// returns its claims as JSON decodes them.
func decodeClaims(t testing.TB, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	header, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(header, []byte(`"alg":"HS256"`)) {
		t.Fatalf("header %s", header)
	}
	if err := jwt.SigningMethodHS256.Verify(parts[0]+"."+parts[1], mustB64(t, parts[2]), []byte(testSecret)); err != nil {
		t.Fatalf("signature: %v", err)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

func mustB64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCodeGrantIssuesTokens(t *testing.T) {
	s, _ := newTestServer(t)
	code := approve(t, s, nil)
	rec := do(s, tokenRequestOf(jsonBody(t, codeGrantRequest(code))))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if rec.Header().Get("Cache-Control") != "no-store" || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", rec.Header())
	}
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 4 || out["token_type"] != "bearer" || out["expires_in"] != float64(7200) ||
		out["refresh_token"] == "" || out["access_token"] == "" {
		t.Fatalf("token response %v", out)
	}
	claims := decodeClaims(t, out["access_token"].(string))
	want := map[string]any{
		"iss":     "service-emulator",
		"sub":     "7",
		"aud":     testClientID,
		"domain":  "acme.example",
		"context": map[string]any{"organization_id": float64(1), "user_id": float64(7)},
		"iat":     float64(testStart.Unix()),
		"exp":     float64(testStart.Add(2 * time.Hour).Unix()),
	}
	jti, _ := claims["jti"].(string)
	if jti == "" {
		t.Fatalf("no jti in %v", claims)
	}
	delete(claims, "jti")
	if got, wantJSON := jsonBody(t, claims), jsonBody(t, want); got != wantJSON {
		t.Fatalf("claims\n got %s\nwant %s", got, wantJSON)
	}
}

func TestMintTokenLeavesOutEmptyDomain(t *testing.T) {
	token, err := MintToken(testSecret, Token{Issuer: "i", Audience: "a", UserID: 3, OrganizationID: 9,
		IssuedAt: testStart, Lifetime: time.Minute, ID: "j1"})
	if err != nil {
		t.Fatal(err)
	}
	claims := decodeClaims(t, token)
	if _, ok := claims["domain"]; ok {
		t.Fatalf("domain claim present: %v", claims)
	}
	if claims["jti"] != "j1" || claims["exp"] != float64(testStart.Unix()+60) || claims["sub"] != "3" {
		t.Fatalf("claims %v", claims)
	}
}

func TestMintTokenRefuses(t *testing.T) {
	if _, err := MintToken("", Token{Lifetime: time.Hour}); err == nil {
		t.Error("minted with an empty secret")
	}
	if _, err := MintToken("s", Token{}); err == nil {
		t.Error("minted without a lifetime")
	}
}

func TestTokenRefusals(t *testing.T) {
	longString := strings.Repeat("a", maxTokenBody)
	tests := []struct {
		name        string
		contentType string
		body        string
		status      int
		code        string
	}{
		{"wrong content type", "text/plain", `{"grant_type":"refresh_token"}`, 400, "invalid_request"},
		{"no content type", "", `{"grant_type":"refresh_token"}`, 400, "invalid_request"},
		{"malformed JSON", "application/json", `{"grant_type":`, 400, "invalid_request"},
		{"JSON array", "application/json", `[1,2]`, 400, "invalid_request"},
		{"number field", "application/json", `{"grant_type":"refresh_token","client_id":5}`, 400, "invalid_request"},
		{"two values", "application/json", `{"grant_type":"x"} {}`, 400, "invalid_request"},
		{"empty body", "application/json", ``, 400, "invalid_request"},
		{"huge body", "application/json", `{"grant_type":"` + longString + `"}`, 413, "invalid_request"},
		{"missing grant type", "application/json", `{"client_id":"demo-client"}`, 400, "invalid_request"},
		{"unknown grant type", "application/json", `{"grant_type":"password","client_id":"demo-client","client_secret":"demo-client-secret"}`, 400, "unsupported_grant_type"},
		{"missing client secret", "application/json", `{"grant_type":"refresh_token","client_id":"demo-client","refresh_token":"r"}`, 400, "invalid_request"},
		{"wrong client secret", "application/json", `{"grant_type":"refresh_token","client_id":"demo-client","client_secret":"nope","refresh_token":"r"}`, 401, "invalid_client"},
		{"unknown client", "application/json", `{"grant_type":"refresh_token","client_id":"other","client_secret":"demo-client-secret","refresh_token":"r"}`, 401, "invalid_client"},
		{"missing code", "application/json", `{"grant_type":"authorization_code","client_id":"demo-client","client_secret":"demo-client-secret","redirect_uri":"http://localhost:8080/callback"}`, 400, "invalid_request"},
		{"missing redirect uri", "application/json", `{"grant_type":"authorization_code","client_id":"demo-client","client_secret":"demo-client-secret","code":"c"}`, 400, "invalid_request"},
		{"unknown code", "application/json", `{"grant_type":"authorization_code","client_id":"demo-client","client_secret":"demo-client-secret","redirect_uri":"http://localhost:8080/callback","code":"c"}`, 400, "invalid_grant"},
		{"missing refresh token", "application/json", `{"grant_type":"refresh_token","client_id":"demo-client","client_secret":"demo-client-secret"}`, 400, "invalid_request"},
		{"unknown refresh token", "application/json", `{"grant_type":"refresh_token","client_id":"demo-client","client_secret":"demo-client-secret","refresh_token":"r"}`, 400, "invalid_grant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t)
			r := httptest.NewRequest(http.MethodPost, "/oauth/token", strings.NewReader(tt.body))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			rec := do(s, r)
			assertOAuthError(t, rec, tt.status, tt.code)
		})
	}
}

func TestTokenHugeBodyWithoutLength(t *testing.T) {
	s, _ := newTestServer(t)
	r := httptest.NewRequest(http.MethodPost, "/oauth/token", strings.NewReader(strings.Repeat(" ", 1<<20)))
	r.ContentLength = -1
	r.Header.Set("Content-Type", "application/json; charset=utf-8")
	assertOAuthError(t, do(s, r), http.StatusRequestEntityTooLarge, "invalid_request")
}

func TestTokenRefusesGet(t *testing.T) {
	s, _ := newTestServer(t)
	rec := do(s, httptest.NewRequest(http.MethodGet, "/oauth/token", nil))
	assertOAuthError(t, rec, http.StatusMethodNotAllowed, "invalid_request")
	if rec.Header().Get("Allow") != "POST" {
		t.Errorf("Allow %q", rec.Header().Get("Allow"))
	}
}

func assertOAuthError(t testing.TB, rec *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d; body %s", rec.Code, status, rec.Body)
	}
	var out map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	if out["error"] != code || out["error_description"] == "" || len(out) != 2 {
		t.Fatalf("error body %v, want error %q with a description", out, code)
	}
	if strings.Contains(rec.Body.String(), testSecret) {
		t.Fatal("the answer repeats the client secret")
	}
}

func TestCodeGrantRefusals(t *testing.T) {
	t.Run("reused code revokes its refresh token", func(t *testing.T) {
		s, _ := newTestServer(t)
		code := approve(t, s, nil)
		status, first := exchange(t, s, codeGrantRequest(code))
		if status != http.StatusOK {
			t.Fatalf("first exchange: %d %v", status, first)
		}
		status, second := exchange(t, s, codeGrantRequest(code))
		if status != http.StatusBadRequest || second["error"] != "invalid_grant" {
			t.Fatalf("second exchange: %d %v", status, second)
		}
		status, out := exchange(t, s, refreshGrantRequest(first["refresh_token"].(string)))
		if status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Fatalf("refresh after code reuse: %d %v", status, out)
		}
	})
	t.Run("expired code", func(t *testing.T) {
		s, c := newTestServer(t)
		code := approve(t, s, nil)
		c.Advance(60 * time.Second)
		status, out := exchange(t, s, codeGrantRequest(code))
		if status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Fatalf("%d %v", status, out)
		}
	})
	t.Run("code just before expiry", func(t *testing.T) {
		s, c := newTestServer(t)
		code := approve(t, s, nil)
		c.Advance(59 * time.Second)
		if status, out := exchange(t, s, codeGrantRequest(code)); status != http.StatusOK {
			t.Fatalf("%d %v", status, out)
		}
	})
	t.Run("wrong redirect uri", func(t *testing.T) {
		s, _ := newTestServer(t)
		code := approve(t, s, nil)
		req := codeGrantRequest(code)
		req["redirect_uri"] = "http://localhost:8080/other?keep=1"
		status, out := exchange(t, s, req)
		if status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Fatalf("%d %v", status, out)
		}
	})
	t.Run("wrong secret does not use up the code", func(t *testing.T) {
		s, _ := newTestServer(t)
		code := approve(t, s, nil)
		req := codeGrantRequest(code)
		req["client_secret"] = "wrong"
		if status, out := exchange(t, s, req); status != http.StatusUnauthorized || out["error"] != "invalid_client" {
			t.Fatalf("%d %v", status, out)
		}
		if status, out := exchange(t, s, codeGrantRequest(code)); status != http.StatusOK {
			t.Fatalf("%d %v", status, out)
		}
	})
}

func TestRefreshRotates(t *testing.T) {
	s, c := newTestServer(t)
	code := approve(t, s, map[string]string{"organization": "unpaid.example", "user": "11"})
	status, first := exchange(t, s, codeGrantRequest(code))
	if status != http.StatusOK {
		t.Fatalf("exchange: %d %v", status, first)
	}
	c.Advance(3 * time.Hour) // the access token has expired; the refresh token still works
	status, second := exchange(t, s, refreshGrantRequest(first["refresh_token"].(string)))
	if status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, second)
	}
	if second["refresh_token"] == first["refresh_token"] || second["access_token"] == first["access_token"] {
		t.Fatal("refresh returned the same tokens")
	}
	claims := decodeClaims(t, second["access_token"].(string))
	if claims["domain"] != "unpaid.example" || claims["sub"] != "11" || claims["iat"] != float64(testStart.Add(3*time.Hour).Unix()) {
		t.Fatalf("refreshed claims %v", claims)
	}
	status, old := exchange(t, s, refreshGrantRequest(first["refresh_token"].(string)))
	if status != http.StatusBadRequest || old["error"] != "invalid_grant" {
		t.Fatalf("old refresh token: %d %v", status, old)
	}
	if status, third := exchange(t, s, refreshGrantRequest(second["refresh_token"].(string))); status != http.StatusOK {
		t.Fatalf("new refresh token: %d %v", status, third)
	}
}

func FuzzTokenEndpoint(f *testing.F) {
	f.Add(`{"grant_type":"authorization_code","client_id":"demo-client","client_secret":"demo-client-secret","redirect_uri":"http://localhost:8080/callback","code":"x"}`)
	f.Add(`{"grant_type":"refresh_token","client_id":"demo-client","client_secret":"demo-client-secret","refresh_token":"x"}`)
	f.Add(`{"grant_type":null}`)
	f.Add(`{"grant_type":["a"]}`)
	f.Add(`null`)
	f.Add(`"x"`)
	f.Add(`{}{}`)
	f.Add("\xff\xfe")
	f.Add(`{"client_id":"\u0000"}`)
	s, _ := newTestServer(f)
	f.Fuzz(func(t *testing.T, body string) {
		rec := do(s, tokenRequestOf(body))
		if rec.Code >= 500 || rec.Code == http.StatusOK {
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		var out map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out["error"] == "" {
			t.Fatalf("answer %q is not an OAuth error", rec.Body)
		}
	})
}
