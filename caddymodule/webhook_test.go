package caddymodule

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/servicegate/servicegate/limits"
	"github.com/servicegate/servicegate/webhook"
)

// hmacHex signs like the service, with the standard library only (not the
// package under test).
func hmacHex(secret string, body []byte) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func hmacBase64URL(secret string, body []byte) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(body)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

const (
	appSecret  = "app-secret-0123456789"
	nextSecret = "app-secret-rotated-9876"
)

var delivery = []byte(`{"events":[{"event":"project.translated","project":{"id":"42"}},{"event":"project.approved","project":{"id":"42"}}]}`)

// provisionWebhook provisions m in a fresh Caddy context, with its log
// going to an observer that keeps every entry.
func provisionWebhook(t testing.TB, m *ServiceWebhook) *observer.ObservedLogs {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := m.Provision(ctx); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	t.Cleanup(func() { _ = m.Cleanup() })
	core, logs := observer.New(zapcore.DebugLevel)
	m.logger = zap.New(core)
	if err := m.newHandler(); err != nil {
		t.Fatal(err)
	}
	return logs
}

// recordingApp is the app behind the handler: it records what reached it.
type recordingApp struct {
	calls  int
	body   []byte
	header http.Header
	length int64
}

func (a *recordingApp) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	a.calls++
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	_ = r.Body.Close()
	a.body, a.header, a.length = body, r.Header.Clone(), r.ContentLength
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func counterValue(t testing.TB, outcome webhook.Outcome) float64 {
	t.Helper()
	var m dto.Metric
	if err := webhookDeliveries.WithLabelValues(outcome.String()).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// opaque hides a reader's type so httptest.NewRequest leaves the length
// unknown, as for a chunked upload.
type opaque struct{ io.Reader }

func TestWebhookServeHTTP(t *testing.T) {
	tampered := bytes.Replace(delivery, []byte("42"), []byte("43"), 1)
	big := bytes.Repeat([]byte("x"), 2048)
	other := []byte(`{"events":[{"event":"project.deleted"}]}`)
	tests := []struct {
		name       string
		config     ServiceWebhook
		body       []byte
		unknownLen bool // sent without Content-Length
		header     map[string][]string
		status     int
		outcome    webhook.Outcome
	}{
		{"hex signature", ServiceWebhook{Secrets: []string{appSecret}}, delivery, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, delivery)}}, 204, webhook.Accepted},
		{"base64url with prefix, unknown length", ServiceWebhook{Secrets: []string{appSecret}}, delivery, true,
			map[string][]string{"X-Service-Signature": {"sha256=" + hmacBase64URL(appSecret, delivery)}}, 204, webhook.Accepted},
		{"rotation: the new secret", ServiceWebhook{Secrets: []string{appSecret, nextSecret}}, delivery, false,
			map[string][]string{"X-Service-Signature": {hmacHex(nextSecret, delivery)}}, 204, webhook.Accepted},
		{"empty body signed", ServiceWebhook{Secrets: []string{appSecret}}, nil, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, nil)}}, 204, webhook.Accepted},
		{"missing signature", ServiceWebhook{Secrets: []string{appSecret}}, delivery, false,
			nil, 401, webhook.MissingSignature},
		{"empty signature", ServiceWebhook{Secrets: []string{appSecret}}, delivery, false,
			map[string][]string{"X-Service-Signature": {""}}, 401, webhook.MissingSignature},
		{"malformed signature", ServiceWebhook{Secrets: []string{appSecret}}, delivery, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, delivery)[:40]}}, 401, webhook.BadSignature},
		{"repeated signature header", ServiceWebhook{Secrets: []string{appSecret}}, delivery, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, delivery), hmacHex(appSecret, delivery)}}, 401, webhook.BadSignature},
		{"tampered body", ServiceWebhook{Secrets: []string{appSecret}}, tampered, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, delivery)}}, 401, webhook.BadSignature},
		{"unknown secret", ServiceWebhook{Secrets: []string{appSecret}}, delivery, false,
			map[string][]string{"X-Service-Signature": {hmacHex("guess", delivery)}}, 401, webhook.BadSignature},
		{"repeated organization header", ServiceWebhook{Secrets: []string{appSecret}}, delivery, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, delivery)}, "X-Service-Id": {"1", "2"}}, 401, webhook.BadSignature},
		{"over max_size by Content-Length", ServiceWebhook{Secrets: []string{appSecret}, MaxSize: 1024}, big, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, big)}}, 413, webhook.TooLarge},
		{"over max_size while reading", ServiceWebhook{Secrets: []string{appSecret}, MaxSize: 1024}, big, true,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, big)}}, 413, webhook.TooLarge},
		{"size is checked before the signature", ServiceWebhook{Secrets: []string{appSecret}, MaxSize: 1024}, big, false,
			nil, 413, webhook.TooLarge},
		{"exactly max_size", ServiceWebhook{Secrets: []string{appSecret}, MaxSize: 2048}, big, true,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, big)}}, 204, webhook.Accepted},
		{"module key allowed", ServiceWebhook{Secrets: []string{appSecret}, ModuleKeys: []string{"a", "events-hook"}}, delivery, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, delivery)}, "X-Module-Key": {"events-hook"}}, 204, webhook.Accepted},
		{"module key not allowed", ServiceWebhook{Secrets: []string{appSecret}, ModuleKeys: []string{"events-hook"}}, delivery, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, delivery)}, "X-Module-Key": {"other"}}, 403, webhook.Forbidden},
		{"module key missing", ServiceWebhook{Secrets: []string{appSecret}, ModuleKeys: []string{"events-hook"}}, delivery, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, delivery)}}, 403, webhook.Forbidden},
		{"module key repeated", ServiceWebhook{Secrets: []string{appSecret}, ModuleKeys: []string{"events-hook"}}, delivery, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, delivery)}, "X-Module-Key": {"events-hook", "events-hook"}}, 403, webhook.Forbidden},
		{"module key checked after the signature", ServiceWebhook{Secrets: []string{appSecret}, ModuleKeys: []string{"events-hook"}}, delivery, false,
			map[string][]string{"X-Service-Signature": {hmacHex("guess", delivery)}, "X-Module-Key": {"other"}}, 401, webhook.BadSignature},
		{"events allowed", ServiceWebhook{Secrets: []string{appSecret}, Events: []string{"project.translated", "project.approved"}}, delivery, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, delivery)}}, 204, webhook.Accepted},
		{"one event not allowed", ServiceWebhook{Secrets: []string{appSecret}, Events: []string{"project.translated"}}, delivery, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, delivery)}}, 403, webhook.Forbidden},
		{"event outside the list", ServiceWebhook{Secrets: []string{appSecret}, Events: []string{"project.translated"}}, other, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, other)}}, 403, webhook.Forbidden},
		{"events checked after the signature", ServiceWebhook{Secrets: []string{appSecret}, Events: []string{"x"}}, other, false,
			map[string][]string{"X-Service-Signature": {hmacHex("guess", other)}}, 401, webhook.BadSignature},
	}
	for _, shape := range []string{``, `[]`, `{}`, `{"events":null}`, `{"events":[]}`, `{"events":{}}`, `{"events":[1]}`,
		`{"events":[{}]}`, `{"events":[{"event":1}]}`, `{"events":[{"event":null}]}`, `{"events":[{"event":"project.translated"}]`, `not json`,
		// issue 13 #5: a Go app reads the events under "EVENTS" too.
		`{"events":[{"event":"project.translated"}],"EVENTS":[{"event":"project.deleted"}]}`,
		`{"events":[{"event":"project.translated","Event":"project.deleted"}]}`,
		`{"events":[{"event":"project.translated","x":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}]}`} {
		body := []byte(shape)
		tests = append(tests, struct {
			name       string
			config     ServiceWebhook
			body       []byte
			unknownLen bool
			header     map[string][]string
			status     int
			outcome    webhook.Outcome
		}{"bad shape " + shape, ServiceWebhook{Secrets: []string{appSecret}, Events: []string{"project.translated"}}, body, false,
			map[string][]string{"X-Service-Signature": {hmacHex(appSecret, body)}}, 400, webhook.BadBody})
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.config
			logs := provisionWebhook(t, &m)
			var body io.Reader = bytes.NewReader(tt.body)
			if tt.unknownLen {
				body = opaque{body}
			}
			req := httptest.NewRequest(http.MethodPost, "/webhooks", body)
			for k, vs := range tt.header {
				req.Header[k] = vs
			}
			req.Header.Set("X-Service-Domain", "acme")
			rec := httptest.NewRecorder()
			app := &recordingApp{}
			before := counterValue(t, tt.outcome)

			if err := m.ServeHTTP(rec, req, app); err != nil {
				t.Fatalf("ServeHTTP: %v", err)
			}
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tt.status, rec.Body)
			}
			if got := counterValue(t, tt.outcome) - before; got != 1 {
				t.Fatalf("outcome %s counted %v times, want 1", tt.outcome, got)
			}
			if tt.status != http.StatusNoContent {
				if app.calls != 0 {
					t.Fatal("the app saw a refused delivery")
				}
				var eb errorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Message == "" {
					t.Fatalf("refusal body %q is not {\"error\":{\"message\":…}}", rec.Body)
				}
				assertNoLeak(t, "refusal message", eb.Error.Message, tt.config.Secrets, tt.header, tt.body)
				assertSentence(t, eb.Error.Message)
			} else {
				if app.calls != 1 || !bytes.Equal(app.body, tt.body) {
					t.Fatalf("the app got %d calls and body %q, want the delivery byte for byte", app.calls, app.body)
				}
				if app.length != int64(len(tt.body)) {
					t.Fatalf("the app saw ContentLength %d, want %d", app.length, len(tt.body))
				}
				for k, vs := range tt.header {
					if got := app.header[k]; strings.Join(got, ",") != strings.Join(vs, ",") {
						t.Fatalf("the app got %s = %q, want %q", k, got, vs)
					}
				}
			}
			for _, e := range logs.All() {
				line, _ := json.Marshal(e.ContextMap())
				assertNoLeak(t, "log entry", e.Message+string(line), tt.config.Secrets, tt.header, tt.body)
			}
		})
	}
}

