package caddymodule

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
)

// End-to-end tests run one real Caddy inside this package's test binary,
// driven through caddytest. Its admin, HTTP and HTTPS ports are chosen free
// on 127.0.0.1 when the test binary starts, so two runs of the suite on one
// host (a second terminal, an IDE, CI beside a developer) never load their
// configurations into each other's Caddy. The one Caddy is shared by the
// package's tests, so none of them may call t.Parallel.
// SERVICEGATE_E2E_ADMIN_PORT, SERVICEGATE_E2E_HTTP_PORT and
// SERVICEGATE_E2E_HTTPS_PORT pin a port instead, for a debugging session.
var (
	e2eAdminPort = envPort("SERVICEGATE_E2E_ADMIN_PORT")
	e2eHTTPPort  = envPort("SERVICEGATE_E2E_HTTP_PORT")
	e2eHTTPSPort = envPort("SERVICEGATE_E2E_HTTPS_PORT")
)

// envPort is the port named by the environment variable name, or else a
// port that was free on 127.0.0.1 a moment ago.
func envPort(name string) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return freePort()
}

// freePort asks the kernel for a free loopback port. The listener is closed
// at once; the kernel does not hand the same port out again soon, which is
// all a test run needs.
func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("no free loopback port for the end-to-end Caddy: %v", err))
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
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
	loadCaddyfile(tester, e2eGlobal()+sites)
	return tester
}

// loadCaddyfile loads a Caddyfile into the test Caddy, then closes the
// default client's kept-alive connections to the Caddy of an earlier test:
// the new config serves on a new socket and closes the old one's
// connections, and a request written on one of them (POSTs are not
// retried) would get "connection reset by peer".
func loadCaddyfile(tester *caddytest.Tester, caddyfile string) {
	tester.InitServer(caddyfile, "caddyfile")
	http.DefaultClient.CloseIdleConnections()
}

// TestE2ESuiteRunsBesideItself runs one end-to-end test in two copies of
// this test binary at the same time, as two developers' runs (or CI beside a
// developer) would on one host: each must get its own Caddy and pass.
func TestE2ESuiteRunsBesideItself(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped in -short mode")
	}
	if os.Getenv("SERVICEGATE_E2E_CHILD") != "" {
		t.Skip("already a child run")
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SERVICEGATE_E2E_") {
			env = append(env, kv)
		}
	}
	env = append(env, "SERVICEGATE_E2E_CHILD=1")
	// caddytest sets os.Args[0] to "caddy" once a test Caddy has run, so
	// the binary is found by the kernel's word instead.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const run = "^TestE2EAuthValidTokenPassesTrustedHeaders$"
	type result struct {
		out []byte
		err error
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			cmd := exec.Command(self, "-test.run", run, "-test.count=1", "-test.v")
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			results <- result{out, err}
		}()
	}
	for range 2 {
		r := <-results
		if r.err != nil || !strings.Contains(string(r.out), "--- PASS: TestE2EAuthValidTokenPassesTrustedHeaders") {
			t.Errorf("a run beside another failed: %v\n%s", r.err, r.out)
		}
	}
}
