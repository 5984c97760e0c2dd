package caddymodule

import (
	"os"
	"path/filepath"
	"testing"
)

// TestConsoleBrowserConformance: the console's Conformance section runs
// the cases through the gateway, lists each one as it ends with its
// status, says the outcome in its status line, and the calls show in the
// log.
func TestConsoleBrowserConformance(t *testing.T) {
	page, _ := openConsole(t)
	installAcme(t, page)
	file := filepath.Join(t.TempDir(), "strings.kv")
	if err := os.WriteFile(file, []byte("greeting = Hello\nfarewell = Goodbye\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	page.waitFor(t, "the organizations of the section", sel(`[data-testid="conformance-org"] option[value="acme.example"]`)+" !== null")
	page.choose(t, `[data-testid="conformance-org"]`, "acme.example")
	page.setFile(t, `[data-testid="conformance-files"]`, file)
	page.click(t, `[data-action="conformance"]`)
	page.waitFor(t, "the run's end", `['passed', 'failed', 'error'].includes(`+sel(`[data-testid="conformance-status"]`)+`.dataset.state)`)
	if state := page.eval(t, sel(`[data-testid="conformance-status"]`)+".dataset.state"); state != "passed" {
		t.Fatalf("the run: %s: %s", state, page.eval(t, `Array.from(document.querySelectorAll('[data-testid="conformance-case"][data-status="failed"]')).map((e) => e.textContent).join('\n') || `+sel(`[data-testid="conformance-status"]`)+`.textContent`))
	}
	if n := page.eval(t, `String(document.querySelectorAll('[data-testid="conformance-case"][data-status="passed"]').length)`); n != "21" {
		t.Errorf("%s cases passed", n)
	}
	page.waitFor(t, "the run's calls in the log", sel(`[data-testid="call"][data-kind="parse-file"]`)+` !== null && `+
		sel(`[data-testid="call"][data-kind="file-pre-export"]`)+` !== null`)
}
