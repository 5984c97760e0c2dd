package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/servicegate/servicegate/cluster/redistest"
)

// appHealthAnswer is the JSON of a health check, as a probe reads it.
type appHealthAnswer struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
	Checks struct {
		Descriptor *struct {
			State      string   `json:"state"`
			AgeSeconds *float64 `json:"age_seconds"`
		} `json:"descriptor"`
		Redis *struct {
			State   string `json:"state"`
			Address string `json:"address"`
		} `json:"redis"`
		Queues []struct {
			Where    string `json:"where"`
			Writable bool   `json:"writable"`
			Depth    int    `json:"depth"`
		} `json:"queues"`
	} `json:"checks"`
}

// probe asks url for the health check, as a load balancer does: no token.
func probe(t *testing.T, method, url string) (int, appHealthAnswer, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var a appHealthAnswer
	if method == http.MethodGet && resp.StatusCode != http.StatusMethodNotAllowed {
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("%d, not JSON: %s", resp.StatusCode, body)
		}
		if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control %q", cc)
		}
	}
	return resp.StatusCode, a, string(body)
}

func adminHealthURL() string { return fmt.Sprintf("http://localhost:%d/service/health", e2eAdminPort) }

// TestServiceAppHealthE2E: the demo's service_app answers its health
// check with no Caddyfile line and no token, shows its disk queue, keeps
// answering 200 on the last good copy of its descriptor (and says so), and
// answers the same through the admin API.
func TestServiceAppHealthE2E(t *testing.T) {
	app := newAppUpstream(t)
	var descriptorDown atomic.Bool
	front := newForwarder(t, app.URL, func(r *http.Request) bool {
		return r.URL.Path == "/manifest.json" && descriptorDown.Load()
	})
	dir := t.TempDir()
	sites := func() string {
		s := appSites(front+"/manifest.json", strings.TrimPrefix(app.URL, "http://"))
		return strings.Replace(s, "public /assets/*", "public /assets/*\n\t\twebhook {\n\t\t\tqueue {\n\t\t\t\tto "+app.URL+"\n\t\t\t\tdir "+dir+"\n\t\t\t}\n\t\t}", 1)
	}
	startCaddy(t, sites())

	status, a, body := probe(t, http.MethodGet, e2eURL(appDefaultHealthPath))
	if status != http.StatusOK || a.Status != "ok" || a.Reason != "" {
		t.Fatalf("demo: %d %s", status, body)
	}
	if d := a.Checks.Descriptor; d == nil || d.State != "read" || d.AgeSeconds == nil || *d.AgeSeconds > 60 {
		t.Errorf("descriptor: %s", body)
	}
	if a.Checks.Redis != nil {
		t.Errorf("Redis shown without the servicegate option: %s", body)
	}
	if len(a.Checks.Queues) != 1 || a.Checks.Queues[0].Where != dir || !a.Checks.Queues[0].Writable {
		t.Errorf("queues: %s", body)
	}
	if app.reached(appDefaultHealthPath) != 0 {
		t.Error("the health check reached the app")
	}
	if status, _, _ := probe(t, http.MethodHead, e2eURL(appDefaultHealthPath)); status != http.StatusOK {
		t.Errorf("HEAD: %d", status)
	}
	if status, _, body := probe(t, http.MethodPost, e2eURL(appDefaultHealthPath)); status != http.StatusMethodNotAllowed || !strings.Contains(body, `"message"`) {
		t.Errorf("POST: %d %s", status, body)
	}

	var admin struct {
		Status string `json:"status"`
		Apps   []struct {
			App    string `json:"app"`
			Path   string `json:"path"`
			Status string `json:"status"`
		} `json:"apps"`
	}
	status, _, body = probe(t, http.MethodPost, adminHealthURL()) // admin: POST refused
	if status != http.StatusMethodNotAllowed {
		t.Errorf("admin POST: %d %s", status, body)
	}
	resp, err := http.Get(adminHealthURL())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || json.Unmarshal(raw, &admin) != nil || admin.Status != "ok" ||
		len(admin.Apps) != 1 || admin.Apps[0].App != "demo-app" || admin.Apps[0].Path != appDefaultHealthPath {
		t.Errorf("admin: %d %s", resp.StatusCode, raw)
	}

	// The app cannot answer its descriptor at the next load (a changed
	// config, so that Caddy loads it): the last good copy serves, and the
	// health check says so.
	descriptorDown.Store(true)
	startCaddy(t, strings.Replace(sites(), "public /assets/*", "public /assets/* /favicon.ico", 1))
	status, a, body = probe(t, http.MethodGet, e2eURL(appDefaultHealthPath))
	if status != http.StatusOK || a.Checks.Descriptor == nil || a.Checks.Descriptor.State != "last_good" || a.Checks.Descriptor.AgeSeconds == nil {
		t.Errorf("on the last good copy: %d %s", status, body)
	}
}

