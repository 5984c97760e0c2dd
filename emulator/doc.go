// Package emulator is a small, honest stand-in for the service: its OAuth 2.0
// authorization server, its subscription query and its webhook sender, for
// demos, tests and app development. It is a development tool and never a
// production default: it keeps codes and tokens in memory, approves whatever
// a request asks it to approve, and knows one app. It has no Caddy import.
//
// A Server answers
//
//	GET  /oauth/authorize   consent page; decision=approve|decline answers at once
//	POST /oauth/authorize   the consent page's form
//	POST /oauth/token       authorization_code, refresh_token and service_app
//	                        grants: a JSON or form body; the client in the body
//	                        or in HTTP Basic
//	GET  /api/v2/applications/{id}/subscription
//	POST /emulator/lifecycle  for a developer's tools: install, uninstall,
//	                        subscription_paid, or a signed delivery (LifecycleRequest)
//	GET  /emulator/console  the console's page (ConsoleConfig)
//	     /emulator/api/...  the console's JSON API, its event stream at
//	                        /emulator/api/events
//
// Access tokens are HS256 JWTs signed with the client secret (see
// MintToken), so a gateway that verifies with the same secret accepts them.
// Codes are single-use and short-lived; refresh tokens rotate. The
// subscription query answers per organization as configured, counts the
// queries it receives (Queries), and can be made to fail or to wait
// (SetOutage, SetDelay) for outage tests.
//
// SignDelivery and SendDelivery send webhook event deliveries the way the
// service does. InstallApp, UninstallApp and SubscriptionPaid make the
// lifecycle calls of an installation: each installation gets a fresh random
// app secret, which the service_app grant answers until it is uninstalled.
//
// The console keeps the last calls the emulator took part in (what it sent
// the app through the gateway, what it answered the gateway) in a bounded
// log, with bodies capped and secrets masked when shown, and the gateway's
// verdict on each call it sent: from the gateway itself when it runs in the
// same process (Verdicts, CallHeader), else from the answer's error.message.
// Its page and API answer loopback and the site's own names only, and take
// changes from the same origin only.
package emulator
