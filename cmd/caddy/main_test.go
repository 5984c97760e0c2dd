package main

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
)

const modulePath = "github.com/servicegate/servicegate"

// manifest is xcaddy.json, the build manifest of servicegate.
type manifest struct {
	CaddyVersion string `json:"caddy_version"`
	Module       string `json:"module"`
	Build        string `json:"build"`
	BuildLocal   string `json:"build_local"`
	Modules      []struct {
		ID        string `json:"id"`
		Directive string `json:"directive"`
	} `json:"modules"`
	DirectiveOrder []string `json:"directive_order"`
	Commands       []string `json:"commands"`
}

func readManifest(t *testing.T) manifest {
	t.Helper()
	raw, err := os.ReadFile("../../xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("xcaddy.json: %v", err)
	}
	return m
}

// TestManifestMatchesBinary fails when xcaddy.json and the modules, directives
// and commands this binary registers disagree.
func TestManifestMatchesBinary(t *testing.T) {
	m := readManifest(t)
	if m.Module != modulePath {
		t.Errorf("xcaddy.json module %q, go.mod says %q", m.Module, modulePath)
	}

	// Caddy version: the one go.mod requires.
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gomod), "github.com/caddyserver/caddy/v2 "+m.CaddyVersion+"\n") {
		t.Errorf("xcaddy.json caddy_version %s is not the version go.mod requires", m.CaddyVersion)
	}
	for _, build := range []string{m.Build, m.BuildLocal} {
		if !strings.HasPrefix(build, "xcaddy build "+m.CaddyVersion+" ") {
			t.Errorf("xcaddy.json build command %q does not build Caddy %s", build, m.CaddyVersion)
		}
		// The plugin is the module root, which TestXcaddyBuild imports.
		if plugin := withArgument(t, build); plugin != modulePath {
			t.Errorf("xcaddy.json build command %q names the plugin %q, want %q", build, plugin, modulePath)
		}
	}
	// xcaddy (0.4.5) runs `go get` on the plugin: without a version Go asks
	// the module proxy for the latest, which a checkout is not; a version
	// that the replace covers makes Go take the checkout.
	if !strings.Contains(m.BuildLocal, "--with "+modulePath+"@v0.0.0=") {
		t.Errorf("xcaddy.json build_local %q does not replace the module, at a version, by a local path (--with %s@v0.0.0=<dir>)", m.BuildLocal, modulePath)
	}

	// Modules: every registered module whose type lives in this Go module, and nothing else.
	var registered []string
	for _, id := range caddy.Modules() {
		info, err := caddy.GetModule(id)
		if err != nil {
			t.Fatal(err)
		}
		typ := reflect.TypeOf(info.New())
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if strings.HasPrefix(typ.PkgPath(), modulePath+"/") {
			registered = append(registered, id)
		}
	}
	var listed []string
	for _, mod := range m.Modules {
		listed = append(listed, mod.ID)
	}
	slices.Sort(registered)
	slices.Sort(listed)
	if !slices.Equal(registered, listed) {
		t.Errorf("modules registered by the binary:\n  %v\nmodules in xcaddy.json:\n  %v", registered, listed)
	}

	// Directives: each one listed is known to the Caddyfile adapter.
	for _, mod := range m.Modules {
		if mod.Directive == "" {
			continue
		}
		input := ":8080 {\n\t" + mod.Directive + "\n}\n"
		_, _, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt([]byte(input), nil)
		if err != nil && strings.Contains(err.Error(), "unrecognized directive") {
			t.Errorf("directive %s of %s is not registered: %v", mod.Directive, mod.ID, err)
		}
	}

	// Commands.
	commands := caddycmd.Commands()
	for _, name := range m.Commands {
		if _, ok := commands[name]; !ok {
			t.Errorf("xcaddy.json lists the command %q, which the binary does not register", name)
		}
	}
	for name, cmd := range commands {
		if strings.HasPrefix(name, "service-") && !slices.Contains(m.Commands, name) {
			t.Errorf("the binary registers the command %q (%s), which xcaddy.json does not list", name, cmd.Short)
		}
	}
}

// TestDirectiveOrder adapts a site block that lists servicegate's directives
// in reverse and checks that they run in the order xcaddy.json gives, with no
// order global option. (Inside a route block, directives run as written.)
func TestDirectiveOrder(t *testing.T) {
	m := readManifest(t)
	blocks := map[string]string{
		"service_app":          "service_app {\n\t\tdescriptor ../../examples/demoapp/manifest.json\n\t\tclient_id c\n\t\tclient_secret s\n\t\tapp_secret w\n\t\tinstallations {\n\t\t\tkey 0123456789abcdef0123456789abcdef\n\t\t}\n\t}",
		"service_limits":       "service_limits",
		"service_webhook":      "service_webhook {\n\t\tsecret s\n\t}",
		"service_oauth":        "service_oauth {\n\t\tclient_id c\n\t\tclient_secret s\n\t\tauth_url http://localhost:8081\n\t\tscopes project\n\t}",
		"service_auth":         "service_auth {\n\t\ths256_secret s\n\t}",
		"service_subscription": "service_subscription {\n\t\tapp_identifier a\n\t\tbase_url http://localhost:8081\n\t}",
		"basic_auth":           "basic_auth {\n\t\tuser $2a$14$Zkx19XLiW6VYouLHR5NmfOFU0z2GTNmpkT/5qqR7hx4IjWJPDhjvG\n\t}",
	}
	handlerName := map[string]string{"basic_auth": "authentication"}
	var body strings.Builder
	for i := len(m.DirectiveOrder) - 1; i >= 0; i-- {
		block, ok := blocks[m.DirectiveOrder[i]]
		if !ok {
			t.Fatalf("no test block for directive %s", m.DirectiveOrder[i])
		}
		body.WriteString("\t" + block + "\n")
	}
	input := ":8080 {\n" + body.String() + "\treverse_proxy localhost:3000\n}\n"
	adapted, _, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt([]byte(input), nil)
	if err != nil {
		t.Fatalf("adapt: %v\n%s", err, input)
	}
	var got []string
	for _, field := range strings.Split(string(adapted), `"handler":"`)[1:] {
		name, _, _ := strings.Cut(field, `"`)
		if name != "subroute" {
			got = append(got, name)
		}
	}
	var want []string
	for _, dir := range m.DirectiveOrder {
		if h, ok := handlerName[dir]; ok {
			want = append(want, h)
		} else {
			want = append(want, dir)
		}
	}
	want = append(want, "reverse_proxy")
	if !slices.Equal(got, want) {
		t.Errorf("handlers run in the order\n  %v\nwant\n  %v", got, want)
	}
}
