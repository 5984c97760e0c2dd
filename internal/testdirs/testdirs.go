// Package testdirs gives a package's tests a data and config directory of
// their own, so that what a test's Caddy keeps there (installations, last
// good descriptors, autosaved configs) never meets another run of the
// suite or the user's own Caddy.
package testdirs

import (
	"fmt"
	"os"
	"testing"
)

// Run points XDG_DATA_HOME and XDG_CONFIG_HOME at a new temporary
// directory named after prefix, runs the tests, calls after (what the
// tests leave running, such as a browser), removes the directory and
// exits with the tests' code. A package's TestMain calls it last.
func Run(m *testing.M, prefix string, after ...func()) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_DATA_HOME", dir)
	os.Setenv("XDG_CONFIG_HOME", dir)
	code := m.Run()
	for _, f := range after {
		f()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
