package caddymodule

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// TestServiceAppHandlersAreCaddyModules: service_app loads the handlers of
// its routes as Caddy modules, so the config's context owns them: when it
// is unloaded, they let go of what they hold (here the webhook's queue),
// whatever service_app itself does.
func TestServiceAppHandlersAreCaddyModules(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	dir := t.TempDir()
	desc := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(desc, []byte(appDescriptor), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	app := &ServiceApp{Descriptor: desc, ClientID: "c", ClientSecret: "s", AppSecrets: []string{"w"},
		Webhooks: map[string]*ServiceWebhook{appAllModules: {Queue: &WebhookQueue{To: "http://127.0.0.1:1", Dir: filepath.Join(dir, "queue")}}}}
	if err := app.Provision(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	defer app.Cleanup()
	wh := app.Routes[0].Webhook
	if wh == nil || wh.queue == nil {
		cancel()
		t.Fatal("the webhook route has no queue")
	}
	if refs, ok := webhookQueues.References(wh.queueKey); !ok || refs != 1 {
		t.Errorf("the queue is held %d times (%v) once loaded", refs, ok)
	}
	cancel()
	if refs, ok := webhookQueues.References(wh.queueKey); ok {
		t.Errorf("the queue is still held %d times once the config's context is unloaded: the handlers are not Caddy's", refs)
	}
}

// TestServiceAppLateHandlersReleasedAtCleanup: the handlers of routes made
// from a descriptor read in the background, which service_app provisions
// itself, are released by its Cleanup.
func TestServiceAppLateHandlersReleasedAtCleanup(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, appDescriptor)
	}))
	defer srv.Close()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	app := &ServiceApp{Descriptor: srv.URL + fmt.Sprintf("/manifest.json?late=%d", time.Now().UnixNano()), ClientID: "c", ClientSecret: "s", AppSecrets: []string{"w"},
		Webhooks: map[string]*ServiceWebhook{appAllModules: {Queue: &WebhookQueue{To: "http://127.0.0.1:1", Dir: filepath.Join(t.TempDir(), "queue")}}}}
	if err := app.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	up.Store(true)
	for i := 0; !app.DescriptorReady() && i < 200; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if !app.DescriptorReady() {
		_ = app.Cleanup()
		t.Fatal("the descriptor was not read in the background")
	}
	key := app.Routes[0].Webhook.queueKey
	if refs, ok := webhookQueues.References(key); !ok || refs != 1 {
		t.Errorf("the queue is held %d times (%v) once loaded", refs, ok)
	}
	if err := app.Cleanup(); err != nil {
		t.Error(err)
	}
	if refs, ok := webhookQueues.References(key); ok {
		t.Errorf("the queue is still held %d times after Cleanup", refs)
	}
}
