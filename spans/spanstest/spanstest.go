// Package spanstest records the spans servicegate's packages start, for
// their tests.
package spanstest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Request begins a recording span named "request" under a tracer
// provider of its own, as Caddy's tracing does for each request, and
// returns its context and the recorder of every span that provider
// ends. The span ends and the provider shuts down when the test ends;
// trace.SpanFromContext(ctx) gives the span, to end it sooner, and its
// provider.
func Request(t testing.TB) (context.Context, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, span := tp.Tracer("caddy").Start(context.Background(), "request")
	t.Cleanup(func() {
		span.End()
		_ = tp.Shutdown(context.Background())
	})
	return ctx, rec
}

// Peer starts an HTTP server, stopped when the test ends, that answers
// every request with body as JSON and passes on the traceparent header
// each request brought.
func Peer(t testing.TB, body string) (url string, traceparent <-chan string) {
	t.Helper()
	got := make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, got
}

// Outbound is the span of a call made for the request of ctx: it fails the
// test unless, besides the request's own, rec ended exactly one span,
// named name, a child of the request's span, whose trace context the peer
// got as traceparent.
func Outbound(t testing.TB, ctx context.Context, rec *tracetest.SpanRecorder, name, traceparent string) sdktrace.ReadOnlySpan {
	t.Helper()
	request := trace.SpanContextFromContext(ctx).SpanID()
	var ended []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanContext().SpanID() != request {
			ended = append(ended, s)
		}
	}
	if len(ended) != 1 || ended[0].Name() != name {
		names := make([]string, len(ended))
		for i, s := range ended {
			names[i] = s.Name()
		}
		t.Fatalf("ended spans %q, want one %s", names, name)
	}
	span := ended[0]
	if span.Parent().SpanID() != request {
		t.Errorf("the %s span is not a child of the request's span", name)
	}
	if want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"; traceparent != want {
		t.Errorf("the peer got traceparent %q, want %q", traceparent, want)
	}
	return span
}
