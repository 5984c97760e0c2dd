package conformance

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/servicegate/servicegate/emulator"
)

// TestConformanceDeliverySecret: through a stand-in gateway (it answers
// the health check, and takes a delivery only when it is signed with the
// secret it expects), a run with InstallationSecret signs with what the
// stand-in emulator hands over for the organization, or with Secret
// when the emulator has no installation; without InstallationSecret, it
// signs with Secret, and a refusal names the secret that signed it.
func TestConformanceDeliverySecret(t *testing.T) {
	var expect, installed atomic.Value
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/manifest.json":
			io.WriteString(w, `{"identifier":"hook-app","authentication":{"type":"service_app","clientId":"c"},
"modules":{"webhook":[{"key":"hook","url":"/hook","events":["project.translated"]}]}}`)
		case "/servicegate/health":
			io.WriteString(w, `{"status":"ok","checks":[]}`)
		case "/hook":
			body, _ := io.ReadAll(r.Body)
			if r.Header.Get("X-Service-Signature") != emulator.SignDelivery(body, expect.Load().(string)) {
				http.Error(w, `{"error":{"message":"The signature of the delivery does not match its body."}}`, http.StatusUnauthorized)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	}))
	defer gateway.Close()
	emu := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != emulator.APIPrefix+"organizations/acme.example/secret" {
			http.NotFound(w, r)
			return
		}
		if s := installed.Load().(string); s != "" {
			io.WriteString(w, `{"secret":"`+s+`"}`)
			return
		}
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"error":{"message":"The app is not installed for acme.example: it has no app secret."}}`)
	}))
	defer emu.Close()

	run := func(installationSecret bool) *Report {
		t.Helper()
		rep, err := Run(context.Background(), Options{App: gateway.URL, Secret: "default-secret", Emulator: emu.URL,
			Domain: "acme.example", OrganizationID: 1, InstallationSecret: installationSecret})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	for _, tc := range []struct {
		name                    string
		installed, gatewayWants string
		installationSecret      bool
		passed                  bool
		reason                  string
	}{
		{"installed", "installation-secret", "installation-secret", true, true, ""},
		{"not installed", "", "default-secret", true, true, ""},
		{"--secret given", "installation-secret", "installation-secret", false, false, "the secret of --secret"},
		{"installation unknown to the gateway", "installation-secret", "default-secret", true, false, "the installation secret the emulator at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			installed.Store(tc.installed)
			expect.Store(tc.gatewayWants)
			rep := run(tc.installationSecret)
			if len(rep.Cases) != 2 {
				t.Fatalf("%d cases, want 2", len(rep.Cases))
			}
			for _, c := range rep.Cases {
				if (c.Status == Passed) != tc.passed || !strings.Contains(c.Reason, tc.reason) {
					t.Errorf("%s: %s %q, want passed %v and a reason with %q", c.ID, c.Status, c.Reason, tc.passed, tc.reason)
				}
			}
		})
	}
}
