package servicegate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const systemdUnit = "examples/systemd/servicegate.service"

// TestSystemdUnit checks the example service unit: a user of its own,
// secrets from an environment file, Caddy's data in the state directory,
// the hardening options, and no --environ (which would print the secrets
// to the journal). Where systemd-analyze is installed, a copy whose
// ExecStart is this test binary (systemd checks that it exists) must
// verify without a single warning: systemd-analyze verify exits 0 on
// unknown keys and bad values, so its output is what tells.
func TestSystemdUnit(t *testing.T) {
	raw, err := os.ReadFile(systemdUnit)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(raw)
	for _, want := range []string{
		"User=servicegate", "EnvironmentFile=/etc/servicegate/servicegate.env", "StateDirectory=servicegate",
		"Environment=XDG_DATA_HOME=/var/lib/servicegate", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes",
		"PrivateTmp=yes", "CapabilityBoundingSet=CAP_NET_BIND_SERVICE", "Type=notify",
	} {
		if !strings.Contains(unit, "\n"+want) {
			t.Errorf("the unit lacks %s", want)
		}
	}
	for line := range strings.Lines(unit) {
		if strings.HasPrefix(line, "Exec") && strings.Contains(line, "--environ") {
			t.Errorf("the unit runs caddy with --environ, which prints the secrets to the journal: %s", line)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd); CI verifies the unit")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "servicegate.service")
	if err := os.WriteFile(copyPath, []byte(strings.ReplaceAll(unit, "/usr/local/bin/caddy", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", copyPath).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
