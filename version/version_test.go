package version

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	dep := func(v string, replace *debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "caddy"}, Deps: []*debug.Module{
			{Path: "github.com/caddyserver/caddy/v2", Version: "v2.11.9"},
			{Path: Module, Version: v, Replace: replace},
		}}
	}
	main := func(v string) *debug.BuildInfo { return &debug.BuildInfo{Main: debug.Module{Path: Module, Version: v}} }
	cases := []struct {
		name string
		set  string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"set at link time wins", "v0.2.0", dep("v0.1.0", nil), true, "v0.2.0"},
		{"xcaddy build of a released version", "", dep("v0.2.0", nil), true, "v0.2.0"},
		{"xcaddy build of a local checkout", "", dep("v0.0.0-00010101000000-000000000000", &debug.Module{Path: "../servicegate"}), true, "(devel)"},
		{"replaced by another version", "", dep("v0.1.0", &debug.Module{Path: "example.com/fork", Version: "v0.1.1"}), true, "v0.1.1"},
		{"cmd/caddy on a tag", "", main("v0.2.0"), true, "v0.2.0"},
		{"cmd/caddy with a pseudo-version", "", main("v0.0.0-20261126062219-5a79b8b1c3e4+dirty"), true, "v0.0.0-20261126062219-5a79b8b1c3e4+dirty"},
		{"cmd/caddy without VCS stamping", "", main("(devel)"), true, "(devel)"},
		{"no build information", "", nil, false, "unknown"},
	}
	for _, tc := range cases {
		if got := resolve(tc.set, tc.bi, tc.ok); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestGetInThisTestBinary(t *testing.T) {
	// A test binary of this module: servicegate is the main module.
	if got := Get(); got == "" || got == "unknown" {
		t.Errorf("Get() = %q", got)
	}
}
