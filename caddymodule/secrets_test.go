package caddymodule

import (
	"os"
	"path/filepath"
	"strconv"
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

// TestWrittenRedisPasswordWarnedAtItsLine: a Redis password written into
// the servicegate global option, in its URL or as password, is warned
// about at its file and line by `caddy adapt`, without the password. (A
// global option cannot add to the adapter's warnings: the warning is a
// log line with the file and line.)
func TestWrittenRedisPasswordWarnedAtItsLine(t *testing.T) {
	for _, tt := range []struct{ option, what string }{
		{"redis redis://:a-written-password@127.0.0.1:6379", "the password in the redis URL"},
		{"redis_sentinel mymaster 127.0.0.1:26379\n\t\tpassword a-written-password", "password"},
	} {
		file := filepath.Join(t.TempDir(), "Caddyfile")
		if err := os.WriteFile(file, []byte("{\n\tservicegate {\n\t\t"+tt.option+"\n\t}\n}\n:0 {\n\trespond ok\n}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		line := 3 + strings.Count(tt.option, "\n")
		code, stdout, stderr := runCommand(t, "adapt", "--config", file)
		want := `"msg":"servicegate: ` + tt.what + ` is written into the Caddyfile`
		at := `"file":"` + file + `","line":` + strconv.Itoa(line)
		if code != 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, at) || !strings.Contains(stderr, "write {env.NAME} or {file.PATH}") {
			t.Errorf("%s: exit %d\nstdout %s\nstderr %s\nwant %s … %s", tt.option, code, stdout, stderr, want, at)
		}
		if strings.Contains(stderr, "a-written-password") {
			t.Errorf("%s: the warning quotes the password:\n%s", tt.option, stderr)
		}
	}
	// From the environment when the config loads: no warning.
	file := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(file, []byte("{\n\tservicegate {\n\t\tredis redis://:{env.REDIS_PASSWORD}@127.0.0.1:6379\n\t}\n}\n:0 {\n\trespond ok\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCommand(t, "adapt", "--config", file); code != 0 || strings.Contains(stderr, "is written into the Caddyfile") {
		t.Errorf("{env.REDIS_PASSWORD}: exit %d\n%s", code, stderr)
	}
}