// assertNoLeak fails when text holds a secret, a signature or (a
// recognisable piece of) the body.
func assertNoLeak(t *testing.T, what, text string, secrets []string, header map[string][]string, body []byte) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Fatalf("%s holds a secret: %q", what, text)
		}
	}
	for _, sig := range header["X-Service-Signature"] {
		if len(sig) >= 8 && strings.Contains(text, sig) {
			t.Fatalf("%s holds the signature: %q", what, text)
		}
	}
	if len(body) >= 12 && strings.Contains(text, string(body[:12])) {
		t.Fatalf("%s holds the body: %q", what, text)
	}
}

func TestWebhookPerOrganizationSecrets(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secrets.json")
	writeFile(t, file, `{"acme": "acme-secret", "1234": ["id-old", "id-new"], "77": "acme-secret"}`)
	m := ServiceWebhook{Secrets: []string{appSecret}, SecretsFile: file}
	provisionWebhook(t, &m)

	const gone = "(removed)"
	tests := []struct {
		name, domain, id, secret string
		status                   int
		appDomain, appID         string // the headers the app sees; "" when not sent
	}{
		{"domain in the file", "acme", "", "acme-secret", 204, "acme", ""},
		{"domain in the file, app secret", "acme", "", appSecret, 401, "", ""},
		// Both headers listed under different secrets name two
		// organizations: refused once the signature passes (issue 13 #4;
		// this passed before, with the id of the other organization).
		{"domain and id of different organizations", "acme", "1234", "acme-secret", 403, "", ""},
		{"domain wins over id, id secret", "acme", "1234", "id-new", 401, "", ""},
		{"domain and id listed with the same secrets", "acme", "77", "acme-secret", 204, "acme", "77"},
		{"id not in the file is removed", "acme", "999", "acme-secret", 204, "acme", gone},
		{"id in the file, old secret", "", "1234", "id-old", 204, "", "1234"},
		{"id in the file, new secret", "", "1234", "id-new", 204, "", "1234"},
		{"unknown domain falls back to the app secret; the listed id is removed", "other", "1234", appSecret, 204, "other", gone},
		{"unknown domain does not use the id's secret", "other", "1234", "id-new", 401, "", ""},
		{"unknown domain and id keep the app secret", "other", "999", appSecret, 204, "other", "999"},
		{"no organization: app secret", "", "", appSecret, 204, "", ""},
		{"no organization: an organization's secret", "", "", "acme-secret", 401, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(delivery))
			req.Header.Set("X-Service-Signature", hmacHex(tt.secret, delivery))
			if tt.domain != "" {
				req.Header.Set("X-Service-Domain", tt.domain)
			}
			if tt.id != "" {
				req.Header.Set("X-Service-Id", tt.id)
			}
			rec := httptest.NewRecorder()
			app := &recordingApp{}
			if err := m.ServeHTTP(rec, req, app); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d", rec.Code, tt.status)
			}
			if tt.status != http.StatusNoContent {
				var eb errorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Message == "" {
					t.Fatalf("refusal body %q", rec.Body)
				}
				return
			}
			for header, want := range map[string]string{"X-Service-Domain": tt.appDomain, "X-Service-Id": tt.appID} {
				got, sent := app.header[header]
				switch {
				case want == gone && sent:
					t.Errorf("the app got the unverified %s %q", header, got)
				case want != gone && strings.Join(got, ",") != want:
					t.Errorf("the app got %s %q, want %q", header, got, want)
				}
			}
		})
	}
}

