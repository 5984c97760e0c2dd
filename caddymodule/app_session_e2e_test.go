package caddymodule

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/servicegate/servicegate/emulator"
)

// cookieTransport adds a Cookie header to every request, as a browser
// holding a session would.
type cookieTransport struct{ cookie string }

func (c cookieTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Cookie", c.cookie)
	return http.DefaultTransport.RoundTrip(r)
}

// TestServiceAppSessionCookieNeverReachesApp: with sign_in, the session
// cookie (and the login's state cookie) is taken off every request
// service_app passes to the app: public paths, requests with a token,
// webhook and file modules; the app's own cookies stay.
func TestServiceAppSessionCookieNeverReachesApp(t *testing.T) {
	app := newAppUpstream(t)
	path := appDescriptorFile(t)
	startCaddy(t, `http://localhost:{port} {
	service_app {
		descriptor `+path+`
		client_id demo-client
		client_secret demo-client-secret
		app_secret demo-app-secret
		service http://127.0.0.1:1
		public /assets/*
		sign_in {
			cookie_secure off
		}
	}
	reverse_proxy `+strings.TrimPrefix(app.URL, "http://")+`
}
`)
	const sent = "theme=dark; servicegate_session=secret-session-id; servicegate_session_state=s; lang=uk"
	client := &http.Client{Timeout: 20 * time.Second, Transport: cookieTransport{sent}}
	tok, err := emulator.MintToken("demo-client-secret", emulator.Token{
		Issuer: "service-emulator", Audience: "demo-client", UserID: 7, OrganizationID: 1, Domain: "acme.example", Lifetime: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, status, want int) {
		t.Helper()
		if status != want {
			t.Fatalf("%s: status %d, want %d", what, status, want)
		}
		if got := strings.Join(app.header().Values("Cookie"), "; "); got != "theme=dark; lang=uk" {
			t.Errorf("%s: the app received Cookie %q, want only its own cookies", what, got)
		}
	}

	resp, _ := request(t, client, "GET", "/assets/app.css", nil, nil)
	check("a public path", resp.StatusCode, 200)

	resp, _ = request(t, client, "GET", "/api/whoami", map[string]string{"Authorization": "Bearer " + tok}, nil)
	check("a request with a token", resp.StatusCode, 200)

	resp, _ = request(t, client, "GET", "/api/whoami?jwtToken="+tok, nil, nil)
	check("a request with a query token", resp.StatusCode, 200)

	job := formatJob("parse-file", map[string]any{"file": map[string]any{"id": 1, "name": "a.kv", "content": b64([]byte("greeting = Hello\n"))}})
	resp, _ = request(t, client, "POST", "/file-format", map[string]string{"Content-Type": "application/json"}, job)
	check("a file module", resp.StatusCode, 200)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, _, err := emulator.SendDelivery(ctx, client, e2eURL("/webhooks"), emulator.Delivery{
		Body:   []byte(`{"events":[{"event":"project.translated","project":{"id":"1"},"targetLanguage":{"id":"uk"}}]}`),
		Secret: "demo-app-secret", OrganizationID: "1", Domain: "acme.example", ModuleKey: "events-hook",
	})
	if err != nil {
		t.Fatal(err)
	}
	check("a webhook module", status, 200)
}
