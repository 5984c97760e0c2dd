package caddymodule

import "github.com/caddyserver/caddy/v2"

// hasConfig tells whether ctx belongs to a config. Caddy's accessors of
// the config (its apps, its storage) dereference it, and a context made
// with caddy.NewContext from a bare Context has none.
func hasConfig(ctx caddy.Context) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_ = ctx.Storage()
	return true
}