func TestWebhookOnlyFileSecrets(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secrets.json")
	writeFile(t, file, `{"acme": "acme-secret"}`)
	m := ServiceWebhook{SecretsFile: file}
	provisionWebhook(t, &m)
	for _, tt := range []struct {
		domain string
		status int
	}{{"acme", 204}, {"other", 401}, {"", 401}} {
		body := &readCounter{r: bytes.NewReader(delivery)}
		req := httptest.NewRequest(http.MethodPost, "/", body)
		req.Header.Set("X-Service-Signature", hmacHex("acme-secret", delivery))
		req.Header.Set("X-Service-Domain", tt.domain)
		rec := httptest.NewRecorder()
		if err := m.ServeHTTP(rec, req, &recordingApp{}); err != nil {
			t.Fatal(err)
		}
		if rec.Code != tt.status {
			t.Fatalf("domain %q: status %d, want %d", tt.domain, rec.Code, tt.status)
		}
		if tt.status == http.StatusUnauthorized && body.n != 0 {
			t.Fatalf("domain %q: the body of a delivery no secret can verify was read", tt.domain)
		}
	}
}

// readCounter counts the bytes read through it.
type readCounter struct {
	r io.Reader
	n int
}

func (c *readCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestSecretsFileWatchStopsOnCleanup(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secrets.json")
	writeFile(t, file, `{"acme": "first-secret"}`)
	m := ServiceWebhook{SecretsFile: file, SecretsPoll: caddy.Duration(10 * time.Millisecond)}
	provisionWebhook(t, &m)
	writeFile(t, file, `{"acme": "second-secret-longer"}`)
	deadline := time.Now().Add(5 * time.Second)
	for m.check.File.Lookup("acme").Verify(delivery, hmacHex("second-secret-longer", delivery)) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the watcher never reloaded the file")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := m.Cleanup(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.watching:
	default:
		t.Fatal("the watching goroutine still runs after Cleanup")
	}
}

