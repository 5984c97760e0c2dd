package urlpath

import (
	"errors"
	"strings"
	"testing"
)

// TestCheck: every spelling of a step out of a segment is refused, at any
// depth of encoding; plain paths, also with an encoded character or a
// "%" of their own, pass.
func TestCheck(t *testing.T) {
	refused := map[string]string{
		"/assets/../api":             `".."`,
		"/assets/./api":              `".."`,
		"/assets/..":                 `".."`,
		"/assets/..;/api/whoami":     `".."`,
		"/assets/..;x=1/api":         `".."`,
		"/assets/.;/api":             `".."`,
		"/assets/%2e%2e/api":         `".."`,
		"/assets/%2E%2E/api":         `".."`,
		"/assets/.%2e/api":           `".."`,
		"/assets/%2e./api":           `".."`,
		"/assets/%252e%252e/api":     `".."`,
		"/assets/%25252e%25252e/api": `".."`,
		"/assets/..%3b/api":          `".."`,
		"/assets/..%253b/api":        `".."`,
		"/assets/.../api":            `".."`,
		"/assets/.. /api":            `".."`,
		"/assets/..%20/api":          `".."`,
		"/assets/..\\api":            "backslash",
		"/assets\\..\\api":           "backslash",
		"/assets/%5c../api":          "backslash",
		"/assets/%5C..%5Capi":        "backslash",
		"/assets/%255c..%255capi":    "backslash",
		"/assets/..%2fapi":           `encoded "/"`,
		"/assets%2f..%2fapi":         `encoded "/"`,
		"/assets/x%2Fy":              `encoded "/"`,
		"/assets/x%252fy":            `encoded "/"`,
		"/assets/%c0%ae%c0%ae/api":   "UTF-8",
		"/assets/%c0%af":             "UTF-8",
		"/assets/a%00.css":           "control",
		"/assets/a%0d%0a":            "control",
		"/a/%2525252e":               "nested too deep",
	}
	for path, want := range refused {
		err := Check(path)
		var u *Unsafe
		if !errors.As(err, &u) || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%q) = %v, want a refusal naming %s", path, err, want)
		}
	}
	for _, path := range []string{
		"/", "/api/whoami", "/assets/app.css", "/assets/a.b.c", "/assets/..a", "/assets/a..", "/.well-known/x",
		"/hooks;v=1", "/files/100%25", "/files/100%25done", "/a%20b", "/caf%C3%A9", "/x/%41", "*", "",
	} {
		if err := Check(path); err != nil {
			t.Errorf("Check(%q) = %v, want nil", path, err)
		}
	}
}

// TestCanonical: the spellings a lenient router takes for one path share
// its canonical form; other paths do not.
func TestCanonical(t *testing.T) {
	same := map[string][]string{
		"/hooks/events": {"/hooks/events", "/Hooks/events", "/HOOKS/EVENTS", "/hooks/events/", "/hooks//events", "//hooks/events",
			"/hooks;a=b/events", "/hooks/events;jsessionid=1", "/hooks/events;", "/hooks/%65vents", "/hooks/%2565vents",
			"/hoo\u212as/events", "/hooks/events%3bx", "/hooks/event\u017f", "/hooks/events%20", "/hooks/ events", "/hooks%09/events"},
		"/file-format": {"/file-format", "/File-Format/", "/file-format;x"},
		"/":            {"/", "//", "/;x", ""},
	}
	for want, paths := range same {
		for _, p := range paths {
			if got := Canonical(p); got != want {
				t.Errorf("Canonical(%q) = %q, want %q", p, got, want)
			}
		}
	}
	for _, p := range []string{"/hooks/events2", "/hooks/event", "/hooks-events", "/hooks/events/x"} {
		if Canonical(p) == "/hooks/events" {
			t.Errorf("Canonical(%q) is the webhook's", p)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = Canonical("/api/projects/42") }); n != 0 {
		t.Errorf("a canonical path costs %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Check("/api/projects/42;v=1") }); n != 0 {
		t.Errorf("checking a plain path costs %v allocations", n)
	}
}

// FuzzCheck: no path panics; a path Check accepts holds no dot segment and
// no backslash however often it is decoded, and its canonical form is
// canonical.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"/api/projects/42", "/A-b_c~d/e", "/assets/..;/api", "/a/%252e%252e/b", "/a%2fb", "/a\\b", "/Hooks/events/", "/x;y/z", "/%c0%ae"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		c := Canonical(path)
		if plain(path) && check(path) != nil {
			t.Fatalf("%q is plain, but the full check refuses it: %v", path, check(path))
		}
		if Check(path) != nil {
			return
		}
		s := path
		for range maxDecodes + 2 {
			if strings.Contains(s, "\\") {
				t.Fatalf("accepted %q holds a backslash when decoded: %q", path, s)
			}
			for seg := range strings.SplitSeq(s, "/") {
				name, _, _ := strings.Cut(seg, ";")
				if name == "." || name == ".." {
					t.Fatalf("accepted %q has a dot segment when decoded: %q", path, s)
				}
			}
			s = decode(s)
		}
		if Canonical(c) != c {
			t.Fatalf("Canonical(%q) = %q is not canonical: %q", path, c, Canonical(c))
		}
	})
}
