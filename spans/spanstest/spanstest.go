// Package spanstest records the spans servicegate's packages start, for
// their tests.
package spanstest

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
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
