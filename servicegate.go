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
// do is in Caddy-free packages, which a Go app can import too:
//
//	token, signature       bearer tokens and their claims; webhook signatures
//	webhook, subscription  delivery checks and secrets; the subscription query and cache
//	limits, contract       bounded bodies and answers; the module contract, spill and inline
//	modulecall             the pipeline of the service's calls to module endpoints (service_limits)
//	oauth, descriptor      the sign-in and sessions; the app descriptor and its checks
//	urlpath                one canonical form of request paths, and the spellings refused
//	approute, siteorigin   service_app's router of every path to its checks; a site's public origin
//	installations          organizations' installations, sealed, and their app tokens
//	queue, cluster         the durable webhook queue; what instances share through Redis
//	health, spans, version the health check, trace spans, the version that runs
//	emulator               a local stand-in of the service
//	cli                    what the service-* commands do, printed as plain text
//	jsonscan, respond, safehttp  one JSON scanner; refusals and small pages; the address-checked client
package servicegate

import (
	// Registers http.handlers.service_*, the servicegate app, the
	// admin.api.service_* modules, the service_* directives and the
	// service-* commands.
	_ "github.com/servicegate/servicegate/caddymodule"
)
