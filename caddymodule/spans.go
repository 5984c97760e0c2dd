package caddymodule

import (
	"errors"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/spans"
)

// endCheck ends the span of a check that did not pass the request on (a
// refusal), marking it failed, with the status when err carries one (with
// handle_errors routes). On the way through the handler ends the span
// first, and this does nothing more.
func endCheck(span spans.Span, err error) {
	if span.Recording() {
		var he caddyhttp.HandlerError
		if errors.As(err, &he) {
			span.Int("http.response.status_code", int64(he.StatusCode))
		}
		span.Fail("refused")
	}
	span.End()
}
