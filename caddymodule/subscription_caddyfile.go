package caddymodule

import (
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(ServiceSubscription{})
	httpcaddyfile.RegisterHandlerDirective("service_subscription", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(ServiceSubscription)
		return m, m.UnmarshalCaddyfile(adaptDispenser(h))
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
	if err := parseDirective(d, h.subdirectives()); err != nil {
		return err
	}
	return directiveErr(d, h.Validate())
}

// subdirectives is the table of service_subscription's sub-directives, for
// its directive and service_app's subscription block.
func (h *ServiceSubscription) subdirectives() map[string]subdirective {
	return map[string]subdirective{
		"app_identifier": once(stringArg(&h.AppIdentifier)),
		// One with placeholders is checked once they are resolved, one
		// of the request on each request.
		"base_url": once(urlArg(&h.BaseURL, baseURL)),
		"time_zone": once(func(d *caddyfile.Dispenser) (err error) {
			if h.TimeZone, err = oneArg(d); err != nil {
				return err
			}
			if _, err := time.LoadLocation(h.TimeZone); err != nil {
				return d.Errf("service_subscription time_zone: %v", err)
			}
			return nil
		}),
		"realm":        once(stringArg(&h.Realm)),
		"negative_ttl": once(durationTo(&h.NegativeTTL)),
		"timeout":      once(durationTo(&h.Timeout)),
		"max_age":      once(durationTo(&h.MaxAge)),
		"cache_size":   once(intTo(&h.CacheSize, 1)),
		"on_error":     once(h.parseOnError),
	}
}

// parseOnError reads "on_error deny|allow|stale <grace>".
func (h *ServiceSubscription) parseOnError(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	h.OnError = d.Val()
	switch h.OnError {
	case onErrorDeny, onErrorAllow:
		return noArg(d)
	case onErrorStale:
		var v string
		if !d.AllArgs(&v) {
			return d.Errf("service_subscription: on_error stale needs a grace period, e.g. on_error stale 1h")
		}
		grace, err := caddy.ParseDuration(v)
		if err != nil || grace <= 0 {
			return d.Errf("on_error stale %q is not a positive duration", v)
		}
		h.StaleGrace = caddy.Duration(grace)
		return nil
	default:
		return d.Errf("service_subscription: on_error %q is not one of deny, allow, stale <grace>", h.OnError)
	}
}
