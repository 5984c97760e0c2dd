package token

import (
	"testing"

	"github.com/servicegate/servicegate/spans/spanstest"
)

// A fetch of the key set for a request is a span of the request's trace,
// and the key server gets its trace context.
func TestJWKSFetchIsASpan(t *testing.T) {
	url, got := spanstest.Peer(t, `{"keys":[]}`)
	ctx, rec := spanstest.Request(t)

	_ = NewJWKS(url+"?key=secret", JWKSOptions{}).Refresh(ctx) // no usable key: an error
	span := spanstest.Outbound(t, ctx, rec, "servicegate.jwks.fetch", <-got)
	if span.Status().Code.String() != "Error" || span.Status().Description == "" {
		t.Errorf("a failed fetch has status %+v", span.Status())
	}
	for _, kv := range span.Attributes() {
		if kv.Value.String() == "secret" {
			t.Errorf("attribute %s holds the URL's query", kv.Key)
		}
	}
}
