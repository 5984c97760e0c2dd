package caddymodule

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/servicegate/servicegate/internal/doccheck"
)

// tutorialPage is the tutorial whose commands TestTutorialCommands runs.
const tutorialPage = "../docs/tutorial/your-own-app.md"

// tutorialStart is what the tutorial's first terminal runs after its
// export line: the test builds no Caddy (its own binary is one, run as
// Caddy) and starts the other two itself, the same way.
var tutorialStart = []string{
	"go build -o bin/caddy ./cmd/caddy",
	"go run ./examples/tutorial -listen 127.0.0.1:3001 &",
	"bin/caddy run --config examples/tutorial/Caddyfile",
}

// TestTutorialCommands follows docs/tutorial/your-own-app.md: the
// descriptor and Caddyfile it shows are the example's files; its first
// terminal starts the example app with go run and a real Caddy (this test
// binary run as Caddy stands for bin/caddy) with the tutorial's Caddyfile;
// then every command of its console blocks runs in one bash session, in
// order, and prints what the page says (… in the page stands for any
// text). The addresses of the page (localhost:8080, localhost:8081,
// 127.0.0.1:3001, localhost:2019) are replaced by free loopback ports,
// and the commands that default to the emulator at localhost:8081 are
// given its address.
func TestTutorialCommands(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	raw, err := os.ReadFile(tutorialPage)
	if err != nil {
		t.Fatal(err)
	}
	blocks := doccheck.Blocks(string(raw))
	shown := map[string]string{}
	for _, b := range blocks {
		if _, ok := shown[b.Lang]; !ok {
			shown[b.Lang] = b.Text
		}
	}
	for lang, file := range map[string]string{"json": "manifest.json", "caddy": "Caddyfile"} {
		want, err := os.ReadFile("../examples/tutorial/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if shown[lang] != string(want) {
			t.Errorf("the tutorial's first %s block is not examples/tutorial/%s", lang, file)
		}
	}
	start := strings.Split(strings.TrimSpace(shown["sh"]), "\n")
	if len(start) != 1+len(tutorialStart) || !strings.HasPrefix(start[0], "export ") ||
		strings.Join(start[1:], "\n") != strings.Join(tutorialStart, "\n") {
		t.Fatalf("the tutorial's first terminal runs\n%s\nwant an export line, then\n%s", shown["sh"], strings.Join(tutorialStart, "\n"))
	}

	addresses := []string{"localhost:8080", "localhost:8081", "127.0.0.1:3001", "localhost:2019"}
	var toTest, toPage []string
	for _, a := range addresses {
		host, _, _ := strings.Cut(a, ":")
		free := fmt.Sprintf("%s:%d", host, freePort())
		toTest, toPage = append(toTest, a, free), append(toPage, free, a)
	}
	local, back := strings.NewReplacer(toTest...), strings.NewReplacer(toPage...)
	emulatorAddress := "http://" + local.Replace("localhost:8081")

	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	caddy := filepath.Join(dir, "caddy")
	wrapper := fmt.Sprintf("#!/bin/sh\n%s=1 exec '%s' \"$@\"\n", envRunCaddy, self)
	if err := os.WriteFile(caddy, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	caddyfile := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(caddyfile, []byte(local.Replace(shown["caddy"])), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	env = append(env, strings.Fields(strings.TrimPrefix(start[0], "export "))...)

	app := strings.Fields(strings.TrimSuffix(local.Replace(tutorialStart[1]), " &"))
	startUntil(t, "..", env, "my app: listening on", app[0], app[1:]...)
	startUntil(t, "..", env, "serving initial configuration", caddy, "run", "--config", caddyfile)

	type step struct {
		command string
		want    []string
	}
	var steps []step
	for _, b := range blocks {
		if b.Lang != "console" {
			continue
		}
		for _, line := range strings.Split(strings.TrimSuffix(b.Text, "\n"), "\n") {
			if c, ok := strings.CutPrefix(line, "$ "); ok {
				steps = append(steps, step{command: c})
			} else if len(steps) > 0 {
				steps[len(steps)-1].want = append(steps[len(steps)-1].want, line)
			}
		}
	}
	if len(steps) < 10 {
		t.Fatalf("found %d commands in the tutorial's console blocks", len(steps))
	}
	var script strings.Builder
	for i, s := range steps {
		c := strings.ReplaceAll(local.Replace(s.command), "bin/caddy ", caddy+" ")
		if strings.Contains(c, " service-app ") && !strings.Contains(c, " check ") && !strings.Contains(c, "--emulator") {
			c += " --emulator " + emulatorAddress
		}
		fmt.Fprintf(&script, "echo '@@@ %d'\n%s 2>&1\n", i, c)
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir, cmd.Env = "..", env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	parts := regexp.MustCompile(`(?m)^@@@ \d+\n`).Split(back.Replace(string(out)), -1)[1:]
	if len(parts) != len(steps) {
		t.Fatalf("ran %d of %d commands:\n%s", len(parts), len(steps), out)
	}
	for i, s := range steps {
		got := strings.Split(strings.TrimSuffix(parts[i], "\n"), "\n")
		if parts[i] == "" {
			got = nil
		}
		if !linesMatch(got, s.want) {
			t.Errorf("$ %s\nprinted:\n%s\nthe tutorial says:\n%s", s.command, strings.Join(got, "\n"), strings.Join(s.want, "\n"))
		}
	}
}

// linesMatch compares printed lines with a page's, in which … stands for
// any text.
func linesMatch(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		parts := strings.Split(strings.TrimRight(want[i], " "), "…")
		for k := range parts {
			parts[k] = regexp.QuoteMeta(parts[k])
		}
		if !regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(strings.TrimRight(got[i], " ")) {
			return false
		}
	}
	return true
}

// startUntil starts a process in its own process group, waits until a line
// of its output holds ready, and stops the group when the test ends.
func startUntil(t *testing.T, dir string, env []string, ready, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		<-exited
	})
	var seen []string
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.Contains(sc.Text(), ready) {
			go io.Copy(io.Discard, pr)
			return
		}
	}
	t.Fatalf("%s exited before it printed %q:\n%s", name, ready, strings.Join(seen, "\n"))
}
