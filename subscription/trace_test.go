package subscription

import (
	"strings"
	"testing"

	"github.com/servicegate/servicegate/spans/spanstest"
)

// A subscription query is a span of the request's trace, with the answer
// as an attribute and never the token, and the service gets its trace
// context.
func TestQueryIsASpan(t *testing.T) {
	url, got := spanstest.Peer(t, `{"expires":"2099-01-01 00:00:00"}`)
	ctx, rec := spanstest.Request(t)

	if _, err := (&Client{}).Query(ctx, url, "my-app", "the-token"); err != nil {
		t.Fatal(err)
	}
	span := spanstest.Outbound(t, ctx, rec, "servicegate.subscription.query", <-got)
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
