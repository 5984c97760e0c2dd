package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/emulator"
)

func init() {
	caddy.RegisterModule(storyQueryCounter{})
	httpcaddyfile.RegisterHandlerDirective("story_query_counter", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		h.Next()
		return storyQueryCounter{}, nil
	})
}

// storyQueries counts the subscription queries that reach the emulator in
// the user story, by the bearer token they carry.
var storyQueries struct {
	sync.Mutex
	byToken map[string]int
	total   atomic.Int64
}

// storyQueryCounter sits in front of service_emulator in the user story and
// counts the subscription queries it is sent. It exists only in the test
// binary.
type storyQueryCounter struct{}

func (storyQueryCounter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.story_query_counter",
		New: func() caddy.Module { return new(storyQueryCounter) },
	}
}

func (storyQueryCounter) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if strings.HasSuffix(r.URL.Path, "/subscription") {
		storyQueries.Lock()
		storyQueries.byToken[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]++
		storyQueries.Unlock()
		storyQueries.total.Add(1)
	}
	return next.ServeHTTP(w, r)
}

func storyQueriesFor(token string) int {
	storyQueries.Lock()
	defer storyQueries.Unlock()
	return storyQueries.byToken[token]
}

// storyApp is the app behind the gateway: it records what reaches it.
type storyApp struct {
	*httptest.Server
	mu     sync.Mutex
	hits   int
	header http.Header
	body   []byte
}

