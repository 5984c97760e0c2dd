package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestServiceEmulatorCaddyfile(t *testing.T) {
	m := new(ServiceEmulator)
	err := m.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`service_emulator {
		client_id demo-client
		client_secret {env.CLIENT_SECRET}
		redirect_uri http://localhost:8080/callback http://localhost:3000/cb
		token_lifetime 90m
		code_lifetime 10s
		organization acme.example {
			id 1
			active_until 2030-01-01
		}
		organization unpaid.example {
			id 2
			unpaid https://service.example/checkout
		}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.ClientID != "demo-client" || m.ClientSecret != "{env.CLIENT_SECRET}" || len(m.RedirectURIs) != 2 ||
		time.Duration(m.TokenLifetime) != 90*time.Minute || time.Duration(m.CodeLifetime) != 10*time.Second {
		t.Fatalf("parsed %+v", m)
	}
	want := []EmulatedOrganization{
		{Domain: "acme.example", ID: 1, ActiveUntil: "2030-01-01"},
		{Domain: "unpaid.example", ID: 2, SubscribeLink: "https://service.example/checkout"},
	}
	if fmt.Sprint(m.Organizations) != fmt.Sprint(want) {
		t.Fatalf("organizations %+v, want %+v", m.Organizations, want)
	}
}

func TestServiceEmulatorCaddyfileErrors(t *testing.T) {
	const base = "client_id c\nclient_secret s\nredirect_uri http://localhost/cb\n"
	tests := []struct {
		name, block, want string
	}{
		{"argument on the directive", "", "wrong argument count"},
		{"no client id", "client_secret s\nredirect_uri http://localhost/cb", "needs client_id"},
		{"no redirect", "client_id c\nclient_secret s", "at least one redirect_uri"},
		{"two secrets", "client_secret a b\n" + base, "wrong argument count"},
		{"bad lifetime", base + "token_lifetime soon", "not a positive duration"},
		{"zero lifetime", base + "code_lifetime 0s", "not a positive duration"},
		{"unknown subdirective", base + "scope project", "unrecognized service_emulator sub-directive"},
		{"organization without domain", base + "organization {\nid 1\n}", "wrong argument count"},
		{"organization without id", base + "organization a.example {\nmissing\n}", "needs an id"},
		{"bad id", base + "organization a.example {\nid one\n}", "not a positive integer"},
		{"bad date", base + "organization a.example {\nid 1\nactive_until soon\n}", "is not a date"},
		{"two states", base + "organization a.example {\nid 1\nmissing\nunpaid https://x.example\n}", "give one of"},
		{"twice", base + "organization a.example {\nid 1\n}\norganization a.example {\nid 2\n}", "configured twice"},
		{"unknown organization subdirective", base + "organization a.example {\nid 1\nplan pro\n}", "unrecognized organization sub-directive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input := "service_emulator {\n" + tt.block + "\n}"
			if tt.name == "argument on the directive" {
				input = "service_emulator extra {\n" + base + "}"
			}
			err := new(ServiceEmulator).UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestServiceEmulatorProvision(t *testing.T) {
	t.Setenv("SERVICEGATE_TEST_EMULATOR_SECRET", "from-env")
	ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
	defer cancel()
	m := &ServiceEmulator{ClientID: "c", ClientSecret: "{env.SERVICEGATE_TEST_EMULATOR_SECRET}",
		RedirectURIs:  []string{"http://localhost/cb"},
		Organizations: []EmulatedOrganization{{Domain: "a.example", ID: 1, ActiveUntil: "2030-01-01T00:00:00+02:00"}}}
	if err := m.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	bad := []*ServiceEmulator{
		{ClientID: "c", ClientSecret: "{env.SERVICEGATE_TEST_UNSET_VARIABLE}", RedirectURIs: []string{"http://localhost/cb"}},
		{ClientID: "c", ClientSecret: "s", RedirectURIs: []string{"/relative"}},
		{ClientID: "c", ClientSecret: "s", RedirectURIs: []string{"http://localhost/cb"},
			Organizations: []EmulatedOrganization{{Domain: "a.example", ID: 1, ActiveUntil: "never"}}},
	}
	for i, m := range bad {
		err := m.Provision(ctx)
		if err == nil {
			t.Errorf("config %d provisioned", i)
		} else if strings.Contains(err.Error(), "from-env") {
			t.Errorf("error quotes the secret: %v", err)
		}
	}
}

const emulatorSite = `
localhost:{port} {
	service_emulator {
		client_id demo-client
		client_secret demo-client-secret
		redirect_uri http://localhost:8080/callback
		organization acme.example {
			id 1
			active_until "2030-01-01 00:00:00"
		}
		organization unpaid.example {
			id 2
			unpaid https://service.example/checkout/demo-app
		}
		organization gone.example {
			id 3
			missing
		}
	}
	respond "the app"
}
`

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func TestE2EServiceEmulatorFlow(t *testing.T) {
	startCaddy(t, emulatorSite)

	resp, err := noRedirects.Get(e2eURL("/some/app/page"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "the app" {
		t.Fatalf("other paths: %q, want the next handler's answer", body)
	}

	tests := []struct {
		organization string
		status       int
		body         string
	}{
		{"acme.example", 200, `{"expires":"2030-01-01 00:00:00"}`},
		{"unpaid.example", 402, `{"subscribe_link":"https://service.example/checkout/demo-app"}`},
		{"gone.example", 404, `{"message":"Subscription not found"}`},
	}
	for _, tt := range tests {
		t.Run(tt.organization, func(t *testing.T) {
			code := e2eAuthorize(t, tt.organization)
			tokens := e2eToken(t, map[string]string{"grant_type": "authorization_code", "client_id": "demo-client",
				"client_secret": "demo-client-secret", "redirect_uri": "http://localhost:8080/callback", "code": code})
			status, body := e2eSubscription(t, tokens["access_token"])
			if status != tt.status || body != tt.body {
				t.Fatalf("subscription: %d %s, want %d %s", status, body, tt.status, tt.body)
			}

			refreshed := e2eToken(t, map[string]string{"grant_type": "refresh_token", "client_id": "demo-client",
				"client_secret": "demo-client-secret", "refresh_token": tokens["refresh_token"]})
			if refreshed["refresh_token"] == tokens["refresh_token"] {
				t.Fatal("the refresh token was not rotated")
			}
			status, body = e2eSubscription(t, refreshed["access_token"])
			if status != tt.status || body != tt.body {
				t.Fatalf("subscription after refresh: %d %s, want %d %s", status, body, tt.status, tt.body)
			}
		})
	}
}

// e2eAuthorize approves an authorization request for organization and
// returns the code.
func e2eAuthorize(t *testing.T, organization string) string {
	t.Helper()
	q := url.Values{"client_id": {"demo-client"}, "redirect_uri": {"http://localhost:8080/callback"},
		"response_type": {"code"}, "scope": {"project"}, "state": {"st-" + organization},
		"decision": {"approve"}, "organization": {organization}}
	resp, err := noRedirects.Get(e2eURL("/oauth/authorize?" + q.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil {
		t.Fatalf("authorize: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if loc.Host != "localhost:8080" || loc.Query().Get("state") != "st-"+organization || loc.Query().Get("code") == "" {
		t.Fatalf("redirect %s", loc)
	}
	return loc.Query().Get("code")
}

func e2eToken(t *testing.T, req map[string]string) map[string]string {
	t.Helper()
	b, _ := json.Marshal(req)
	resp, err := noRedirects.Post(e2eURL("/oauth/token"), "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("token: %d %v %v", resp.StatusCode, out, err)
	}
	if out["token_type"] != "bearer" || out["expires_in"] != float64(7200) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("token response %v, Cache-Control %q", out, resp.Header.Get("Cache-Control"))
	}
	return map[string]string{"access_token": out["access_token"].(string), "refresh_token": out["refresh_token"].(string)}
}

func e2eSubscription(t *testing.T, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e2eURL("/api/v2/applications/demo-app/subscription"), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

func TestServiceEmulatorKeptAcrossReloads(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
	defer cancel()
	config := func(secret string) *ServiceEmulator {
		return &ServiceEmulator{ClientID: "reload-client", ClientSecret: secret, RedirectURIs: []string{"http://localhost/cb"}}
	}
	first, second, changed := config("s1"), config("s1"), config("s2")
	for _, m := range []*ServiceEmulator{first, second, changed} {
		if err := m.Provision(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if first.server != second.server {
		t.Error("an unchanged config got a new emulator")
	}
	if first.server == changed.server {
		t.Error("a changed secret kept the old emulator")
	}
	for _, m := range []*ServiceEmulator{first, second, changed} {
		if err := m.Cleanup(); err != nil {
			t.Fatal(err)
		}
	}
	again := config("s1")
	if err := again.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	defer again.Cleanup()
	if again.server == first.server {
		t.Error("the emulator outlived every config that used it")
	}
}

func TestE2EServiceEmulatorSurvivesReload(t *testing.T) {
	startCaddy(t, emulatorSite)
	tokens := e2eToken(t, map[string]string{"grant_type": "authorization_code", "client_id": "demo-client",
		"client_secret": "demo-client-secret", "redirect_uri": "http://localhost:8080/callback",
		"code": e2eAuthorize(t, "acme.example")})

	// Another part of the site changes; the emulator's config does not.
	startCaddy(t, strings.Replace(emulatorSite, `respond "the app"`, `respond "the app, reloaded"`, 1))
	refreshed := e2eToken(t, map[string]string{"grant_type": "refresh_token", "client_id": "demo-client",
		"client_secret": "demo-client-secret", "refresh_token": tokens["refresh_token"]})
	if status, body := e2eSubscription(t, refreshed["access_token"]); status != http.StatusOK {
		t.Fatalf("after reload: %d %s", status, body)
	}
}
