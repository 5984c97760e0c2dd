package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/spans"
)

// endCheck ends the span of a check; a refusal (a caddyhttp.HandlerError)
// marks it failed with its status.
func endCheck(span spans.Span, err error) {
	var he caddyhttp.HandlerError
	if span.Recording() && errors.As(err, &he) {
		span.Int("http.response.status_code", int64(he.StatusCode))
		span.Fail(http.StatusText(he.StatusCode))
	}
	span.End()
}
