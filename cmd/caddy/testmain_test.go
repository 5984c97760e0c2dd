package main

import (
	"fmt"
	"os"
	"testing"
)

// TestMain gives the tests a data and config directory of their own, so
// that what a test's Caddy keeps there (installations, last good
// descriptors, autosaved configs) never meets another run of the suite or
// the user's own.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "servicegate-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_DATA_HOME", dir)
	os.Setenv("XDG_CONFIG_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
