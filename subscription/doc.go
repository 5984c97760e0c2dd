// Package subscription asks the service whether an organization has paid for
// an app, and caches the answers. It has no Caddy import.
package subscription
