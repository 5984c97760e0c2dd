package caddymodule

import (
	"context"
	"os"
	"path/filepath"
	"testing"

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
