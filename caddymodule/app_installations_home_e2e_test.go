package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
)

// homeAppSite is a site at address of an app with lifecycle events whose
// descriptor has identifier, under clientID, keeping installations.
func homeAppSite(t *testing.T, address, identifier, clientID, service, upstream string) string {
	t.Helper()
	desc := filepath.Join(t.TempDir(), identifier+".json")
	body := strings.Replace(installationsDescriptor, `"identifier": "demo-app"`, `"identifier": "`+identifier+`"`, 1)
	if err := os.WriteFile(desc, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`
%s {
	service_app {
		descriptor %s
		client_id %s
		client_secret demo-client-secret
		service %s
		installations {
			key "%s"
		}
	}
	reverse_proxy %s
}
`, address, desc, clientID, service, testInstallationsKey, strings.TrimPrefix(upstream, "http://"))
}

// TestServiceAppInstallationsHomeE2E: with `storage file_system <root>`,
// the installations are kept under root; a second app (its own identifier
// and client id) on the same machine loads without a warning, and the
// first app back under another client id is warned that its client_id
// changed.
func TestServiceAppInstallationsHomeE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped in -short mode")
	}
	// A data directory of its own, holding no store of an earlier test
	// (which would be used where it is, not moved).
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	svc, service := newInstallationsService(t)
	app := newLifecycleUpstream(t)
	root, logFile := t.TempDir(), filepath.Join(t.TempDir(), "caddy.log")
	global := strings.TrimSuffix(e2eGlobal(), "}\n") + fmt.Sprintf("\tstorage file_system %s\n\tlog {\n\t\toutput file %s\n\t}\n}\n", root, logFile)
	first := homeAppSite(t, fmt.Sprintf("http://localhost:%d", e2eHTTPPort), "first-app", "demo-client", service, app.URL)
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: e2eAdminPort})
	load := func(sites ...string) {
		t.Helper()
		loadCaddyfile(tester, global+strings.Join(sites, ""))
	}
	const warning = "installations store for client_id"
	warned := func() []string {
		var lines []string
		for _, l := range readLogLines(t, logFile) {
			if msg, _ := l["msg"].(string); strings.Contains(msg, warning) {
				lines = append(lines, msg)
			}
		}
		return lines
	}

	load(first)
	call, err := svc.InstallApp(context.Background(), nil, e2eURL("/installed"), "acme.example", service)
	if err != nil || !call.OK() {
		t.Fatalf("install: %+v %v", call, err)
	}
	sum := sha256.Sum256([]byte("demo-client"))
	file := filepath.Join(root, "servicegate", "installations", hex.EncodeToString(sum[:8])+".db")
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the installations are not kept under the storage root: %v", err)
	}

	// A second app, with its own identifier and client id, beside it.
	load(first, homeAppSite(t, fmt.Sprintf("http://127.0.0.1:%d", e2eHTTPPort), "second-app", "second-client", service, app.URL))
	if lines := warned(); len(lines) != 0 {
		t.Errorf("a second app was warned that its client_id changed: %q", lines)
	}

	// The first app back under another client id.
	load(homeAppSite(t, fmt.Sprintf("http://localhost:%d", e2eHTTPPort), "first-app", "renamed-client", service, app.URL))
	lines := warned()
	if len(lines) != 1 || !strings.Contains(lines[0], "client_id renamed-client is empty") || !strings.Contains(lines[0], "demo-client (") {
		t.Errorf("the first app under another client id: warnings %q, want one naming renamed-client and demo-client's store", lines)
	}
}
