package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/golang-jwt/jwt/v5"

	"github.com/servicegate/servicegate/emulator"
)

// installationsDescriptor declares a webhook module and the lifecycle
// events.
const installationsDescriptor = `{
  "identifier": "demo-app",
  "modules": {"webhook": [{"key": "events-hook", "url": "/webhooks", "events": ["project.translated"]}]},
  "events": {"installed": "/installed", "uninstall": "/uninstall", "subscription_paid": "/subscription-paid"}
}`

// testInstallationsKey seals the installations of these tests.
const testInstallationsKey = "an installations key of 32 bytes+"

// lifecycleUpstream is the app: it records each request's path, body,
// app token header and headers. While failing is set, it answers 503;
// while gone is set, it closes each connection with no answer.
type lifecycleUpstream struct {
	*httptest.Server
	mu      sync.Mutex
	seen    []lifecycleSeen
	failing atomic.Bool
	gone    atomic.Bool
}

type lifecycleSeen struct {
	path, body, token string
	header            http.Header
}

func newLifecycleUpstream(t *testing.T) *lifecycleUpstream {
	u := &lifecycleUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u.gone.Load() {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, lifecycleSeen{r.URL.Path, string(body), strings.Join(r.Header.Values(appDefaultTokenHeader), ","), r.Header.Clone()})
		u.mu.Unlock()
		if u.failing.Load() {
			http.Error(w, "the app is failing", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "the app: "+r.URL.Path)
	}))
	t.Cleanup(u.Close)
	return u
}

// count is how many requests of path the app received.
func (u *lifecycleUpstream) count(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, s := range u.seen {
		if s.path == path {
			n++
		}
	}
	return n
}

func (u *lifecycleUpstream) last() lifecycleSeen {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		return lifecycleSeen{}
	}
	return u.seen[len(u.seen)-1]
}

// newInstallationsService is the emulated service with three
// organizations.
func newInstallationsService(t *testing.T) (*emulator.Server, string) {
	t.Helper()
	svc, err := emulator.New(emulator.Config{
		ClientID: "demo-client", ClientSecret: "demo-client-secret", RedirectURIs: []string{"http://localhost/oauth/callback"},
		Organizations: []emulator.Organization{
			{Domain: "acme.example", ID: 1, ActiveUntil: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)},
			{Domain: "globex.example", ID: 2, ActiveUntil: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)},
			{Domain: "initech.example", ID: 3, ActiveUntil: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	return svc, srv.URL
}

func installationsSite(t *testing.T, service, upstream string) string {
	desc := filepath.Join(t.TempDir(), "app.json")
	if err := os.WriteFile(desc, []byte(installationsDescriptor), 0o600); err != nil {
		t.Fatal(err)
	}
	return `
http://localhost:{port} {
	service_app {
		descriptor ` + desc + `
		client_id demo-client
		client_secret demo-client-secret
		service ` + service + `
		installations {
			key "` + testInstallationsKey + `"
		}
	}
	reverse_proxy ` + strings.TrimPrefix(upstream, "http://") + `
}
`
}

// deliverFor sends a delivery of one event for the organization, signed
// with secret, to /webhooks.
func deliverFor(t *testing.T, domain, secret string, extra map[string]string) (int, string) {
	t.Helper()
	body := []byte(`{"events":[{"event":"project.translated","project":{"id":1}}]}`)
	h := map[string]string{"X-Service-Domain": domain, "X-Module-Key": "events-hook", "X-Service-Signature": emulator.SignDelivery(body, secret)}
	for k, v := range extra {
		h[k] = v
	}
	return deliver(t, "/webhooks", body, false, h)
}

// signedDelivery is a delivery of project.translated for domain to the
// webhook module of the site at base, signed with secret.
func signedDelivery(base, domain, secret string) *http.Request {
	body := []byte(`{"events":[{"event":"project.translated"}]}`)
	req, _ := http.NewRequest("POST", base+"/webhooks", bytes.NewReader(body))
	req.Header.Set("X-Service-Domain", domain)
	req.Header.Set("X-Module-Key", "events-hook")
	req.Header.Set("X-Service-Signature", emulator.SignDelivery(body, secret))
	return req
}

// issuedFor checks that tok is an access token the service issued (HS256
// under the client secret) for the organization, and returns its domain.
func issuedFor(t *testing.T, tok string) string {
	t.Helper()
	claims := jwt.MapClaims{}
	if _, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return []byte("demo-client-secret"), nil },
		jwt.WithValidMethods([]string{"HS256"})); err != nil {
		t.Fatalf("the app token is not one the service issued: %v", err)
	}
	d, _ := claims["domain"].(string)
	return d
}

