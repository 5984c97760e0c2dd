package emulator

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// oddSecret needs the form encoding of RFC 6749 §2.3.1 in a Basic header.
const oddSecret = "s3cr t:+/%&=ü"

// tokenCall is what one request to the token endpoint carried.
type tokenCall struct {
	basicUser, basicPass string
	hasBasic             bool
	contentType          string
	form                 url.Values
	status               int
}

// newOAuth2Rig is an emulator on a loopback server whose client secret
// needs encoding, with a record of the token requests, and an
// oauth2.Config for it with the given auth style.
func newOAuth2Rig(t *testing.T, style oauth2.AuthStyle) (*oauth2.Config, *http.Client, func() []tokenCall) {
	t.Helper()
	cfg := testConfig(&clock{now: time.Now()})
	cfg.ClientSecret = oddSecret
	cfg.Now = nil // x/oauth2 reads the real clock
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var calls []tokenCall
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != tokenPath {
			s.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		call := tokenCall{contentType: r.Header.Get("Content-Type")}
		call.basicUser, call.basicPass, call.hasBasic = r.BasicAuth()
		call.form, _ = url.ParseQuery(string(body))
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		call.status = rec.Code
		mu.Lock()
		calls = append(calls, call)
		mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	conf := &oauth2.Config{
		ClientID:     testClientID,
		ClientSecret: oddSecret,
		Endpoint: oauth2.Endpoint{
			AuthURL:   srv.URL + authorizePath,
			TokenURL:  srv.URL + tokenPath,
			AuthStyle: style,
		},
		RedirectURL: testRedirect,
		Scopes:      []string{"project"},
	}
	return conf, srv.Client(), func() []tokenCall {
		mu.Lock()
		defer mu.Unlock()
		out := calls
		calls = nil
		return out
	}
}

// oauth2Code approves an authorization request made by conf and returns
// the code.
func oauth2Code(t *testing.T, conf *oauth2.Config, client *http.Client) string {
	t.Helper()
	noRedirects := *client
	noRedirects.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noRedirects.Get(conf.AuthCodeURL("st4te") + "&decision=approve")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound || loc.Query().Get("state") != "st4te" || loc.Query().Get("code") == "" {
		t.Fatalf("authorization: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return loc.Query().Get("code")
}

// TestGoOAuth2Client runs golang.org/x/oauth2, a standard OAuth client,
// against the emulator: the code exchange and a refresh, in each of its
// ways of authenticating the client.
func TestGoOAuth2Client(t *testing.T) {
	tests := []struct {
		name  string
		style oauth2.AuthStyle
		basic bool // the client authenticates with HTTP Basic
	}{
		{"auto-detect", oauth2.AuthStyleAutoDetect, true},
		{"in header", oauth2.AuthStyleInHeader, true},
		{"in params", oauth2.AuthStyleInParams, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf, client, calls := newOAuth2Rig(t, tt.style)
			ctx := context.WithValue(context.Background(), oauth2.HTTPClient, client)

			tok, err := conf.Exchange(ctx, oauth2Code(t, conf, client))
			if err != nil {
				t.Fatalf("Exchange: %v", err)
			}
			if tok.AccessToken == "" || tok.RefreshToken == "" || !strings.EqualFold(tok.TokenType, "bearer") ||
				time.Until(tok.Expiry) < time.Hour {
				t.Fatalf("token %+v", tok)
			}
			checkCalls(t, calls(), tt.basic, "authorization_code")

			// A token about to expire is refreshed by the TokenSource.
			stale := *tok
			stale.Expiry = time.Now().Add(-time.Minute)
			fresh, err := conf.TokenSource(ctx, &stale).Token()
			if err != nil {
				t.Fatalf("refresh: %v", err)
			}
			if fresh.AccessToken == "" || fresh.RefreshToken == "" || fresh.RefreshToken == tok.RefreshToken {
				t.Fatalf("refreshed token %+v", fresh)
			}
			checkCalls(t, calls(), tt.basic, "refresh_token")

			// The rotated-away refresh token is refused, as an OAuth error.
			_, err = conf.TokenSource(ctx, &stale).Token()
			var re *oauth2.RetrieveError
			if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
				t.Fatalf("reused refresh token: %v", err)
			}
		})
	}
}

// checkCalls checks that one form-encoded request of grant made it, with
// the client authenticated one way only.
func checkCalls(t *testing.T, calls []tokenCall, basic bool, grant string) {
	t.Helper()
	if len(calls) != 1 {
		t.Fatalf("%d token requests, want 1 (a refused first try would make 2): %+v", len(calls), calls)
	}
	c := calls[0]
	if c.status != http.StatusOK || c.contentType != "application/x-www-form-urlencoded" || c.form.Get("grant_type") != grant {
		t.Fatalf("token request %+v", c)
	}
	if basic {
		if !c.hasBasic || c.basicUser != testClientID || c.basicPass != url.QueryEscape(oddSecret) || c.form.Has("client_secret") {
			t.Fatalf("want the client in a Basic header only: %+v", c)
		}
	} else if c.hasBasic || c.form.Get("client_id") != testClientID || c.form.Get("client_secret") != oddSecret {
		t.Fatalf("want the client in the form only: %+v", c)
	}
}

func basicAuth(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// TestTokenRequestShapes sends the token request in each body and client
// authentication the endpoint takes, and in each it refuses.
func TestTokenRequestShapes(t *testing.T) {
	const (
		form = "application/x-www-form-urlencoded"
		js   = "application/json"
	)
	okBasic := basicAuth(testClientID, testSecret)
	codeForm := func(code string, extra ...string) string {
		v := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {testRedirect}}
		for i := 0; i+1 < len(extra); i += 2 {
			v.Add(extra[i], extra[i+1])
		}
		return v.Encode()
	}
	withSecret := func(code string) string {
		return codeForm(code, "client_id", testClientID, "client_secret", testSecret)
	}
	tests := []struct {
		name          string
		contentType   string
		authorization []string
		body          func(code string) string
		status        int
		errCode       string // "" for a token
		challenge     bool   // WWW-Authenticate: Basic expected
	}{
		// Accepted shapes.
		{"JSON, client in the body", js, nil, func(c string) string {
			return `{"grant_type":"authorization_code","client_id":"demo-client","client_secret":"demo-client-secret","redirect_uri":"` + testRedirect + `","code":"` + c + `"}`
		}, 200, "", false},
		{"JSON with a charset", js + "; charset=utf-8", nil, func(c string) string {
			return `{"grant_type":"authorization_code","client_id":"demo-client","client_secret":"demo-client-secret","redirect_uri":"` + testRedirect + `","code":"` + c + `"}`
		}, 200, "", false},
		{"JSON, client in Basic", js, []string{okBasic}, func(c string) string {
			return `{"grant_type":"authorization_code","redirect_uri":"` + testRedirect + `","code":"` + c + `"}`
		}, 200, "", false},
		{"form, client in the body", form, nil, withSecret, 200, "", false},
		{"form, client in Basic", form, []string{okBasic}, func(c string) string { return codeForm(c) }, 200, "", false},
		{"form, Basic and the same client_id in the body", form, []string{okBasic},
			func(c string) string { return codeForm(c, "client_id", testClientID) }, 200, "", false},
		{"form, unknown parameters ignored", form, []string{okBasic},
			func(c string) string { return codeForm(c, "scope", "project", "code_verifier", "x") }, 200, "", false},
		{"Basic scheme in lower case", form, []string{"basic " + strings.TrimPrefix(okBasic, "Basic ")},
			func(c string) string { return codeForm(c) }, 200, "", false},

		// Refused bodies.
		{"text body", "text/plain", nil, withSecret, 400, "invalid_request", false},
		{"no content type", "", nil, withSecret, 400, "invalid_request", false},
		{"form, malformed", form, nil, func(string) string { return "grant_type=%zz" }, 400, "invalid_request", false},
		{"form, parameter twice", form, nil,
			func(c string) string { return withSecret(c) + "&code=" + c }, 400, "invalid_request", false},
		{"form, grant_type twice", form, []string{okBasic},
			func(c string) string { return codeForm(c) + "&grant_type=refresh_token" }, 400, "invalid_request", false},
		{"form, no grant_type", form, []string{okBasic}, func(string) string { return "code=x" }, 400, "invalid_request", false},
		{"form, unknown grant_type", form, []string{okBasic},
			func(string) string { return "grant_type=password&username=a&password=b" }, 400, "unsupported_grant_type", false},
		{"form, no client", form, nil, func(c string) string { return codeForm(c) }, 400, "invalid_request", false},
		{"form, unknown code", form, []string{okBasic}, func(string) string { return codeForm("nope") }, 400, "invalid_grant", false},
		{"form, huge", form, nil, func(string) string { return "grant_type=" + strings.Repeat("a", maxTokenBody) }, 413, "invalid_request", false},

		// Refused client authentication.
		{"form, wrong secret in the body", form, nil,
			func(c string) string { return codeForm(c, "client_id", testClientID, "client_secret", "nope") }, 401, "invalid_client", false},
		{"Basic, wrong secret", form, []string{basicAuth(testClientID, "nope")}, func(c string) string { return codeForm(c) }, 401, "invalid_client", true},
		{"Basic, unknown client", form, []string{basicAuth("other", testSecret)}, func(c string) string { return codeForm(c) }, 401, "invalid_client", true},
		{"Basic, no client id", form, []string{basicAuth("", testSecret)}, func(c string) string { return codeForm(c) }, 401, "invalid_client", true},
		{"Basic, not base64", form, []string{"Basic !!!"}, func(c string) string { return codeForm(c) }, 401, "invalid_client", true},
		{"Basic, no colon", form, []string{"Basic " + base64.StdEncoding.EncodeToString([]byte(testClientID))},
			func(c string) string { return codeForm(c) }, 401, "invalid_client", true},
		{"Basic, bad percent-encoding", form, []string{basicAuth(testClientID, "%zz")}, func(c string) string { return codeForm(c) }, 401, "invalid_client", true},
		{"Basic, secret not form-decoded by the client", form, []string{basicAuth(testClientID, "demo%2")},
			func(c string) string { return codeForm(c) }, 401, "invalid_client", true},
		{"another scheme", form, []string{"Bearer abc"}, withSecret, 401, "invalid_client", true},
		{"empty Authorization", form, []string{""}, withSecret, 401, "invalid_client", true},
		{"two Authorization headers", form, []string{okBasic, okBasic}, func(c string) string { return codeForm(c) }, 401, "invalid_client", true},
		{"Basic and client_secret in the body", form, []string{okBasic}, withSecret, 400, "invalid_request", false},
		{"Basic and client_secret in JSON", js, []string{okBasic}, func(c string) string {
			return `{"grant_type":"authorization_code","client_secret":"demo-client-secret","redirect_uri":"` + testRedirect + `","code":"` + c + `"}`
		}, 400, "invalid_request", false},
		{"Basic and another client_id in the body", form, []string{okBasic},
			func(c string) string { return codeForm(c, "client_id", "other") }, 400, "invalid_request", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t)
			code := approve(t, s, nil)
			r := httptest.NewRequest(http.MethodPost, tokenPath, strings.NewReader(tt.body(code)))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			if tt.authorization != nil {
				r.Header["Authorization"] = tt.authorization
			}
			rec := do(s, r)
			if challenge := rec.Header().Get("WWW-Authenticate"); tt.challenge != strings.HasPrefix(challenge, "Basic realm=") {
				t.Errorf("WWW-Authenticate %q, want a Basic challenge: %v", challenge, tt.challenge)
			}
			if tt.errCode != "" {
				assertOAuthError(t, rec, tt.status, tt.errCode)
				// A refused request does not use up the code.
				if tt.status != http.StatusRequestEntityTooLarge {
					if status, out := exchange(t, s, codeGrantRequest(code)); status != http.StatusOK {
						t.Fatalf("the code was used up by a refused request: %d %v", status, out)
					}
				}
				return
			}
			if rec.Code != http.StatusOK || !strings.HasSuffix(rec.Body.String(), "}\n") {
				t.Fatalf("status %d body %q", rec.Code, rec.Body)
			}
			if status, out := exchange(t, s, codeGrantRequest(code)); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
				t.Fatalf("the code was not used: %d %v", status, out)
			}
		})
	}
}

func FuzzTokenEndpointForm(f *testing.F) {
	f.Add("grant_type=authorization_code&code=x&redirect_uri=http%3A%2F%2Flocalhost%3A8080%2Fcallback", basicAuth(testClientID, testSecret))
	f.Add("grant_type=refresh_token&refresh_token=x&client_id=demo-client&client_secret=demo-client-secret", "")
	f.Add("grant_type=refresh_token&grant_type=x", "Basic !!")
	f.Add("%zz=%zz&;&=", "Bearer x")
	f.Add("client_secret=a", basicAuth("%41", "%"))
	s, _ := newTestServer(f)
	f.Fuzz(func(t *testing.T, body, authorization string) {
		r := httptest.NewRequest(http.MethodPost, tokenPath, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
		rec := do(s, r)
		if rec.Code >= 500 || rec.Code == http.StatusOK {
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		if strings.Contains(rec.Body.String(), testSecret) {
			t.Fatal("the answer repeats the client secret")
		}
		if rec.Code == http.StatusUnauthorized && rec.Header().Get("WWW-Authenticate") != "" && authorization == "" {
			t.Fatal("a Basic challenge to a client that sent no Authorization header")
		}
	})
}