func TestWebhookProvisionAndValidate(t *testing.T) {
	t.Setenv("SERVICEGATE_TEST_WEBHOOK_SECRET", appSecret)
	m := ServiceWebhook{Secrets: []string{"{env.SERVICEGATE_TEST_WEBHOOK_SECRET}"}}
	provisionWebhook(t, &m)
	if m.MaxSize != limits.DefaultMaxSize {
		t.Fatalf("default max_size %d", m.MaxSize)
	}
	if m.ReadTimeout != caddy.Duration(10*time.Second) {
		t.Fatalf("default read_timeout %s", time.Duration(m.ReadTimeout))
	}
	if err := m.check.AppWide.Verify(delivery, hmacHex(appSecret, delivery)); err != nil {
		t.Fatalf("the {env.*} secret was not resolved: %v", err)
	}

	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	unset := ServiceWebhook{Secrets: []string{"{env.SERVICEGATE_TEST_UNSET_VARIABLE}"}}
	if err := unset.Provision(ctx); err == nil || !strings.Contains(err.Error(), "empty once its placeholders are resolved") {
		t.Fatalf("an unset secret variable: %v", err)
	}
	missing := ServiceWebhook{SecretsFile: filepath.Join(t.TempDir(), "absent.json")}
	if err := missing.Provision(ctx); err == nil {
		t.Fatal("a missing secrets_file loaded")
	}

	for _, tt := range []struct {
		name string
		m    ServiceWebhook
	}{
		{"no secret", ServiceWebhook{}},
		{"negative size", ServiceWebhook{Secrets: []string{"s"}, MaxSize: -1}},
		{"negative read_timeout", ServiceWebhook{Secrets: []string{"s"}, ReadTimeout: -1}},
		{"empty module key", ServiceWebhook{Secrets: []string{"s"}, ModuleKeys: []string{""}}},
		{"empty event", ServiceWebhook{Secrets: []string{"s"}, Events: []string{""}}},
	} {
		if err := tt.m.Validate(); err == nil {
			t.Errorf("%s: Validate passed", tt.name)
		}
	}
}

func TestWebhookUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		name, input string
		want        ServiceWebhook
		err         bool
	}{
		{"full", `service_webhook {
			secret {env.A} {env.B}
			secret third
			secrets_file /etc/app/secrets.json
			secrets_poll 500ms
			module_key events-hook
			module_key other-hook
			events project.translated project.approved
			events file.added
			max_size 1MiB
			read_timeout 30s
		}`, ServiceWebhook{
			Secrets:     []string{"{env.A}", "{env.B}", "third"},
			SecretsFile: "/etc/app/secrets.json",
			SecretsPoll: caddy.Duration(500 * time.Millisecond),
			ModuleKeys:  []string{"events-hook", "other-hook"},
			Events:      []string{"project.translated", "project.approved", "file.added"},
			MaxSize:     1 << 20,
			ReadTimeout: caddy.Duration(30 * time.Second),
		}, false},
		{"max_size in MB", "service_webhook {\nsecret s\nmax_size 5MB\n}", ServiceWebhook{Secrets: []string{"s"}, MaxSize: 5_000_000}, false},
		{"argument on the directive line", "service_webhook s", ServiceWebhook{}, true},
		{"secret without value", "service_webhook {\nsecret\n}", ServiceWebhook{}, true},
		{"secrets_file twice", "service_webhook {\nsecrets_file a\nsecrets_file b\n}", ServiceWebhook{}, true},
		{"secrets_file two paths", "service_webhook {\nsecrets_file a b\n}", ServiceWebhook{}, true},
		{"bad poll", "service_webhook {\nsecrets_poll soon\n}", ServiceWebhook{}, true},
		{"zero poll", "service_webhook {\nsecrets_poll 0s\n}", ServiceWebhook{}, true},
		{"module_key without value", "service_webhook {\nmodule_key\n}", ServiceWebhook{}, true},
		{"events without value", "service_webhook {\nevents\n}", ServiceWebhook{}, true},
		{"bad size", "service_webhook {\nmax_size lots\n}", ServiceWebhook{}, true},
		{"zero size", "service_webhook {\nmax_size 0\n}", ServiceWebhook{}, true},
		{"bad read_timeout", "service_webhook {\nread_timeout slow\n}", ServiceWebhook{}, true},
		{"zero read_timeout", "service_webhook {\nread_timeout 0s\n}", ServiceWebhook{}, true},
		{"read_timeout without value", "service_webhook {\nread_timeout\n}", ServiceWebhook{}, true},
		{"unknown option", "service_webhook {\nsecret s\nsignature_header X\n}", ServiceWebhook{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got ServiceWebhook
			err := got.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input))
			if tt.err {
				if err == nil {
					t.Fatalf("parsed without error: %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(tt.want)
			if !bytes.Equal(gotJSON, wantJSON) {
				t.Fatalf("got %s\nwant %s", gotJSON, wantJSON)
			}
		})
	}
}

func TestWebhookRefusalWithErrorRoutes(t *testing.T) {
	m := ServiceWebhook{Secrets: []string{appSecret}}
	provisionWebhook(t, &m)
	srv := &caddyhttp.Server{Errors: &caddyhttp.HTTPErrorConfig{Routes: caddyhttp.RouteList{{}}}}
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(delivery))
	req = req.WithContext(context.WithValue(req.Context(), caddyhttp.ServerCtxKey, srv))
	err := m.ServeHTTP(httptest.NewRecorder(), req, &recordingApp{})
	var he caddyhttp.HandlerError
	if !errors.As(err, &he) || he.StatusCode != http.StatusUnauthorized {
		t.Fatalf("got %v, want a 401 handler error", err)
	}
}

// BenchmarkWebhookHandler1KiB is one accepted 1 KiB delivery through the
// handler to an app that reads and closes the body, as reverse_proxy does.
func BenchmarkWebhookHandler1KiB(b *testing.B) {
	benchmarkHandler(b, ServiceWebhook{Secrets: []string{appSecret}, ModuleKeys: []string{"events-hook"}})
}

