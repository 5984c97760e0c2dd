package caddymodule

import (
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/modulecall"
)

func init() {
	caddy.RegisterModule(ServiceLimits{})
	httpcaddyfile.RegisterHandlerDirective("service_limits", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(ServiceLimits)
		return m, m.UnmarshalCaddyfile(adaptDispenser(h))
	})
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	service_limits {
//		max_request_size  <size>     # default 5MiB
//		max_response_size <size>     # default 5MiB
//		timeout           <duration> # default 2m
//
//		contract custom-file-format|file-pre-export  # default: no check
//		mode     enforce|report                      # default enforce
//
//		spill                        # answers over max_response_size go by URL
//		spill_path     <path>        # default /servicegate/spill/
//		spill_base_url <url>         # default: service_app's base_url, else the site's host name
//		spill_ttl      <duration>    # default 10m
//		spill_dir      <dir>         # default <temp dir>/servicegate-spill
//		spill_max_size <size>        # default 64MiB
//		spill_key      <secret>      # default: random per process; required with the servicegate redis option
//
//		inline                       # payloads sent by URL reach the app inline
//		inline_hosts   <host>...     # required with inline; repeatable; *.domain
//		inline_max_size <size>       # default max_request_size
//		inline_timeout <duration>    # default 30s
//		inline_allow_private         # default off: loopback and private ranges refused
//	}
//
// Every sub-directive is optional, and so is the block; a spill_* or
// inline_* sub-directive turns on spill or inline.
func (l *ServiceLimits) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if err := parseDirective(d, l.subdirectives()); err != nil {
		return err
	}
	return directiveErr(d, l.Validate())
}

// subdirectives is the table of service_limits' sub-directives, for its
// directive and service_app's limits blocks.
func (l *ServiceLimits) subdirectives() map[string]subdirective {
	// Each spill_* and inline_* sub-directive turns on spill or inline.
	spill := func(parse func(s *SpillOptions, d *caddyfile.Dispenser) error) func(*caddyfile.Dispenser) error {
		return func(d *caddyfile.Dispenser) error {
			if l.Spill == nil {
				l.Spill = new(SpillOptions)
			}
			return parse(l.Spill, d)
		}
	}
	inline := func(parse func(in *InlineOptions, d *caddyfile.Dispenser) error) func(*caddyfile.Dispenser) error {
		return func(d *caddyfile.Dispenser) error {
			if l.Inline == nil {
				l.Inline = new(InlineOptions)
			}
			return parse(l.Inline, d)
		}
	}
	return map[string]subdirective{
		"max_request_size":  once(sizeTo(&l.MaxRequestSize)),
		"max_response_size": once(sizeTo(&l.MaxResponseSize)),
		"timeout":           once(durationTo(&l.Timeout)),
		"contract": once(func(d *caddyfile.Dispenser) (err error) {
			if l.Contract, err = oneArg(d); err == nil && l.Contract != contract.CustomFileFormat && l.Contract != contract.FilePreExport {
				return d.Errf("contract must be %s or %s, got %q", contract.CustomFileFormat, contract.FilePreExport, l.Contract)
			}
			return err
		}),
		"mode": once(func(d *caddyfile.Dispenser) (err error) {
			if l.Mode, err = oneArg(d); err == nil && l.Mode != modulecall.ModeEnforce && l.Mode != modulecall.ModeReport {
				return d.Errf("mode must be %s or %s, got %q", modulecall.ModeEnforce, modulecall.ModeReport, l.Mode)
			}
			return err
		}),

		"spill": once(spill(func(_ *SpillOptions, d *caddyfile.Dispenser) error { return noArg(d) })),
		"spill_path": once(spill(func(s *SpillOptions, d *caddyfile.Dispenser) (err error) {
			if s.Path, err = oneArg(d); err == nil && (!strings.HasPrefix(s.Path, "/") || !strings.HasSuffix(s.Path, "/")) {
				return d.Errf("spill_path must start and end with /, got %q", s.Path)
			}
			return err
		})),
		"spill_base_url": once(spill(func(s *SpillOptions, d *caddyfile.Dispenser) error { return urlArg(&s.BaseURL, baseURL)(d) })),
		"spill_ttl":      once(spill(func(s *SpillOptions, d *caddyfile.Dispenser) error { return durationTo(&s.TTL)(d) })),
		"spill_dir":      once(spill(func(s *SpillOptions, d *caddyfile.Dispenser) error { return stringArg(&s.Dir)(d) })),
		"spill_max_size": once(spill(func(s *SpillOptions, d *caddyfile.Dispenser) error { return sizeTo(&s.MaxSize)(d) })),
		"spill_key":      once(spill(func(s *SpillOptions, d *caddyfile.Dispenser) error { return secretArg("service_limits", &s.Key)(d) })),

		"inline":          once(inline(func(_ *InlineOptions, d *caddyfile.Dispenser) error { return noArg(d) })),
		"inline_hosts":    repeatable(inline(func(in *InlineOptions, d *caddyfile.Dispenser) error { return appendArgs(&in.Hosts)(d) })),
		"inline_max_size": once(inline(func(in *InlineOptions, d *caddyfile.Dispenser) error { return sizeTo(&in.MaxSize)(d) })),
		"inline_timeout":  once(inline(func(in *InlineOptions, d *caddyfile.Dispenser) error { return durationTo(&in.Timeout)(d) })),
		"inline_allow_private": once(inline(func(in *InlineOptions, d *caddyfile.Dispenser) error {
			in.AllowPrivate = true
			return noArg(d)
		})),
	}
}

var _ caddyfile.Unmarshaler = (*ServiceLimits)(nil)

// responseLimit is max_response_size, or its default when unset.
func (l *ServiceLimits) responseLimit() int64 {
	if l.MaxResponseSize == 0 {
		return modulecall.DefaultMaxSize
	}
	return l.MaxResponseSize
}
