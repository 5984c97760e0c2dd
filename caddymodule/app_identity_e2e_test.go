package caddymodule

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/servicegate/servicegate/emulator"
)

// identityDescriptor declares a file module, a webhook module and the
// lifecycle events: a route of each kind service_app answers.
const identityDescriptor = `{
  "identifier": "demo-app",
  "modules": {
    "custom-file-format": [{"key": "kv-format", "type": "kv", "url": "/file-format"}],
    "webhook": [{"key": "events-hook", "url": "/webhooks", "events": ["project.translated"]}]
  },
  "events": {"installed": "/installed", "uninstall": "/uninstall", "subscription_paid": "/subscription-paid"}
}`

// spoofedIdentity is what a client writes under the names of the headers
// the gateway sets for the app.
var spoofedIdentity = map[string]string{
	"X-Service-User-Id":   "spoofed",
	"X_Service_User_Id":   "spoofed",
	"X-Service-Domain":    "evil.example",
	"X-Service-App-Token": "forged",
}

// spoofedConnection is a Connection header that would make reverse_proxy
// drop, as hop-by-hop, the identity headers the gateway sets.
const spoofedConnection = "X-Service-User-Id, X-Service-Domain, X-Service-App-Token"

// spoofing sends every request with spoofedIdentity and connection as its
// Connection header.
type spoofing struct{ connection string }

func (s spoofing) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range spoofedIdentity {
		r.Header.Set(k, v)
	}
	r.Header.Set("Connection", s.connection)
	return http.DefaultTransport.RoundTrip(r)
}

// TestServiceAppIdentityHeadersE2E: on every route of service_app, the
// identity headers a client sends never reach the app, and its Connection
// header cannot take away the ones the gateway sets: on a lifecycle call,
// a public path, a module url, the descriptor, a verified webhook delivery
// (which keeps the organization its signature vouches for and gets its
// organization's app token) and the API (which gets the token's user and
// organization and their app token).
func TestServiceAppIdentityHeadersE2E(t *testing.T) {
	svc, service := newInstallationsService(t)
	app := newAppUpstream(t)
	desc := filepath.Join(t.TempDir(), "app.json")
	if err := os.WriteFile(desc, []byte(identityDescriptor), 0o600); err != nil {
		t.Fatal(err)
	}
	startCaddy(t, `
http://localhost:{port} {
	service_app {
		descriptor `+desc+`
		client_id demo-client
		client_secret demo-client-secret
		service `+service+`
		public /assets/*
		installations {
			key "`+testInstallationsKey+`"
		}
	}
	reverse_proxy `+strings.TrimPrefix(app.URL, "http://")+`
}
`)
	// On the routes where the gateway sets no identity header, the
	// Connection header names only one, so that reverse_proxy does not
	// drop the others the client sent.
	client := &http.Client{Timeout: 20 * time.Second, Transport: spoofing{"X-Service-User-Id"}}
	withConnection := &http.Client{Timeout: 20 * time.Second, Transport: spoofing{spoofedConnection}}
	// noneSpoofed checks that none of the client's values reached the app
	// and, for each name in want, that the app got exactly that value.
	noneSpoofed := func(t *testing.T, want map[string]string) {
		t.Helper()
		h := app.header()
		for name := range h {
			for spoofed := range spoofedIdentity {
				if strings.EqualFold(strings.ReplaceAll(name, "_", "-"), strings.ReplaceAll(spoofed, "_", "-")) && want[name] == "" {
					t.Errorf("the client's %s: %q reached the app", name, h[name])
				}
			}
		}
		for name, v := range want {
			if got := h.Values(name); len(got) != 1 || got[0] != v {
				t.Errorf("%s %q, want [%s]", name, got, v)
			}
		}
	}

	// A lifecycle call, sent by the service through a client that adds
	// the spoofed headers.
	call, err := svc.InstallApp(context.Background(), client, e2eURL("/installed"), "acme.example", service)
	if err != nil || !call.OK() || app.reached("/installed") != 1 {
		t.Fatalf("install: %+v %v", call, err)
	}
	for _, v := range []string{"spoofed", "evil.example", "forged"} {
		for name, got := range app.header() {
			if strings.Join(got, ",") == v {
				t.Errorf("lifecycle call: the client's %s: %s reached the app", name, v)
			}
		}
	}
	acme, _ := svc.AppSecret("acme.example")

	t.Run("public path", func(t *testing.T) {
		if resp, body := request(t, client, "GET", "/assets/app.css", nil, nil); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		noneSpoofed(t, nil)
	})
	t.Run("module url", func(t *testing.T) {
		job := formatJob("parse-file", map[string]any{"file": map[string]any{"id": 1, "name": "a.kv", "content": b64([]byte("greeting = Hello\n"))}})
		if resp, body := request(t, client, "POST", "/file-format", map[string]string{"Content-Type": "application/json"}, job); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		noneSpoofed(t, nil)
	})
	t.Run("descriptor", func(t *testing.T) {
		resp, body := request(t, client, "GET", "/manifest.json", nil, nil)
		if resp.StatusCode != 200 || !strings.Contains(body, `"demo-app"`) || app.reached("/manifest.json") != 0 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	})
	t.Run("webhook delivery", func(t *testing.T) {
		extra := map[string]string{"Connection": spoofedConnection}
		for k, v := range spoofedIdentity {
			if k != "X-Service-Domain" { // the delivery's own, vouched for by its signature
				extra[k] = v
			}
		}
		if status, body := deliverFor(t, "acme.example", acme, extra); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		noneSpoofed(t, map[string]string{"X-Service-Domain": "acme.example", appDefaultTokenHeader: app.header().Get(appDefaultTokenHeader)})
		if tok := app.header().Get(appDefaultTokenHeader); tok == "" || issuedFor(t, tok) != "acme.example" {
			t.Errorf("the delivery reached the app without acme's app token: %q", tok)
		}
	})
	t.Run("API with a token", func(t *testing.T) {
		user, err := emulator.MintToken("demo-client-secret", emulator.Token{Issuer: "service-emulator", Audience: "demo-client",
			UserID: 7, OrganizationID: 1, Domain: "acme.example", Lifetime: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if resp, body := request(t, withConnection, "GET", "/api/projects", map[string]string{"Authorization": "Bearer " + user}, nil); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		noneSpoofed(t, map[string]string{"X-Service-User-Id": "7", "X-Service-Domain": "acme.example", appDefaultTokenHeader: app.header().Get(appDefaultTokenHeader)})
		if tok := app.header().Get(appDefaultTokenHeader); tok == "" || issuedFor(t, tok) != "acme.example" {
			t.Errorf("the API request reached the app without acme's app token: %q", tok)
		}
	})
}
