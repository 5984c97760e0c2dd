package emulator

import (
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAuthorizeRefusalsSayWhatCame: a refused client_id or redirect_uri is
// named in the page, quoted and cut short, beside what is registered, so
// that whoever set up the app sees the mistake.
func TestAuthorizeRefusalsSayWhatCame(t *testing.T) {
	long := "http://localhost:8080/" + strings.Repeat("a", 300)
	tests := []struct {
		name   string
		params map[string]string
		want   string
	}{
		{"missing client", map[string]string{"redirect_uri": testRedirect},
			`This app is unknown: the request has no client_id. The emulator knows the app as "demo-client".`},
		{"unknown client", map[string]string{"client_id": "demo-cilent\n", "redirect_uri": testRedirect},
			`This app is unknown: client_id "demo-cilent\n" is not registered. The emulator knows the app as "demo-client".`},
		{"missing redirect", map[string]string{"client_id": testClientID},
			`The request has no redirect_uri. The app's registered redirect URLs: "` + testRedirect + `", "http://localhost:8080/other?keep=1".`},
		{"unregistered redirect", map[string]string{"client_id": testClientID, "redirect_uri": "http://localhost:8080/oauth/callback"},
			`The redirect_uri "http://localhost:8080/oauth/callback" is not one of the app's registered redirect URLs: "` + testRedirect + `", "http://localhost:8080/other?keep=1".`},
		{"long redirect", map[string]string{"client_id": testClientID, "redirect_uri": long},
			`The redirect_uri "` + long[:100] + `"… is not one`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t)
			tt.params["response_type"], tt.params["scope"] = "code", "project"
			rec := do(s, httptest.NewRequest(http.MethodGet, authorizeURL(tt.params), nil))
			if rec.Code != http.StatusBadRequest || !strings.Contains(html.UnescapeString(rec.Body.String()), tt.want) {
				t.Fatalf("%d, want 400 with %q:\n%s", rec.Code, tt.want, rec.Body)
			}
		})
	}
}

// TestCodeGrantWrongRedirectSaysWhich: a code exchanged with another
// redirect_uri is refused naming both.
func TestCodeGrantWrongRedirectSaysWhich(t *testing.T) {
	s, _ := newTestServer(t)
	req := codeGrantRequest(approve(t, s, nil))
	req["redirect_uri"] = "http://localhost:8080/other"
	status, out := exchange(t, s, req)
	want := `redirect_uri "http://localhost:8080/other" differs from "` + testRedirect + `", the one the code was issued for`
	if status != http.StatusBadRequest || out["error_description"] != want {
		t.Fatalf("%d %v, want %q", status, out, want)
	}
}