func TestServiceAppInstallationsE2E(t *testing.T) {
	svc, service := newInstallationsService(t)
	app := newLifecycleUpstream(t)
	startCaddy(t, installationsSite(t, service, app.URL))
	ctx := context.Background()
	before := scrapeMetrics(t) // counters outlive a reload: what this test adds is checked

	call, err := svc.InstallApp(ctx, nil, e2eURL("/installed"), "acme.example", service)
	if err != nil || !call.OK() {
		t.Fatalf("install: %+v %v", call, err)
	}
	if seen := app.last(); seen.path != "/installed" || strings.Contains(seen.body, "appSecret") || strings.Contains(seen.body, `"code"`) ||
		!strings.Contains(seen.body, `"organizationId":1`) {
		t.Fatalf("the app was told %+v", seen)
	}
	acme, _ := svc.AppSecret("acme.example")

	// A delivery signed with the organization's secret passes, with an
	// app token the service issued for it; an inbound copy is replaced.
	status, body := deliverFor(t, "acme.example", acme, map[string]string{appDefaultTokenHeader: "forged"})
	if status != http.StatusOK {
		t.Fatalf("delivery of acme: %d %s", status, body)
	}
	if seen := app.last(); seen.path != "/webhooks" || seen.token == "" || seen.token == "forged" || issuedFor(t, seen.token) != "acme.example" {
		t.Fatalf("the app got token %q", seen.token)
	}

	// Another organization's secret does not pass for acme.
	if _, err := svc.InstallApp(ctx, nil, e2eURL("/installed"), "globex.example", service); err != nil {
		t.Fatal(err)
	}
	globex, _ := svc.AppSecret("globex.example")
	if status, body := deliverFor(t, "acme.example", globex, nil); status != http.StatusUnauthorized {
		t.Fatalf("acme signed with globex's secret: %d %s", status, body)
	}
	if status, _ := deliverFor(t, "globex.example", globex, nil); status != http.StatusOK || issuedFor(t, app.last().token) != "globex.example" {
		t.Fatalf("delivery of globex: %d", status)
	}
	globexToken := app.last().token

	// A request with a verified user token of an installed organization
	// gets its app token too.
	user, _ := emulator.MintToken("demo-client-secret", emulator.Token{Issuer: "service-emulator", Audience: "demo-client",
		UserID: 7, OrganizationID: 2, Domain: "globex.example", Lifetime: time.Hour})
	client := &http.Client{Timeout: 10 * time.Second}
	if resp, body := request(t, client, "GET", "/api/projects", map[string]string{"Authorization": "Bearer " + user, appDefaultTokenHeader: "forged"}, nil); resp.StatusCode != 200 ||
		issuedFor(t, app.last().token) != "globex.example" {
		t.Fatalf("user request: %d %s, token %q", resp.StatusCode, body, app.last().token)
	}

	// An organization with no installation: no app token, and an inbound
	// copy of the header never reaches the app.
	initech, _ := emulator.MintToken("demo-client-secret", emulator.Token{Issuer: "service-emulator", Audience: "demo-client",
		UserID: 7, OrganizationID: 3, Domain: "initech.example", Lifetime: time.Hour})
	if resp, body := request(t, client, "GET", "/api/projects", map[string]string{"Authorization": "Bearer " + initech, appDefaultTokenHeader: "forged"}, nil); resp.StatusCode != 200 ||
		app.last().token != "" {
		t.Fatalf("user request of an organization with no installation: %d %s, token %q", resp.StatusCode, body, app.last().token)
	}

	// A made-up installation: the service refuses its secret, nothing is stored.
	madeUp := `{"appId":"demo-app","appSecret":"made-up-secret-0123456789","clientId":"demo-client","userId":7,"organizationId":3,"domain":"initech.example","baseUrl":"` + service + `"}`
	resp, body := request(t, client, "POST", "/installed", map[string]string{"Content-Type": "application/json"}, []byte(madeUp))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `"message"`) {
		t.Fatalf("made-up installation: %d %s", resp.StatusCode, body)
	}
	if status, body := deliverFor(t, "initech.example", "made-up-secret-0123456789", nil); status != http.StatusForbidden || !strings.Contains(body, "not installed") {
		t.Fatalf("delivery of a made-up installation: %d %s", status, body)
	}

	// Uninstall: a wrong secret is refused, the right one accepted; the
	// next delivery is refused as not installed.
	wrong := `{"appId":"demo-app","appSecret":"not-acmes-secret","clientId":"demo-client","organizationId":1,"domain":"acme.example","baseUrl":"` + service + `"}`
	if resp, body := request(t, client, "POST", "/uninstall", nil, []byte(wrong)); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("uninstall with a wrong secret: %d %s", resp.StatusCode, body)
	}
	if status, _ := deliverFor(t, "acme.example", acme, nil); status != http.StatusOK {
		t.Fatal("a refused uninstall removed the installation")
	}
	if call, err := svc.UninstallApp(ctx, nil, e2eURL("/uninstall"), "acme.example", service); err != nil || !call.OK() {
		t.Fatalf("uninstall: %+v %v", call, err)
	}
	if seen := app.last(); seen.path != "/uninstall" || strings.Contains(seen.body, acme) {
		t.Fatalf("the app was told %+v", seen)
	}
	if status, body := deliverFor(t, "acme.example", acme, nil); status != http.StatusForbidden || !strings.Contains(body, "not installed") {
		t.Fatalf("delivery after uninstall: %d %s", status, body)
	}

	// The admin API: a listing without secrets, a token for the app's own
	// work, a removal.
	admin := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, fmt.Sprintf("http://localhost:%d%s", e2eAdminPort, path), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, list := admin("GET", "/service/installations", "")
	if status != 200 || !strings.Contains(list, `"domain":"globex.example"`) || strings.Contains(list, "acme.example") ||
		strings.Contains(list, globex) || strings.Contains(list, globexToken) {
		t.Fatalf("listing: %d %s", status, list)
	}
	status, tokBody := admin("POST", "/service/installations/token", `{"organization":"globex.example"}`)
	var tok struct {
		AccessToken string    `json:"access_token"`
		ExpiresAt   time.Time `json:"expires_at"`
	}
	if status != 200 || json.Unmarshal([]byte(tokBody), &tok) != nil || issuedFor(t, tok.AccessToken) != "globex.example" || tok.ExpiresAt.Before(time.Now()) {
		t.Fatalf("token: %d %s", status, tokBody)
	}
	if status, body := admin("POST", "/service/installations/token", `{"organization":"acme.example"}`); status != http.StatusNotFound {
		t.Fatalf("token of an uninstalled organization: %d %s", status, body)
	}
	_, metrics := admin("GET", "/metrics", "")
	for series, want := range map[string]float64{"servicegate_installations_held": 1, `servicegate_installations_calls_total{outcome="stored"}`: 2,
		`servicegate_installations_calls_total{outcome="refused"}`: 1, `servicegate_installations_token_renewals_total{result="issued"}`: 0} {
		was := metricValue(before, series)
		if strings.HasSuffix(series, "_held") {
			was = 0 // a gauge: the organizations held now
		}
		if got, ok := metricValue(metrics, series), strings.Contains(metrics, series+" "); !ok || got-was != want {
			t.Errorf("%s on /metrics: %v, then %v; want %v more (present: %v)", series, was, got, want, ok)
		}
	}
	if status, body := admin("DELETE", "/service/installations?organization=2", ""); status != 200 {
		t.Fatalf("delete: %d %s", status, body)
	}
	if status, _ := deliverFor(t, "globex.example", globex, nil); status != http.StatusForbidden {
		t.Fatalf("delivery after the admin removed the installation: %d", status)
	}

	// No secret or token in clear in the store file.
	files, _ := filepath.Glob(filepath.Join(caddy.AppDataDir(), "servicegate", "installations", "*.db"))
	if len(files) == 0 {
		t.Fatal("no installations file in Caddy's data directory")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, clear := range []string{globex, globexToken, acme, "made-up-secret", testInstallationsKey} {
			if clear != "" && bytes.Contains(raw, []byte(clear)) {
				t.Errorf("%s holds a secret or token in clear", f)
			}
		}
	}
}

