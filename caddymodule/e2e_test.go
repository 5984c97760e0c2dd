package caddymodule

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
)

// End-to-end tests run one real Caddy inside this package's test binary,
// driven through caddytest. They bind fixed ports, so they live in this one
// package (go test runs a package's tests one at a time unless they ask
// otherwise; none of them may call t.Parallel). The ports can be moved with
// SERVICEGATE_E2E_ADMIN_PORT, SERVICEGATE_E2E_HTTP_PORT and
// SERVICEGATE_E2E_HTTPS_PORT when something else holds the defaults.
var (
	e2eAdminPort = envPort("SERVICEGATE_E2E_ADMIN_PORT", 2999)
	e2eHTTPPort  = envPort("SERVICEGATE_E2E_HTTP_PORT", 9080)
	e2eHTTPSPort = envPort("SERVICEGATE_E2E_HTTPS_PORT", 9443)
)

func envPort(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// e2eBase is the address of the plain-HTTP listener of the test Caddy.
func e2eBase() string { return fmt.Sprintf("http://localhost:%d", e2eHTTPPort) }

// e2eURL is the address of path on the test Caddy.
func e2eURL(path string) string { return e2eBase() + path }

// e2eGlobal is the global options block every test Caddyfile starts with.
func e2eGlobal() string {
	return fmt.Sprintf(`{
	skip_install_trust
	admin localhost:%d
	http_port %d
	https_port %d
	grace_period 1ns
	auto_https off
}
`, e2eAdminPort, e2eHTTPPort, e2eHTTPSPort)
}

// startCaddy loads sites (Caddyfile site blocks, without a global options
// block) into the test Caddy and returns a tester for it. Write site
// addresses as ":{port}" or "localhost:{port}"; {port} becomes the test HTTP
// port.
func startCaddy(t *testing.T, sites string) *caddytest.Tester {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped in -short mode")
	}
	sites = strings.ReplaceAll(sites, "{port}", strconv.Itoa(e2eHTTPPort))
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: e2eAdminPort})
	tester.InitServer(e2eGlobal()+sites, "caddyfile")
	return tester
}
