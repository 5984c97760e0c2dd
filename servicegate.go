// Package servicegate is the Caddy plugin of servicegate: importing it
// registers every servicegate module, Caddyfile directive and CLI command
// with Caddy, as a plugin named to xcaddy with --with does:
//
//	xcaddy build v2.11.9 --with github.com/servicegate/servicegate
//
// or, in a Caddy main package of your own:
//
//	import _ "github.com/servicegate/servicegate"
//
// The modules themselves are in the caddymodule package; the work they
// do is in the Caddy-free packages token, subscription, signature,
// limits, contract, oauth and emulator, which a Go app can import too.
package servicegate

import (
	// Registers http.handlers.service_*, admin.api.service_subscription,
	// the service_* directives and the service-* commands.
	_ "github.com/servicegate/servicegate/caddymodule"
)
