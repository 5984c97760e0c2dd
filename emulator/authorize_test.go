package emulator

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestAuthorize(t *testing.T) {
	base := map[string]string{"client_id": testClientID, "redirect_uri": testRedirect,
		"response_type": "code", "scope": "project tm", "state": "xyz"}
	with := func(changes map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range changes {
			if v == "-" {
				delete(out, k)
			} else {
				out[k] = v
			}
		}
		return out
	}
	tests := []struct {
		name      string
		params    map[string]string
		status    int
		wantQuery url.Values // the redirect's query, "code" only checked for presence
		wantPage  string     // part of the HTML page
	}{
		{"unknown client", with(map[string]string{"client_id": "other"}), 400, nil, "app is unknown"},
		{"missing client", with(map[string]string{"client_id": "-"}), 400, nil, "app is unknown"},
		{"unregistered redirect", with(map[string]string{"redirect_uri": "http://evil.example/cb"}), 400, nil, "redirect_uri"},
		{"redirect with extra path", with(map[string]string{"redirect_uri": testRedirect + "/x"}), 400, nil, "redirect_uri"},
		{"missing redirect", with(map[string]string{"redirect_uri": "-"}), 400, nil, "redirect_uri"},
		{"bad response type", with(map[string]string{"response_type": "token"}), 302,
			url.Values{"error": {"unsupported_response_type"}, "error_description": {"response_type must be code"}, "state": {"xyz"}}, ""},
		{"missing scope", with(map[string]string{"scope": "-"}), 302,
			url.Values{"error": {"invalid_request"}, "error_description": {"scope is required"}, "state": {"xyz"}}, ""},
		{"approve", with(map[string]string{"decision": "approve"}), 302, url.Values{"code": nil, "state": {"xyz"}}, ""},
		{"approve without state", with(map[string]string{"decision": "approve", "state": "-"}), 302, url.Values{"code": nil}, ""},
		{"approve with empty state", with(map[string]string{"decision": "approve", "state": ""}), 302, url.Values{"code": nil, "state": {""}}, ""},
		{"decline", with(map[string]string{"decision": "decline"}), 302, url.Values{"error": {"access_denied"}, "state": {"xyz"}}, ""},
		{"decline without state", with(map[string]string{"decision": "decline", "state": "-"}), 302, url.Values{"error": {"access_denied"}}, ""},
		{"odd decision", with(map[string]string{"decision": "maybe"}), 400, nil, "approve or decline"},
		{"unknown organization", with(map[string]string{"decision": "approve", "organization": "nope.example"}), 400, nil, "organization"},
		{"bad user", with(map[string]string{"decision": "approve", "user": "x"}), 400, nil, "user"},
		{"consent page", with(nil), 200, nil, `<button type="submit" name="decision" value="approve">`},
		{"consent page escapes", with(map[string]string{"state": `"><script>alert(1)</script>`, "scope": "<b>"}), 200, nil,
			`value="&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t)
			rec := do(s, httptest.NewRequest(http.MethodGet, authorizeURL(tt.params), nil))
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tt.status, rec.Body)
			}
			loc := rec.Header().Get("Location")
			if tt.status != http.StatusFound {
				if loc != "" {
					t.Fatalf("redirected to %s", loc)
				}
				if ct := rec.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
					t.Errorf("Content-Type %q", ct)
				}
				if !strings.Contains(rec.Body.String(), tt.wantPage) {
					t.Fatalf("page lacks %q:\n%s", tt.wantPage, rec.Body)
				}
				if strings.Contains(rec.Body.String(), "<script>") {
					t.Fatalf("page holds an unescaped value:\n%s", rec.Body)
				}
				return
			}
			u, err := url.Parse(loc)
			if err != nil {
				t.Fatal(err)
			}
			if got := u.Scheme + "://" + u.Host + u.Path; got != testRedirect {
				t.Fatalf("redirected to %s, want %s", got, testRedirect)
			}
			q := u.Query()
			if len(q) != len(tt.wantQuery) {
				t.Fatalf("redirect query %v, want the keys of %v", q, tt.wantQuery)
			}
			for k, want := range tt.wantQuery {
				got, ok := q[k]
				if !ok {
					t.Fatalf("redirect query %v lacks %s", q, k)
				}
				if want != nil && strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("%s = %v, want %v", k, got, want)
				}
			}
		})
	}
}

func TestAuthorizeKeepsTheRedirectQuery(t *testing.T) {
	s, _ := newTestServer(t)
	rec := do(s, httptest.NewRequest(http.MethodGet, authorizeURL(map[string]string{"client_id": testClientID,
		"redirect_uri": "http://localhost:8080/other?keep=1", "response_type": "code", "scope": "project",
		"state": "a b&c", "decision": "approve"}), nil))
	u, err := url.Parse(rec.Header().Get("Location"))
	if err != nil || rec.Code != http.StatusFound {
		t.Fatalf("status %d, Location %q", rec.Code, rec.Header().Get("Location"))
	}
	if q := u.Query(); q.Get("keep") != "1" || q.Get("state") != "a b&c" || q.Get("code") == "" {
		t.Fatalf("redirect query %v", q)
	}
}

func TestAuthorizePendingCodesAreBounded(t *testing.T) {
	s, clk := newTestServer(t)
	approve := func() int {
		return do(s, httptest.NewRequest(http.MethodGet, authorizeURL(map[string]string{"client_id": testClientID,
			"redirect_uri": testRedirect, "response_type": "code", "scope": "project", "decision": "approve"}), nil)).Code
	}
	for i := 0; i < maxPendingCodes; i++ {
		if code := approve(); code != http.StatusFound {
			t.Fatalf("code %d: status %d", i, code)
		}
	}
	if code := approve(); code != http.StatusServiceUnavailable {
		t.Fatalf("past %d pending codes: status %d, want 503", maxPendingCodes, code)
	}
	if n := len(s.codes); n != maxPendingCodes {
		t.Fatalf("%d codes kept, want %d", n, maxPendingCodes)
	}
	clk.Advance(DefaultCodeLifetime)
	if code := approve(); code != http.StatusFound {
		t.Fatalf("once the codes expired: status %d, want 302", code)
	}
}

func TestAuthorizeConsentFormPost(t *testing.T) {
	s, _ := newTestServer(t)
	form := url.Values{"client_id": {testClientID}, "redirect_uri": {testRedirect}, "response_type": {"code"},
		"scope": {"project"}, "state": {"s1"}, "organization": {"unpaid.example"}, "user": {"42"}, "decision": {"approve"}}
	r := httptest.NewRequest(http.MethodPost, "/oauth/authorize", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := do(s, r)
	if rec.Code != http.StatusFound {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	u, _ := url.Parse(rec.Header().Get("Location"))
	code := u.Query().Get("code")
	if u.Query().Get("state") != "s1" || code == "" {
		t.Fatalf("redirect %s", u)
	}
	status, out := exchange(t, s, codeGrantRequest(code))
	if status != http.StatusOK {
		t.Fatalf("exchange: %d %v", status, out)
	}
	claims := decodeClaims(t, out["access_token"].(string))
	if claims["domain"] != "unpaid.example" || claims["sub"] != "42" {
		t.Fatalf("claims %v", claims)
	}
}

func TestAuthorizeConsentPageListsOrganizations(t *testing.T) {
	s, _ := newTestServer(t)
	rec := do(s, httptest.NewRequest(http.MethodGet, authorizeURL(map[string]string{"client_id": testClientID,
		"redirect_uri": testRedirect, "response_type": "code", "scope": "project", "organization": "unpaid.example"}), nil))
	body := rec.Body.String()
	for _, want := range []string{`<form method="post" action="authorize">`,
		`<option value="acme.example">`, `<option value="unpaid.example" selected>`, `<option value="missing.example">`,
		`name="user" min="1" value="7"`} {
		if !strings.Contains(body, want) {
			t.Errorf("consent page lacks %q", want)
		}
	}
	if strings.Contains(body, `name="state"`) {
		t.Error("consent page carries a state the request did not send")
	}
}

func TestAuthorizeRefusesOtherMethods(t *testing.T) {
	s, _ := newTestServer(t)
	rec := do(s, httptest.NewRequest(http.MethodDelete, "/oauth/authorize", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") == "" {
		t.Fatalf("status %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}

func FuzzAuthorize(f *testing.F) {
	f.Add("client_id=demo-client&redirect_uri=http%3A%2F%2Flocalhost%3A8080%2Fcallback&response_type=code&scope=project&decision=approve&state=x")
	f.Add("client_id=demo-client&redirect_uri=http%3A%2F%2Fevil.example%2F&response_type=token")
	f.Add("client_id=demo-client&redirect_uri=http%3A%2F%2Flocalhost%3A8080%2Fcallback&response_type=code&scope=a&organization=%3Cx%3E&user=-1")
	f.Add("%zz&;;=&client_id")
	s, _ := newTestServer(f)
	f.Fuzz(func(t *testing.T, query string) {
		r := httptest.NewRequest(http.MethodGet, "/oauth/authorize", nil)
		r.URL.RawQuery = query
		rec := do(s, r)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest:
			if rec.Header().Get("Location") != "" {
				t.Fatalf("%d with a Location", rec.Code)
			}
		case http.StatusFound:
			loc := rec.Header().Get("Location")
			if !strings.HasPrefix(loc, testRedirect+"?") && !strings.HasPrefix(loc, "http://localhost:8080/other?") {
				t.Fatalf("redirected to %q", loc)
			}
		default:
			t.Fatalf("status %d for %q", rec.Code, query)
		}
	})
}

func FuzzSubscriptionAuthorization(f *testing.F) {
	f.Add("Bearer x.y.z")
	f.Add("bearer eyJhbGciOiJub25lIn0.eyJleHAiOjF9.")
	f.Add("Basic Zm9v")
	f.Add("Bearer ")
	s, _ := newTestServer(f)
	f.Fuzz(func(t *testing.T, header string) {
		rec := do(s, subscriptionRequest("demo-app", header))
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("status %d for %q", rec.Code, header)
		}
	})
}
