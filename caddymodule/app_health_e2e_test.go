package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/servicegate/servicegate/cluster/redistest"
	"github.com/servicegate/servicegate/emulator"
	"github.com/servicegate/servicegate/health"
	"github.com/servicegate/servicegate/installations"
)

// appHealthAnswer is the JSON of a health check, as a probe reads it:
// the status and each part's name and state, nothing else.
type appHealthAnswer struct {
	Status string `json:"status"`
	Checks []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"checks"`
}

// state is the state of the check called name, "" when there is none.
func (a appHealthAnswer) state(name string) string {
	for _, c := range a.Checks {
		if c.Name == name {
			return c.State
		}
	}
	return ""
}

// probe asks url for the health check, as a load balancer does: no token.
// A GET's answer must hold the status and each part's name and state, and
// no other field (no address, error, path or depth).
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
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			t.Fatalf("%d, not the public answer (%v): %s", resp.StatusCode, err, body)
		}
		if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control %q", cc)
		}
	}
	return resp.StatusCode, a, string(body)
}

func adminHealthURL() string { return fmt.Sprintf("http://localhost:%d/service/health", e2eAdminPort) }

// adminHealth is the admin API's report of every app, in full.
func adminHealth(t *testing.T) (int, health.RegistryReport, string) {
	t.Helper()
	resp, err := http.Get(adminHealthURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var rep health.RegistryReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("admin health %d, not JSON: %s", resp.StatusCode, raw)
	}
	return resp.StatusCode, rep, string(raw)
}

// adminCheck is the check called name of the only app of rep.
func adminCheck(t *testing.T, rep health.RegistryReport, name string) health.Check {
	t.Helper()
	if len(rep.Apps) != 1 {
		t.Fatalf("admin report of %d apps", len(rep.Apps))
	}
	for _, c := range rep.Apps[0].Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("admin report without a %s check: %+v", name, rep.Apps[0].Checks)
	return health.Check{}
}

// TestServiceAppHealthE2E: the demo's service_app answers its health
// check with no Caddyfile line and no token, names its disk queue's check
// without its directory, keeps answering 200 on the last good copy of its
// descriptor (degraded, and says so), and the admin API has the detail.
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
	if status != http.StatusOK || a.Status != "ok" || len(a.Checks) != 2 || a.state("descriptor") != "read" || a.state("webhook_queue") != "ok" {
		t.Fatalf("demo: %d %s", status, body)
	}
	if a.state("redis") != "" {
		t.Errorf("Redis shown without the servicegate option: %s", body)
	}
	if strings.Contains(body, dir) {
		t.Errorf("the public answer names the queue's directory: %s", body)
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

	status, _, body = probe(t, http.MethodPost, adminHealthURL()) // admin: POST refused
	if status != http.StatusMethodNotAllowed {
		t.Errorf("admin POST: %d %s", status, body)
	}
	status, rep, raw := adminHealth(t)
	if status != 200 || rep.Status != "ok" || len(rep.Apps) != 1 || rep.Apps[0].App != "demo-app" || rep.Apps[0].Path != appDefaultHealthPath {
		t.Fatalf("admin: %d %s", status, raw)
	}
	if d := adminCheck(t, rep, "descriptor"); d.State != "read" || d.AgeSeconds == nil || *d.AgeSeconds > 60 {
		t.Errorf("admin descriptor: %s", raw)
	}
	if q := adminCheck(t, rep, "webhook_queue"); q.Where != dir || q.Depth == nil || *q.Depth != 0 || q.Status != "ok" {
		t.Errorf("admin queue: %s", raw)
	}

	// The app cannot answer its descriptor at the next load (a changed
	// config, so that Caddy loads it): the last good copy serves, and the
	// health check says so, degraded but answering 200.
	descriptorDown.Store(true)
	startCaddy(t, strings.Replace(sites(), "public /assets/*", "public /assets/* /favicon.ico", 1))
	status, a, body = probe(t, http.MethodGet, e2eURL(appDefaultHealthPath))
	if status != http.StatusOK || a.Status != "degraded" || a.state("descriptor") != "last_good" {
		t.Errorf("on the last good copy: %d %s", status, body)
	}
	status, rep, raw = adminHealth(t)
	if d := adminCheck(t, rep, "descriptor"); status != http.StatusOK || rep.Status != "degraded" || d.AgeSeconds == nil || !strings.Contains(rep.Apps[0].Reason, "last good copy") {
		t.Errorf("admin on the last good copy: %d %s", status, raw)
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

// appSitesWith is appSites for app with more lines in service_app.
func appSitesWith(app *appUpstream, lines string) string {
	return strings.Replace(appSites(app.URL+"/manifest.json", strings.TrimPrefix(app.URL, "http://")),
		"public /assets/*", "public /assets/*\n\t\t"+lines, 1)
}

// redisGlobal is the servicegate option naming the Redis at url.
func redisGlobal(url string) string {
	return "\tservicegate {\n\t\tredis " + url + "\n\t\ttimeout 500ms\n\t}"
}

// sharedSpill is the service_app line that spills answers through Redis,
// which the servicegate option asks for.
const sharedSpill = "limits {\n\t\t\tspill_key 0123456789abcdef-shared\n\t\t}\n\t\t"

// TestServiceAppHealthRedisE2E: with the servicegate option, the health
// check pings Redis. With Redis stopped, an instance whose configuration
// keeps nothing only in Redis (subscription answers and spilled answers
// shared there, the webhook queue on disk) still serves: a delivery is
// queued (202), an API request is answered, and the check answers 200
// "degraded", so that a load balancer keeps the fleet that Redis' outage
// touches alike. The public answer names no address, error or path; the
// admin API has them, without the Redis password.
func TestServiceAppHealthRedisE2E(t *testing.T) {
	srv := redistest.Start(t)
	// A Redis with a password, given in the URL: no answer may show it.
	const password = "s3cret-redis-password"
	requirePassword := func() {
		if _, err := srv.Do("CONFIG", "SET", "requirepass", password); err != nil {
			t.Fatal(err)
		}
	}
	requirePassword()
	url := strings.Replace(srv.URL(), "redis://", "redis://:"+password+"@", 1)
	app := newAppUpstream(t)
	dir := t.TempDir()
	startCaddyWithGlobal(t, redisGlobal(url), appSitesWith(app,
		sharedSpill+"webhook {\n\t\t\tqueue {\n\t\t\t\tto "+app.URL+"\n\t\t\t\tstore disk\n\t\t\t\tdir "+dir+"\n\t\t\t}\n\t\t}"))

	status, a, body := probe(t, http.MethodGet, e2eURL(appDefaultHealthPath))
	if status != http.StatusOK || a.Status != "ok" || a.state("redis") != "ok" || a.state("webhook_queue") != "ok" {
		t.Fatalf("Redis up: %d %s", status, body)
	}
	status, rep, raw := adminHealth(t)
	if r := adminCheck(t, rep, "redis"); status != http.StatusOK || r.Address != srv.Addr {
		t.Errorf("admin, Redis up: %d %s", status, raw)
	}
	if strings.Contains(raw, password) {
		t.Errorf("the admin API shows the Redis password: %s", raw)
	}

	srv.Stop()
	status, a, body = probe(t, http.MethodGet, e2eURL(appDefaultHealthPath))
	if status != http.StatusOK || a.Status != "degraded" || a.state("redis") != "unreachable" ||
		a.state("webhook_queue") != "ok" || a.state("descriptor") != "read" {
		t.Errorf("Redis down, nothing kept only in Redis: %d %s", status, body)
	}
	for _, leak := range []string{srv.Addr, strconv.Itoa(srv.Port), dir, password, "redis://", "refused", "dial", "depth", "reason"} {
		if strings.Contains(body, leak) {
			t.Errorf("the public answer holds %q: %s", leak, body)
		}
	}
	// The instance serves: the health check says so rightly.
	if status, answer := sendQueued(t, "/webhooks", "acme.example", queuedDelivery(1)); status != http.StatusAccepted {
		t.Errorf("a delivery with Redis down: %d %s", status, answer)
	}
	tok, err := emulator.MintToken("demo-client-secret", emulator.Token{
		Issuer: "service-emulator", Audience: "demo-client", UserID: 7, OrganizationID: 1, Domain: "acme.example", Lifetime: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := request(t, noRedirects, "GET", "/api/whoami", map[string]string{"Authorization": "Bearer " + tok}, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("an API request with Redis down: %d %s", resp.StatusCode, body)
	}
	status, rep, raw = adminHealth(t)
	r := adminCheck(t, rep, "redis")
	if status != http.StatusOK || rep.Status != "degraded" || r.Status != "degraded" || r.Address != srv.Addr || r.Error == "" ||
		!strings.Contains(rep.Apps[0].Reason, "Redis does not answer") || adminCheck(t, rep, "webhook_queue").Where != dir {
		t.Errorf("admin, Redis down: %d %s", status, raw)
	}
	if strings.Contains(raw, password) || strings.Contains(raw, "redis://") {
		t.Errorf("the admin API quotes the Redis URL or its password: %s", raw)
	}

	srv.Restart()
	requirePassword()
	if status, a, body := probe(t, http.MethodGet, e2eURL(appDefaultHealthPath)); status != http.StatusOK || a.Status != "ok" {
		t.Errorf("Redis back: %d %s", status, body)
	}
}

// TestServiceAppHealthRedisQueueE2E: an instance whose webhook queue is
// kept only in Redis cannot take a delivery while Redis is stopped (the
// service gets 503 and sends it again): its health check answers 503, the
// queue unreachable; 200 again once Redis is back.
func TestServiceAppHealthRedisQueueE2E(t *testing.T) {
	srv := redistest.Start(t)
	app := newAppUpstream(t)
	startCaddyWithGlobal(t, redisGlobal(srv.URL()), appSitesWith(app, sharedSpill+"webhook {\n\t\t\tqueue {\n\t\t\t\tto "+app.URL+"\n\t\t\t}\n\t\t}"))
	if status, a, body := probe(t, http.MethodGet, e2eURL(appDefaultHealthPath)); status != http.StatusOK || a.state("webhook_queue") != "ok" {
		t.Fatalf("Redis up: %d %s", status, body)
	}
	srv.Stop()
	status, a, body := probe(t, http.MethodGet, e2eURL(appDefaultHealthPath))
	if status != http.StatusServiceUnavailable || a.Status != "unavailable" || a.state("webhook_queue") != "unreachable" || a.state("redis") != "unreachable" {
		t.Errorf("Redis down, the queue in Redis: %d %s", status, body)
	}
	if strings.Contains(body, srv.Addr) || strings.Contains(body, "servicegate:") {
		t.Errorf("the public answer names the queue's Redis: %s", body)
	}
	if status, answer := sendQueued(t, "/webhooks", "acme.example", queuedDelivery(1)); status != http.StatusServiceUnavailable {
		t.Errorf("a delivery with the queue's Redis down: %d %s, want 503", status, answer)
	}
	status, rep, raw := adminHealth(t)
	if q := adminCheck(t, rep, "webhook_queue"); status != http.StatusServiceUnavailable || q.Status != "unavailable" ||
		q.Where != "redis "+srv.Addr+" servicegate:{queue:"+app.URL+"}" || q.Error == "" {
		t.Errorf("admin, Redis down: %d %s", status, raw)
	}
	srv.Restart()
	if status, a, body := probe(t, http.MethodGet, e2eURL(appDefaultHealthPath)); status != http.StatusOK || a.Status != "ok" {
		t.Errorf("Redis back: %d %s", status, body)
	}
}

// TestServiceAppHealthInstallationsE2E: the installation store is a
// check. On disk it is ok once open; in Redis it is Redis' ping, and with
// Redis stopped the app is degraded (200): it answers installed
// organizations from its own copy. Only the admin API says where the
// store is.
func TestServiceAppHealthInstallationsE2E(t *testing.T) {
	if _, ok := any((*installations.Book)(nil)).(storePinger); !ok {
		t.Skip("installations.Book has no Ping(context.Context) error yet: the store is not checked")
	}
	_, service := newInstallationsService(t)
	app := newLifecycleUpstream(t)
	startCaddy(t, installationsSite(t, service, app.URL))
	if status, a, body := probe(t, http.MethodGet, e2eURL(appDefaultHealthPath)); status != http.StatusOK || a.state("installations") != "ok" {
		t.Fatalf("on disk: %d %s", status, body)
	}
	if _, rep, raw := adminHealth(t); !strings.HasSuffix(adminCheck(t, rep, "installations").Where, ".db") {
		t.Errorf("admin, on disk: %s", raw)
	}

	srv := redistest.Start(t)
	startCaddyWithGlobal(t, redisGlobal(srv.URL()), installationsSite(t, service, app.URL))
	if status, a, body := probe(t, http.MethodGet, e2eURL(appDefaultHealthPath)); status != http.StatusOK || a.Status != "ok" || a.state("installations") != "ok" {
		t.Fatalf("in Redis: %d %s", status, body)
	}
	srv.Stop()
	status, a, body := probe(t, http.MethodGet, e2eURL(appDefaultHealthPath))
	if status != http.StatusOK || a.Status != "degraded" || a.state("installations") != "unreachable" {
		t.Errorf("in Redis, Redis down: %d %s", status, body)
	}
	if _, rep, raw := adminHealth(t); adminCheck(t, rep, "installations").Error == "" {
		t.Errorf("admin, Redis down: %s", raw)
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
