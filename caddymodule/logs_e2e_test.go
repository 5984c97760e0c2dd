package caddymodule

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
)

// logFilterSnippet is the snippet of Caddyfile.example that keeps the
// service's secrets out of Caddy's logs, as docs/guides/keeping-secrets.md documents it.
func logFilterSnippet(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	const start = "(redact_service_secrets) {\n"
	i := strings.Index(string(raw), start)
	if i < 0 {
		t.Fatal("Caddyfile.example has no (redact_service_secrets) snippet")
	}
	rest := string(raw[i:])
	end := strings.Index(rest, "\n}\n")
	if end < 0 {
		t.Fatal("the (redact_service_secrets) snippet of Caddyfile.example does not end")
	}
	return rest[:end+3]
}

// TestLogFilterDocumented checks that the guide to keeping secrets out of
// logs shows the log filter of Caddyfile.example, the one
// TestE2ELogsHoldNoSecrets runs.
func TestLogFilterDocumented(t *testing.T) {
	readme, err := os.ReadFile("../docs/guides/keeping-secrets.md")
	if err != nil {
		t.Fatal(err)
	}
	snippet := logFilterSnippet(t)
	if !strings.Contains(string(readme), snippet) {
		t.Errorf("docs/guides/keeping-secrets.md does not show the log filter of Caddyfile.example:\n%s", snippet)
	}
	for _, param := range []string{"jwtToken", "code", "state", "sig"} {
		if !strings.Contains(snippet, "replace "+param+" REDACTED") {
			t.Errorf("the log filter does not redact the query parameter %s", param)
		}
	}
}