// BenchmarkWebhookHandler1KiBEvents adds the events allow-list, which
// parses the body.
func BenchmarkWebhookHandler1KiBEvents(b *testing.B) {
	benchmarkHandler(b, ServiceWebhook{Secrets: []string{appSecret}, ModuleKeys: []string{"events-hook"},
		Events: []string{"project.translated", "project.approved"}})
}

// BenchmarkWebhookHandler5MiB is one accepted 5 MiB delivery: its B/op is
// the one copy of the body the handler holds (too large to be pooled).
func BenchmarkWebhookHandler5MiB(b *testing.B) {
	benchmarkHandlerBody(b, ServiceWebhook{Secrets: []string{appSecret}, ModuleKeys: []string{"events-hook"}},
		bytes.Repeat([]byte{'x'}, limits.DefaultMaxSize))
}

func benchmarkHandler(b *testing.B, m ServiceWebhook) {
	benchmarkHandlerBody(b, m, oneKiBDelivery())
}

func benchmarkHandlerBody(b *testing.B, m ServiceWebhook, body []byte) {
	provisionWebhook(b, &m)
	m.logger = zap.NewNop()
	if err := m.newHandler(); err != nil {
		b.Fatal(err)
	}
	sig := hmacHex(appSecret, body)
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		_, err := io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
		return err
	})
	w := &statusWriter{header: http.Header{}}
	req := httptest.NewRequest(http.MethodPost, "/webhooks", nil)
	req.Header.Set("X-Service-Signature", sig)
	req.Header.Set("X-Module-Key", "events-hook")
	req.Header.Set("X-Service-Domain", "acme")
	src := bytes.NewReader(body)
	rc := io.NopCloser(src)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(body)
		req.Body, req.ContentLength = rc, int64(len(body))
		if err := m.ServeHTTP(w, req, next); err != nil || w.code != 0 {
			b.Fatalf("delivery refused: %v, status %d", err, w.code)
		}
	}
}

// oneKiBDelivery is a realistic delivery of 1 KiB.
func oneKiBDelivery() []byte {
	const event = `{"event":"project.translated","project":{"id":"42","identifier":"acme-site"},"targetLanguage":{"id":"de"}}`
	b := []byte(`{"events":[` + event)
	for len(b)+1+len(event)+2 <= 1024 {
		b = append(b, ',')
		b = append(b, event...)
	}
	b = append(b, "]}"...)
	for len(b) < 1024 {
		b = append(b, ' ')
	}
	if len(b) != 1024 || !json.Valid(b) {
		panic("oneKiBDelivery: not 1 KiB of JSON")
	}
	return b
}

// statusWriter records the status of the last answer, for benchmarks that
// must check every round without the cost of a recorder.
type statusWriter struct {
	header http.Header
	code   int
}

func (w *statusWriter) Header() http.Header         { return w.header }
func (w *statusWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *statusWriter) WriteHeader(code int)        { w.code = code }

func TestWebhookTooLargeNamesTheLimit(t *testing.T) {
	m := ServiceWebhook{Secrets: []string{appSecret}, MaxSize: 1024}
	provisionWebhook(t, &m)
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(make([]byte, 2048)))
	req.Header.Set("X-Service-Signature", hmacHex(appSecret, make([]byte, 2048)))
	rec := httptest.NewRecorder()
	if err := m.ServeHTTP(rec, req, &recordingApp{}); err != nil {
		t.Fatal(err)
	}
	var eb errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if want := "The delivery is larger than the 1 KB this endpoint accepts."; eb.Error.Message != want {
		t.Fatalf("message %q, want %q", eb.Error.Message, want)
	}
}

// A body nested too deeply is told as such, not as "not JSON".
func TestWebhookTooDeepSaysSo(t *testing.T) {
	m := ServiceWebhook{Secrets: []string{appSecret}, Events: []string{"project.translated"}}
	provisionWebhook(t, &m)
	body := []byte(`{"events":[{"event":"project.translated","x":` + strings.Repeat("[", 100000) + `}]}`)
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set("X-Service-Signature", hmacHex(appSecret, body))
	rec := httptest.NewRecorder()
	if err := m.ServeHTTP(rec, req, &recordingApp{}); err != nil {
		t.Fatal(err)
	}
	var eb errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || rec.Code != http.StatusBadRequest || !strings.Contains(eb.Error.Message, "too deeply nested") {
		t.Fatalf("%d %s, want 400 saying too deeply nested", rec.Code, rec.Body)
	}
}
