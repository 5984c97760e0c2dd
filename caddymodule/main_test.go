package caddymodule

import (
	"fmt"
	"os"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// envRunCaddy makes the test binary run as Caddy itself (`caddy run` with
// the arguments that follow), so that a test can start, kill and restart a
// real Caddy process with servicegate's modules without building one.
const envRunCaddy = "SERVICEGATE_TEST_RUN_CADDY"

func TestMain(m *testing.M) {
	if os.Getenv(envRunCaddy) == "1" {
		os.Args = append([]string{"caddy"}, os.Args[1:]...)
		caddycmd.Main()
		return
	}
	// The tests' Caddy keeps its data (installations, last good
	// descriptors, autosaved configs) in a directory of this run's own, so
	// that two runs of the suite, or the user's own Caddy, never meet.
	dir, err := os.MkdirTemp("", "servicegate-test-")
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
