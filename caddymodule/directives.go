package caddymodule

import "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

// The order of servicegate's directives in a route. Each is inserted right
// before basic_auth, so registering them in this order keeps them in this
// order: limits first (nothing is read before the size and time limits hold),
// then webhook signatures, then the gateway's own sign-in (which puts the
// session's token on the request), then the bearer token, then the
// subscription that needs the token and the verified organization.
func init() {
	// service_app routes a whole site by itself, with the handlers below.
	httpcaddyfile.RegisterDirectiveOrder("service_app", httpcaddyfile.Before, "basic_auth")
	httpcaddyfile.RegisterDirectiveOrder("service_limits", httpcaddyfile.Before, "basic_auth")
	httpcaddyfile.RegisterDirectiveOrder("service_webhook", httpcaddyfile.Before, "basic_auth")
	httpcaddyfile.RegisterDirectiveOrder("service_oauth", httpcaddyfile.Before, "basic_auth")
	httpcaddyfile.RegisterDirectiveOrder("service_auth", httpcaddyfile.Before, "basic_auth")
	httpcaddyfile.RegisterDirectiveOrder("service_subscription", httpcaddyfile.Before, "basic_auth")
	// The emulator answers its own paths and passes every other request on,
	// so it sits with the handlers that write responses.
	httpcaddyfile.RegisterDirectiveOrder("service_emulator", httpcaddyfile.Before, "respond")
}
