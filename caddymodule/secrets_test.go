package caddymodule

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestUnsetSecretVariableNamed: a secret whose {env.NAME} is not set stops
// the config with an error naming the variable, in every directive that
// takes a secret.
func TestUnsetSecretVariableNamed(t *testing.T) {
	const unset = "{env.SERVICEGATE_TEST_UNSET_VARIABLE}"
	want := unset + " is empty once its placeholders are resolved: the environment variable SERVICEGATE_TEST_UNSET_VARIABLE is not set, or set to nothing"
	for name, m := range map[string]caddy.Provisioner{
		"service_webhook: secret 2 of 2": &ServiceWebhook{Secrets: []string{"s", unset}},
		"service_auth: hs256_secret":     &ServiceAuth{HS256Secret: unset},
		"service_oauth: client_secret": &ServiceOAuth{ClientID: "c", ClientSecret: unset, AuthURL: "http://127.0.0.1:1",
			Scopes: []string{"project"}},
		"service_emulator: client_secret": &ServiceEmulator{ClientID: "c", ClientSecret: unset, RedirectURIs: []string{"http://localhost/cb"}},
	} {
		ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
		err := m.Provision(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), name+" "+want) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestUnsetSecretVariableAtItsLine: `caddy validate` of a Caddyfile whose
// secret names a variable that is not set warns with the file and line of
// the secret, then fails naming the variable.
func TestUnsetSecretVariableAtItsLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(file, []byte(`{
	admin off
}
:0 {
	route /webhooks {
		service_webhook {
			secret {env.SERVICEGATE_TEST_UNSET_VARIABLE}
		}
	}
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCommand(t, "validate", "--config", file, "--adapter", "caddyfile")
	wantWarning := `"msg":"service_webhook secret {env.SERVICEGATE_TEST_UNSET_VARIABLE}: the environment variable SERVICEGATE_TEST_UNSET_VARIABLE is not set here; the config does not load where it is not set","file":"` + file + `","line":7`
	if code == 0 || !strings.Contains(stderr, wantWarning) ||
		!strings.Contains(stderr, "the environment variable SERVICEGATE_TEST_UNSET_VARIABLE is not set, or set to nothing") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s\nwant the warning %s", code, stdout, stderr, wantWarning)
	}
}
