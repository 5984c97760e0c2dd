package doccheck

import (
	"strings"
	"testing"
)

// TestModuleConfigFieldsHaveDocComments parses the caddymodule package
// and fails on a Caddy module without a doc comment, and on an exported
// field of a module's config (its own struct, or a struct of the package
// it holds) without one: Caddy renders a module's page from them.
func TestModuleConfigFieldsHaveDocComments(t *testing.T) {
	modules, err := ModulesOf(root + "/caddymodule")
	if err != nil {
		t.Fatal(err)
	}
	if len(modules) < 10 {
		t.Fatalf("found %d Caddy modules in caddymodule, want at least 10", len(modules))
	}
	fields := 0
	for _, m := range modules {
		if m.ID == "" {
			t.Errorf("%s: CaddyModule names no module ID as a string literal", m.Type)
		}
		if strings.TrimSpace(m.Doc) == "" {
			t.Errorf("module %s (%s) has no doc comment", m.ID, m.Type)
		}
		for _, f := range m.Fields {
			fields++
			if strings.TrimSpace(f.Doc) == "" {
				t.Errorf("%s: %s.%s (json %q) of module %s has no doc comment", f.Pos, f.Type, f.Name, f.JSON, m.ID)
			}
		}
	}
	if fields < 100 {
		t.Fatalf("found %d config fields, want at least 100", fields)
	}
}

// TestModulesOfFindsUndocumentedField runs the check on a package of
// known shape, so that a checker that finds nothing cannot pass.
func TestModulesOfFindsUndocumentedField(t *testing.T) {
	modules, err := ModulesOf("testdata/undocumented")
	if err != nil {
		t.Fatal(err)
	}
	if len(modules) != 1 || modules[0].ID != "http.handlers.example" {
		t.Fatalf("modules: %+v", modules)
	}
	var undocumented []string
	for _, f := range modules[0].Fields {
		if f.Doc == "" {
			undocumented = append(undocumented, f.Type+"."+f.Name)
		}
	}
	if strings.Join(undocumented, " ") != "Example.Bare Inner.Deep" {
		t.Errorf("undocumented fields %q, want Example.Bare and Inner.Deep", undocumented)
	}
}
