// Package version names the version of servicegate that a binary carries,
// for the servicegate_build_info metric and for operators who need to know
// which version runs.
package version

import "runtime/debug"

// Module is servicegate's Go module path.
const Module = "github.com/servicegate/servicegate"

// Version, when set at link time, is the version the binary reports,
// whatever Go recorded:
//
//	go build -ldflags "-X github.com/servicegate/servicegate/version.Version=v0.2.0" ./cmd/caddy
//
// Empty, the version comes from the build information (see Get).
var Version string

// Get returns the version of servicegate in this binary: Version when it
// was set at link time; else servicegate's entry in the build information:
// the version of the dependency when servicegate was built into Caddy as a
// module (xcaddy, or a main package of your own), "(devel)" when that
// dependency is replaced by a local directory, or the main module's
// version when the binary is servicegate's own cmd/caddy (a tag or a
// pseudo-version when Go stamped it from git, "(devel)" when it did not).
func Get() string {
	bi, ok := debug.ReadBuildInfo()
	return resolve(Version, bi, ok)
}

// resolve is Get with its inputs as values, for tests.
func resolve(set string, bi *debug.BuildInfo, ok bool) string {
	if set != "" {
		return set
	}
	if !ok || bi == nil {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path != Module {
			continue
		}
		if d.Replace != nil {
			if d.Replace.Version != "" {
				return d.Replace.Version
			}
			return "(devel)"
		}
		return d.Version
	}
	if bi.Main.Path == Module && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
