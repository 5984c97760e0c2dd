package oauth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/servicegate/servicegate/spans/spanstest"
)

// A token request is a span of the request's trace, and the authorization
// server gets its trace context; nothing secret is an attribute.
func TestTokenRequestIsASpan(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"the-access-token","refresh_token":"the-refresh-token","expires_in":3600}`))
	}))
	defer srv.Close()
	ctx, rec := spanstest.Request(t)
	c := &Client{AuthURL: srv.URL, ClientID: "client-id", ClientSecret: "the-client-secret"}
	if _, err := c.Exchange(ctx, "the-code", "https://app.example/callback", testNow); err != nil {
		t.Fatal(err)
	}
	trace.SpanFromContext(ctx).End()
	traceparent := <-got
	var span sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "servicegate.oauth.token" {
			span = s
		}
	}
	if span == nil {
		t.Fatal("no servicegate.oauth.token span")
	}
	if span.Parent().SpanID() != trace.SpanContextFromContext(ctx).SpanID() {
		t.Error("the token request's span is not a child of the request's span")
	}
	if !strings.Contains(traceparent, span.SpanContext().SpanID().String()) {
		t.Errorf("the authorization server got traceparent %q, want the token request's span %s", traceparent, span.SpanContext().SpanID())
	}
	for _, kv := range span.Attributes() {
		if v := kv.Value.String(); strings.Contains(v, "the-") {
			t.Errorf("attribute %s = %q holds a secret", kv.Key, v)
		}
	}
}