func newStoryApp(t *testing.T) *storyApp {
	a := &storyApp{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.hits++
		a.header, a.body = r.Header.Clone(), body
		a.mu.Unlock()
		_, _ = io.WriteString(w, "the app")
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *storyApp) last() (int, http.Header, []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hits, a.header, a.body
}

// storySite is one Caddy holding the emulated service and an app behind
// service_auth, service_subscription and service_webhook, configured with
// the demo settings.
func storySite(app string) string {
	return `
localhost:{port} {
	@service path /oauth/* /api/v2/applications/*
	route @service {
		story_query_counter
		service_emulator {
			client_id demo-client
			client_secret demo-client-secret
			redirect_uri http://localhost:8080/callback
			organization acme.example {
				id 1
				active_until "2099-01-01 00:00:00"
			}
			organization unpaid.example {
				id 2
				unpaid https://service.example/checkout/demo-app?org=unpaid.example
			}
			organization gone.example {
				id 3
				missing
			}
		}
	}
	route /webhooks {
		service_webhook {
			secret demo-app-secret
			module_key events-hook
			events project.translated project.approved
		}
		reverse_proxy ` + app + `
	}
	route /app/* {
		service_auth {
			hs256_secret demo-client-secret
			audience demo-client
			issuer service-emulator
			claim_header X-Service-User-Id sub
			claim_header X-Service-Domain domain
		}
		service_subscription {
			app_identifier demo-app
			base_url http://localhost:{port}
		}
		reverse_proxy ` + app + ` {
			header_up X-Organization {http.service.organization}
			header_up X-User {http.auth.user.id}
		}
	}
}
`
}

func TestE2EUserStory(t *testing.T) {
	storyQueries.Lock()
	storyQueries.byToken = map[string]int{}
	storyQueries.Unlock()
	app := newStoryApp(t)
	startCaddy(t, storySite(strings.TrimPrefix(app.URL, "http://")))

	mint := func(secret, domain string, orgID int64) string {
		t.Helper()
		tok, err := emulator.MintToken(secret, emulator.Token{
			Issuer: "service-emulator", Audience: "demo-client",
			UserID: 42, OrganizationID: orgID, Domain: domain, Lifetime: time.Hour,
		})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	t.Run("a member of a paying organization reaches the app with trusted headers", func(t *testing.T) {
		tok := mint("demo-client-secret", "acme.example", 1)
		for i := 0; i < 3; i++ {
			resp, body := get(t, noRedirects, "/app/projects", map[string]string{
				"Authorization":     "Bearer " + tok,
				"X-Service-User-Id": "1", // spoofed: must be replaced
				"X-Service_Domain":  "evil.example",
			})
			if resp.StatusCode != http.StatusOK || body != "the app" {
				t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
			}
		}
		_, h, _ := app.last()
		if got := h.Values("X-Service-User-Id"); len(got) != 1 || got[0] != "42" {
			t.Errorf("X-Service-User-Id %q, want [42]", got)
		}
		if got := h.Values("X-Service-Domain"); len(got) != 1 || got[0] != "acme.example" {
			t.Errorf("X-Service-Domain %q, want [acme.example]", got)
		}
		for name := range h {
			if name != "X-Service-Domain" && sameHeaderName(name, "X-Service-Domain") {
				t.Errorf("the spoofed %s reached the app", name)
			}
		}
		if h.Get("X-Organization") != "acme.example" || h.Get("X-User") != "42" {
			t.Errorf("placeholders: organization %q, user %q", h.Get("X-Organization"), h.Get("X-User"))
		}
		if n := storyQueriesFor(tok); n != 1 {
			t.Errorf("the emulator was asked %d times for three requests, want once (cached)", n)
		}
	})

	t.Run("an unpaid organization is sent to the subscribe link", func(t *testing.T) {
		tok := mint("demo-client-secret", "unpaid.example", 2)
		before, _, _ := app.last()
		resp, body := get(t, noRedirects, "/app/projects", map[string]string{"Authorization": "Bearer " + tok})
		const link = "https://service.example/checkout/demo-app?org=unpaid.example"
		if resp.StatusCode != http.StatusPaymentRequired || resp.Header.Get("Location") != link {
			t.Fatalf("%d Location %q, want 402 %s", resp.StatusCode, resp.Header.Get("Location"), link)
		}
		var out struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
			SubscribeLink string `json:"subscribe_link"`
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil || out.SubscribeLink != link || out.Error.Message == "" {
			t.Fatalf("body %s (%v)", body, err)
		}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
		}

		resp, body = get(t, noRedirects, "/app/projects", map[string]string{
			"Authorization": "Bearer " + tok,
			"Accept":        "text/html,application/xhtml+xml,*/*;q=0.8",
		})
		if resp.StatusCode != http.StatusPaymentRequired || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(body, `href="https://service.example/checkout/demo-app?org=unpaid.example"`) {
			t.Fatalf("browser: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if after, _, _ := app.last(); after != before {
			t.Error("an unpaid request reached the app")
		}
	})

	t.Run("an organization without a subscription is refused", func(t *testing.T) {
		tok := mint("demo-client-secret", "gone.example", 3)
		before, _, _ := app.last()
		resp, body := get(t, noRedirects, "/app/projects", map[string]string{"Authorization": "Bearer " + tok})
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `"message"`) {
			t.Fatalf("%d %s, want 403 with a JSON message", resp.StatusCode, body)
		}
		if after, _, _ := app.last(); after != before {
			t.Error("the request reached the app")
		}
	})

	t.Run("a request without a token is asked to sign in", func(t *testing.T) {
		total := storyQueries.total.Load()
		resp, body := get(t, noRedirects, "/app/projects", nil)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") ||
			!strings.Contains(body, `"message"`) {
			t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
		if storyQueries.total.Load() != total {
			t.Error("a request without a token caused a subscription query")
		}
	})

	t.Run("a forged token is refused without asking the service", func(t *testing.T) {
		forged := mint("another-secret", "acme.example", 1)
		total := storyQueries.total.Load()
		resp, body := get(t, noRedirects, "/app/projects", map[string]string{"Authorization": "Bearer " + forged})
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
		if strings.Contains(body, forged) {
			t.Error("the refusal repeats the token")
		}
		if storyQueriesFor(forged) != 0 || storyQueries.total.Load() != total {
			t.Error("the emulator was queried for a forged token")
		}
	})

	t.Run("a signed delivery reaches the app and a tampered one does not", func(t *testing.T) {
		body := []byte(`{"events":[{"event":"project.translated","project":{"id":"1"},"targetLanguage":{"id":"uk"}}]}`)
		d := emulator.Delivery{Body: body, Secret: "demo-app-secret", OrganizationID: "1", Domain: "acme.example", ModuleKey: "events-hook"}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		status, answer, err := emulator.SendDelivery(ctx, noRedirects, e2eURL("/webhooks"), d)
		if err != nil || status != http.StatusOK || string(answer) != "the app" {
			t.Fatalf("signed: %d %s %v", status, answer, err)
		}
		hits, h, got := app.last()
		if !bytes.Equal(got, body) || h.Get("X-Service-Signature") != emulator.SignDelivery(body, "demo-app-secret") {
			t.Fatalf("the app got %q with signature %q", got, h.Get("X-Service-Signature"))
		}

		tampered := d
		tampered.Signature = emulator.SignDelivery(body, "demo-app-secret")
		tampered.Body = bytes.Replace(body, []byte(`"uk"`), []byte(`"de"`), 1)
		status, answer, err = emulator.SendDelivery(ctx, noRedirects, e2eURL("/webhooks"), tampered)
		if err != nil || status != http.StatusUnauthorized || !bytes.Contains(answer, []byte(`"message"`)) {
			t.Fatalf("tampered: %d %s %v", status, answer, err)
		}
		if after, _, _ := app.last(); after != hits {
			t.Error("the tampered delivery reached the app")
		}
	})
}
