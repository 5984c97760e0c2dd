package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("servicegate", parseServicegateOption)
}

// parseServicegateOption sets up the servicegate app from the global option:
//
//	servicegate {
//		redis <url>
//		key_prefix <prefix>
//		timeout <duration>
//	}
//
// or, shorter, servicegate { redis <url> } alone.
func parseServicegateOption(d *caddyfile.Dispenser, existing any) (any, error) {
	if existing != nil {
		return nil, d.Err("the servicegate global option is given more than once")
	}
	app := new(App)
	d.Next() // the option's name
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "redis":
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			app.Redis = d.Val()
		case "key_prefix":
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			app.KeyPrefix = d.Val()
		case "timeout":
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil {
				return nil, d.Errf("servicegate timeout: %v", err)
			}
			app.Timeout = caddy.Duration(dur)
		default:
			return nil, d.Errf("unknown servicegate option %q (known: redis, key_prefix, timeout)", d.Val())
		}
		if d.NextArg() {
			return nil, d.ArgErr()
		}
	}
	if app.Redis == "" {
		return nil, d.Err("servicegate: redis <url> is required")
	}
	return httpcaddyfile.App{Name: "servicegate", Value: caddyconfig.JSON(app, nil)}, nil
}
