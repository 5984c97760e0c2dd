package caddymodule

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/queue"
)

// TestServiceAppWebhookTimeoutE2E: a webhook module of service_app whose
// app does not acknowledge a delivery within the module's timeout is given
// up on: the request to the app is cancelled, and the service gets 504
// naming the timeout and where it comes from.
func TestServiceAppWebhookTimeoutE2E(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done() // acknowledges nothing until the gateway gives up
		cancelled <- struct{}{}
	}))
	t.Cleanup(app.Close)
	desc := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(desc, []byte(appDescriptor), 0o600); err != nil {
		t.Fatal(err)
	}
	startCaddy(t, `
http://localhost:{port} {
	service_app {
		descriptor `+desc+`
		client_id demo-client
		client_secret demo-client-secret
		app_secret demo-app-secret
		webhook events-hook {
			timeout 1s
		}
	}
	reverse_proxy `+strings.TrimPrefix(app.URL, "http://")+`
}
`)
	body := []byte(`{"events":[{"event":"project.translated","project":{"id":"1"}}]}`)
	status, answer := deliver(t, "/webhooks", body, false, map[string]string{
		"X-Module-Key": "events-hook", "X-Service-Signature": hmacHex("demo-app-secret", body),
	})
	want := "The app did not acknowledge the delivery within 1 second, the `timeout` of this webhook module. Send it again later."
	var out errorBody
	if status != http.StatusGatewayTimeout || json.Unmarshal([]byte(answer), &out) != nil || out.Error.Message != want {
		t.Fatalf("a delivery the app does not acknowledge: %d %s, want 504 with message %q", status, answer, want)
	}
	<-cancelled // the request to the app was cancelled, not left running
}

// TestWebhookQueueAttemptTimeoutE2E: with a queue, service_webhook's
// timeout bounds each attempt: an attempt the app does not acknowledge in
// time fails and the delivery is sent again.
func TestWebhookQueueAttemptTimeoutE2E(t *testing.T) {
	app := newQueueApp(t)
	app.answer = func(r *http.Request) int {
		if r.Header.Get(queue.HeaderAttempt) == "1" {
			// The first attempt hangs until the queue gives it up; its
			// answer reaches nobody.
			<-r.Context().Done()
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	app.up(t)
	startCaddy(t, `
localhost:{port} {
	route /webhooks/* {
		service_webhook {
			secret demo-app-secret
			timeout 1s
			queue {
				to http://`+app.addr+`
				dir `+t.TempDir()+`
			}
		}
	}
}
`)
	status, answer := sendQueued(t, "/webhooks/in", "acme.example", queuedDelivery(1))
	if status != http.StatusAccepted {
		t.Fatalf("delivery: %d %s, want 202", status, answer)
	}
	waitUntil(t, "the delivery acknowledged", func() bool { return app.total() == 1 })
	app.mu.Lock()
	attempts := slices.Clone(app.attempts)
	app.mu.Unlock()
	if !slices.Equal(attempts, []string{"1", "2"}) {
		t.Errorf("attempts %v, want the first given up on and the second acknowledged", attempts)
	}
}
