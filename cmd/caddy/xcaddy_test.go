package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	binary := filepath.Join(dir, "caddy")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goTool, "build", "-o", binary, ".")
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