// TestServiceAppInstallationsSurviveSIGKILL: an installation acknowledged
// to the service is there after Caddy is killed with SIGKILL and started
// again on the same data directory.
func TestServiceAppInstallationsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Caddy processes: skipped in -short mode")
	}
	svc, service := newInstallationsService(t)
	app := newLifecycleUpstream(t)
	port := freePort()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	site := strings.Replace(installationsSite(t, service, app.URL), "http://localhost:{port}", base, 1)
	caddyfile := "{\n\tadmin off\n\tpersist_config off\n\tskip_install_trust\n\tauto_https off\n}\n" + site
	data := t.TempDir()

	first := startCaddyProcess(t, caddyfile, "XDG_DATA_HOME="+data)
	waitListening(t, base+"/manifest.json", first)
	if call, err := svc.InstallApp(context.Background(), nil, base+"/installed", "acme.example", service); err != nil || !call.OK() {
		t.Fatalf("install: %+v %v\n%s", call, err, first.logText())
	}
	first.kill()

	second := startCaddyProcess(t, caddyfile, "XDG_DATA_HOME="+data)
	waitListening(t, base+"/manifest.json", second)
	acme, _ := svc.AppSecret("acme.example")
	resp, err := http.DefaultClient.Do(signedDelivery(base, "acme.example", acme))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || issuedFor(t, app.last().token) != "acme.example" {
		t.Fatalf("after the restart: %d %s\n%s", resp.StatusCode, answer, second.logText())
	}
	for _, p := range []*caddyProcess{first, second} {
		if strings.Contains(p.logText(), acme) {
			t.Error("the app secret is in Caddy's log")
		}
	}
}

