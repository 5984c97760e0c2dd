package doccheck

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated JSON field tables of docs/reference")

// jsonSection is a generated section of a reference page: the module ID
// in its opening marker, the tables up to the closing one.
var jsonSection = regexp.MustCompile(`(?s)(<!-- json-fields ([a-z0-9_.]+) -->\n)(.*?)(<!-- end json-fields -->)`)

// TestJSONFieldTables fails when a reference page's table of a module's
// JSON fields is not what the module's Go config declares (its json tags,
// types and doc comments). go test ./internal/doccheck -run TestJSONFieldTables -update
// rewrites them.
func TestJSONFieldTables(t *testing.T) {
	modules, err := ModulesOf(filepath.Join(root, "caddymodule"))
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "reference", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := 0
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		var failed bool
		out := jsonSection.ReplaceAllStringFunc(string(raw), func(s string) string {
			m := jsonSection.FindStringSubmatch(s)
			sections++
			want, err := JSONFields(modules, m[2])
			if err != nil {
				t.Errorf("%s: %v", page, err)
				failed = true
				return s
			}
			want = "\n" + want + "\n"
			if m[3] != want && !*update {
				t.Errorf("%s: the JSON fields of %s are not what caddymodule declares; run go test ./internal/doccheck -run TestJSONFieldTables -update", page, m[2])
			}
			return m[1] + want + m[4]
		})
		if *update && !failed && out != string(raw) {
			if err := os.WriteFile(page, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if sections < 8 {
		t.Errorf("found %d JSON field sections in docs/reference, want one per directive and the servicegate app", sections)
	}
	if !strings.Contains(firstSentence("Foo is e.g. this. Bar."), "e.g. this.") {
		t.Error("firstSentence stops at e.g.")
	}
}
