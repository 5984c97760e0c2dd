package caddymodule

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegate/servicegate/emulator"
)

// TestServiceAppRefusesPatternURLs: a module url with pattern characters
// (a wildcard that would become a prefix route skipping the token check,
// a query, an encoding, whitespace) is refused by `caddy service-app
// check`, by the Caddyfile adapter and at provision, naming the module.
func TestServiceAppRefusesPatternURLs(t *testing.T) {
	for url, want := range map[string]string{
		"/*":      `url "/*" has a wildcard`,
		"/api/*":  `url "/api/*" has a wildcard`,
		"/w?x=1":  "has a query",
		"/w%2e":   "percent-encoding",
		"/w x":    "whitespace",
		"/a/../w": `".."`,
	} {
		t.Run(url, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "manifest.json")
			doc := `{"modules":{"webhook":[{"key":"hook","url":"` + url + `","events":["e"]}]}}`
			if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			wants := []string{want, `(key "hook")`}
			var out bytes.Buffer
			if code, err := runServiceAppCheck(path, &out); code != 1 || err != nil || !containsAll(out.String(), wants) {
				t.Errorf("check: %d %v\n%s", code, err, out.String())
			}
			if _, err := adaptCaddyfile(t, "localhost {\n\tservice_app {\n\t\tdescriptor "+path+"\n\t\tclient_id c\n\t\tclient_secret s\n\t\tapp_secret w\n\t}\n}\n"); err == nil || !containsAll(err.Error(), append(wants, "Caddyfile:2")) {
				t.Errorf("adapt: %v", err)
			}
			app := &ServiceApp{Descriptor: path, ClientID: "c", ClientSecret: "s", AppSecrets: []string{"w"}}
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			if err := app.Provision(ctx); err == nil || !containsAll(err.Error(), wants) {
				t.Errorf("provision: %v", err)
				_ = app.Cleanup()
			}
		})
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// rawRequest sends one request with target written as it is on the
// request line, so that no client cleans or re-encodes the path, and
// returns the answer's status and body.
func rawRequest(t *testing.T, method, target string, header map[string]string, body string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", e2eHTTPPort), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: localhost:%d\r\nConnection: close\r\nContent-Length: %d\r\n", method, target, e2eHTTPPort, len(body))
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n" + body)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s: no answer: %v", method, target, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// requests lists the requests that reached the app, but for its
// descriptor, which service_app reads.
func (u *appUpstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, s := range u.seen {
		if !strings.HasSuffix(s, " /manifest.json") {
			out = append(out, s)
		}
	}
	return out
}

