package caddymodule

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// restartSiteShapes are the site shapes in which tracing and
// service_webhook may be written, for a Caddy listening on port whose
// queue delivers to app from dir: {site} is the site's address.
var restartSiteShapes = []struct {
	name, address, body string
}{
	// Both handlers directly in a site without a host: Caddy merges the
	// site's routes into the server's, and the two handlers into one route.
	{"site without host, no route", ":%d", "\ttracing {\n\t\tspan webhooks\n\t}\n\tservice_webhook {\n\t\tsecret demo-app-secret\n\t\tqueue {\n\t\t\tto http://%s\n\t\t\tdir %s\n\t\t}\n\t}\n"},
	// Both directly in a site with a host: one route in the site's subroute.
	{"site with host, no route", "http://127.0.0.1:%d", "\ttracing {\n\t\tspan webhooks\n\t}\n\tservice_webhook {\n\t\tsecret demo-app-secret\n\t\tqueue {\n\t\t\tto http://%s\n\t\t\tdir %s\n\t\t}\n\t}\n"},
	// Both inside one route.
	{"both in a route", ":%d", "\troute /webhooks {\n\t\ttracing {\n\t\t\tspan webhooks\n\t\t}\n\t\tservice_webhook {\n\t\t\tsecret demo-app-secret\n\t\t\tqueue {\n\t\t\t\tto http://%s\n\t\t\t\tdir %s\n\t\t\t}\n\t\t}\n\t}\n"},
	// Tracing in the site, service_webhook in a route.
	{"tracing in the site, the queue in a route", "http://127.0.0.1:%d", "\ttracing {\n\t\tspan webhooks\n\t}\n\troute /webhooks {\n\t\tservice_webhook {\n\t\t\tsecret demo-app-secret\n\t\t\tqueue {\n\t\t\t\tto http://%s\n\t\t\t\tdir %s\n\t\t\t}\n\t\t}\n\t}\n"},
}

// TestTracesQueueAfterRestartEverySiteShapeE2E: in every site shape that
// tracing and service_webhook allow, a delivery stored before Caddy is
// killed is attempted by the new process under the delivery's trace, also
// when the first attempts after the restart fail: each attempt of the new
// process, failed or not, is a child span of the request that delivered it.
func TestTracesQueueAfterRestartEverySiteShapeE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Caddy processes: skipped in -short mode")
	}
	for _, shape := range restartSiteShapes {
		t.Run(shape.name, func(t *testing.T) {
			rcv := newOTLPReceiver(t)
			env := []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
				"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=50"}
			app := newQueueApp(t) // down until the first process is gone
			port := freePort()
			base := "http://127.0.0.1:" + strconv.Itoa(port)
			conf := "{\n\tadmin off\n\tpersist_config off\n\tskip_install_trust\n\tauto_https off\n}\n" +
				fmt.Sprintf(shape.address, port) + " {\n" + fmt.Sprintf(shape.body, app.addr, t.TempDir()) + "}\n"

			first := startCaddyProcess(t, conf, env...)
			waitListening(t, base+"/ready", first)
			if status, err := sendQueuedTo(base+"/webhooks", "acme.example", queuedDelivery(1)); err != nil || status != http.StatusAccepted {
				t.Fatalf("delivery: %d %v\n%s", status, err, first.logText())
			}
			enqueue := rcv.find(t, "servicegate.webhook.enqueue", func(exportedSpan) bool { return true })
			rcv.find(t, "servicegate.webhook.attempt", func(s exportedSpan) bool { return childOf(enqueue)(s) && s.failed != "" })
			first.kill()

			// The app is up, but refuses the new process's first two attempts.
			var refused atomic.Int32
			app.answer = func(*http.Request) int {
				if refused.Add(1) <= 2 {
					return http.StatusServiceUnavailable
				}
				return http.StatusOK
			}
			app.up(t)
			second := startCaddyProcess(t, conf, env...)
			waitUntil(t, "the stored delivery to reach the app", func() bool { return app.total() == 1 })
			for _, status := range []string{"503", "200"} {
				rcv.find(t, "servicegate.webhook.attempt", func(s exportedSpan) bool {
					return childOf(enqueue)(s) && s.attrs["http.response.status_code"] == status
				})
			}
			rcv.mu.Lock()
			failedAfter := 0
			for _, s := range rcv.spans {
				if s.name == "servicegate.webhook.attempt" && childOf(enqueue)(s) && s.attrs["http.response.status_code"] == "503" {
					failedAfter++
				}
			}
			rcv.mu.Unlock()
			if failedAfter != 2 {
				t.Errorf("%d refused attempts after the restart were traced, want 2", failedAfter)
			}
			if log := second.logText(); strings.Contains(log, `"level":"error"`) {
				t.Errorf("the second process logged an error:\n%s", log)
			}
		})
	}
}
