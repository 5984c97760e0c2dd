package queue

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/servicegate/servicegate/spans"
	"github.com/servicegate/servicegate/spans/spanstest"
)

// The trace context of the request that queued a delivery is kept with it
// on disk, so that attempts after a restart still join that trace.
func TestBoltStoreKeepsTraceparent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	path := filepath.Join(t.TempDir(), "q.db")
	s := openStore(t, path)
	d := delivery("a.example", "{}")
	d.Traceparent = tp
	if err := s.Add(d, 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openStore(t, path)
	defer s.Close()
	pending, _ := s.Pending()
	if len(pending) != 1 || pending[0].Traceparent != tp {
		t.Fatalf("pending after reopen: %+v", pending)
	}
}

// Each attempt is a span under the delivery's trace, and the app gets the
// attempt's trace context; without a tracer provider the app gets the
// delivery's own.
func TestHTTPSenderTracesAttempts(t *testing.T) {
	appURL, traceparents := spanstest.Peer(t, "")

	reqCtx, rec := spanstest.Request(t)
	trace.SpanFromContext(reqCtx).End()
	tp := trace.SpanFromContext(reqCtx).TracerProvider()
	delivery := spans.Traceparent(reqCtx)
	stale := http.Header{"Traceparent": {"00-11111111111111111111111111111111-2222222222222222-01"}}
	m := Meta{ID: "d-1", To: appURL, Method: "POST", URI: "/hooks", Attempts: 1, Traceparent: delivery}

	var later spans.Later
	sender := &HTTPSender{Spans: &later}
	if res := sender.Send(context.Background(), m, stale, nil); !res.Delivered() {
		t.Fatalf("result %+v", res)
	}
	if got := <-traceparents; got != delivery {
		t.Errorf("without a tracer provider the app got traceparent %q, want the delivery's %q", got, delivery)
	}

	later.Learn(reqCtx2(t, tp))
	if res := sender.Send(context.Background(), m, stale, nil); !res.Delivered() {
		t.Fatalf("result %+v", res)
	}
	got := <-traceparents
	var attempt sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "servicegate.webhook.attempt" {
			attempt = s
		}
	}
	if attempt == nil {
		t.Fatal("no attempt span")
	}
	want := trace.SpanContextFromContext(reqCtx)
	if attempt.SpanContext().TraceID() != want.TraceID() || attempt.Parent().SpanID() != want.SpanID() {
		t.Errorf("attempt span in trace %s under %s, want under the delivery's %s/%s",
			attempt.SpanContext().TraceID(), attempt.Parent().SpanID(), want.TraceID(), want.SpanID())
	}
	if !strings.Contains(got, attempt.SpanContext().SpanID().String()) {
		t.Errorf("the app got traceparent %q, want the attempt's span %s", got, attempt.SpanContext().SpanID())
	}
	for _, kv := range attempt.Attributes() {
		if v := kv.Value.String(); strings.Contains(v, "{") {
			t.Errorf("attribute %s = %q looks like a body", kv.Key, v)
		}
	}
}

// reqCtx2 is another request's recording span, to learn the provider from.
func reqCtx2(t *testing.T, tp trace.TracerProvider) context.Context {
	ctx, s := tp.Tracer("caddy").Start(context.Background(), "another request")
	t.Cleanup(func() { s.End() })
	return ctx
}
