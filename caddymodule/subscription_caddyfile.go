package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(ServiceSubscription{})
	httpcaddyfile.RegisterHandlerDirective("service_subscription", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(ServiceSubscription)
		return m, m.UnmarshalCaddyfile(h.Dispenser)
	})
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	service_subscription [<matcher>] {
//		app_identifier <id>
//		base_url       <url>                   # may hold placeholders
//		negative_ttl   <duration>              # default 30s
//		timeout        <duration>              # default 10s
//		on_error       deny|allow|stale <grace> # default deny
//		max_age        <duration>              # default: until expires
//		cache_size     <entries>               # default 10000
//		time_zone      <IANA zone>             # default UTC
//		realm          <realm>                 # default service
//	}
func (h *ServiceSubscription) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	for d.NextBlock(0) {
		name := d.Val()
		if seen[name] {
			return d.Errf("service_subscription: %s given more than once", name)
		}
		seen[name] = true
		switch name {
		case "app_identifier":
			if !d.AllArgs(&h.AppIdentifier) {
				return d.ArgErr()
			}
		case "base_url":
			if !d.AllArgs(&h.BaseURL) {
				return d.ArgErr()
			}
		case "time_zone":
			if !d.AllArgs(&h.TimeZone) {
				return d.ArgErr()
			}
		case "realm":
			if !d.AllArgs(&h.Realm) {
				return d.ArgErr()
			}
		case "negative_ttl", "timeout", "max_age":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil {
				return d.Errf("service_subscription: %s %q: %v", name, v, err)
			}
			if dur <= 0 {
				return d.Errf("service_subscription: %s must be above zero", name)
			}
			switch name {
			case "negative_ttl":
				h.NegativeTTL = caddy.Duration(dur)
			case "timeout":
				h.Timeout = caddy.Duration(dur)
			default:
				h.MaxAge = caddy.Duration(dur)
			}
		case "cache_size":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return d.Errf("service_subscription: cache_size %q is not a positive number of entries", v)
			}
			h.CacheSize = n
		case "on_error":
			if !d.NextArg() {
				return d.ArgErr()
			}
			h.OnError = d.Val()
			switch h.OnError {
			case onErrorDeny, onErrorAllow:
				if d.NextArg() {
					return d.ArgErr()
				}
			case onErrorStale:
				var v string
				if !d.AllArgs(&v) {
					return d.Errf("service_subscription: on_error stale needs a grace period, e.g. on_error stale 1h")
				}
				grace, err := caddy.ParseDuration(v)
				if err != nil {
					return d.Errf("service_subscription: on_error stale %q: %v", v, err)
				}
				if grace <= 0 {
					return d.Errf("service_subscription: on_error stale needs a grace period above zero")
				}
				h.StaleGrace = caddy.Duration(grace)
			default:
				return d.Errf("service_subscription: on_error %q is not one of deny, allow, stale <grace>", h.OnError)
			}
		default:
			return d.Errf("unrecognized service_subscription sub-directive %q", name)
		}
	}
	return nil
}
