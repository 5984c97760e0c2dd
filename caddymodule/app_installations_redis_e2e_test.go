package caddymodule

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/cluster/redistest"
	"github.com/servicegate/servicegate/emulator"
)

// TestServiceAppInstallationsTwoInstances runs two Caddy processes on one
// Redis: installed on one, a delivery verified on the other; a token
// renewal for 200 concurrent deliveries over both is one request to the
// service; uninstalled on one, refused on the other within a second.
func TestServiceAppInstallationsTwoInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Caddy processes: skipped in -short mode")
	}
	srv := redistest.Start(t)
	svc, err := emulator.New(emulator.Config{
		ClientID: "demo-client", ClientSecret: "demo-client-secret", RedirectURIs: []string{"http://localhost/oauth/callback"},
		Organizations: []emulator.Organization{{Domain: "acme.example", ID: 1, ActiveUntil: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}},
		TokenLifetime: 4 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	var grants atomic.Int64
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" {
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), `"service_app"`) {
				grants.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		svc.ServeHTTP(w, r)
	}))
	t.Cleanup(service.Close)
	app := newLifecycleUpstream(t)

	var bases []string
	for range 2 {
		port := freePort()
		base := "http://127.0.0.1:" + strconv.Itoa(port)
		site := strings.Replace(installationsSite(t, service.URL, app.URL), "http://localhost:{port}", base, 1)
		global := "{\n\tadmin off\n\tpersist_config off\n\tskip_install_trust\n\tauto_https off\n\tservicegate {\n\t\tredis " + srv.URL() + "\n\t\ttimeout 2s\n\t}\n}\n"
		p := startCaddyProcess(t, global+site)
		waitListening(t, base+"/manifest.json", p)
		bases = append(bases, base)
	}
	one, two := bases[0], bases[1]
	send := func(base string) (int, string) {
		acme, _ := svc.AppSecret("acme.example")
		resp, err := http.DefaultClient.Do(signedDelivery(base, "acme.example", acme))
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	installed := time.Now()
	if call, err := svc.InstallApp(context.Background(), nil, one+"/installed", "acme.example", service.URL); err != nil || !call.OK() {
		t.Fatalf("install on the first instance: %+v %v", call, err)
	}
	// The second instance hears of the installation through Redis.
	deadline := time.Now().Add(time.Second)
	for {
		status, body := send(two)
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a delivery on the second instance a second after the installation: %d %s", status, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if issuedFor(t, app.last().token) != "acme.example" {
		t.Fatal("the delivery on the second instance carried no app token of acme")
	}

	// The token is renewed once 4/5 of its 4 s lifetime has passed.
	time.Sleep(time.Until(installed.Add(3500 * time.Millisecond)))
	before := grants.Load()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if status, body := send(bases[i%2]); status != http.StatusOK {
				t.Errorf("delivery %d: %d %s", i, status, body)
			}
		})
	}
	wg.Wait()
	if n := grants.Load() - before; n != 1 {
		t.Errorf("200 deliveries needing a renewed token over two instances made %d token requests, want 1", n)
	}

	if call, err := svc.UninstallApp(context.Background(), nil, one+"/uninstall", "acme.example", service.URL); err != nil || !call.OK() {
		t.Fatalf("uninstall on the first instance: %+v %v", call, err)
	}
	deadline = time.Now().Add(time.Second)
	for {
		status, body := send(two)
		if status == http.StatusForbidden && strings.Contains(body, "not installed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second instance still accepts acme's deliveries a second after the uninstall: %d %s", status, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Redis holds no secret or token in clear.
	acmeToken := app.last().token
	keys, _ := srv.Do("KEYS", "*")
	for _, k := range strings.Fields(keys) {
		v, _ := srv.Do("DUMP", k)
		if acmeToken != "" && strings.Contains(v, acmeToken) {
			t.Errorf("Redis key %s holds an app token in clear", k)
		}
	}
}
