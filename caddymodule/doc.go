// Package caddymodule is the Caddy glue of servicegate: the module types,
// their provisioning, their Caddyfile directives and their metrics. The work
// itself is done by the packages token, subscription, signature, webhook,
// jsonscan, limits, contract, oauth, emulator and health, which know nothing of
// Caddy.
//
// Importing this package (or the module root, github.com/servicegate/servicegate,
// the package xcaddy's --with imports) registers the modules
//
//	http.handlers.service_limits
//	http.handlers.service_webhook
//	http.handlers.service_oauth
//	http.handlers.service_auth
//	http.handlers.service_subscription
//	http.handlers.service_emulator
//	admin.api.service_subscription (forget an organization's cached answer)
//	admin.api.service_health (the health of every service_app)
//
// and their Caddyfile directives, ordered so that a route runs
// limits → webhook → oauth → auth → subscription → the rest without an `order`
// global option.
package caddymodule
