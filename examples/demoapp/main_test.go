package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/descriptor"
)

// TestManifestHasNoDefects: the descriptor the demo app serves is one
// service_app accepts, with the modules the walk-through calls.
func TestManifestHasNoDefects(t *testing.T) {
	d, err := descriptor.Parse("examples/demoapp/manifest.json", manifest)
	if err != nil {
		t.Fatal(err)
	}
	if d.Identifier != "demo-app" || len(d.FileFormats) != 4 || len(d.PreExports) != 1 || len(d.Webhooks) != 1 {
		t.Errorf("modules: %d file formats, %d pre-exports, %d webhooks", len(d.FileFormats), len(d.PreExports), len(d.Webhooks))
	}
}

// TestOnlyGatewayHost: the app answers requests for the gateway's host, and
// refuses with 421 any other, such as a page rebound to 127.0.0.1, however
// it spells identity headers; the descriptor is served for any host.
func TestOnlyGatewayHost(t *testing.T) {
	h := newHandler(strings.Split(defaultGatewayHosts, ","))
	tests := []struct {
		host, path string
		status     int
	}{
		{"localhost:8080", "/api/whoami", http.StatusOK},
		{"LOCALHOST:8080", "/api/whoami", http.StatusOK},
		{"127.0.0.1:3000", "/api/whoami", http.StatusMisdirectedRequest},
		{"rebound.example:3000", "/api/whoami", http.StatusMisdirectedRequest},
		{"rebound.example:3000", "/", http.StatusMisdirectedRequest},
		{"localhost:3000", "/api/whoami", http.StatusMisdirectedRequest},
		{"", "/api/whoami", http.StatusMisdirectedRequest},
		{"127.0.0.1:3000", "/manifest.json", http.StatusOK},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(http.MethodGet, "http://x"+tt.path, nil)
		req.Host = tt.host
		req.Header.Set("X-Service-User-Id", "7")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.status {
			t.Errorf("Host %q %s: %d, want %d", tt.host, tt.path, rec.Code, tt.status)
		}
		if rec.Code == http.StatusMisdirectedRequest &&
			!strings.Contains(rec.Body.String(), `"message":"This app answers only through its gateway (localhost:8080)`) {
			t.Errorf("Host %q: body %s", tt.host, rec.Body)
		}
	}
}

// TestDefaultGatewayHostIsTheExample: the default host is the site of
// Caddyfile.example, whose reverse_proxy passes it on as Host.
func TestDefaultGatewayHostIsTheExample(t *testing.T) {
	raw, err := os.ReadFile("../../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "\nhttp://"+defaultGatewayHosts+" {\n") || strings.Contains(string(raw), "header_up Host") {
		t.Errorf("Caddyfile.example does not serve the app at http://%s with the Host passed on", defaultGatewayHosts)
	}
}
