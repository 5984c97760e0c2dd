package oauth

import (
	"strings"
	"testing"

	"github.com/servicegate/servicegate/spans/spanstest"
)

// A token request is a span of the request's trace, and the authorization
// server gets its trace context; nothing secret is an attribute.
func TestTokenRequestIsASpan(t *testing.T) {
	url, got := spanstest.Peer(t, `{"access_token":"the-access-token","refresh_token":"the-refresh-token","expires_in":3600}`)
	ctx, rec := spanstest.Request(t)
	c := &Client{AuthURL: url, ClientID: "client-id", ClientSecret: "the-client-secret"}
	if _, err := c.Exchange(ctx, "the-code", "https://app.example/callback", testNow); err != nil {
		t.Fatal(err)
	}
	span := spanstest.Outbound(t, ctx, rec, "servicegate.oauth.token", <-got)
	for _, kv := range span.Attributes() {
		if v := kv.Value.String(); strings.Contains(v, "the-") {
			t.Errorf("attribute %s = %q holds a secret", kv.Key, v)
		}
	}
}
