// Package emulator is a small, honest stand-in for the service: its OAuth 2.0
// authorization server, its subscription query and its webhook sender, for
// demos, tests and app development. It is a development tool and never a
// production default. It has no Caddy import.
package emulator
