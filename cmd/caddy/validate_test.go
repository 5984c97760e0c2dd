package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// validateDescriptor is an app with lifecycle events and a webhook module.
const validateDescriptor = `{
  "identifier": "validated-app",
  "modules": {"webhook": [{"key": "events-hook", "url": "/webhooks", "events": ["project.translated"]}]},
  "events": {"installed": "/installed", "uninstall": "/uninstall"}
}`

// validateCaddyfile is a config with installations and a webhook queue on
// disk, serving on port, with the installations key key.
func validateCaddyfile(desc string, port int, key string) string {
	return fmt.Sprintf(`{
	admin off
	persist_config off
	auto_https off
}

http://127.0.0.1:%d {
	service_app {
		descriptor %s
		client_id demo-client
		client_secret demo-client-secret
		service http://127.0.0.1:9
		installations {
			key "%s"
		}
		webhook events-hook {
			queue {
				to http://127.0.0.1:9
			}
		}
	}
	reverse_proxy 127.0.0.1:9
}
`, port, desc, key)
}

// TestValidateBesideRunningCaddy: `caddy validate` (the binary built from
// this directory) of the very config a running Caddy serves, with
// installations and a webhook queue on disk that the running Caddy holds
// locked, succeeds; a config whose installations cannot work still fails
// validation.
func TestValidateBesideRunningCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs Caddy: skipped in -short mode")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "caddy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	desc, conf, bad := filepath.Join(dir, "manifest.json"), filepath.Join(dir, "Caddyfile"), filepath.Join(dir, "Caddyfile.bad")
	const key = "an installations key of 32 bytes+"
	for path, body := range map[string]string{
		desc: validateDescriptor,
		conf: validateCaddyfile(desc, port, key),
		bad:  validateCaddyfile(desc, port, "too short"),
	} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	env := append(os.Environ(), "XDG_DATA_HOME="+data, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))

	logf, err := os.Create(filepath.Join(dir, "caddy.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	run := exec.Command(bin, "run", "--config", conf, "--adapter", "caddyfile")
	run.Env, run.Stdout, run.Stderr = env, logf, logf
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = run.Process.Kill()
		_ = run.Wait()
	})
	// Serving: the config has started, and its stores are open.
	health := fmt.Sprintf("http://127.0.0.1:%d/servicegate/health", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(health)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("Caddy did not serve: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, pattern := range []string{"servicegate/installations/*.db", "servicegate/webhook-queue/queue.db"} {
		if files, _ := filepath.Glob(filepath.Join(data, "caddy", pattern)); len(files) != 1 {
			t.Fatalf("the running Caddy has no store %s in its data directory: %v", pattern, files)
		}
	}

	validate := exec.Command(bin, "validate", "--config", conf, "--adapter", "caddyfile")
	validate.Env = env
	if out, err := validate.CombinedOutput(); err != nil {
		t.Fatalf("caddy validate beside the running Caddy: %v\n%s", err, out)
	}

	validate = exec.Command(bin, "validate", "--config", bad, "--adapter", "caddyfile")
	validate.Env = env
	out, err := validate.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "key") {
		t.Fatalf("caddy validate of a config with a short installations key: %v\n%s", err, out)
	}
}
