package caddymodule

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/servicegate/servicegate/cluster/redistest"
)

// TestServiceOAuthRedisSessionsE2E: with the servicegate global option,
// logins and sessions live in Redis by default, sealed; a login begun
// under one configuration finishes under another that shares nothing in
// memory with it; Redis down answers 503 with Retry-After and keeps the
// session.
func TestServiceOAuthRedisSessionsE2E(t *testing.T) {
	srv := redistest.Start(t)
	rig := newOAuthRig(t)
	global := "\tservicegate {\n\t\tredis " + srv.URL() + "\n\t\ttimeout 500ms\n\t}"
	startCaddyWithGlobal(t, global, rig.site(""))

	authorize := rig.startLogin(rig.client, "/reports")
	if keys, _ := srv.Do("KEYS", "servicegate:oauth-login:*"); keys == "" || strings.Contains(keys, "\n") {
		t.Fatalf("login keys in Redis: %q, want one", keys)
	}
	// Another configuration: its in-memory store would be a new one.
	startCaddyWithGlobal(t, global, rig.site("max_sessions 5"))
	callback := rig.consent(rig.client, authorize, "approve")
	resp, body := rig.get(rig.client, callback, true)
	if got := rig.expectRedirect(resp, body, "callback"); got != "/reports" {
		t.Fatalf("sent back to %q, want /reports", got)
	}
	token := rig.through(rig.client, "/", false).Authorization
	if !strings.HasPrefix(token, "Bearer ey") {
		t.Fatalf("the app got %q", token)
	}
	if keys, _ := srv.Do("KEYS", "servicegate:oauth-login:*"); keys != "" {
		t.Fatalf("the login was not removed from Redis: %q", keys)
	}
	keys, _ := srv.Do("KEYS", "servicegate:oauth-session:*")
	if keys == "" || strings.Contains(keys, "\n") {
		t.Fatalf("session keys in Redis: %q, want one", keys)
	}
	raw, _ := srv.Do("GET", keys)
	if strings.Contains(raw, strings.TrimPrefix(token, "Bearer ")) || strings.Contains(raw, "acme.example") {
		t.Fatal("Redis holds the session in clear")
	}

	srv.Stop()
	start := time.Now()
	resp, body = rig.get(rig.client, e2eURL("/"), false)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(body, `"message"`) {
		t.Fatalf("with Redis down: %d Retry-After %q %s, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if strings.Contains(strings.Join(resp.Header.Values("Set-Cookie"), ";"), "servicegate_session=") {
		t.Fatal("the session cookie was touched while Redis was down")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the answer took %v", d)
	}
	if resp, _ := rig.get(newOAuthClient(t), e2eURL("/"), true); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a new sign-in with Redis down: %d, want 503", resp.StatusCode)
	}
	srv.Restart()
	// Redis lost everything on its crash: the browser signs in again.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := rig.get(rig.client, e2eURL("/"), true)
		if resp.StatusCode == http.StatusFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Redis came back: %d, want a redirect to sign in", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServiceOAuthRedisStoreNeedsTheOption: session_store redis without
// the global option is refused with a message that says what is missing.
func TestServiceOAuthRedisStoreNeedsTheOption(t *testing.T) {
	m := &ServiceOAuth{ClientID: "c", ClientSecret: "s", AuthURL: "http://127.0.0.1:1", Scopes: []string{"project"}, SessionStore: oauthStoreRedis}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
	defer cancel()
	err := m.Provision(ctx)
	if err == nil || !strings.Contains(err.Error(), "servicegate global option") {
		t.Fatalf("got %v, want an error naming the servicegate global option", err)
	}
}
