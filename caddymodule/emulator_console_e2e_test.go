package caddymodule

import (
	"bytes"
	"cmp"
	"encoding/json"
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

	"github.com/servicegate/servicegate/emulator"
	"github.com/servicegate/servicegate/examples/formatapp"
)

// consoleDescriptor is the app of the console's end-to-end tests: the
// lifecycle events, a webhook module, a custom file format and a
// pre-export module.
const consoleDescriptor = `{
  "identifier": "demo-app",
  "modules": {
    "custom-file-format": [{"key": "kv-format", "type": "kv", "url": "/file-format", "signaturePatterns": {"fileName": "\\.kv$"}}],
    "file-pre-export": [{"key": "kv-pre-export", "url": "/pre-export"}],
    "webhook": [{"key": "events-hook", "url": "/webhooks", "events": ["project.translated", "project.approved"]}]
  },
  "events": {"installed": "/installed", "uninstall": "/uninstall", "subscription_paid": "/subscription-paid"}
}`

// consoleApp is the app behind the gateway: the format app's file
// modules, and for every other path a 200 that records the request's
// headers.
type consoleApp struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
}

func newConsoleApp(t *testing.T) *consoleApp {
	a := &consoleApp{}
	files := formatapp.Handler()
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.headers = append(a.headers, r.Header.Clone())
		a.mu.Unlock()
		if r.URL.Path == "/file-format" || r.URL.Path == "/pre-export" {
			files.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(a.Close)
	return a
}

// sawHeader reports whether a request the app got carried the header.
func (a *consoleApp) sawHeader(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, h := range a.headers {
		if _, ok := h[http.CanonicalHeaderKey(name)]; ok {
			return true
		}
	}
	return false
}

// consoleSites are the emulator (for any host but localhost: 127.0.0.1)
// and the gateway of the app (at localhost) in one Caddy, as the demo
// runs them; console is the emulator's console directive, by default one
// of its own so that each test has an emulator of its own (the emulator
// is kept across loads of the same configuration).
func consoleSites(t *testing.T, app string, console string) string {
	t.Helper()
	desc := filepath.Join(t.TempDir(), "app.json")
	if err := os.WriteFile(desc, []byte(consoleDescriptor), 0o600); err != nil {
		t.Fatal(err)
	}
	return `
http://:{port} {
	service_emulator {
		client_id demo-client
		client_secret demo-client-secret
		redirect_uri http://localhost:{port}/oauth/callback
		organization acme.example {
			id 1
			active_until "2099-01-01 00:00:00"
		}
		organization globex.example {
			id 2
			active_until "2099-01-01 00:00:00"
		}
		organization unpaid.example {
			id 3
			unpaid http://127.0.0.1:{port}/checkout
		}
` + cmp.Or(console, uniqueConsole()) + `
	}
}

http://localhost:{port} {
	service_app {
		descriptor ` + desc + `
		client_id demo-client
		client_secret demo-client-secret
		service http://127.0.0.1:{port}
		installations {
			key "` + testInstallationsKey + `"
		}
	}
	reverse_proxy ` + strings.TrimPrefix(app, "http://") + `
}
`
}

// consoleConfigs numbers the emulators of consoleSites.
var consoleConfigs atomic.Int32

// uniqueConsole is a console directive no other test uses.
func uniqueConsole() string {
	return "\t\tconsole {\n\t\t\tkeep " + strconv.Itoa(int(consoleConfigs.Add(1))+1000) + "\n\t\t}"
}

// emulatorAPI is the address of a path of the emulator's API in the test
// Caddy.
func emulatorAPI(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(e2eHTTPPort) + emulator.APIPrefix + path
}

// consoleCall sends one request to the emulator's API and decodes its
// answer into out.
func consoleCall(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, emulatorAPI(path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

// consoleItem is a call as the API lists it.
type consoleItem struct {
	ID           int64  `json:"id"`
	Kind         string `json:"kind"`
	Organization string `json:"organization"`
	Status       int    `json:"status"`
	Direction    string `json:"direction"`
	Gateway      struct {
		Outcome string   `json:"outcome"`
		Reason  string   `json:"reason"`
		Added   []string `json:"added"`
		From    string   `json:"from"`
	} `json:"gateway"`
}

// TestEmulatorConsoleE2E: in one Caddy with the gateway, the console's
// install is a real lifecycle call through the gateway, whose verdict the
// gateway gives itself; a tampered delivery is refused with the reason
// the gateway logs at DEBUG; the correlation header never reaches the app
// and a client that sends it gains nothing.
func TestEmulatorConsoleE2E(t *testing.T) {
	app := newConsoleApp(t)
	startCaddy(t, consoleSites(t, app.URL, ""))

	var installed struct {
		Organization struct {
			Installation struct{ State string } `json:"installation"`
		} `json:"organization"`
		Call consoleItem `json:"call"`
	}
	if code := consoleCall(t, "POST", "organizations/acme.example/install", "", &installed); code != 200 {
		t.Fatalf("install: %d %+v", code, installed)
	}
	call := installed.Call
	if installed.Organization.Installation.State != "installed" || call.Kind != "installed" || call.Status != 200 ||
		call.Gateway.Outcome != "accepted" || call.Gateway.From != "gateway" || !contains(call.Gateway.Added, "X-Service-App-Token") {
		t.Fatalf("the installed call: %+v", installed)
	}
	// The gateway asked the emulator for an app token to prove the call:
	// the console shows that grant too.
	var list []consoleItem
	consoleCall(t, "GET", "calls?kind=token", "", &list)
	if len(list) == 0 || list[0].Organization != "acme.example" || list[0].Status != 200 || list[0].Direction != "answered" {
		t.Fatalf("the gateway's token grant: %+v", list)
	}

	var delivery consoleItem
	if code := consoleCall(t, "POST", "deliveries", `{"organization":"acme.example","event":"project.translated"}`, &delivery); code != 200 ||
		delivery.Status != 200 || delivery.Gateway.Outcome != "accepted" {
		t.Fatalf("a delivery: %d %+v", code, delivery)
	}
	var tampered consoleItem
	consoleCall(t, "POST", "calls/"+strconv.FormatInt(delivery.ID, 10)+"/resend", `{"tamper":"wrong_secret"}`, &tampered)
	if tampered.Status != 401 || tampered.Gateway.Outcome != "refused" || tampered.Gateway.From != "gateway" ||
		tampered.Gateway.Reason != "The signature of the delivery does not match its body." {
		t.Fatalf("a tampered resend: %+v", tampered)
	}
	if app.sawHeader(emulator.CallHeader) {
		t.Fatalf("the app got %s", emulator.CallHeader)
	}

	// A client that sends the header itself: the same refusal, the header
	// removed, nothing recorded.
	body := []byte(`{"events":[{"event":"project.translated"}]}`)
	req, _ := http.NewRequest("POST", e2eURL("/webhooks"), bytes.NewReader(body))
	req.Header.Set("X-Service-Domain", "acme.example")
	req.Header.Set("X-Module-Key", "events-hook")
	req.Header.Set("X-Service-Signature", emulator.SignDelivery(body, "not-the-secret"))
	req.Header.Set(emulator.CallHeader, "made-up")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("a forged delivery with the header: %d", resp.StatusCode)
	}
	// A valid one with the header reaches the app without it.
	secret := revealSecret(t, "acme.example")
	req, _ = http.NewRequest("POST", e2eURL("/webhooks"), bytes.NewReader(body))
	req.Header.Set("X-Service-Domain", "acme.example")
	req.Header.Set("X-Module-Key", "events-hook")
	req.Header.Set("X-Service-Signature", emulator.SignDelivery(body, secret))
	req.Header.Set(emulator.CallHeader, "made-up")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || app.sawHeader(emulator.CallHeader) {
		t.Fatalf("a delivery with the header: %d, the app saw it: %v", resp.StatusCode, app.sawHeader(emulator.CallHeader))
	}
}

func revealSecret(t *testing.T, domain string) string {
	t.Helper()
	var out map[string]string
	if code := consoleCall(t, "POST", "organizations/"+domain+"/secret", "", &out); code != 200 || out["secret"] == "" {
		t.Fatalf("the secret of %s: %d", domain, code)
	}
	return out["secret"]
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestEmulatorConsoleHostsAndRoot: the console answers loopback and its
// site's names only, a foreign Host gets 421 with a JSON message, and the
// emulator's / points to the console.
func TestEmulatorConsoleHostsAndRoot(t *testing.T) {
	app := newConsoleApp(t)
	startCaddy(t, consoleSites(t, app.URL, ""))
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(e2eHTTPPort) + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `href="/emulator/console"`) {
		t.Fatalf("the emulator's /: %d %s", resp.StatusCode, page)
	}
	req, _ := http.NewRequest("GET", emulatorAPI("organizations"), nil)
	req.Host = "rebound.example"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(string(raw), `"message"`) {
		t.Fatalf("a foreign Host: %d %s", resp.StatusCode, raw)
	}
}

// TestEmulatorConsoleOff: console off leaves the emulator without page
// and API.
func TestEmulatorConsoleOff(t *testing.T) {
	app := newConsoleApp(t)
	startCaddy(t, consoleSites(t, app.URL, "\t\tconsole off"))
	// The emulator leaves the path to what follows it: Caddy's empty answer.
	resp, err := http.Get(emulatorAPI("organizations"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(raw) != 0 {
		t.Fatalf("the API of a console turned off: %d %s", resp.StatusCode, raw)
	}
}

// TestServiceAppCommandsShowInTheConsole: caddy service-app install,
// deliver (with --event, --body and --tamper), paid and send go through
// the emulator, and its console shows each call with the gateway's
// verdict.
func TestServiceAppCommandsShowInTheConsole(t *testing.T) {
	app := newConsoleApp(t)
	sites := consoleSites(t, app.URL, "")
	startCaddy(t, sites)
	desc := strings.Fields(sites[strings.Index(sites, "descriptor "):])[1]
	emu := "http://127.0.0.1:" + strconv.Itoa(e2eHTTPPort)
	run := func(cmd, event string, wantOK bool, args ...string) string {
		t.Helper()
		var out bytes.Buffer
		fl := parsedFlags(t, serviceAppLifecycleFlags(cmd), append([]string{"--app", e2eBase(), "--emulator", emu, "--descriptor", desc}, args...)...)
		code, err := runServiceAppLifecycle(fl, event, &out)
		if (err == nil) != wantOK || (code == 0) != wantOK {
			t.Fatalf("caddy service-app %s %v: %d %v\n%s", cmd, args, code, err, out.String())
		}
		return out.String()
	}
	last := func() consoleItem {
		t.Helper()
		var list []consoleItem
		consoleCall(t, "GET", "calls?organization=acme.example", "", &list)
		return list[0]
	}
	run("install", emulator.EventInstalled, true)
	if c := last(); c.Kind != "installed" || c.Gateway.Outcome != "accepted" {
		t.Fatalf("install: %+v", c)
	}
	run("deliver", "delivery", true, "--event", "project.approved")
	var detail struct {
		Request struct {
			Body string `json:"body"`
		} `json:"request"`
	}
	c := last()
	consoleCall(t, "GET", "calls/"+strconv.FormatInt(c.ID, 10), "", &detail)
	if c.Kind != "delivery" || c.Status != 200 || !strings.Contains(detail.Request.Body, `"event": "project.approved"`) ||
		strings.Contains(detail.Request.Body, "project.translated") {
		t.Fatalf("deliver --event: %+v %s", c, detail.Request.Body)
	}
	body := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(body, []byte(`{"events":[{"event":"project.translated","note":"by hand"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	run("deliver", "delivery", true, "--body", body)
	c = last()
	consoleCall(t, "GET", "calls/"+strconv.FormatInt(c.ID, 10), "", &detail)
	if c.Status != 200 || !strings.Contains(detail.Request.Body, "by hand") {
		t.Fatalf("deliver --body: %+v %s", c, detail.Request.Body)
	}
	out := run("deliver", "delivery", false, "--tamper", "unsigned")
	if c = last(); c.Status != 401 || c.Gateway.Reason != "The delivery is not signed: its X-Service-Signature header is missing." ||
		!strings.Contains(out, "401") {
		t.Fatalf("deliver --tamper unsigned: %+v\n%s", c, out)
	}
	var errOut bytes.Buffer
	fl := parsedFlags(t, serviceAppLifecycleFlags("deliver"), "--app", e2eBase(), "--emulator", emu, "--descriptor", desc, "--tamper", "flip")
	if _, err := runServiceAppLifecycle(fl, "delivery", &errOut); err == nil || !strings.Contains(err.Error(), "tamper must be") {
		t.Fatalf("deliver --tamper flip: %v", err)
	}

	// send: signed with the installation's secret, not the demo one.
	src := filepath.Join(t.TempDir(), "a.kv")
	if err := os.WriteFile(src, []byte("greeting = Hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var sendOut bytes.Buffer
	code, err := runServiceAppSend(parsedFlags(t, serviceAppSendFlags(), "--descriptor", desc, "--app", e2eBase(), "--emulator", emu, "--file", src), &sendOut)
	if code != 0 || err != nil || !strings.HasSuffix(sendOut.String(), "all 4 calls were answered 2xx\n") {
		t.Fatalf("send: %d %v\n%s", code, err, sendOut.String())
	}
	var list []consoleItem
	consoleCall(t, "GET", "calls?organization=acme.example", "", &list)
	kinds := map[string]bool{}
	for _, c := range list[:4] {
		kinds[c.Kind] = c.Gateway.Outcome == "accepted"
	}
	if !kinds["delivery"] || !kinds["parse-file"] || !kinds["build-file"] || !kinds["file-pre-export"] {
		t.Fatalf("send's calls in the console: %+v", list[:4])
	}
}
