package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(ServiceWebhook{})
	httpcaddyfile.RegisterHandlerDirective("service_webhook", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(ServiceWebhook)
		return m, m.UnmarshalCaddyfile(h.Dispenser)
	})
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	service_webhook {
//		secret <secret...>            # repeatable: any one matching passes (rotation)
//		secrets_file <path>           # {"<org domain or id>": "secret" | ["s1","s2"]}
//		secrets_poll <duration>       # how often secrets_file is checked; default 2s
//		module_key <key...>           # repeatable: allowed X-Module-Key values
//		events <name...>              # repeatable: allowed event names
//		max_size <size>               # default 5MiB
//		read_timeout <duration>       # how long the body may take to arrive; default 10s
//	}
func (m *ServiceWebhook) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "secret":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			m.Secrets = append(m.Secrets, args...)
		case "secrets_file":
			if m.SecretsFile != "" {
				return d.Err("secrets_file given twice")
			}
			if !d.AllArgs(&m.SecretsFile) {
				return d.ArgErr()
			}
		case "secrets_poll":
			var s string
			if !d.AllArgs(&s) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(s)
			if err != nil {
				return d.Errf("parsing secrets_poll: %v", err)
			}
			if dur <= 0 {
				return d.Err("secrets_poll must be positive")
			}
			m.SecretsPoll = caddy.Duration(dur)
		case "module_key":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			m.ModuleKeys = append(m.ModuleKeys, args...)
		case "events":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			m.Events = append(m.Events, args...)
		case "max_size":
			var s string
			if !d.AllArgs(&s) {
				return d.ArgErr()
			}
			size, err := parseSize(d, "max_size", s)
			if err != nil {
				return err
			}
			if size > 1<<40 {
				return d.Errf("max_size must be between 1 byte and 1 TiB")
			}
			m.MaxSize = size
		case "read_timeout":
			var s string
			if !d.AllArgs(&s) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(s)
			if err != nil {
				return d.Errf("parsing read_timeout: %v", err)
			}
			if dur <= 0 {
				return d.Err("read_timeout must be positive")
			}
			m.ReadTimeout = caddy.Duration(dur)
		default:
			return d.Errf("unrecognized service_webhook sub-directive %q", d.Val())
		}
	}
	return nil
}
