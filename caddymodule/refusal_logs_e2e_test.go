package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
)

// TestE2ERefusalsLogWhatWasExpected: behind service_app, every 401 and 403
// writes one DEBUG line saying why and what was expected (audience and
// issuer of a token, module key and events of a delivery, the app
// identifier of the subscription query), and none holds the token or the
// signature that was refused.
func TestE2ERefusalsLogWhatWasExpected(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped in -short mode")
	}
	t.Setenv("SERVICEGATE_E2E_CLIENT_SECRET", testClientSecret)
	app := newUpstream(t)
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound) // no subscription for any organization
	}))
	defer service.Close()
	dir := t.TempDir()
	desc, logFile := filepath.Join(dir, "manifest.json"), filepath.Join(dir, "caddy.log")
	if err := os.WriteFile(desc, []byte(appDescriptor), 0o600); err != nil {
		t.Fatal(err)
	}
	global := strings.TrimSuffix(e2eGlobal(), "}\n") + fmt.Sprintf("\tlog {\n\t\toutput file %s\n\t\tlevel DEBUG\n\t}\n}\n", logFile)
	site := fmt.Sprintf(`
localhost:%d {
	service_app {
		descriptor %s
		client_id client-id
		client_secret {env.SERVICEGATE_E2E_CLIENT_SECRET}
		app_secret webhook-secret-of-the-app
		service %s
		subscription
		auth {
			issuer service-emulator
		}
	}
	reverse_proxy %s
}
`, e2eHTTPPort, desc, service.URL, strings.TrimPrefix(app.URL, "http://"))
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: e2eAdminPort})
	loadCaddyfile(tester, global+site)

	send := func(method, path string, header map[string]string, body string, want int) {
		t.Helper()
		req, _ := http.NewRequest(method, e2eURL(path), strings.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d, want %d", method, path, resp.StatusCode, want)
		}
	}
	otherAudience := hsToken(t, claimsWith("aud", "another-app"))
	good := hsToken(t, claimsWith("jti", "good"))
	delivery := `{"events":[{"event":"project.translated"}]}`
	signature := hmacHex("webhook-secret-of-the-app", []byte(delivery))
	forged := hmacHex("not-the-secret", []byte(delivery))

	send("GET", "/api/none", nil, "", http.StatusUnauthorized)
	send("GET", "/api/audience", map[string]string{"Authorization": "Bearer " + otherAudience}, "", http.StatusUnauthorized)
	send("POST", "/webhooks", map[string]string{"X-Service-Signature": forged, "X-Module-Key": "events-hook"}, delivery, http.StatusUnauthorized)
	send("POST", "/webhooks", map[string]string{"X-Service-Signature": signature, "X-Module-Key": "other-hook"}, delivery, http.StatusForbidden)
	send("GET", "/api/subscription", map[string]string{"Authorization": "Bearer " + good}, "", http.StatusForbidden)

	// The five refusals, each with why and what was expected.
	want := []struct {
		msg    string
		fields map[string]any
	}{
		{"bearer token refused", map[string]any{"path": "/api/none", "reason": "no bearer token",
			"expected_audience": []any{"client-id"}, "expected_issuer": "service-emulator"}},
		{"bearer token refused", map[string]any{"path": "/api/audience", "expected_audience": []any{"client-id"}}},
		{"webhook delivery refused", map[string]any{"status": 401.0, "reason": "The signature of the delivery does not match its body.",
			"expected_module_keys": []any{"events-hook"}, "expected_events": []any{"project.translated", "project.approved"}}},
		{"webhook delivery refused", map[string]any{"status": 403.0, "module_key": `"other-hook"`, "expected_module_keys": []any{"events-hook"}}},
		{"subscription refused", map[string]any{"path": "/api/subscription", "app_identifier": "demo-app"}},
	}
	var entries []map[string]any
	var raw []byte
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		raw, _ = os.ReadFile(logFile)
		if strings.Contains(string(raw), "subscription refused") || time.Now().After(deadline) {
			break
		}
	}
	for _, line := range strings.Split(string(raw), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil && e["level"] == "debug" && strings.HasSuffix(e["msg"].(string), "refused") {
			entries = append(entries, e)
		}
	}
	next := 0
	for _, w := range want {
		found := false
		for ; next < len(entries) && !found; next++ {
			e := entries[next]
			found = e["msg"] == w.msg
			for k, v := range w.fields {
				if fmt.Sprint(e[k]) != fmt.Sprint(v) {
					found = false
				}
			}
		}
		if !found {
			t.Errorf("no DEBUG line %q with %v", w.msg, w.fields)
		}
	}
	if !strings.Contains(string(raw), `"reason":"wrong audience"`) {
		t.Error("the refusal of a token for another audience does not say so")
	}
	for _, secret := range []string{otherAudience, good, signature, forged, testClientSecret, "webhook-secret-of-the-app"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the log holds a secret: %s…", secret[:8])
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", raw)
	}
}
