package caddymodule

import (
	"os"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/servicegate/servicegate/internal/testdirs"
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
	// The tests' Caddy keeps its data in a directory of this run's own;
	// the browser tests' Chromium is stopped at the end.
	testdirs.Run(m, "servicegate-test-", stopChromium)
}
