package caddymodule

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/cluster/redistest"
	"github.com/servicegate/servicegate/emulator"
)

// testAppWideSecret is the app_secret of the unreadable-record test: what
// signs the deliveries of organizations without an installation.
const testAppWideSecret = "the app-wide secret of the test app"

// deliverNamed sends a signed delivery to the site at base, naming the
// organization by domain, by id, or by both (an empty one is not sent),
// and returns its status and Retry-After.
func deliverNamed(t *testing.T, base, domain, id, secret string) (int, string) {
	t.Helper()
	body := []byte(`{"events":[{"event":"project.translated"}]}`)
	req, _ := http.NewRequest("POST", base+"/webhooks", bytes.NewReader(body))
	if domain != "" {
		req.Header.Set("X-Service-Domain", domain)
	}
	if id != "" {
		req.Header.Set("X-Service-Id", id)
	}
	req.Header.Set("X-Module-Key", "events-hook")
	req.Header.Set("X-Service-Signature", emulator.SignDelivery(body, secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestE2EUnreadableRecordIsVerifiedAgainstItOnly: with app_secret set
// beside installations, an organization whose record is stored but does
// not open gets 503 with Retry-After for every delivery, named by
// X-Service-Id, X-Service-Domain or both, signed with its installation's
// secret or with app_secret, and the app receives none; a new installed
// repairs it. An organization with a readable installation is verified
// with its installation's secret only, however the delivery names it.
func TestE2EUnreadableRecordIsVerifiedAgainstItOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Caddy processes: skipped in -short mode")
	}
	srv := redistest.Start(t)
	svc := newTenantsService(t)
	app := newLifecycleUpstream(t)
	base := "http://127.0.0.1:" + strconv.Itoa(freePort())
	site := strings.Replace(svc.site(t, app.URL), "http://localhost:{port}", base, 1)
	site = strings.Replace(site, "client_secret demo-client-secret\n", "client_secret demo-client-secret\n\t\tapp_secret \""+testAppWideSecret+"\"\n", 1)
	global := "{\n\tadmin off\n\tpersist_config off\n\tskip_install_trust\n\tauto_https off\n\tservicegate {\n\t\tredis " + srv.URL() + "\n\t}\n}\n"
	start := func() *caddyProcess {
		p := startCaddyProcess(t, global+site)
		waitListening(t, base+"/manifest.json", p)
		return p
	}
	p := start()
	for _, d := range []string{"acme.example", "globex.example"} {
		if call, err := svc.InstallApp(context.Background(), nil, base+"/installed", d, svc.URL); err != nil || !call.OK() {
			t.Fatalf("install %s: %+v %v", d, call, err)
		}
	}
	acme, _ := svc.AppSecret("acme.example")
	globex, _ := svc.AppSecret("globex.example")
	if code, _ := deliverNamed(t, base, "globex.example", "2", globex); code != http.StatusOK {
		t.Fatalf("globex before its record is damaged: %d", code)
	}
	// Globex's record damaged, then read at a start: its domain is not
	// known to the new process.
	if _, err := srv.Do("HSET", redisInstallationsKey(svc.clientID), "2", "damaged"); err != nil {
		t.Fatal(err)
	}
	p.kill()
	start()

	received := app.count("/webhooks")
	names := []struct{ domain, id string }{{"globex.example", "2"}, {"", "2"}, {"globex.example", ""}}
	for _, n := range names {
		for secret, name := range map[string]string{globex: "its installation's secret", testAppWideSecret: "app_secret"} {
			code, retry := deliverNamed(t, base, n.domain, n.id, secret)
			if code != http.StatusServiceUnavailable || retry == "" {
				t.Errorf("globex (unreadable) named by domain %q, id %q, signed with %s: %d, Retry-After %q; want 503 with Retry-After",
					n.domain, n.id, name, code, retry)
			}
		}
	}
	if got := app.count("/webhooks"); got != received {
		t.Errorf("the app received %d deliveries of an organization whose record does not open", got-received)
	}

	// Acme's installation opens: its secret alone verifies its deliveries.
	for _, n := range []struct{ domain, id string }{{"acme.example", "1"}, {"", "1"}, {"acme.example", ""}, {"unknown.example", "1"}} {
		if code, _ := deliverNamed(t, base, n.domain, n.id, testAppWideSecret); code == http.StatusOK {
			t.Errorf("acme (installed) named by domain %q, id %q, signed with app_secret: accepted", n.domain, n.id)
		}
	}
	if code, _ := deliverNamed(t, base, "acme.example", "1", acme); code != http.StatusOK {
		t.Errorf("acme with its installation's secret: %d", code)
	}
	// An organization never installed, named by both headers, is still
	// verified with app_secret.
	if code, _ := deliverNamed(t, base, "initech.example", "3", testAppWideSecret); code != http.StatusOK {
		t.Errorf("initech (no installation) with app_secret: %d", code)
	}

	// A new installed repairs globex: its new secret verifies, app_secret
	// does not.
	if call, err := svc.InstallApp(context.Background(), nil, base+"/installed", "globex.example", svc.URL); err != nil || !call.OK() {
		t.Fatalf("reinstall globex: %+v %v", call, err)
	}
	globex, _ = svc.AppSecret("globex.example")
	for _, n := range names {
		if code, _ := deliverNamed(t, base, n.domain, n.id, globex); code != http.StatusOK {
			t.Errorf("globex repaired, named by domain %q, id %q: %d", n.domain, n.id, code)
		}
		if code, _ := deliverNamed(t, base, n.domain, n.id, testAppWideSecret); code == http.StatusOK {
			t.Errorf("globex repaired, named by domain %q, id %q, signed with app_secret: accepted", n.domain, n.id)
		}
	}
}
