// Package signature verifies the HMAC-SHA256 signatures of the service's
// webhook deliveries. It has no Caddy import.
package signature
