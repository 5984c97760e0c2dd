package spans

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// recorder returns a provider that keeps its ended spans, and a context
// holding a recording span of it (the request's span).
func recorder(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider, context.Context) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, req := tp.Tracer("caddy").Start(context.Background(), "request")
	t.Cleanup(func() { req.End() })
	return rec, tp, ctx
}

func TestStartWithoutSpanAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	h := http.Header{}
	allocs := testing.AllocsPerRun(100, func() {
		c, s := Start(ctx, "servicegate.token.check")
		s.Bool("remembered", true)
		s.String("outcome", "verified")
		s.Int("status", 200)
		s.Fail("expired")
		s.End()
		Inject(c, h)
		if c != ctx || s.Recording() {
			t.Fatal("Start without a recording span returned a new context or a recording span")
		}
	})
	if allocs != 0 {
		t.Errorf("tracing off: %v allocations per check, want 0", allocs)
	}
	if len(h) != 0 {
		t.Errorf("Inject without a span set %v", h)
	}
	if tp := Traceparent(ctx); tp != "" {
		t.Errorf("Traceparent without a span = %q", tp)
	}
}

func TestStartIsAChildOfTheRequestSpan(t *testing.T) {
	rec, _, ctx := recorder(t)
	c, s := Start(ctx, "servicegate.token.check")
	s.Bool("remembered", false)
	h := http.Header{}
	Inject(c, h)
	s.End()
	s.End()

	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	got := ended[0]
	if got.Name() != "servicegate.token.check" || got.Parent().SpanID() != spanOf(ctx).SpanID() {
		t.Errorf("span %q has parent %s, want the request's span %s", got.Name(), got.Parent().SpanID(), spanOf(ctx).SpanID())
	}
	want := "00-" + got.SpanContext().TraceID().String() + "-" + got.SpanContext().SpanID().String() + "-01"
	if h.Get("Traceparent") != want {
		t.Errorf("traceparent %q, want %q", h.Get("Traceparent"), want)
	}
}

// A refusal marks the span failed; its status is recorded when it was
// returned for the error routes, and a span already ended stays as it was.
func TestEndRefused(t *testing.T) {
	rec, _, ctx := recorder(t)
	_, written := Start(ctx, "written")
	written.EndRefused(http.StatusUnauthorized, nil)
	_, returned := Start(ctx, "returned")
	returned.EndRefused(http.StatusForbidden, errors.New("refused"))
	_, passed := Start(ctx, "passed")
	passed.End()
	passed.EndRefused(0, nil)
	Span{}.EndRefused(http.StatusForbidden, errors.New("refused"))

	for _, s := range rec.Ended() {
		var status int64
		for _, kv := range s.Attributes() {
			if kv.Key == "http.response.status_code" {
				status = kv.Value.AsInt64()
			}
		}
		want := map[string]struct {
			failed bool
			status int64
		}{"written": {true, 0}, "returned": {true, 403}, "passed": {false, 0}}[s.Name()]
		if failed := s.Status().Code == codes.Error; failed != want.failed || status != want.status {
			t.Errorf("%s: failed %v with status %d, want %v with %d", s.Name(), failed, status, want.failed, want.status)
		}
	}
	if n := len(rec.Ended()); n != 3 {
		t.Errorf("%d spans ended, want 3", n)
	}
}

func TestLaterStartsUnderTheStoredTraceparent(t *testing.T) {
	rec, _, ctx := recorder(t)
	var l Later
	tp := Traceparent(ctx)
	if tp == "" {
		t.Fatal("no traceparent for a sampled span")
	}
	if _, s := l.Start(context.Background(), "servicegate.webhook.attempt", tp); s.Recording() {
		t.Fatal("a Later that learnt no provider started a span")
	}
	l.Learn(context.Background()) // no span: nothing learnt
	if _, s := l.Start(context.Background(), "servicegate.webhook.attempt", tp); s.Recording() {
		t.Fatal("Learn without a span learnt a provider")
	}
	l.Learn(ctx)
	if _, s := l.Start(context.Background(), "servicegate.webhook.attempt", "garbage"); s.Recording() {
		t.Fatal("a span started under an unreadable traceparent")
	}
	_, s := l.Start(context.Background(), "servicegate.webhook.attempt", tp)
	s.End()
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	if got := ended[0]; got.SpanContext().TraceID() != spanOf(ctx).TraceID() || got.Parent().SpanID() != spanOf(ctx).SpanID() {
		t.Errorf("attempt in trace %s under %s, want the delivery's %s under %s",
			got.SpanContext().TraceID(), got.Parent().SpanID(), spanOf(ctx).TraceID(), spanOf(ctx).SpanID())
	}
}

// TestLaterLearnsThroughAMiddleware: a tracing middleware's provider is
// learnt without a request of its own, and the probe records nothing
// there (its parent is not sampled); a middleware that starts no span
// teaches nothing.
func TestLaterLearnsThroughAMiddleware(t *testing.T) {
	rec, tp, ctx := recorder(t)
	traced := func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		// As otelhttp does: the parent from the headers, a span of the
		// provider's around next.
		ctx := w3c.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, s := tp.Tracer("caddy").Start(ctx, "request")
		defer s.End()
		next.ServeHTTP(w, r.WithContext(ctx))
	}
	untraced := func(w http.ResponseWriter, r *http.Request, next http.Handler) { next.ServeHTTP(w, r) }
	var l Later
	if l.LearnThrough(untraced) {
		t.Error("learnt a provider through a middleware that starts no span")
	}
	if !l.LearnThrough(traced) {
		t.Fatal("learnt nothing through a tracing middleware")
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("the probe recorded %d spans", n)
	}
	_, s := l.Start(context.Background(), "servicegate.webhook.attempt", Traceparent(ctx))
	s.End()
	if ended := rec.Ended(); len(ended) != 1 || ended[0].Parent().SpanID() != spanOf(ctx).SpanID() {
		t.Errorf("after learning: %d spans ended, want the attempt under the delivery's span", len(ended))
	}
	if (*Later)(nil).LearnThrough(traced) {
		t.Error("a nil Later learnt")
	}
}

func spanOf(ctx context.Context) oteltrace.SpanContext { return oteltrace.SpanContextFromContext(ctx) }

type ctxKey int

// BenchmarkStartOff is a check's span with tracing off, in a context as
// deep as Caddy's request context (a dozen values).
func BenchmarkStartOff(b *testing.B) {
	ctx := context.Background()
	for i := range 12 {
		ctx = context.WithValue(ctx, ctxKey(i), i)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, s := Start(ctx, "servicegate.token.check")
		s.Bool("servicegate.token.remembered", true)
		s.End()
	}
}
