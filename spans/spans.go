// Package spans makes servicegate's work visible in the traces of the
// requests it serves: a child span of the request's span for each check,
// query and attempt, and W3C trace context (traceparent) on servicegate's
// own calls, so that the service's and the app's spans join the same trace.
//
// It follows whatever span the request's context holds (Caddy's tracing
// directive puts one there, with its own tracer provider); it sets up no
// exporter and no global provider. Without a recording span every function
// here returns at once and allocates nothing, so tracing off costs nothing.
//
// Attributes carry names, counts, statuses and outcomes, never a token, a
// secret or a body.
package spans

import (
	"context"
	"crypto/rand"
	"net/http"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation names servicegate as the tracer of its spans.
const instrumentation = "github.com/servicegate/servicegate"

// w3c reads and writes traceparent and tracestate.
var w3c propagation.TraceContext

// Span is one span of servicegate's work. The zero Span (tracing off, or
// the request's span not sampled) does nothing.
type Span struct{ s trace.Span }

// Start starts a span named name as a child of the recording span of ctx,
// and returns a context holding it for the work below. Without one it
// returns ctx itself and the zero Span.
func Start(ctx context.Context, name string) (context.Context, Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, Span{}
	}
	ctx, s := parent.TracerProvider().Tracer(instrumentation).Start(ctx, name)
	return ctx, Span{s}
}

// Recording tells whether the span records: whether its attributes are
// worth computing.
func (s Span) Recording() bool { return s.s != nil }

// End ends the span; ending it again does nothing.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// Bool sets an attribute.
func (s Span) Bool(key string, v bool) {
	if s.s != nil {
		s.s.SetAttributes(attribute.Bool(key, v))
	}
}

// String sets an attribute; v must hold no token, secret or body.
func (s Span) String(key, v string) {
	if s.s != nil {
		s.s.SetAttributes(attribute.String(key, v))
	}
}

// Int sets an attribute.
func (s Span) Int(key string, v int64) {
	if s.s != nil {
		s.s.SetAttributes(attribute.Int64(key, v))
	}
}

// Fail marks the span as failed, with a reason in a few words (an outcome
// such as "expired" or "unreachable"; never a token, secret or body).
func (s Span) Fail(reason string) {
	if s.s != nil {
		s.s.SetStatus(codes.Error, reason)
	}
}

// EndRefused ends the span of a check or step that refused its request
// with status, marking it failed; the status is recorded when the refusal
// was returned as err, for the server's error routes to answer. Work that
// passes its request on ends its span first, and this does nothing more.
func (s Span) EndRefused(status int, err error) {
	if s.s != nil {
		if err != nil {
			s.Int("http.response.status_code", int64(status))
		}
		s.Fail("refused")
		s.s.End()
	}
}

// Inject puts the W3C trace context of ctx's span on h (traceparent, and
// tracestate when there is one), replacing any already there, so that the
// service or the app continues the trace. Without a valid span it leaves h
// as it is.
func Inject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	w3c.Inject(ctx, propagation.HeaderCarrier(h))
}

// Traceparent returns the W3C traceparent of ctx's span, to keep with work
// done later (a queued delivery); "" without a sampled span.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	h := http.Header{}
	w3c.Inject(ctx, propagation.HeaderCarrier(h))
	return h.Get("Traceparent")
}

// Later starts spans of work done apart from any request (the attempts of
// a queued delivery) in the trace of the request that asked for it. It
// uses the tracer provider of the last recording span it was shown
// (Learn), or of the tracing middleware it last went through
// (LearnThrough): the one Caddy's tracing directive exports to. The zero
// Later is ready to use and starts nothing until it has learnt a provider.
type Later struct {
	provider atomic.Pointer[providerBox]
}

// providerBox holds a provider behind a pointer, for atomic.Pointer.
type providerBox struct{ p trace.TracerProvider }

// Learn remembers the tracer provider of ctx's span when it records.
func (l *Later) Learn(ctx context.Context) {
	s := trace.SpanFromContext(ctx)
	if l == nil || !s.IsRecording() {
		return
	}
	l.use(s.TracerProvider())
}

// probePath is the path of LearnThrough's request: a span of it that a
// sampler exports despite its parent is known by it.
const probePath = "/servicegate/tracer"

// LearnThrough learns the tracer provider of a tracing middleware before
// any request has come through it: the attempts of deliveries stored
// before a restart start at once, with no request to learn from. serve
// must pass w and r through the middleware to next. r's parent span is not
// sampled, so that the middleware's span for it records nothing (with a
// sampler that follows the parent, the default); next learns that span's
// provider. It reports whether it learnt one.
func (l *Later) LearnThrough(serve func(w http.ResponseWriter, r *http.Request, next http.Handler)) bool {
	if l == nil {
		return false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, Remote: true}) // not sampled
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, probePath, nil)
	if err != nil {
		return false
	}
	w3c.Inject(ctx, propagation.HeaderCarrier(r.Header))
	learnt := false
	serve(discard{http.Header{}}, r, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		// The middleware's own span: in the parent's trace, not the
		// parent itself (which a middleware that starts none leaves).
		s := trace.SpanFromContext(r.Context())
		if sc := s.SpanContext(); sc.TraceID() == tid && sc.SpanID() != sid {
			l.use(s.TracerProvider())
			learnt = true
		}
	}))
	return learnt
}

// use remembers p.
func (l *Later) use(p trace.TracerProvider) {
	if b := l.provider.Load(); b != nil && b.p == p {
		return
	}
	l.provider.Store(&providerBox{p})
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{ h http.Header }

func (d discard) Header() http.Header       { return d.h }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// Start starts a span named name as a child of the span that traceparent
// names, and returns ctx holding it. Without a provider learnt, or without
// a valid traceparent, it returns ctx and the zero Span; so does a nil
// Later.
func (l *Later) Start(ctx context.Context, name, traceparent string) (context.Context, Span) {
	if l == nil || traceparent == "" {
		return ctx, Span{}
	}
	b := l.provider.Load()
	if b == nil {
		return ctx, Span{}
	}
	parent := trace.SpanContextFromContext(w3c.Extract(ctx, propagation.HeaderCarrier{"Traceparent": {traceparent}}))
	if !parent.IsValid() {
		return ctx, Span{}
	}
	ctx, s := b.p.Tracer(instrumentation).Start(trace.ContextWithRemoteSpanContext(ctx, parent), name,
		trace.WithSpanKind(trace.SpanKindClient))
	return ctx, Span{s}
}