// TestE2ELogsHoldNoSecrets runs the documented log configuration (the
// snippet of Caddyfile.example in the default log at DEBUG and in the
// site's access log, each written to a file) and sends what carries
// secrets: a query token (passed on, and stripped), a signed webhook
// delivery, a whole OAuth sign-in (code, state, session cookie), a spill
// link's sig, a bearer token. None of these values may appear in either
// log, while the requests themselves must.
func TestE2ELogsHoldNoSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped in -short mode")
	}
	t.Setenv("SERVICEGATE_E2E_CLIENT_SECRET", testClientSecret)
	rig := newOAuthRig(t)
	app := newUpstream(t)
	dir := t.TempDir()
	defaultLog, accessLog := filepath.Join(dir, "caddy.log"), filepath.Join(dir, "access.log")

	global := strings.TrimSuffix(e2eGlobal(), "}\n") + fmt.Sprintf(`	log {
		output file %s
		level DEBUG
		import redact_service_secrets
	}
}
`, defaultLog)
	site := fmt.Sprintf(`
localhost:%[1]d {
	log {
		output file %[2]s
		import redact_service_secrets
	}
	route /api/* {
		service_auth {
			hs256_secret {env.SERVICEGATE_E2E_CLIENT_SECRET}
			from_query jwtToken
			strip_query
		}
		reverse_proxy %[3]s
	}
	route /kept/* {
		service_auth {
			hs256_secret {env.SERVICEGATE_E2E_CLIENT_SECRET}
			from_query jwtToken
		}
		reverse_proxy %[3]s
	}
	route /webhooks {
		service_webhook {
			secret webhook-secret-of-the-app
		}
		reverse_proxy %[3]s
	}
	@format path /file-format /servicegate/spill/*
	route @format {
		service_limits {
			contract custom-file-format
			spill
			spill_dir %[4]s
		}
		reverse_proxy %[3]s
	}
	route {
		service_oauth {
			client_id %[5]s
			client_secret %[6]s
			auth_url %[7]s
			scopes project
			cookie_secure off
		}
		reverse_proxy %[8]s
	}
}
`, e2eHTTPPort, accessLog, strings.TrimPrefix(app.URL, "http://"), filepath.Join(dir, "spill"),
		oauthTestClientID, oauthTestSecret, rig.svc.URL, strings.TrimPrefix(rig.app.URL, "http://"))
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: e2eAdminPort})
	loadCaddyfile(tester, logFilterSnippet(t)+global+site)

	var secrets []string
	send := func(method, path string, header map[string]string, body string, want int) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, e2eURL(path), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := rig.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: status %d, want %d", method, path, resp.StatusCode, want)
		}
		return resp
	}

	// A query token, passed on (its value stripped) and kept (passed on as it is).
	stripped, kept := hsToken(t, claimsWith("jti", "stripped")), hsToken(t, claimsWith("jti", "kept"))
	secrets = append(secrets, stripped, kept)
	send("GET", "/api/report?jwtToken="+stripped, nil, "", http.StatusOK)
	send("GET", "/kept/report?jwtToken="+kept, nil, "", http.StatusOK)
	// A refused one, and one in a Referer.
	forged := hsToken(t, claimsWith("exp", time.Now().Add(-time.Hour).Unix()))
	secrets = append(secrets, forged)
	send("GET", "/api/report?jwtToken="+forged, map[string]string{"Referer": e2eURL("/api/x?jwtToken=" + forged)}, "", http.StatusUnauthorized)

	// A bearer token in the Authorization header.
	bearer := hsToken(t, claimsWith("jti", "bearer"))
	secrets = append(secrets, bearer)
	send("GET", "/api/report", map[string]string{"Authorization": "Bearer " + bearer}, "", http.StatusOK)

	// A signed webhook delivery, passed on to the app.
	delivery := `{"events":[{"event":"project.translated"}]}`
	signature := hmacHex("webhook-secret-of-the-app", []byte(delivery))
	secrets = append(secrets, signature)
	send("POST", "/webhooks", map[string]string{"X-Service-Signature": signature, "Content-Type": "application/json"}, delivery, http.StatusOK)

	// A spill link's signature.
	sig := strings.Repeat("5a", 32)
	secrets = append(secrets, sig)
	send("GET", "/servicegate/spill/0123456789abcdef?expires="+strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)+"&sig="+sig, nil, "", http.StatusForbidden)

	// A whole OAuth sign-in: the state in the redirect to the service and
	// in the callback, the code in the callback, the session cookie after.
	authorize := rig.startLogin(rig.client, "/pages/home")
	state := authorize.Query().Get("state")
	callback := rig.consent(rig.client, authorize, "approve")
	cb, err := url.Parse(callback)
	if err != nil {
		t.Fatal(err)
	}
	code := cb.Query().Get("code")
	if state == "" || code == "" {
		t.Fatalf("no state or code in the sign-in: %s, %s", authorize, callback)
	}
	secrets = append(secrets, state, code)
	resp, body := rig.get(rig.client, callback, true)
	rig.expectRedirect(resp, body, "callback")
	for _, c := range resp.Cookies() {
		if c.Value != "" { // the state cookie is cleared
			secrets = append(secrets, c.Value)
		}
	}
	rig.through(rig.client, "/pages/home", true)
	send("GET", "/last-request-marker", nil, "", http.StatusOK) // signed in: the app answers

	// Both logs hold the requests, and none of the secrets.
	for _, file := range []string{accessLog, defaultLog} {
		var log string
		deadline := time.Now().Add(5 * time.Second)
		for {
			raw, _ := os.ReadFile(file)
			log = string(raw)
			if strings.Contains(log, "/last-request-marker") || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !strings.Contains(log, "REDACTED") {
			t.Errorf("%s holds nothing redacted:\n%s", filepath.Base(file), log)
		}
		for _, secret := range secrets {
			if len(secret) < 8 {
				t.Fatalf("secret %q is too short to look for", secret)
			}
			if strings.Contains(log, secret) {
				t.Errorf("%s holds the secret %s…", filepath.Base(file), secret[:8])
			}
		}
		for _, path := range []string{"/api/report", "/kept/report", "/webhooks", "/servicegate/spill/", "/oauth/callback", "/pages/home"} {
			if file == accessLog && !strings.Contains(log, path) {
				t.Errorf("the access log has no request for %s", path)
			}
		}
		if t.Failed() {
			t.Logf("%s:\n%s", filepath.Base(file), log)
		}
	}
}
