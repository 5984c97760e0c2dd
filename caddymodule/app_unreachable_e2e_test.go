package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/servicegate/servicegate/emulator"
)

// TestServiceAppUnreachableE2E: a request whose app does not answer its
// connection gets 502 with a JSON message naming the app's address and the
// cause, on the guard's route and on a module's; with handle_errors, the
// error routes get the status and the message.
func TestServiceAppUnreachableE2E(t *testing.T) {
	closed := fmt.Sprintf("127.0.0.1:%d", freePort()) // nothing listens there
	site := func(errorRoutes string) string {
		return `
http://localhost:{port} {
	service_app {
		descriptor ` + appDescriptorFile(t) + `
		client_id demo-client
		client_secret demo-client-secret
		app_secret demo-app-secret
		public /assets/*
	}
	reverse_proxy ` + closed + errorRoutes + `
}
`
	}
	startCaddy(t, site(""))
	client := &http.Client{Timeout: 20 * time.Second}
	user, err := emulator.MintToken("demo-client-secret", emulator.Token{Issuer: "service-emulator", Audience: "demo-client",
		UserID: 7, OrganizationID: 1, Domain: "acme.example", Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	want := "The app at " + closed + " could not be reached: connection refused."
	job := formatJob("parse-file", map[string]any{"file": map[string]any{"id": 1, "name": "a.kv", "content": b64([]byte("greeting = Hello\n"))}})
	for _, c := range []struct {
		method, path string
		header       map[string]string
		body         []byte
	}{
		{"GET", "/assets/app.css", nil, nil},
		{"GET", "/api/projects", map[string]string{"Authorization": "Bearer " + user}, nil},
		{"POST", "/file-format", map[string]string{"Content-Type": "application/json"}, job},
	} {
		resp, body := request(t, client, c.method, c.path, c.header, c.body)
		var out errorBody
		if resp.StatusCode != http.StatusBadGateway || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
			json.Unmarshal([]byte(body), &out) != nil || out.Error.Message != want {
			t.Errorf("%s %s: %d %q %s, want 502 with {\"error\":{\"message\":%q}}", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, want)
		}
	}

	startCaddy(t, site(`
	handle_errors {
		respond "{err.status_code}: {err.message}" {err.status_code}
	}`))
	resp, body := request(t, client, "GET", "/assets/app.css", nil, nil)
	if resp.StatusCode != http.StatusBadGateway || body != "502: "+want {
		t.Errorf("with handle_errors: %d %q, want 502 %q", resp.StatusCode, body, "502: "+want)
	}
}
