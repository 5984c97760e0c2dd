package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
)

func init() {
	caddy.RegisterModule(ServiceLimits{})
	httpcaddyfile.RegisterHandlerDirective("service_limits", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(ServiceLimits)
		return m, m.UnmarshalCaddyfile(h.Dispenser)
	})
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	service_limits {
//		max_request_size  <size>     # default 5MiB
//		max_response_size <size>     # default 5MiB
//		timeout           <duration> # default 2m
//	}
//
// Every sub-directive is optional, and so is the block.
func (l *ServiceLimits) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		sub := d.Val()
		var arg string
		if !d.AllArgs(&arg) {
			return d.ArgErr()
		}
		switch sub {
		case "max_request_size", "max_response_size":
			size, err := humanize.ParseBytes(arg)
			if err != nil {
				return d.Errf("parsing %s %q: %v", sub, arg, err)
			}
			if size == 0 {
				return d.Errf("%s must be more than zero bytes, got %q", sub, arg)
			}
			if size > 1<<62 {
				return d.Errf("%s %q is too large", sub, arg)
			}
			if sub == "max_request_size" {
				l.MaxRequestSize = int64(size)
			} else {
				l.MaxResponseSize = int64(size)
			}
		case "timeout":
			dur, err := caddy.ParseDuration(arg)
			if err != nil {
				return d.Errf("parsing timeout %q: %v", arg, err)
			}
			if dur <= 0 {
				return d.Errf("timeout must be more than zero, got %q", arg)
			}
			l.Timeout = caddy.Duration(dur)
		default:
			return d.Errf("unrecognized service_limits subdirective %q", sub)
		}
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*ServiceLimits)(nil)