// newForwarder is a proxy to upstream that answers 503 to the requests
// down reports, standing in for an app that cannot answer them just now.
func newForwarder(t *testing.T, upstream string, down func(*http.Request) bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down(r) {
			http.Error(w, "restarting", http.StatusServiceUnavailable)
			return
		}
		resp, err := http.Get(upstream + r.URL.RequestURI())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestServiceAppHealthRedisE2E: with the servicegate option, the health
// check pings Redis: 200 while it answers, 503 with the reason while it
// does not, and the Redis address without credentials.
func TestServiceAppHealthRedisE2E(t *testing.T) {
	srv := redistest.Start(t)
	// A Redis with a password, given in the URL: the answer must never
	// show it.
	const password = "s3cret-redis-password"
	requirePassword := func() {
		if _, err := srv.Do("CONFIG", "SET", "requirepass", password); err != nil {
			t.Fatal(err)
		}
	}
	requirePassword()
	url := strings.Replace(srv.URL(), "redis://", "redis://:"+password+"@", 1)
	app := newAppUpstream(t)
	startCaddyWithGlobal(t, "\tservicegate {\n\t\tredis "+url+"\n\t\ttimeout 500ms\n\t}",
		strings.Replace(appSites(app.URL+"/manifest.json", strings.TrimPrefix(app.URL, "http://")),
			"public /assets/*", "public /assets/*\n\t\tlimits {\n\t\t\tspill_key 0123456789abcdef-shared\n\t\t}", 1))

	status, a, body := probe(t, http.MethodGet, e2eURL(appDefaultHealthPath))
	if status != http.StatusOK || a.Checks.Redis == nil || a.Checks.Redis.State != "ok" || a.Checks.Redis.Address != srv.Addr {
		t.Fatalf("Redis up: %d %s", status, body)
	}
	if strings.Contains(body, password) {
		t.Errorf("the answer shows the Redis password: %s", body)
	}
	srv.Stop()
	status, a, body = probe(t, http.MethodGet, e2eURL(appDefaultHealthPath))
	if status != http.StatusServiceUnavailable || a.Status != "unavailable" || !strings.Contains(a.Reason, "Redis does not answer") ||
		a.Checks.Redis == nil || a.Checks.Redis.State != "unreachable" {
		t.Errorf("Redis down: %d %s", status, body)
	}
	if strings.Contains(body, "redis://") || strings.Contains(body, password) {
		t.Errorf("the answer quotes the Redis URL or its password: %s", body)
	}
	resp, err := http.Get(adminHealthURL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("admin with Redis down: %d", resp.StatusCode)
	}
	srv.Restart()
	requirePassword()
	if status, _, body := probe(t, http.MethodGet, e2eURL(appDefaultHealthPath)); status != http.StatusOK {
		t.Errorf("Redis back: %d %s", status, body)
	}
}

// TestServiceAppHealthPath: health <path> moves the check, health off
// removes it (the path then needs a token like any other).
func TestServiceAppHealthPath(t *testing.T) {
	app := newAppUpstream(t)
	sites := func(line string) string {
		return strings.Replace(appSites(app.URL+"/manifest.json", strings.TrimPrefix(app.URL, "http://")),
			"public /assets/*", "public /assets/*\n\t\t"+line, 1)
	}
	startCaddy(t, sites("health /healthz"))
	if status, _, body := probe(t, http.MethodGet, e2eURL("/healthz")); status != http.StatusOK {
		t.Errorf("/healthz: %d %s", status, body)
	}
	if status, _, _ := probe(t, http.MethodHead, e2eURL(appDefaultHealthPath)); status != http.StatusUnauthorized {
		t.Errorf("the default path once moved: %d, want 401", status)
	}
	startCaddy(t, sites("health off"))
	if status, _, _ := probe(t, http.MethodHead, e2eURL(appDefaultHealthPath)); status != http.StatusUnauthorized {
		t.Errorf("health off: %d, want 401", status)
	}
}

// TestServiceAppHealthRefusals: a health path that is not a path, or that
// is already one of the app's, stops the config with a message that says
// what to do; nothing of the refused app is left for the admin API.
func TestServiceAppHealthRefusals(t *testing.T) {
	if err := (&ServiceApp{Descriptor: "d", Health: "healthz"}).Validate(); err == nil || !strings.Contains(err.Error(), "health must be a path starting with /, or off") {
		t.Errorf("health healthz: %v", err)
	}
	path := appDescriptorFile(t)
	ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
	defer cancel()
	a := &ServiceApp{Descriptor: path, ClientID: "c", ClientSecret: "s", AppSecrets: []string{"w"}, Health: "/webhooks"}
	err := a.Provision(ctx)
	if err == nil {
		_ = a.Cleanup()
		t.Fatal("a health path on the webhook module's url provisioned")
	}
	if !strings.Contains(err.Error(), "the health check's path /webhooks is also a path of the app") {
		t.Errorf("error %q", err)
	}
	if _, ok := appHealth.Load(a); ok {
		t.Error("the refused app is left in the admin API's list")
	}
}
