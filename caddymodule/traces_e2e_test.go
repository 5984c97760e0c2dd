package caddymodule

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/servicegate/servicegate/emulator"
)

// exportedSpan is a span as an OTLP receiver gets it.
type exportedSpan struct {
	name, trace, id, parent string
	attrs                   map[string]string
	failed                  string // the status message of a span marked failed
}

// otlpReceiver is an OTLP/HTTP (protobuf) trace receiver on loopback: what
// Caddy's tracing directive exports to when OTEL_EXPORTER_OTLP_ENDPOINT
// names it.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []exportedSpan
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rcv := &otlpReceiver{}
	rcv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			t.Errorf("the receiver got %s %s that is no OTLP trace export", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					attrs := map[string]string{}
					for _, kv := range s.Attributes {
						switch v := kv.Value.Value.(type) {
						case *commonpb.AnyValue_StringValue:
							attrs[kv.Key] = v.StringValue
						case *commonpb.AnyValue_BoolValue:
							attrs[kv.Key] = fmt.Sprint(v.BoolValue)
						case *commonpb.AnyValue_IntValue:
							attrs[kv.Key] = fmt.Sprint(v.IntValue)
						}
					}
					span := exportedSpan{
						name: s.Name, trace: hex.EncodeToString(s.TraceId), id: hex.EncodeToString(s.SpanId),
						parent: hex.EncodeToString(s.ParentSpanId), attrs: attrs,
					}
					if s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
						span.failed = s.GetStatus().GetMessage()
					}
					rcv.spans = append(rcv.spans, span)
				}
			}
		}
		rcv.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(rcv.Close)
	return rcv
}

