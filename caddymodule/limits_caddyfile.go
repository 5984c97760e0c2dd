package caddymodule

import (
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/servicegate/servicegate/contract"
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
//
//		contract custom-file-format|file-pre-export  # default: no check
//		mode     enforce|report                      # default enforce
//
//		spill                        # answers over max_response_size go by URL
//		spill_path     <path>        # default /servicegate/spill/
//		spill_base_url <url>         # default: scheme and host of the request
//		spill_ttl      <duration>    # default 10m
//		spill_dir      <dir>         # default <temp dir>/servicegate-spill
//		spill_max_size <size>        # default 64MiB
//		spill_key      <secret>      # default: random per process
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
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		sub := d.Val()
		if strings.HasPrefix(sub, "spill") && l.Spill == nil {
			l.Spill = new(SpillOptions)
		}
		if strings.HasPrefix(sub, "inline") && l.Inline == nil {
			l.Inline = new(InlineOptions)
		}
		switch sub {
		case "spill", "inline", "inline_allow_private":
			if d.NextArg() {
				return d.ArgErr()
			}
			if sub == "inline_allow_private" {
				l.Inline.AllowPrivate = true
			}
			continue
		case "inline_hosts":
			hosts := d.RemainingArgs()
			if len(hosts) == 0 {
				return d.ArgErr()
			}
			l.Inline.Hosts = append(l.Inline.Hosts, hosts...)
			continue
		}
		var arg string
		if !d.AllArgs(&arg) {
			return d.ArgErr()
		}
		switch sub {
		case "max_request_size", "max_response_size", "spill_max_size", "inline_max_size":
			size, err := parseSize(d, sub, arg)
			if err != nil {
				return err
			}
			switch sub {
			case "max_request_size":
				l.MaxRequestSize = size
			case "max_response_size":
				l.MaxResponseSize = size
			case "spill_max_size":
				l.Spill.MaxSize = size
			default:
				l.Inline.MaxSize = size
			}
		case "timeout", "spill_ttl", "inline_timeout":
			dur, err := caddy.ParseDuration(arg)
			if err != nil {
				return d.Errf("parsing %s %q: %v", sub, arg, err)
			}
			if dur <= 0 {
				return d.Errf("%s must be more than zero, got %q", sub, arg)
			}
			switch sub {
			case "timeout":
				l.Timeout = caddy.Duration(dur)
			case "spill_ttl":
				l.Spill.TTL = caddy.Duration(dur)
			default:
				l.Inline.Timeout = caddy.Duration(dur)
			}
		case "contract":
			if arg != contract.CustomFileFormat && arg != contract.FilePreExport {
				return d.Errf("contract must be %s or %s, got %q", contract.CustomFileFormat, contract.FilePreExport, arg)
			}
			l.Contract = arg
		case "mode":
			if arg != contractEnforce && arg != contractReport {
				return d.Errf("mode must be %s or %s, got %q", contractEnforce, contractReport, arg)
			}
			l.Mode = arg
		case "spill_path":
			if !strings.HasPrefix(arg, "/") || !strings.HasSuffix(arg, "/") {
				return d.Errf("spill_path must start and end with /, got %q", arg)
			}
			l.Spill.Path = arg
		case "spill_base_url":
			l.Spill.BaseURL = arg
		case "spill_dir":
			l.Spill.Dir = arg
		case "spill_key":
			l.Spill.Key = arg
		default:
			return d.Errf("unrecognized service_limits subdirective %q", sub)
		}
	}
	switch {
	case l.Mode != "" && l.Contract == "":
		return d.Err("mode needs contract")
	case l.Spill != nil && l.Contract == "":
		return d.Err("spill needs contract, which tells what an answer carries")
	case l.Inline != nil && l.Contract == "":
		return d.Err("inline needs contract, which tells what a job carries")
	case l.Inline != nil && len(l.Inline.Hosts) == 0:
		return d.Err("inline needs inline_hosts, the hosts payloads may be fetched from")
	case l.Spill != nil && l.Spill.MaxSize != 0 && l.Spill.MaxSize < l.responseLimit():
		return d.Err("spill_max_size is below max_response_size")
	}
	return nil
}

// parseSize reads a size as Caddy writes sizes: 5MiB, 500KB, 1048576.
func parseSize(d *caddyfile.Dispenser, sub, arg string) (int64, error) {
	size, err := humanize.ParseBytes(arg)
	if err != nil {
		return 0, d.Errf("parsing %s %q: %v", sub, arg, err)
	}
	if size == 0 {
		return 0, d.Errf("%s must be more than zero bytes, got %q", sub, arg)
	}
	if size > 1<<62 {
		return 0, d.Errf("%s %q is too large", sub, arg)
	}
	return int64(size), nil
}

var _ caddyfile.Unmarshaler = (*ServiceLimits)(nil)

// responseLimit is max_response_size, or its default when unset.
func (l *ServiceLimits) responseLimit() int64 {
	if l.MaxResponseSize == 0 {
		return defaultMaxResponseSize
	}
	return l.MaxResponseSize
}
