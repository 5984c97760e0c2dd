package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// TestCaddyfileExampleValidates adapts Caddyfile.example and provisions every
// module in it, as `caddy validate` does, with no environment set.
func TestCaddyfileExampleValidates(t *testing.T) {
	for _, name := range []string{"CLIENT_SECRET", "APP_SECRET"} {
		if v, ok := os.LookupEnv(name); ok {
			os.Unsetenv(name)
			t.Cleanup(func() { os.Setenv(name, v) })
		}
	}
	raw, err := os.ReadFile("../../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	adapted, warnings, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt(raw, map[string]any{"filename": "Caddyfile.example"})
	if err != nil {
		t.Fatalf("adapt Caddyfile.example: %v", err)
	}
	for _, w := range warnings {
		t.Errorf("adapt warning: %s", w.String())
	}
	for _, handler := range []string{"service_emulator", "service_webhook", "service_limits", "service_oauth", "service_auth", "service_subscription", "reverse_proxy"} {
		if !strings.Contains(string(adapted), `"handler":"`+handler+`"`) {
			t.Errorf("Caddyfile.example does not use %s", handler)
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
