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
	if !strings.Contains(m.Build, m.CaddyVersion) || !strings.Contains(m.Build, modulePath) {
		t.Errorf("xcaddy.json build command %q does not name the Caddy version and the module", m.Build)
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
