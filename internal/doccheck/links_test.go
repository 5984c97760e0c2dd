package doccheck

import (
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository's root, seen from this package's directory.
const root = "../.."

// TestLinksResolve follows every relative link of README.md and docs/:
// the file or directory it names exists, and its #anchor is one that
// GitHub gives a heading of that page (or of the page itself).
func TestLinksResolve(t *testing.T) {
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) (map[string]bool, error) {
		if a, ok := anchors[page]; ok {
			return a, nil
		}
		raw, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			return nil, err
		}
		anchors[page] = Anchors(string(raw))
		return anchors[page], nil
	}
	checked := 0
	for _, page := range pages {
		raw, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, link := range Links(string(raw)) {
			u, err := url.Parse(link.Target)
			if err != nil {
				t.Errorf("%s:%d: link %q does not parse: %v", page, link.Line, link.Target, err)
				continue
			}
			if u.Scheme != "" || u.Host != "" {
				continue // another site's page: not checked here
			}
			checked++
			target := page
			if u.Path != "" {
				target = path.Join(path.Dir(page), u.Path)
				if strings.HasPrefix(target, "..") {
					t.Errorf("%s:%d: link %q leaves the repository", page, link.Line, link.Target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, target)); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", page, link.Line, link.Target, target)
					continue
				}
			}
			if u.Fragment == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: link %q has an anchor in a file that is not a Markdown page", page, link.Line, link.Target)
				continue
			}
			a, err := anchorsOf(target)
			if err != nil {
				t.Errorf("%s:%d: %v", page, link.Line, err)
				continue
			}
			if !a[u.Fragment] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", page, link.Line, link.Target, target, u.Fragment)
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative link to check")
	}
}

// TestSlug holds Slug to the anchors GitHub gives headings of the kinds
// the documentation has.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"One block per app: service_app":                  "one-block-per-app-service_app",
		"Errors, placeholders and metrics":                "errors-placeholders-and-metrics",
		"Choices where the service's interface is silent": "choices-where-the-services-interface-is-silent",
		"`caddy service-app check`":                       "caddy-service-app-check",
		"5. Run the conformance":                          "5-run-the-conformance",
		"The [console](x.md#y)":                           "the-console",
		"Schlüssel – drehen":                              "schlüssel--drehen",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
	a := Anchors("# A\n\n## A\n\n```\n# not a heading\n```\n## A\n")
	for _, want := range []string{"a", "a-1", "a-2"} {
		if !a[want] {
			t.Errorf("Anchors: no %q in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("Anchors took a line of a code block for a heading")
	}
}
