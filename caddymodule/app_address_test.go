package caddymodule

import (
	"fmt"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestServiceAddressWithoutScheme: a service address written without
// http:// is refused where it is written, with what to write instead,
// when adapted and when a JSON config is loaded.
func TestServiceAddressWithoutScheme(t *testing.T) {
	desc := appDescriptorFile(t)
	for _, tt := range []struct{ sub, value, want string }{
		{"service", "localhost:8091", `service_app: service "localhost:8091" has no scheme: write service http://localhost:8091 (or https://)`},
		{"auth_url", "auth.example/oauth", `service_app: auth_url "auth.example/oauth" has no scheme: write auth_url http://auth.example/oauth (or https://)`},
		{"service", "ftp://service.example", `service_app: service: invalid service base URL: scheme "ftp" is not http or https`},
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
		if err == nil || !strings.Contains(err.Error(), tt.want+", at Caddyfile:7") {
			t.Errorf("%s %s: %v\nwant %s", tt.sub, tt.value, err, tt.want)
		}
		a := &ServiceApp{Descriptor: desc, ClientSecret: "s", AppSecrets: []string{"w"}}
		if tt.sub == "service" {
			a.Service = tt.value
		} else {
			a.AuthURL = tt.value
		}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
		err = a.Provision(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("JSON %s %s: %v", tt.sub, tt.value, err)
		}
	}
}
