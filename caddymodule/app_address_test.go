package caddymodule

import (
	"fmt"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestServiceAddressWithoutScheme: an address of service_app written
// without http:// is refused where it is written, with what to write
// instead, when adapted and when a JSON config is loaded.
func TestServiceAddressWithoutScheme(t *testing.T) {
	desc := appDescriptorFile(t)
	for _, tt := range []struct{ sub, value, want string }{
		{"service", "localhost:8091", `service "localhost:8091" has no scheme: write http://localhost:8091 (or https://)`},
		{"auth_url", "auth.example/oauth", `auth_url "auth.example/oauth" has no scheme: write http://auth.example/oauth (or https://)`},
		{"service", "ftp://service.example", `service "ftp://service.example" is not an http(s) URL (its scheme is "ftp")`},
		{"base_url", "localhost:8093", `base_url "localhost:8093" has no scheme: write http://localhost:8093 (or https://)`},
		{"base_url", "https://app.example/?x=1", `base_url "https://app.example/?x=1" holds a query`},
		{"service", "https://user:pw@service.example", `service "https://…@service.example" holds a user name or password`},
	} {
		_, err := adaptCaddyfile(t, fmt.Sprintf(`:8080 {
	service_app {
		descriptor %s
		client_id c
		client_secret s
		app_secret w
		%s %s
	}
}
`, desc, tt.sub, tt.value))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), ", at Caddyfile:7") {
			t.Errorf("%s %s: %v\nwant %s at Caddyfile:7", tt.sub, tt.value, err, tt.want)
		}
		a := &ServiceApp{Descriptor: desc, ClientSecret: "s", AppSecrets: []string{"w"}}
		switch tt.sub {
		case "service":
			a.Service = tt.value
		case "auth_url":
			a.AuthURL = tt.value
		case "base_url":
			a.BaseURL = tt.value
		}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
		err = a.Provision(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "service_app: "+tt.want) {
			t.Errorf("JSON %s %s: %v", tt.sub, tt.value, err)
		}
		if strings.Contains(fmt.Sprint(err), "pw") {
			t.Errorf("the error quotes the password: %v", err)
		}
	}
}

// TestDescriptorAddressWithoutScheme: a descriptor that is a host and port
// without a scheme is taken for the address it is, not a missing file.
func TestDescriptorAddressWithoutScheme(t *testing.T) {
	for _, value := range []string{"127.0.0.1:3000/manifest.json", "localhost:3000"} {
		_, err := adaptCaddyfile(t, ":8080 {\n\tservice_app {\n\t\tdescriptor "+value+"\n\t}\n\treverse_proxy 127.0.0.1:3000\n}\n")
		want := fmt.Sprintf(`descriptor %q has no scheme: write http://%s (or https://), at Caddyfile:3`, value, value)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("descriptor %s: %v\nwant %s", value, err, want)
		}
	}
}

// TestAddressesCheckedOnceResolved: an address given as a placeholder is
// left alone when the Caddyfile is adapted, and its value is checked as a
// written address is when the handler loads, naming the placeholder.
func TestAddressesCheckedOnceResolved(t *testing.T) {
	t.Setenv("SERVICEGATE_TEST_ADDRESS", "localhost:8093")
	const placeholder = "{env.SERVICEGATE_TEST_ADDRESS}"
	want := `{env.SERVICEGATE_TEST_ADDRESS} "localhost:8093" has no scheme: write http://localhost:8093 (or https://)`
	for name, m := range map[string]caddy.Provisioner{
		"service_app: base_url":              &ServiceApp{Descriptor: appDescriptorFile(t), ClientSecret: "s", AppSecrets: []string{"w"}, BaseURL: placeholder},
		"service_app: descriptor":            &ServiceApp{Descriptor: placeholder + "/manifest.json"},
		"service_subscription: base_url":     &ServiceSubscription{AppIdentifier: "a", BaseURL: placeholder},
		"service_auth: jwks_url":             &ServiceAuth{JWKSURL: placeholder},
		"service_oauth: auth_url":            &ServiceOAuth{ClientID: "c", ClientSecret: "s", AuthURL: placeholder, Scopes: []string{"project"}},
		"service_limits: spill_base_url":     &ServiceLimits{Contract: "custom-file-format", Spill: &SpillOptions{BaseURL: placeholder}},
		"service_app: service (the adapted)": &ServiceApp{Descriptor: appDescriptorFile(t), ClientSecret: "s", AppSecrets: []string{"w"}, Service: "http://" + placeholder},
	} {
		ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
		err := m.Provision(ctx)
		if c, ok := m.(caddy.CleanerUpper); ok && err == nil {
			_ = c.Cleanup() // what it registered (its health check) goes with it
		}
		cancel()
		want := name + " " + want
		if name == "service_app: descriptor" {
			want = `service_app: descriptor {env.SERVICEGATE_TEST_ADDRESS}/manifest.json "localhost:8093/manifest.json" has no scheme`
		}
		if name == "service_app: service (the adapted)" {
			if err != nil { // http://localhost:8093 is an address
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v\nwant %s", name, err, want)
		}
	}
	// Adapted, the placeholders are left as they are.
	for _, lines := range [][]string{
		{"app_identifier a", "base_url " + placeholder},
		{"app_identifier a", "base_url https://{http.request.host}/service"},
	} {
		if err := adaptDirective("service_subscription", lines); err != nil {
			t.Errorf("%q: %v", lines, err)
		}
	}
	// A placeholder after the scheme's place does not hide a missing one.
	err := adaptDirective("service_subscription", []string{"app_identifier a", "base_url localhost:{env.PORT}"})
	if err == nil || !strings.Contains(err.Error(), `base_url "localhost:{env.PORT}" has no scheme`) || !strings.Contains(err.Error(), "Caddyfile:5") {
		t.Errorf("base_url localhost:{env.PORT}: %v", err)
	}
}
