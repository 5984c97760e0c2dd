package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/servicegate/servicegate"
)

// demoSecrets sets the variables run-demo.sh sets for Caddyfile.example
// (export NAME="${NAME:-value}"), with their demo values.
func demoSecrets(t *testing.T) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(root, "run-demo.sh"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, m := range regexp.MustCompile(`(?m)^export (\w+)="\$\{\w+:-([^}"]+)\}"$`).FindAllStringSubmatch(string(script), -1) {
		t.Setenv(m[1], m[2])
		found++
	}
	if found == 0 {
		t.Fatal("run-demo.sh sets no secret")
	}
	// The pages' examples also read these, which the demo does not use.
	for name, value := range map[string]string{
		"CLIENT_ID": "demo-client", "REDIS_PASSWORD": "demo-redis-password",
		"SERVICEGATE_OLD_KEY": "demo-retired-installations-key-32",
	} {
		t.Setenv(name, value)
	}
}

// TestCaddyfileBlocksAdapt adapts every ```caddy block of README.md and
// docs/ as a whole Caddyfile, and every ```caddy-d block inside a site,
// with Caddy's Caddyfile adapter and servicegate's modules, from the
// repository's root (where the examples' files are) and with the demo's
// secrets in the environment. A block that does not adapt, or that the
// adapter warns about, fails.
func TestCaddyfileBlocksAdapt(t *testing.T) {
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	demoSecrets(t)
	sources := map[string][]byte{}
	for _, page := range pages {
		raw, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		sources[page] = raw
	}
	t.Chdir(root)
	adapted := map[string]int{}
	for _, page := range pages {
		for _, block := range Blocks(string(sources[page])) {
			var caddyfileText string
			switch block.Lang {
			case "caddy":
				caddyfileText = block.Text
			case "caddy-d":
				caddyfileText = "http://localhost:8080 {\n" + indent(block.Text) + "}\n"
			case "caddyfile":
				t.Errorf("%s:%d: fence a whole Caddyfile as caddy and a snippet of a site as caddy-d (Caddy's documentation's names), a syntax summary as caddy-syntax", page, block.Line)
				continue
			default:
				continue
			}
			adapted[block.Lang]++
			name := page + ":" + itoa(block.Line)
			_, warnings, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt([]byte(caddyfileText), map[string]any{"filename": name})
			if err != nil {
				t.Errorf("%s: the %s block does not adapt: %v\n%s", name, block.Lang, err, block.Text)
				continue
			}
			for _, w := range warnings {
				t.Errorf("%s: adapting the %s block warns: %s", name, block.Lang, w.String())
			}
		}
	}
	if adapted["caddy"] < 5 || adapted["caddy-d"] < 5 {
		t.Fatalf("adapted %d caddy and %d caddy-d blocks; the documentation has more", adapted["caddy"], adapted["caddy-d"])
	}
}

// TestSyntaxBlocksNameTheirDirective checks that each directive page has a
// caddy-syntax block
// (its whole syntax, with <placeholders> and alternatives, which is not
// adapted) that starts with the directive.
func TestSyntaxBlocksNameTheirDirective(t *testing.T) {
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		if !strings.HasPrefix(page, "docs/reference/service") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		directive := strings.TrimSuffix(filepath.Base(page), ".md")
		if directive == "servicegate-option" {
			directive = "servicegate"
		}
		found := false
		for _, b := range Blocks(string(raw)) {
			if b.Lang == "caddy-syntax" && (strings.HasPrefix(b.Text, directive+" ") || strings.HasPrefix(b.Text, "{\n\t"+directive+" ")) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s has no caddy-syntax block of %s", page, directive)
		}
	}
}

// indent puts a tab before every line that is not empty, as caddy fmt
// writes the directives of a site.
func indent(text string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = "\t" + l
		}
	}
	return strings.Join(lines, "")
}
