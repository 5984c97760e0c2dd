package subscription

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/servicegate/servicegate/spans/spanstest"
)

// A subscription query is a span of the request's trace, with the answer
// as an attribute and never the token, and the service gets its trace
// context.
func TestQueryIsASpan(t *testing.T) {
	got := make(chan string, 1)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
		_, _ = w.Write([]byte(`{"expires":"2099-01-01 00:00:00"}`))
	}))
	defer svc.Close()
	ctx, rec := spanstest.Request(t)

	if _, err := (&Client{}).Query(ctx, svc.URL, "my-app", "the-token"); err != nil {
		t.Fatal(err)
	}
	traceparent := <-got
	ended := rec.Ended()
	if len(ended) != 1 || ended[0].Name() != "servicegate.subscription.query" {
		t.Fatalf("ended spans %v, want one servicegate.subscription.query", ended)
	}
	span := ended[0]
	if span.Parent().SpanID() != trace.SpanContextFromContext(ctx).SpanID() {
		t.Error("the query's span is not a child of the request's span")
	}
	if !strings.Contains(traceparent, span.SpanContext().SpanID().String()) {
		t.Errorf("the service got traceparent %q, want the query's span %s", traceparent, span.SpanContext().SpanID())
	}
	answer := ""
	for _, kv := range span.Attributes() {
		if strings.Contains(kv.Value.String(), "the-token") {
			t.Errorf("attribute %s holds the token", kv.Key)
		}
		if kv.Key == "servicegate.subscription.answer" {
			answer = kv.Value.String()
		}
	}
	if answer != "active" {
		t.Errorf("answer attribute %q, want active", answer)
	}
}