// TestServiceAppInstallationsLogsHoldNoSecrets: with the documented log
// filter, Caddy's default log at DEBUG (where reverse_proxy writes the
// headers it sends) holds neither the app secret nor the app token.
func TestServiceAppInstallationsLogsHoldNoSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped in -short mode")
	}
	svc, service := newInstallationsService(t)
	app := newLifecycleUpstream(t)
	logFile := filepath.Join(t.TempDir(), "caddy.log")
	global := strings.TrimSuffix(e2eGlobal(), "}\n") + "\tlog {\n\t\toutput file " + logFile + "\n\t\tlevel DEBUG\n\t\timport redact_service_secrets\n\t}\n}\n"
	site := strings.ReplaceAll(installationsSite(t, service, app.URL), "{port}", strconv.Itoa(e2eHTTPPort))
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: e2eAdminPort})
	loadCaddyfile(tester, logFilterSnippet(t)+global+site)

	if call, err := svc.InstallApp(context.Background(), nil, e2eURL("/installed"), "acme.example", service); err != nil || !call.OK() {
		t.Fatalf("install: %+v %v", call, err)
	}
	acme, _ := svc.AppSecret("acme.example")
	if status, body := deliverFor(t, "acme.example", acme, nil); status != http.StatusOK {
		t.Fatalf("delivery: %d %s", status, body)
	}
	token := app.last().token
	if token == "" {
		t.Fatal("the app got no token")
	}
	logs, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(logs, []byte(appDefaultTokenHeader)) {
		t.Fatal("the DEBUG log does not show the headers sent upstream: the test proves nothing")
	}
	for name, secret := range map[string]string{"app secret": acme, "app token": token} {
		if bytes.Contains(logs, []byte(secret)) {
			t.Errorf("the log holds the %s", name)
		}
	}
}

// TestServiceAppInstallationsQueuedDeliveryGetsToken: a delivery queued
// for the app carries the organization's app token when it is sent, and
// an inbound copy of the header is not kept.
func TestServiceAppInstallationsQueuedDeliveryGetsToken(t *testing.T) {
	svc, service := newInstallationsService(t)
	app := newLifecycleUpstream(t)
	site := strings.Replace(installationsSite(t, service, app.URL), "\t\tinstallations {", "\t\twebhook {\n\t\t\tqueue {\n\t\t\t\tto "+app.URL+
		"\n\t\t\t\tdir "+t.TempDir()+"\n\t\t\t}\n\t\t}\n\t\tinstallations {", 1)
	startCaddy(t, site)
	if call, err := svc.InstallApp(context.Background(), nil, e2eURL("/installed"), "acme.example", service); err != nil || !call.OK() {
		t.Fatalf("install: %+v %v", call, err)
	}
	acme, _ := svc.AppSecret("acme.example")
	if status, body := deliverFor(t, "acme.example", acme, map[string]string{appDefaultTokenHeader: "forged"}); status/100 != 2 {
		t.Fatalf("delivery: %d %s", status, body)
	}
	waitUntil(t, "the queued delivery reaches the app", func() bool { return app.last().path == "/webhooks" })
	if tok := app.last().token; tok == "forged" || issuedFor(t, tok) != "acme.example" {
		t.Fatalf("the queued delivery carried %q", tok)
	}
}

