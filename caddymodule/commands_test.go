package caddymodule

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/golang-jwt/jwt/v5"
	"github.com/spf13/pflag"

	"github.com/servicegate/servicegate/emulator"
)

func parsedFlags(t *testing.T, fs *pflag.FlagSet, args ...string) caddycmd.Flags {
	t.Helper()
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return caddycmd.Flags{FlagSet: fs}
}

func TestCommandsRegistered(t *testing.T) {
	for _, name := range []string{"service-token", "service-webhook"} {
		if _, ok := caddycmd.Commands()[name]; !ok {
			t.Errorf("caddy %s is not registered", name)
		}
	}
}

// parseServiceToken verifies a printed token with secret and returns its
// claims.
func parseServiceToken(t *testing.T, out, secret string) jwt.MapClaims {
	t.Helper()
	raw, ok := strings.CutSuffix(out, "\n")
	if !ok || strings.ContainsAny(raw, " \n") {
		t.Fatalf("stdout %q is not one token and a newline", out)
	}
	claims := jwt.MapClaims{}
	_, err := jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired()).
		ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return []byte(secret), nil })
	if err != nil {
		t.Fatalf("token does not verify: %v", err)
	}
	return claims
}

func TestServiceTokenDefaults(t *testing.T) {
	var out bytes.Buffer
	code, err := runServiceToken(parsedFlags(t, serviceTokenFlags()), &out)
	if err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	claims := parseServiceToken(t, out.String(), "demo-client-secret")
	ctx, _ := claims["context"].(map[string]any)
	if claims["iss"] != "service-emulator" || claims["aud"] != "demo-client" || claims["sub"] != "7" ||
		claims["domain"] != "acme.example" || ctx["organization_id"] != float64(1) || ctx["user_id"] != float64(7) {
		t.Fatalf("claims %v", claims)
	}
	exp, _ := claims.GetExpirationTime()
	iat, _ := claims.GetIssuedAt()
	if exp.Sub(iat.Time) != 2*time.Hour {
		t.Fatalf("lifetime %v", exp.Sub(iat.Time))
	}
}

func TestServiceTokenFlags(t *testing.T) {
	t.Setenv("SERVICEGATE_TEST_TOKEN_SECRET", "env-secret")
	var out bytes.Buffer
	code, err := runServiceToken(parsedFlags(t, serviceTokenFlags(), "--secret-env", "SERVICEGATE_TEST_TOKEN_SECRET",
		"--domain", "", "--organization-id", "42", "--user", "9", "--audience", "my-client",
		"--issuer", "iss-x", "--lifetime", "10m"), &out)
	if err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	claims := parseServiceToken(t, out.String(), "env-secret")
	ctx, _ := claims["context"].(map[string]any)
	if _, has := claims["domain"]; has || claims["iss"] != "iss-x" || claims["aud"] != "my-client" ||
		claims["sub"] != "9" || ctx["organization_id"] != float64(42) {
		t.Fatalf("claims %v", claims)
	}
}

func TestServiceTokenRefusals(t *testing.T) {
	tests := map[string][]string{
		"secret and secret-env": {"--secret", "a", "--secret-env", "HOME"},
		"unset secret-env":      {"--secret-env", "SERVICEGATE_TEST_UNSET_VARIABLE"},
		"empty secret":          {"--secret", ""},
		"bad lifetime":          {"--lifetime", "soon"},
		"tiny lifetime":         {"--lifetime", "1ms"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			code, err := runServiceToken(parsedFlags(t, serviceTokenFlags(), args...), &out)
			if err == nil || code == 0 || out.Len() != 0 {
				t.Fatalf("exit %d, err %v, stdout %q", code, err, out.String())
			}
		})
	}
}

