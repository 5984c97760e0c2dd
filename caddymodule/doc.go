// Package caddymodule is the Caddy glue of servicegate: the module types,
// their provisioning, their Caddyfile directives, admin API and metrics, and
// the CLI commands. The work itself is done by Caddy-free packages (token,
// signature, webhook, subscription, limits, contract, modulecall, oauth,
// descriptor, urlpath, approute, siteorigin, installations, queue, cluster,
// health, spans, version, emulator, jsonscan, respond, safehttp, cli: see the
// module root's package doc).
//
// Importing this package (or the module root, github.com/servicegate/servicegate,
// the package xcaddy's --with imports) registers the modules
//
//	http.handlers.service_app (one block per app, from its descriptor)
//	http.handlers.service_limits
//	http.handlers.service_webhook
//	http.handlers.service_oauth
//	http.handlers.service_auth
//	http.handlers.service_subscription
//	http.handlers.service_emulator
//	servicegate (the app of what several instances share through Redis)
//	admin.api.service_subscription (forget an organization's cached answer)
//	admin.api.service_webhook_queue (list, replay and drop queued deliveries)
//	admin.api.service_health (the health of every service_app)
//	admin.api.service_installations (service_app's installations and app tokens)
//
// and their Caddyfile directives, ordered so that a route runs
// service_app → limits → webhook → oauth → auth → subscription → the rest
// without an `order` global option.
package caddymodule
