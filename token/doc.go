// Package token verifies the service's JWT-shaped bearer tokens and extracts
// their claims. It has no Caddy import.
package token