func TestServiceTokenAcceptedByTheEmulator(t *testing.T) {
	var out bytes.Buffer
	if _, err := runServiceToken(parsedFlags(t, serviceTokenFlags()), &out); err != nil {
		t.Fatal(err)
	}
	srv, err := emulator.New(emulator.Config{ClientID: "demo-client", ClientSecret: "demo-client-secret",
		RedirectURIs:  []string{"http://localhost:8080/callback"},
		Organizations: []emulator.Organization{{Domain: "acme.example", ID: 1, ActiveUntil: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/api/v2/applications/demo-app/subscription", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(out.String()))
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("emulator answered %d %s", rec.Code, rec.Body)
	}
}

// webhookApp is an app that checks deliveries with crypto/hmac itself.
type webhookApp struct {
	mu      sync.Mutex
	secret  string
	status  int // answered to a good delivery
	body    []byte
	headers http.Header
}

func (a *webhookApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.body, a.headers = body, r.Header.Clone()
	a.mu.Unlock()
	mac := hmac.New(sha256.New, []byte(a.secret))
	mac.Write(body)
	got, err := hex.DecodeString(r.Header.Get("X-Service-Signature"))
	if err != nil || !hmac.Equal(got, mac.Sum(nil)) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"message":"bad signature"}}`)
		return
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, `{"received":true}`)
}

func TestServiceWebhookSendsSignedDelivery(t *testing.T) {
	app := &webhookApp{secret: "demo-app-secret", status: http.StatusOK}
	srv := httptest.NewServer(app)
	defer srv.Close()

	var out bytes.Buffer
	code, err := runServiceWebhook(parsedFlags(t, serviceWebhookFlags(), "--url", srv.URL+"/webhooks"), &out)
	if err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	if out.String() != "200 OK\n{\"received\":true}\n" {
		t.Fatalf("stdout %q", out.String())
	}
	want := `{"events":[{"event":"project.translated","project":{"id":"1"},"targetLanguage":{"id":"uk"}}]}`
	if string(app.body) != want {
		t.Fatalf("body %s, want %s", app.body, want)
	}
	for k, v := range map[string]string{"User-Agent": "Service-Webhook", "Content-Type": "application/json",
		"X-Service-Id": "1", "X-Service-Domain": "acme.example", "X-Module-Key": "events-hook"} {
		if got := app.headers.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
}

func TestServiceWebhookFlagsAndAnswers(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "delivery.json")
	fileBody := `{"events":[{"event":"file.approved","project":{"id":"5"}}]}`
	if err := os.WriteFile(file, []byte(fileBody), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		secret   string // the app's
		status   int    // the app's answer to a good delivery
		args     []string
		exitZero bool
		stdout   string
		body     string // what the app received, when checked
	}{
		{"tampered", "demo-app-secret", 200, []string{"--tamper"}, false, "401 Unauthorized\n", ""},
		{"wrong secret", "other", 200, nil, false, "401 Unauthorized\n", ""},
		{"custom secret and headers", "s2", 202,
			[]string{"--secret", "s2", "--domain", "b.example", "--organization-id", "9", "--module-key", "k2",
				"--event", "project.approved", "--project", "12", "--target-language", "de"}, true, "202 Accepted\n",
			`{"events":[{"event":"project.approved","project":{"id":"12"},"targetLanguage":{"id":"de"}}]}`},
		{"body file", "demo-app-secret", 200, []string{"--body", file}, true, "200 OK\n", fileBody},
		{"app error", "demo-app-secret", 500, nil, false, "500 Internal Server Error\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := &webhookApp{secret: tt.secret, status: tt.status}
			srv := httptest.NewServer(app)
			defer srv.Close()
			var out bytes.Buffer
			code, err := runServiceWebhook(parsedFlags(t, serviceWebhookFlags(), append([]string{"--url", srv.URL}, tt.args...)...), &out)
			// A refusal is an answer, printed on stdout, not an error.
			if (code == 0) != tt.exitZero || err != nil {
				t.Fatalf("exit %d, err %v", code, err)
			}
			// The demo secret refused: say to pass the app's; a tampered
			// delivery is meant to be refused.
			hinted := strings.Contains(out.String(), "signed with the demo app secret. Pass the app's secret with --secret-env NAME (or --secret).")
			if hinted != (tt.name == "wrong secret") {
				t.Fatalf("stdout %q: hint to pass --secret shown %v", out.String(), hinted)
			}
			if !strings.HasPrefix(out.String(), tt.stdout) {
				t.Fatalf("stdout %q, want it to start with %q", out.String(), tt.stdout)
			}
			if tt.body != "" && string(app.body) != tt.body {
				t.Fatalf("app received %s, want %s", app.body, tt.body)
			}
			if tt.name == "custom secret and headers" &&
				(app.headers.Get("X-Service-Domain") != "b.example" || app.headers.Get("X-Service-Id") != "9" || app.headers.Get("X-Module-Key") != "k2") {
				t.Fatalf("headers %v", app.headers)
			}
		})
	}
}

func TestServiceWebhookRefusals(t *testing.T) {
	tests := map[string][]string{
		"no url":       nil,
		"missing body": {"--url", "http://127.0.0.1:1/", "--body", filepath.Join(t.TempDir(), "none.json")},
		"bad timeout":  {"--url", "http://127.0.0.1:1/", "--timeout", "x"},
		"unreachable":  {"--url", "http://127.0.0.1:1/", "--timeout", "2s"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			code, err := runServiceWebhook(parsedFlags(t, serviceWebhookFlags(), args...), &out)
			if err == nil || code == 0 || out.Len() != 0 {
				t.Fatalf("exit %d, err %v, stdout %q", code, err, out.String())
			}
		})
	}
}