// find waits for the exported span named name for which ok holds.
func (rcv *otlpReceiver) find(t *testing.T, name string, ok func(exportedSpan) bool) exportedSpan {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rcv.mu.Lock()
		for _, s := range rcv.spans {
			if s.name == name && ok(s) {
				rcv.mu.Unlock()
				return s
			}
		}
		rcv.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no span %s was exported", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// childOf is a condition of find: the span's parent is p.
func childOf(p exportedSpan) func(exportedSpan) bool {
	return func(s exportedSpan) bool { return s.trace == p.trace && s.parent == p.id }
}

// tracingTo makes the test Caddy's tracing directive export to rcv, with a
// short batch delay. Caddy keeps one tracer provider, with its exporter,
// while any config traces, so the test ends by loading a config without
// tracing: the provider flushes to rcv and shuts down, and the next test's
// tracing exports to its own receiver.
func tracingTo(t *testing.T, rcv *otlpReceiver) {
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Cleanup(func() { startCaddy(t, "") })
}

// withTracing adds Caddy's tracing directive, with span name span, to the
// site blocks of sites whose address starts with prefix.
func withTracing(sites, prefix, span string) string {
	return strings.ReplaceAll(sites, "\n"+prefix+"{port} {\n", "\n"+prefix+"{port} {\n\ttracing {\n\t\tspan "+span+"\n\t}\n")
}

// TestTracesE2E: with Caddy's tracing directive on, an API request through
// service_app shows the token check and the subscription check (and its
// query, under which the service's own span continues the trace) under the
// request's span; nothing secret is an attribute.
func TestTracesE2E(t *testing.T) {
	rcv := newOTLPReceiver(t)
	tracingTo(t, rcv)
	app := newAppUpstream(t)
	sites := appSites(app.URL+"/manifest.json", strings.TrimPrefix(app.URL, "http://"))
	sites = withTracing(withTracing(sites, "http://localhost:", "app"), "http://127.0.0.1:", "service")
	if !strings.Contains(sites, "span app") || !strings.Contains(sites, "span service") {
		t.Fatalf("tracing not added to the sites:\n%s", sites)
	}
	startCaddy(t, sites)
	// The first check must query the service: an answer an earlier test
	// left in the process's cache would make both checks cache hits.
	forgetLocalSubscriptions("acme.example")
	tok, err := emulator.MintToken("demo-client-secret", emulator.Token{
		Issuer: "service-emulator", Audience: "demo-client", UserID: 7, OrganizationID: 1, Domain: "acme.example", Lifetime: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		resp, body := request(t, noRedirects, "GET", fmt.Sprintf("/api/whoami?n=%d", i), map[string]string{"Authorization": "Bearer " + tok}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	if tp := app.header().Get("Traceparent"); tp == "" {
		t.Error("the app got no traceparent")
	}
	if resp, body := request(t, noRedirects, "GET", "/api/whoami", map[string]string{"Authorization": "Bearer not.a.token"}, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a bad token: %d %s", resp.StatusCode, body)
	}
	if bad := rcv.find(t, "servicegate.token.check", func(s exportedSpan) bool { return s.failed != "" }); strings.Contains(bad.failed, "not.a.token") {
		t.Errorf("the failed token check names the token: %q", bad.failed)
	}

	hit := func(v string) func(exportedSpan) bool {
		return func(s exportedSpan) bool { return s.attrs["servicegate.subscription.cache_hit"] == v }
	}
	for _, cached := range []string{"false", "true"} {
		check := rcv.find(t, "servicegate.subscription.check", hit(cached))
		if check.attrs["servicegate.subscription.answer"] != "active" {
			t.Errorf("subscription check (cache hit %s) attributes %v", cached, check.attrs)
		}
		req := rcv.find(t, "app", func(s exportedSpan) bool { return s.trace == check.trace && s.id == check.parent })
		tc := rcv.find(t, "servicegate.token.check", childOf(req))
		if cached == "false" {
			q := rcv.find(t, "servicegate.subscription.query", childOf(check))
			rcv.find(t, "service", childOf(q)) // the service continues the trace
		} else if tc.attrs["servicegate.token.remembered"] != "true" {
			t.Errorf("second token check attributes %v", tc.attrs)
		}
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, s := range rcv.spans {
		for k, v := range s.attrs {
			if strings.Contains(v, tok) || strings.Contains(v, "demo-client-secret") {
				t.Errorf("span %s: attribute %s holds a secret", s.name, k)
			}
		}
	}
}

// TestTracesQueueE2E: a queued delivery's attempts show under the trace of
// the request that delivered it, the failed one and the one that arrived,
// and the app gets the trace context of the attempt.
func TestTracesQueueE2E(t *testing.T) {
	rcv := newOTLPReceiver(t)
	tracingTo(t, rcv)
	app := newQueueApp(t)
	sites := withTracing(queueSite(app, t.TempDir(), "max_attempts 5"), "localhost:", "webhooks")
	if !strings.Contains(sites, "span webhooks") {
		t.Fatalf("tracing not added to the site:\n%s", sites)
	}
	startCaddy(t, sites)
	var first sync.Once
	var traceparent string
	app.answer = func(r *http.Request) int {
		status := http.StatusOK
		first.Do(func() { status = http.StatusServiceUnavailable })
		if status == http.StatusOK {
			traceparent = r.Header.Get("Traceparent")
		}
		return status
	}
	app.up(t)
	if status, answer := sendQueued(t, "/webhooks/in", "acme.example", queuedDelivery(1)); status != http.StatusAccepted {
		t.Fatalf("delivery: %d %s", status, answer)
	}
	waitUntil(t, "the delivery to reach the app", func() bool { return app.total() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, _, err := emulator.SendDelivery(ctx, noRedirects, e2eURL("/webhooks/in"), emulator.Delivery{
		Body: []byte(queuedDelivery(2)), Secret: "not-the-app-secret", OrganizationID: "1", Domain: "acme.example", ModuleKey: "events-hook",
	})
	if err != nil || status != http.StatusUnauthorized {
		t.Fatalf("a delivery with a bad signature: %d %v", status, err)
	}
	rcv.find(t, "servicegate.webhook.check", func(s exportedSpan) bool { return s.failed == "refused" })

	req := rcv.find(t, "webhooks", func(exportedSpan) bool { return true })
	rcv.find(t, "servicegate.webhook.check", childOf(req))
	enqueue := rcv.find(t, "servicegate.webhook.enqueue", childOf(req))
	for _, n := range []string{"1", "2"} {
		attempt := rcv.find(t, "servicegate.webhook.attempt", func(s exportedSpan) bool {
			return childOf(enqueue)(s) && s.attrs["servicegate.webhook.attempt"] == n
		})
		if attempt.attrs["servicegate.webhook.delivery_id"] != enqueue.attrs["servicegate.webhook.delivery_id"] || attempt.attrs["servicegate.webhook.delivery_id"] == "" {
			t.Errorf("attempt %s is of delivery %q, the request queued %q", n, attempt.attrs["servicegate.webhook.delivery_id"], enqueue.attrs["servicegate.webhook.delivery_id"])
		}
		if n == "2" && traceparent != "00-"+attempt.trace+"-"+attempt.id+"-01" {
			t.Errorf("the app got traceparent %q, want the attempt's %s/%s", traceparent, attempt.trace, attempt.id)
		}
	}
}

// TestTracesSpillE2E: an answer handed over by URL shows its store under
// the job's request span, and each download (the one that works and the
// one refused) under its own.
func TestTracesSpillE2E(t *testing.T) {
	rcv := newOTLPReceiver(t)
	tracingTo(t, rcv)
	built := pattern(6 << 20)
	other := otherApp(t, map[string][]byte{"big": []byte(`{"data":{"content":"` + b64(built) + `"}}`)})
	startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	tracing {
		span limits
	}
	route {
		service_limits {
			contract custom-file-format
			spill
			spill_path /other-spill/
			spill_dir %s
		}
		reverse_proxy %s
	}
}
`, t.TempDir(), strings.TrimPrefix(other.URL, "http://")))

	status, _, body := send(t, "/other/big", formatJob("build-file", map[string]any{"strings": []any{}}), true)
	a := decodeAnswer(t, body)
	if status != http.StatusOK || a.Data.ContentURL == "" {
		t.Fatalf("%d %.300s", status, body)
	}
	for _, want := range []int{http.StatusOK, http.StatusForbidden} {
		if got, _ := download(t, a.Data.ContentURL); got != want {
			t.Fatalf("download: %d, want %d", got, want)
		}
	}

	store := rcv.find(t, "servicegate.spill.store", func(exportedSpan) bool { return true })
	rcv.find(t, "limits", func(s exportedSpan) bool { return s.trace == store.trace && s.id == store.parent })
	if store.attrs["servicegate.spill.payloads"] != "1" {
		t.Errorf("spill store attributes %v", store.attrs)
	}
	ok := rcv.find(t, "servicegate.spill.download", func(s exportedSpan) bool { return s.failed == "" })
	if ok.attrs["servicegate.spill.size"] != fmt.Sprint(len(built)) || ok.attrs["servicegate.spill.kind"] == "" {
		t.Errorf("download attributes %v", ok.attrs)
	}
	refused := rcv.find(t, "servicegate.spill.download", func(s exportedSpan) bool { return s.failed == "refused" })
	for _, s := range []exportedSpan{ok, refused} {
		rcv.find(t, "limits", func(p exportedSpan) bool { return p.trace == s.trace && p.id == s.parent })
		if s.trace == store.trace {
			t.Error("a download is in the trace of the job that stored its payload")
		}
	}
}

// TestTracesQueueReopenE2E: a delivery still queued when its queue closes
// (a config without it) is delivered from the disk once the queue opens
// again, and that attempt still shows under the request that delivered it.
func TestTracesQueueReopenE2E(t *testing.T) {
	rcv := newOTLPReceiver(t)
	tracingTo(t, rcv)
	app := newQueueApp(t) // down until the queue has closed
	site := withTracing(queueSite(app, t.TempDir(), ""), "localhost:", "webhooks")
	startCaddy(t, site)
	if status, answer := sendQueued(t, "/webhooks/in", "acme.example", queuedDelivery(1)); status != http.StatusAccepted {
		t.Fatalf("delivery: %d %s", status, answer)
	}
	enqueue := rcv.find(t, "servicegate.webhook.enqueue", func(exportedSpan) bool { return true })
	rcv.find(t, "servicegate.webhook.attempt", func(s exportedSpan) bool { return childOf(enqueue)(s) && s.failed != "" })

	// The queue closes; tracing stays on.
	startCaddy(t, "\nlocalhost:{port} {\n\ttracing\n\trespond \"no queue here\"\n}\n")
	app.up(t)
	startCaddy(t, site)
	waitUntil(t, "the delivery to reach the app", func() bool { return app.total() == 1 })
	rcv.find(t, "servicegate.webhook.attempt", func(s exportedSpan) bool { return childOf(enqueue)(s) && s.failed == "" })
	app.mu.Lock()
	defer app.mu.Unlock()
	if tp := app.header.Get("Traceparent"); !strings.HasPrefix(tp, "00-"+enqueue.trace+"-") {
		t.Errorf("the app got traceparent %q, want one in the delivery's trace %s", tp, enqueue.trace)
	}
}

// TestTracesQueueAfterRestartE2E: a delivery stored before Caddy is killed
// is attempted as soon as Caddy starts again, before any other delivery
// arrives, and that attempt shows under the request that delivered it: the
// new process learns its tracer from the config, not from a delivery.
func TestTracesQueueAfterRestartE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Caddy processes: skipped in -short mode")
	}
	rcv := newOTLPReceiver(t)
	env := []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=50"}
	app := newQueueApp(t) // down until the first process is gone
	port := freePort()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	conf := strings.Replace(queueProcessCaddyfile(port, app, "", "dir "+t.TempDir()),
		"\troute /webhooks {", "\ttracing {\n\t\tspan webhooks\n\t}\n\troute /webhooks {", 1)
	if !strings.Contains(conf, "span webhooks") {
		t.Fatalf("tracing not added to the site:\n%s", conf)
	}

	first := startCaddyProcess(t, conf, env...)
	waitListening(t, base+"/ready", first)
	if status, err := sendQueuedTo(base+"/webhooks", "acme.example", queuedDelivery(1)); err != nil || status != http.StatusAccepted {
		t.Fatalf("delivery: %d %v", status, err)
	}
	enqueue := rcv.find(t, "servicegate.webhook.enqueue", func(exportedSpan) bool { return true })
	rcv.find(t, "servicegate.webhook.attempt", func(s exportedSpan) bool { return childOf(enqueue)(s) && s.failed != "" })
	first.kill()

	app.up(t)
	second := startCaddyProcess(t, conf, env...)
	waitUntil(t, "the stored delivery to reach the app", func() bool { return app.total() == 1 })
	attempt := rcv.find(t, "servicegate.webhook.attempt", func(s exportedSpan) bool { return childOf(enqueue)(s) && s.failed == "" })
	app.mu.Lock()
	tp := app.header.Get("Traceparent")
	app.mu.Unlock()
	if tp != "00-"+attempt.trace+"-"+attempt.id+"-01" {
		t.Errorf("the app got traceparent %q, want the attempt's %s/%s", tp, attempt.trace, attempt.id)
	}
	if log := second.logText(); strings.Contains(log, `"level":"error"`) {
		t.Errorf("the second process logged an error:\n%s", log)
	}
	// The tracer was learnt without a span of its own: every request span
	// exported is one of the test's requests, which came with no parent.
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, s := range rcv.spans {
		if s.name == "webhooks" && s.parent != "" {
			t.Errorf("a request span under %s was exported: %+v", s.parent, s)
		}
	}
}
