package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestXcaddyBuild builds a Caddy the way xcaddy does from the manifest's
// build command: a throwaway main module that imports Caddy's command,
// Caddy's standard modules and the plugin named by --with, with a replace
// pointing at this checkout. The binary must list every module the
// manifest names. It runs offline from the module cache (CI runs
// `go mod download` first).
func TestXcaddyBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a whole Caddy; skipped in -short mode")
	}
	m := readManifest(t)
	plugin := withArgument(t, m.Build)
	if plugin != modulePath {
		t.Fatalf("xcaddy.json build command names the plugin %q, want %q", plugin, modulePath)
	}
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(checkout, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := "go 1.26"
	for line := range strings.Lines(string(gomod)) {
		if strings.HasPrefix(line, "go ") {
			goLine = strings.TrimSpace(line)
		}
	}
	gosum, err := os.ReadFile(filepath.Join(checkout, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.go", `package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "`+plugin+`"
)

func main() {
	caddycmd.Main()
}
`)
	write("go.mod", "module caddy\n\n"+goLine+"\n\nrequire (\n"+
		"\tgithub.com/caddyserver/caddy/v2 "+m.CaddyVersion+"\n"+
		"\t"+plugin+" v0.0.0\n)\n\n"+
		"replace "+plugin+" => "+checkout+"\n")
	write("go.sum", string(gosum))

	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	binary := filepath.Join(dir, "caddy")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// A version set at link time, as XCADDY_GO_BUILD_FLAGS passes it.
	const linkedVersion = "v9.9.9-linked"
	build := exec.CommandContext(ctx, goTool, "build", "-ldflags", "-X "+modulePath+"/version.Version="+linkedVersion, "-o", binary, ".")
	build.Dir = dir
	// Offline, from the module cache: missing requirements are added to
	// the throwaway go.mod from the module graph, as `go get` does.
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the xcaddy-style main module (offline: run `go mod download` first): %v\n%s", err, out)
	}

	out, err := exec.CommandContext(ctx, binary, "list-modules").CombinedOutput()
	if err != nil {
		t.Fatalf("caddy list-modules: %v\n%s", err, out)
	}
	listed := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		listed[strings.TrimSpace(line)] = true
	}
	if !listed["http.handlers.reverse_proxy"] {
		t.Errorf("the binary lacks Caddy's standard modules:\n%s", out)
	}
	for _, mod := range m.Modules {
		if !listed[mod.ID] {
			t.Errorf("the xcaddy-built binary does not list %s", mod.ID)
		}
	}
	// Caddy names the version of the module it was built with: the one
	// the main module requires (here the throwaway v0.0.0; a released
	// version when xcaddy fetched it).
	out, err = exec.CommandContext(ctx, binary, "list-modules", "--versions", "--skip-standard").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "http.handlers.service_app v0.0.0") {
		t.Errorf("caddy list-modules --versions does not name servicegate's version: %v\n%s", err, out)
	}
	checkBuildInfoMetric(t, ctx, binary, linkedVersion)

	help, err := exec.CommandContext(ctx, binary, "help").CombinedOutput()
	if err != nil {
		t.Fatalf("caddy help: %v\n%s", err, help)
	}
	for _, name := range m.Commands {
		if !strings.Contains(string(help), name) {
			t.Errorf("the xcaddy-built binary does not offer the command %s:\n%s", name, help)
		}
	}
}

// checkBuildInfoMetric runs binary with a servicegate handler and checks
// that its metrics name version in servicegate_build_info.
func checkBuildInfoMetric(t *testing.T, ctx context.Context, binary, version string) {
	t.Helper()
	admin, web := freePort(t), freePort(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`{
	admin 127.0.0.1:%d
	http_port %d
	auto_https off
	persist_config off
}
http://127.0.0.1:%d {
	service_auth {
		hs256_secret s
	}
	respond "ok"
}
`, admin, web, web)), 0o600); err != nil {
		t.Fatal(err)
	}
	run := exec.CommandContext(ctx, binary, "run", "--config", config, "--adapter", "caddyfile")
	run.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	var logs strings.Builder
	run.Stdout, run.Stderr = &logs, &logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = run.Process.Kill()
		_ = run.Wait()
	}()
	want := fmt.Sprintf("servicegate_build_info{version=%q} 1", version)
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", admin))
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if last = string(body); strings.Contains(last, want) {
			return
		}
	}
	t.Errorf("the metrics of the running binary lack %s:\n%s\nlog:\n%s", want, grepLines(last, "servicegate_build_info"), logs.String())
}

func grepLines(text, word string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, word) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// freePort returns a loopback port free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// withArgument returns the plugin an xcaddy build command names with
// --with, without a =<replacement> or @<version> suffix.
func withArgument(t *testing.T, command string) string {
	t.Helper()
	fields := strings.Fields(command)
	for i, f := range fields {
		if f == "--with" && i+1 < len(fields) {
			arg, _, _ := strings.Cut(fields[i+1], "=")
			arg, _, _ = strings.Cut(arg, "@")
			return arg
		}
	}
	t.Fatalf("no --with in the build command %q", command)
	return ""
}
