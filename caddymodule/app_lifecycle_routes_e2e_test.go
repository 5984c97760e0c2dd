package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"
)

// TestE2ELifecycleRoutesOfTheConfig: the lifecycle routes `caddy adapt`
// writes are the ones the site serves. The config is adapted, the
// descriptor then moves its installed call to another path, and the
// adapted config is loaded: the installed call is answered at the path of
// the config, and the new path gets the token check like any other. A
// config adapted by an earlier version, with no lifecycle route, still
// answers the descriptor's lifecycle calls.
func TestE2ELifecycleRoutesOfTheConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped in -short mode")
	}
	svc, service := newInstallationsService(t)
	app := newLifecycleUpstream(t)
	site := installationsSite(t, service, app.URL)
	desc := regexp.MustCompile(`descriptor (\S+)`).FindStringSubmatch(site)[1]
	caddyfileText := strings.ReplaceAll(e2eGlobal()+site, "{port}", strconv.Itoa(e2eHTTPPort))
	adapted, _, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt([]byte(caddyfileText), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, route := range []string{`{"event":"installed","path":"/installed","serve":"lifecycle"}`, `{"event":"uninstall","path":"/uninstall","serve":"lifecycle"}`,
		`{"event":"subscription_paid","path":"/subscription-paid","serve":"lifecycle"}`} {
		if !strings.Contains(string(adapted), route) {
			t.Fatalf("the adapted config lacks the route %s:\n%s", route, adapted)
		}
	}
	moved := strings.Replace(installationsDescriptor, `"installed": "/installed"`, `"installed": "/setup"`, 1)
	if err := os.WriteFile(desc, []byte(moved), 0o600); err != nil {
		t.Fatal(err)
	}

	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: e2eAdminPort})
	tester.InitServer(string(adapted), "json")
	http.DefaultClient.CloseIdleConnections()
	if call, err := svc.InstallApp(context.Background(), nil, e2eURL("/installed"), "acme.example", service); err != nil || !call.OK() {
		t.Fatalf("installed at the config's path: %+v %v", call, err)
	}
	if seen := app.last(); seen.path != "/installed" || !strings.Contains(seen.body, `"organizationId":1`) {
		t.Fatalf("the app was told %+v", seen)
	}
	if call, err := svc.InstallApp(context.Background(), nil, e2eURL("/setup"), "globex.example", service); err != nil || call.Status != http.StatusUnauthorized {
		t.Fatalf("installed at the descriptor's new path, not routed by the config: %+v %v, want 401 of the token check", call, err)
	}

	// Adapted before the lifecycle routes were written.
	var cfg map[string]any
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		t.Fatal(err)
	}
	handler := serviceAppOf(cfg)
	if handler == nil {
		t.Fatalf("no service_app in the adapted config:\n%s", adapted)
	}
	routes := handler["routes"].([]any)
	handler["routes"] = slices.DeleteFunc(routes, func(r any) bool { return r.(map[string]any)["serve"] == "lifecycle" })
	if len(handler["routes"].([]any)) != len(routes)-3 {
		t.Fatalf("the lifecycle routes were not taken out: %v", handler["routes"])
	}
	earlier, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tester.InitServer(string(earlier), "json")
	http.DefaultClient.CloseIdleConnections()
	if call, err := svc.InstallApp(context.Background(), nil, e2eURL("/setup"), "initech.example", service); err != nil || !call.OK() {
		t.Fatalf("installed with a config of no lifecycle route: %+v %v", call, err)
	}
	if seen := app.last(); seen.path != "/setup" || !strings.Contains(seen.body, `"organizationId":3`) {
		t.Fatalf("the app was told %+v", seen)
	}
}

// serviceAppOf is the first service_app handler in a JSON config.
func serviceAppOf(v any) map[string]any {
	switch v := v.(type) {
	case map[string]any:
		if v["handler"] == "service_app" {
			return v
		}
		for _, e := range v {
			if h := serviceAppOf(e); h != nil {
				return h
			}
		}
	case []any:
		for _, e := range v {
			if h := serviceAppOf(e); h != nil {
				return h
			}
		}
	}
	return nil
}

// TestLifecycleRoutesRefused: a lifecycle route the installations could
// not answer (no such call, a call routed twice, no installations) stops
// the config, since the installations would pass its requests on to the
// app unchecked.
func TestLifecycleRoutesRefused(t *testing.T) {
	desc := filepath.Join(t.TempDir(), "app.json")
	if err := os.WriteFile(desc, []byte(installationsDescriptor), 0o600); err != nil {
		t.Fatal(err)
	}
	guard := AppRoute{Path: "*", Auth: &ServiceAuth{HS256Secret: "demo-client-secret"}}
	for _, tt := range []struct {
		name   string
		routes []AppRoute
		inst   bool
		want   string
	}{
		{"unknown call", []AppRoute{{Path: "/installed", Serve: appServeLifecycle, Event: "instaled"}, guard}, true,
			`route /installed: event "instaled" is not a lifecycle call of the service`},
		{"routed twice", []AppRoute{{Path: "/installed", Serve: appServeLifecycle, Event: "installed"},
			{Path: "/setup", Serve: appServeLifecycle, Event: "installed"}, guard}, true, "the lifecycle call installed has two routes, /installed and /setup"},
		{"no installations", []AppRoute{{Path: "/installed", Serve: appServeLifecycle, Event: "installed"}, guard}, false,
			"route /installed answers the lifecycle call installed, which needs an installations block"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("XDG_DATA_HOME", t.TempDir())
			a := &ServiceApp{Descriptor: desc, ClientID: "demo-client", ClientSecret: "demo-client-secret", Service: "http://127.0.0.1:1", Routes: tt.routes}
			if tt.inst {
				a.Installations = &AppInstallations{Key: testInstallationsKey}
			} else {
				// A descriptor without events: its own would be refused first.
				a.Descriptor, a.AppSecrets = appDescriptorFile(t), []string{"demo-app-secret"}
			}
			ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
			defer cancel()
			err := a.Provision(ctx)
			if err == nil {
				_ = a.Cleanup()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("provision: %v\nwant %s", err, tt.want)
			}
		})
	}
}