// TestServiceAppLifecycleCommands drives an installation with caddy
// service-app install, deliver, paid and uninstall through the emulator.
func TestServiceAppLifecycleCommands(t *testing.T) {
	_, service := newInstallationsService(t)
	app := newLifecycleUpstream(t)
	site := installationsSite(t, service, app.URL)
	startCaddy(t, site)
	desc := strings.Fields(site[strings.Index(site, "descriptor "):])[1]
	run := func(cmd, event string, wantOK bool) string {
		t.Helper()
		var out bytes.Buffer
		fl := parsedFlags(t, serviceAppLifecycleFlags(cmd), "--app", e2eBase(), "--emulator", service, "--descriptor", desc)
		code, err := runServiceAppLifecycle(fl, event, &out)
		if (err == nil) != wantOK || (code == caddy.ExitCodeSuccess) != wantOK {
			t.Fatalf("caddy service-app %s: %d %v\n%s", cmd, code, err, out.String())
		}
		return out.String()
	}
	run("deliver", "delivery", false) // the emulator has no installation secret to sign with
	if out := run("install", emulator.EventInstalled, true); !strings.Contains(out, "200") {
		t.Fatalf("install: %s", out)
	}
	if out := run("deliver", "delivery", true); !strings.Contains(out, "/webhooks  200") || issuedFor(t, app.last().token) != "acme.example" {
		t.Fatalf("deliver: %s", out)
	}
	run("paid", emulator.EventSubscriptionPaid, true)
	if seen := app.last(); seen.path != "/subscription-paid" {
		t.Fatalf("paid reached %+v", seen)
	}
	run("uninstall", emulator.EventUninstall, true)
	if seen := app.last(); seen.path != "/uninstall" {
		t.Fatalf("uninstall reached %+v", seen)
	}
	run("deliver", "delivery", false)
}

// TestServiceAppSubscriptionPaidForgetsTheAnswer: after subscription_paid
// the next request of the organization asks the service again, and a
// flood of made-up or repeated calls costs at most one query.
func TestServiceAppSubscriptionPaidForgetsTheAnswer(t *testing.T) {
	svc, service := newInstallationsService(t)
	app := newLifecycleUpstream(t)
	site := strings.Replace(installationsSite(t, service, app.URL), "\t\tinstallations {", "\t\tsubscription\n\t\tinstallations {", 1)
	startCaddy(t, site)
	ctx := context.Background()
	if call, err := svc.InstallApp(ctx, nil, e2eURL("/installed"), "acme.example", service); err != nil || !call.OK() {
		t.Fatalf("install: %+v %v", call, err)
	}
	user, _ := emulator.MintToken("demo-client-secret", emulator.Token{Issuer: "service-emulator", Audience: "demo-client",
		UserID: 7, OrganizationID: 1, Domain: "acme.example", Lifetime: time.Hour})
	client := &http.Client{Timeout: 10 * time.Second}
	get := func() {
		t.Helper()
		if resp, body := request(t, client, "GET", "/api/projects", map[string]string{"Authorization": "Bearer " + user}, nil); resp.StatusCode != 200 {
			t.Fatalf("paid organization: %d %s", resp.StatusCode, body)
		}
	}
	get()
	get()
	if n := svc.Queries("acme.example"); n != 1 {
		t.Fatalf("%d subscription queries before the payment, want 1 (cached)", n)
	}
	for range 5 {
		if call, err := svc.SubscriptionPaid(ctx, nil, e2eURL("/subscription-paid"), "acme.example"); err != nil || !call.OK() {
			t.Fatalf("paid: %+v %v", call, err)
		}
	}
	if seen := app.last(); seen.path != "/subscription-paid" {
		t.Fatalf("the app was told %+v", seen)
	}
	get()
	get()
	if n := svc.Queries("acme.example"); n != 3 {
		t.Fatalf("%d subscription queries after five payments, want 3: the gateway's one confirmation of the payment, one more for the users, then cached again", n)
	}
	// A made-up organization purges nothing.
	made := `{"appId":"demo-app","organizationId":999,"domain":"acme.example"}`
	if resp, _ := request(t, client, "POST", "/subscription-paid", nil, []byte(made)); resp.StatusCode != 200 {
		t.Fatalf("made-up paid: %d", resp.StatusCode)
	}
	get()
	if n := svc.Queries("acme.example"); n != 3 {
		t.Fatalf("a made-up subscription_paid made the gateway ask again: %d queries", n)
	}
}
