package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// demoSecrets are the variables run-demo.sh sets for Caddyfile.example
// when they are not set, with their DEMO values:
// export NAME="${NAME:-value}".
func demoSecrets(t *testing.T) map[string]string {
	t.Helper()
	script, err := os.ReadFile("../../run-demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^export (\w+)="\$\{(\w+):-([^}"]+)\}"$`).FindAllStringSubmatch(string(script), -1) {
		if m[1] != m[2] {
			t.Fatalf("run-demo.sh: %s", m[0])
		}
		secrets[m[1]] = m[3]
	}
	return secrets
}

// TestCaddyfileExampleValidates adapts Caddyfile.example and provisions every
// module in it, as `caddy validate` does, with the environment run-demo.sh
// sets and nothing else: no secret stands in the adapted config, and
// nothing is warned about.
func TestCaddyfileExampleValidates(t *testing.T) {
	secrets := demoSecrets(t)
	for _, name := range []string{"CLIENT_SECRET", "APP_SECRET", "SERVICEGATE_INSTALLATIONS_KEY"} {
		if secrets[name] == "" {
			t.Fatalf("run-demo.sh does not set %s, which Caddyfile.example reads", name)
		}
	}
	for name, value := range secrets {
		t.Setenv(name, value)
	}
	raw, err := os.ReadFile("../../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	// The demo app serves its descriptor; a stand-in serves the same file
	// here, where the example expects the app.
	manifest, err := os.ReadFile("../../examples/demoapp/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(manifest) }))
	defer app.Close()
	const address = "http://127.0.0.1:3000/manifest.json"
	if !strings.Contains(string(raw), address) {
		t.Fatalf("Caddyfile.example does not read the descriptor from the demo app at %s", address)
	}
	raw = []byte(strings.Replace(string(raw), address, app.URL+"/manifest.json", 1))
	adapted, warnings, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt(raw, map[string]any{"filename": "Caddyfile.example"})
	if err != nil {
		t.Fatalf("adapt Caddyfile.example: %v", err)
	}
	for _, w := range warnings {
		t.Errorf("adapt warning: %s", w.String())
	}
	for name, value := range secrets {
		if !strings.Contains(string(raw), "{env."+name+"}") {
			t.Errorf("Caddyfile.example does not read %s from the environment", name)
		}
		if strings.Contains(string(adapted), value) {
			t.Errorf("the adapted Caddyfile.example holds the value of %s", name)
		}
	}
	for _, handler := range []string{"service_emulator", "service_app", "reverse_proxy"} {
		if !strings.Contains(string(adapted), `"handler":"`+handler+`"`) {
			t.Errorf("Caddyfile.example does not use %s", handler)
		}
	}
	// service_app expanded the descriptor: every kind of module is routed.
	for _, route := range []string{`"module":"webhook"`, `"module":"custom-file-format"`, `"module":"file-pre-export"`, `"serve":"descriptor"`, `"sign_in":{`, `"subscription":{"app_identifier":"demo-app"`} {
		if !strings.Contains(string(adapted), route) {
			t.Errorf("the adapted service_app lacks %s", route)
		}
	}
	var cfg caddy.Config
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := caddy.Validate(&cfg); err != nil {
		t.Fatalf("Caddyfile.example does not validate: %v", err)
	}
}

// TestCaddyfileExampleListensOnLoopback adapts Caddyfile.example and checks
// that every listener of the demo (its sites and the admin endpoint) is a
// loopback address: the emulator and its DEMO secrets must not be reachable
// from another machine.
func TestCaddyfileExampleListensOnLoopback(t *testing.T) {
	raw, err := os.ReadFile("../../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	adapted, _, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt(raw, map[string]any{"filename": "Caddyfile.example"})
	if err != nil {
		t.Fatalf("adapt Caddyfile.example: %v", err)
	}
	var cfg struct {
		Admin struct {
			Listen string `json:"listen"`
		} `json:"admin"`
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Listen []string `json:"listen"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		t.Fatal(err)
	}
	listeners := []string{cfg.Admin.Listen}
	for _, srv := range cfg.Apps.HTTP.Servers {
		listeners = append(listeners, srv.Listen...)
	}
	if len(listeners) < 3 {
		t.Fatalf("found only the listeners %q in the adapted Caddyfile.example", listeners)
	}
	for _, l := range listeners {
		addr, err := caddy.ParseNetworkAddress(l)
		if err != nil {
			t.Fatalf("listener %q: %v", l, err)
		}
		if !isLoopback(addr.Host) {
			t.Errorf("Caddyfile.example listens on %q, which is not a loopback address", l)
		}
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
