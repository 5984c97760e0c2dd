package oauth

import (
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

var testNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func fakeJWT(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc([]byte(payload)) + ".c2ln"
}

func TestParseTokenResponse(t *testing.T) {
	withExp := fakeJWT(`{"exp":1795380000}`)
	tests := []struct {
		name       string
		status     int
		body       string
		wantExpiry time.Time
		wantCode   string // RefusedError code, "-" for a RefusedError without one
		wantErr    string // other error
	}{
		{"ok", 200, `{"access_token":"a.b.c","token_type":"bearer","expires_in":7200,"refresh_token":"r"}`, testNow.Add(2 * time.Hour), "", ""},
		{"token type in capitals", 200, `{"access_token":"a","token_type":"Bearer","expires_in":60,"refresh_token":"r"}`, testNow.Add(time.Minute), "", ""},
		{"exp claim when no expires_in", 200, `{"access_token":"` + withExp + `","refresh_token":"r"}`, time.Unix(1795380000, 0), "", ""},
		{"invalid_grant", 400, `{"error":"invalid_grant","error_description":"used"}`, time.Time{}, "invalid_grant", ""},
		{"invalid_client", 401, `{"error":"invalid_client"}`, time.Time{}, "invalid_client", ""},
		{"4xx without JSON", 403, `<html>no</html>`, time.Time{}, "-", ""},
		{"4xx with an odd error", 400, `{"error":"<script>"}`, time.Time{}, "-", ""},
		{"5xx", 503, `{"error":"temporarily_unavailable"}`, time.Time{}, "", "status 503"},
		{"garbage", 200, `not json`, time.Time{}, "", "not a JSON object"},
		{"no refresh token", 200, `{"access_token":"a","expires_in":60}`, time.Time{}, "", "lacks access_token or refresh_token"},
		{"no access token", 200, `{"refresh_token":"r","expires_in":60}`, time.Time{}, "", "lacks access_token or refresh_token"},
		{"mac token", 200, `{"access_token":"a","token_type":"mac","expires_in":60,"refresh_token":"r"}`, time.Time{}, "", "not bearer"},
		{"negative expires_in", 200, `{"access_token":"a","expires_in":-5,"refresh_token":"r"}`, time.Time{}, "", "expires_in"},
		{"fractional expires_in", 200, `{"access_token":"a","expires_in":1.5,"refresh_token":"r"}`, time.Time{}, "", "expires_in"},
		{"no expiry at all", 200, `{"access_token":"a","refresh_token":"r"}`, time.Time{}, "", "no expires_in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := parseTokenResponse(tt.status, []byte(tt.body), testNow)
			var refused *RefusedError
			switch {
			case tt.wantCode != "":
				if !errors.As(err, &refused) {
					t.Fatalf("error %v, want a RefusedError", err)
				}
				if want := strings.TrimPrefix(tt.wantCode, "-"); refused.Code != want || refused.Status != tt.status {
					t.Fatalf("refused %+v, want code %q", refused, want)
				}
			case tt.wantErr != "":
				if err == nil || errors.As(err, &refused) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if tok.AccessToken == "" || tok.RefreshToken != "r" || !tok.Expiry.Equal(tt.wantExpiry) {
					t.Fatalf("token %+v, expiry want %v", tok, tt.wantExpiry)
				}
			}
		})
	}
}

func TestAuthorizeURL(t *testing.T) {
	c := &Client{AuthURL: "https://accounts.service.example/", ClientID: "my app", Scopes: []string{"project", "tm"}}
	raw := c.AuthorizeURL("https://app.example/cb?x=1", "st&ate")
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Scheme+"://"+u.Host+u.Path != "https://accounts.service.example/oauth/authorize" ||
		q.Get("client_id") != "my app" || q.Get("redirect_uri") != "https://app.example/cb?x=1" ||
		q.Get("response_type") != "code" || q.Get("scope") != "project tm" || q.Get("state") != "st&ate" {
		t.Fatalf("authorize URL %s", raw)
	}
	if !strings.Contains(raw, "scope=project+tm") {
		t.Fatalf("scopes not separated by an encoded space: %s", raw)
	}
}

func TestNewSessionNames(t *testing.T) {
	tests := []struct {
		name, payload, user, org string
	}{
		{"emulator token", `{"sub":"7","domain":"acme.example","context":{"organization_id":1,"user_id":7}}`, "7", "acme.example"},
		{"no domain", `{"sub":"7","context":{"organization_id":12,"user_id":8}}`, "8", "12"},
		{"sub only", `{"sub":"u-1"}`, "u-1", ""},
		{"empty domain", `{"sub":"1","domain":"","context":{"organization_id":3}}`, "1", "3"},
		{"fractional id ignored", `{"context":{"organization_id":1.5}}`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSession(Token{AccessToken: fakeJWT(tt.payload)}, testNow)
			if s.UserID != tt.user || s.Organization != tt.org {
				t.Fatalf("user %q org %q, want %q %q", s.UserID, s.Organization, tt.user, tt.org)
			}
		})
	}
	if s := newSession(Token{AccessToken: "opaque"}, testNow); s.UserID != "" || s.Organization != "" {
		t.Fatalf("an opaque token named %+v", s)
	}
}

func FuzzParseTokenResponse(f *testing.F) {
	f.Add(200, []byte(`{"access_token":"a.b.c","token_type":"bearer","expires_in":7200,"refresh_token":"r"}`))
	f.Add(400, []byte(`{"error":"invalid_grant"}`))
	f.Add(200, []byte(`{"access_token":"`+fakeJWT(`{"exp":1}`)+`","refresh_token":"r"}`))
	f.Add(200, []byte(`{"expires_in":"1e400"}`))
	f.Add(500, []byte{0xff})
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		tok, err := parseTokenResponse(status, body, testNow)
		if err == nil && (status != 200 || tok.AccessToken == "" || tok.RefreshToken == "" || tok.Expiry.IsZero()) {
			t.Fatalf("accepted status %d with token %+v", status, tok)
		}
	})
}

func FuzzDecodeClaims(f *testing.F) {
	f.Add(fakeJWT(`{"sub":"7","domain":"acme.example","context":{"organization_id":1,"user_id":7}}`))
	f.Add("a.b.c")
	f.Add("..")
	f.Add("eyJ9.eyJ9")
	f.Fuzz(func(t *testing.T, token string) {
		claims, ok := decodeClaims(token)
		if ok && claims == nil {
			t.Fatal("ok without claims")
		}
		_ = newSession(Token{AccessToken: token}, testNow)
	})
}
