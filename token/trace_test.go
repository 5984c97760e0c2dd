package token

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/servicegate/servicegate/spans/spanstest"
)

// A fetch of the key set for a request is a span of the request's trace,
// and the key server gets its trace context.
func TestJWKSFetchIsASpan(t *testing.T) {
	got := make(chan string, 1)
	ks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
		_, _ = w.Write([]byte(`{"keys":[]}`))
	}))
	defer ks.Close()
	ctx, rec := spanstest.Request(t)

	_ = NewJWKS(ks.URL+"?key=secret", JWKSOptions{}).Refresh(ctx) // no usable key: an error
	traceparent := <-got
	ended := rec.Ended()
	if len(ended) != 1 || ended[0].Name() != "servicegate.jwks.fetch" {
		t.Fatalf("ended spans %v, want one servicegate.jwks.fetch", ended)
	}
	span := ended[0]
	if span.Parent().SpanID() != trace.SpanContextFromContext(ctx).SpanID() {
		t.Error("the fetch's span is not a child of the request's span")
	}
	if want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"; traceparent != want {
		t.Errorf("the key server got traceparent %q, want %q", traceparent, want)
	}
	if span.Status().Code.String() != "Error" || span.Status().Description == "" {
		t.Errorf("a failed fetch has status %+v", span.Status())
	}
	for _, kv := range span.Attributes() {
		if kv.Value.String() == "secret" {
			t.Errorf("attribute %s holds the URL's query", kv.Key)
		}
	}
}