// appUserToken is a token of a member of the paid organization of
// appSites.
func appUserToken(t *testing.T) string {
	t.Helper()
	tok, err := emulator.MintToken("demo-client-secret", emulator.Token{
		Issuer: "service-emulator", Audience: "demo-client", UserID: 7, OrganizationID: 1, Domain: "acme.example", Lifetime: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestServiceAppModuleSpellingsE2E: every spelling of a module url that a
// case-insensitive or lenient router takes for it (another case, a
// trailing or doubled slash, a ;param, an encoded letter) gets the
// module's checks, even with a user's token, and a delivery that passes
// them reaches the app at the url the descriptor declares.
func TestServiceAppModuleSpellingsE2E(t *testing.T) {
	app := newAppUpstream(t)
	startCaddy(t, appSites(app.URL+"/manifest.json", strings.TrimPrefix(app.URL, "http://")))
	bearer := map[string]string{"Authorization": "Bearer " + appUserToken(t), "Content-Type": "application/json"}
	delivery := `{"events":[{"event":"project.translated"}]}`
	for _, target := range []string{"/Webhooks", "/WEBHOOKS", "/webhooks/", "//webhooks", "/webhooks;jsessionid=1", "/webhooks;", "/%77ebhooks", "/%2577ebhooks", "/webhooks%3bx", "/webhooks%20", "/Webhooks/?x=1"} {
		status, body := rawRequest(t, "POST", target, bearer, delivery)
		if status != http.StatusUnauthorized || !strings.Contains(body, "not signed") {
			t.Errorf("POST %s with a user token and no signature: %d %s, want the webhook's 401", target, status, body)
		}
	}
	for _, target := range []string{"/Pre-Export", "/pre-export/", "/pre-export;v=2", "/PRE-EXPORT//"} {
		if status, body := rawRequest(t, "POST", target, bearer, `{"jobType":"parse-file"}`); status != http.StatusBadRequest {
			t.Errorf("POST %s, a job outside the module contract: %d %s, want the contract's 400", target, status, body)
		}
	}
	for _, p := range []string{"/webhooks", "/pre-export"} {
		if n := app.reached(p); n != 0 {
			t.Errorf("%d unchecked requests reached the app at %s", n, p)
		}
	}
	if seen := app.requests(); len(seen) > 0 {
		t.Errorf("requests reached the app: %v", seen)
	}

	// A signed delivery by another spelling passes, and the app gets the
	// declared url.
	sig := hmacHex("demo-app-secret", []byte(delivery))
	status, body := rawRequest(t, "POST", "/Webhooks/", map[string]string{"X-Service-Signature": sig, "X-Module-Key": "events-hook",
		"X-Service-Domain": "acme.example", "X-Service-Id": "1", "Content-Type": "application/json"}, delivery)
	if status != 200 || app.reached("/webhooks") != 1 {
		t.Errorf("a signed delivery to /Webhooks/: %d %s; the app saw %v", status, body, app.seen)
	}
}

// TestServiceAppTraversalE2E: a path that a decoder behind the gateway
// could read as leaving a public prefix (or any segment) is refused with
// 400 and a message, whatever its spelling, and never reaches the app.
func TestServiceAppTraversalE2E(t *testing.T) {
	app := newAppUpstream(t)
	startCaddy(t, appSites(app.URL+"/manifest.json", strings.TrimPrefix(app.URL, "http://")))
	for _, target := range []string{
		"/assets/..;/api/whoami", "/assets/..;x=1/api/whoami", "/assets/.;/../api/whoami", "/assets/%2e%2e/api/whoami",
		"/assets/%2E%2e;/api/whoami", "/assets/.%2e/api/whoami", "/assets/%252e%252e/api/whoami", "/assets/..%3b/api/whoami",
		"/assets/..%253B/api/whoami", "/assets/..%5capi/whoami", "/assets/%5c..%5capi%5cwhoami", "/assets\\..\\api\\whoami",
		"/assets/..\\api/whoami", "/assets/..%2fapi%2fwhoami", "/assets/..%252fapi/whoami", "/assets/%c0%ae%c0%ae/api/whoami",
		"/assets/.../api/whoami", "/assets/..%20/api/whoami", "/assets/../api/whoami", "/assets/x/../../api/whoami",
	} {
		status, body := rawRequest(t, "GET", target, nil, "")
		if status != http.StatusBadRequest || !strings.Contains(body, `{"error":{"message":"The request path is not accepted`) {
			t.Errorf("GET %s: %d %s, want 400 with a message", target, status, body)
		}
	}
	if seen := app.requests(); len(seen) > 0 {
		t.Errorf("refused paths reached the app: %v", seen)
	}
	if status, body := rawRequest(t, "GET", "/assets/app.css", nil, ""); status != 200 || body != "the app: /assets/app.css" {
		t.Errorf("a public path: %d %s", status, body)
	}
}

// TestServiceAppWithoutUpstreamWarnsAtAdapt: a site with service_app and
// nothing to pass requests on to is a warning of the Caddyfile adapter,
// naming the file and line; with reverse_proxy there is none.
func TestServiceAppWithoutUpstreamWarnsAtAdapt(t *testing.T) {
	path := appDescriptorFile(t)
	// The secrets from the environment: written out, they are warned about.
	block := "\tservice_app {\n\t\tdescriptor " + path + "\n\t\tclient_id c\n\t\tclient_secret {env.CLIENT_SECRET}\n\t\tapp_secret {env.APP_SECRET}\n\t}\n"
	adapter := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}
	_, warnings, err := adapter.Adapt([]byte("localhost {\n"+block+"}\n"), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range warnings {
		found = found || (strings.Contains(w.Message, "add reverse_proxy") && w.File == "Caddyfile" && w.Line == 2 && w.Directive == "service_app")
	}
	if !found {
		t.Errorf("no warning naming the missing reverse_proxy at Caddyfile:2: %+v", warnings)
	}
	for _, rest := range []string{"\treverse_proxy 127.0.0.1:3000\n", "\thandle {\n\t\treverse_proxy 127.0.0.1:3000\n\t}\n"} {
		_, warnings, err = adapter.Adapt([]byte("localhost {\n"+block+rest+"}\n"), map[string]any{"filename": "Caddyfile"})
		if err != nil || len(warnings) != 0 {
			t.Errorf("with %q: %v %+v", rest, err, warnings)
		}
	}
}

// TestServiceAppWithoutUpstreamE2E: with nothing behind service_app, a
// request that passes its checks (a signed delivery, a file job, a page
// with a token, a public path) is answered 502 with a message naming the
// missing reverse_proxy, never acknowledged with Caddy's empty 200.
func TestServiceAppWithoutUpstreamE2E(t *testing.T) {
	path := appDescriptorFile(t)
	startCaddy(t, `
http://127.0.0.1:{port} {
	service_emulator {
		client_id demo-client
		client_secret demo-client-secret
		redirect_uri http://localhost:{port}/oauth/callback
		organization acme.example {
			id 1
			active_until "2099-01-01 00:00:00"
		}
	}
}

http://localhost:{port} {
	service_app {
		descriptor `+path+`
		client_id demo-client
		client_secret demo-client-secret
		app_secret demo-app-secret
		service http://127.0.0.1:{port}
		subscription
		public /assets/*
	}
}
`)
	delivery := `{"events":[{"event":"project.translated"}]}`
	signed := map[string]string{"X-Service-Signature": hmacHex("demo-app-secret", []byte(delivery)), "X-Module-Key": "events-hook",
		"X-Service-Domain": "acme.example", "X-Service-Id": "1", "Content-Type": "application/json"}
	bearer := map[string]string{"Authorization": "Bearer " + appUserToken(t), "Content-Type": "application/json"}
	job := string(formatJob("parse-file", map[string]any{"file": map[string]any{"id": 1, "name": "a.kv", "content": b64([]byte("greeting = Hello\n"))}}))
	for name, c := range map[string]struct {
		method, path string
		header       map[string]string
		body         string
	}{
		"a signed delivery": {"POST", "/webhooks", signed, delivery},
		"a file job":        {"POST", "/file-format", nil, job},
		"a page":            {"GET", "/projects", bearer, ""},
		"a public path":     {"GET", "/assets/app.css", nil, ""},
	} {
		status, body := rawRequest(t, c.method, c.path, c.header, c.body)
		if status != http.StatusBadGateway || !strings.Contains(body, "no reverse_proxy to the app") {
			t.Errorf("%s: %d %s, want 502 naming the missing reverse_proxy", name, status, body)
		}
	}
	// Refusals stay what they are.
	if status, body := rawRequest(t, "GET", "/projects", nil, ""); status != http.StatusUnauthorized {
		t.Errorf("a page without a token: %d %s", status, body)
	}
}

// TestServiceAppAwaitsDescriptorE2E: in an orchestrated start, the
// gateway before the app, a descriptor address that does not answer does
// not stop Caddy: the site answers 503 with Retry-After and a message on
// every path, the metric says not ready, and once the app is up the site
// serves it within seconds.
func TestServiceAppAwaitsDescriptorE2E(t *testing.T) {
	port := freePort()
	// A query of its own, so that no last good copy of an earlier run is
	// found for the address.
	addr := fmt.Sprintf("http://127.0.0.1:%d/manifest.json?start=%d", port, time.Now().UnixNano())
	startCaddy(t, appSites(addr, fmt.Sprintf("127.0.0.1:%d", port)))
	ready := func() float64 { return descriptorGauge(t, "servicegate_app_descriptor_ready", addr) }
	token := map[string]string{"Authorization": "Bearer " + appUserToken(t)}
	for _, path := range []string{"/api/whoami", "/webhooks", "/assets/app.css", "/manifest.json", "/"} {
		status, body := rawRequest(t, "GET", path, token, "")
		if status != http.StatusServiceUnavailable || !strings.Contains(body, `{"error":{"message":"The app is starting`) {
			t.Errorf("GET %s while the app is down: %d %s", path, status, body)
		}
	}
	resp, body := get(t, &http.Client{Timeout: 10 * time.Second}, "/api/whoami", token)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("while the app is down: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if ready() != 0 {
		t.Errorf("servicegate_app_descriptor_ready = %v while the app is down", ready())
	}
	// The load balancer's probe learns why: the descriptor is not read.
	if status, body := rawRequest(t, "GET", appDefaultHealthPath, nil, ""); status != http.StatusServiceUnavailable ||
		!strings.Contains(body, `"state":"not_read"`) || !strings.Contains(body, `"status":"unavailable"`) {
		t.Errorf("the health check while the app is down: %d %s", status, body)
	}

	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Skipf("the app's port was taken meanwhile: %v", err)
	}
	app := newAppUpstreamOn(t, ln)
	started := time.Now()
	deadline := started.Add(10 * time.Second)
	for {
		status, body := rawRequest(t, "GET", "/api/whoami", token, "")
		if status == 200 && body == "the app: /api/whoami" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the site did not serve the app within 10 s of its start: %d %s", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the site served the app %v after its start", time.Since(started).Round(time.Millisecond))
	if ready := descriptorGauge(t, "servicegate_app_descriptor_ready", "demo-app"); ready != 1 {
		t.Errorf("servicegate_app_descriptor_ready = %v once the app is up", ready)
	}
	if status, body := rawRequest(t, "GET", appDefaultHealthPath, nil, ""); status != http.StatusOK || !strings.Contains(body, `"state":"read"`) {
		t.Errorf("the health check once the app is up: %d %s", status, body)
	}
	if status, _ := rawRequest(t, "POST", "/webhooks", token, "{}"); status != http.StatusUnauthorized || app.reached("/webhooks") != 0 {
		t.Errorf("the webhook's route after the start: %d", status)
	}
}

// TestServiceAppAwaitingStopsAtCleanup: the background read of a
// descriptor address ends with the config, and a file or an answer that
// is no descriptor still fails the load.
func TestServiceAppAwaitingStopsAtCleanup(t *testing.T) {
	before := runtime.NumGoroutine()
	app := &ServiceApp{Descriptor: fmt.Sprintf("http://127.0.0.1:%d/manifest.json?cleanup=%d", freePort(), time.Now().UnixNano()),
		ClientID: "c", ClientSecret: "s", AppSecrets: []string{"w"}}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := app.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if app.DescriptorReady() {
		t.Error("ready without a descriptor")
	}
	done := make(chan error, 1)
	go func() { done <- app.Cleanup() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Cleanup did not stop the background read")
	}
	for i := 0; runtime.NumGoroutine() > before && i < 50; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines left after Cleanup (%d before)", n, before)
	}

	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"modules":{"webhook":[{"key":"w","url":"/*"}]}}`)
	}))
	defer bad.Close()
	for _, source := range []string{filepath.Join(t.TempDir(), "none.json"), bad.URL + fmt.Sprintf("/manifest.json?bad=%d", time.Now().UnixNano())} {
		app := &ServiceApp{Descriptor: source, ClientID: "c", ClientSecret: "s", AppSecrets: []string{"w"}}
		if err := app.Provision(ctx); err == nil {
			_ = app.Cleanup()
			t.Errorf("%s: loaded", source)
		}
	}
}

// TestServiceAppQueuedWebhookWithoutUpstreamE2E: a queued webhook names
// its own destination (queue { to }), so without reverse_proxy a verified
// delivery is still stored, acknowledged 202 and delivered there, while a
// page is answered 502.
func TestServiceAppQueuedWebhookWithoutUpstreamE2E(t *testing.T) {
	app := newQueueApp(t)
	app.up(t)
	path := appDescriptorFile(t)
	startCaddy(t, `
localhost:{port} {
	service_app {
		descriptor `+path+`
		client_id demo-client
		client_secret demo-client-secret
		app_secret demo-app-secret
		webhook {
			queue {
				to http://`+app.addr+`
				dir `+t.TempDir()+`
			}
		}
	}
}
`)
	if status, body := sendQueued(t, "/webhooks", "acme.example", queuedDelivery(1)); status != http.StatusAccepted {
		t.Fatalf("a queued delivery: %d %s", status, body)
	}
	waitUntil(t, "the queued delivery to reach the app", func() bool { return app.total() == 1 })
	bearer := map[string]string{"Authorization": "Bearer " + appUserToken(t)}
	if status, body := rawRequest(t, "GET", "/projects", bearer, ""); status != http.StatusBadGateway {
		t.Errorf("a page: %d %s", status, body)
	}
}

// descriptorGauge is the value of the descriptor gauge name for app, or -1
// when there is none.
func descriptorGauge(t *testing.T, name, app string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(descriptorCollector)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "app" && l.GetValue() == app {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
