package caddymodule

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/servicegate/servicegate/emulator"
)

// restartQueue is the queue block of the restart test's sites, at the
// depth of service_webhook's sub-directives directly in a site.
const restartQueue = "queue {\n\t\t\tto http://{app}\n\t\t\tdir {dir}\n\t\t}"

// restartSiteShapes are the site shapes in which tracing and a webhook
// queue (service_webhook's, or service_app's) may be written; {app}, {dir}
// and {descriptor} stand for the app's address, the queue's directory and
// service_app's descriptor file.
var restartSiteShapes = []struct {
	name, address, body string
}{
	// Both handlers directly in a site without a host: Caddy merges the
	// site's routes into the server's, and the two handlers into one route.
	{"site without host, no route", ":%d", "\ttracing {\n\t\tspan webhooks\n\t}\n\tservice_webhook {\n\t\tsecret demo-app-secret\n\t\t" + restartQueue + "\n\t}\n"},
	// Both directly in a site with a host: one route in the site's subroute.
	{"site with host, no route", "http://127.0.0.1:%d", "\ttracing {\n\t\tspan webhooks\n\t}\n\tservice_webhook {\n\t\tsecret demo-app-secret\n\t\t" + restartQueue + "\n\t}\n"},
	// Both inside one route.
	{"both in a route", ":%d", "\troute /webhooks {\n\t\ttracing {\n\t\t\tspan webhooks\n\t\t}\n\t\tservice_webhook {\n\t\t\tsecret demo-app-secret\n\t\t\t" +
		strings.ReplaceAll(restartQueue, "\n", "\n\t") + "\n\t\t}\n\t}\n"},
	// Tracing in the site, service_webhook in a route.
	{"tracing in the site, the queue in a route", "http://127.0.0.1:%d", "\ttracing {\n\t\tspan webhooks\n\t}\n\troute /webhooks {\n\t\tservice_webhook {\n\t\t\tsecret demo-app-secret\n\t\t\t" +
		strings.ReplaceAll(restartQueue, "\n", "\n\t") + "\n\t\t}\n\t}\n"},
	// service_app's queue, beside tracing directly in a site, with or
	// without a host.
	{"service_app in a site without host", ":%d", "\ttracing {\n\t\tspan webhooks\n\t}\n" + restartApp},
	{"service_app in a site with host", "http://127.0.0.1:%d", "\ttracing {\n\t\tspan webhooks\n\t}\n" + restartApp},
}

// restartApp is service_app with its webhook queued, directly in a site.
const restartApp = "\tservice_app {\n\t\tdescriptor {descriptor}\n\t\tclient_id demo-client\n\t\tclient_secret demo-client-secret\n" +
	"\t\tapp_secret demo-app-secret\n\t\tservice http://127.0.0.1:1\n\t\twebhook {\n\t\t\t" + "queue {\n\t\t\t\tto http://{app}\n\t\t\t\tdir {dir}\n\t\t\t}" +
	"\n\t\t}\n\t}\n\treverse_proxy {app}\n"

// sendRestartDelivery sends a delivery of acme, signed with the app
// secret of the restart test's sites and its module key, to url.
func sendRestartDelivery(url string) (int, error) {
	body := queuedDelivery(1)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Service-Domain", "acme.example")
	req.Header.Set("X-Module-Key", "events-hook")
	req.Header.Set("X-Service-Signature", emulator.SignDelivery([]byte(body), "demo-app-secret"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
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
				fmt.Sprintf(shape.address, port) + " {\n" +
				strings.NewReplacer("{app}", app.addr, "{dir}", t.TempDir(), "{descriptor}", appDescriptorFile(t)).Replace(shape.body) + "}\n"

			first := startCaddyProcess(t, conf, env...)
			waitListening(t, base+"/ready", first)
			if status, err := sendRestartDelivery(base + "/webhooks"); err != nil || status != http.StatusAccepted {
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
