package caddymodule

import (
	"strconv"

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
//		queue {                       # store, answer the service, deliver to the app with retries
//			to <url>                  # the app, e.g. http://127.0.0.1:3000 (required)
//			dir <path>                # default: servicegate/webhook-queue in Caddy's data directory
//			concurrency <n>           # deliveries in flight toward the app; default 8
//			max_age <duration>        # give up after; default 72h
//			max_attempts <n>          # give up after; default: no limit but max_age
//			timeout <duration>        # one attempt; default 30s
//			dedup <duration>          # drop identical deliveries within; default off
//		}
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
		case "queue":
			if m.Queue != nil {
				return d.Err("queue given twice")
			}
			q, err := unmarshalWebhookQueue(d)
			if err != nil {
				return err
			}
			m.Queue = q
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

// unmarshalWebhookQueue parses service_webhook's queue block.
func unmarshalWebhookQueue(d *caddyfile.Dispenser) (*WebhookQueue, error) {
	q := new(WebhookQueue)
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	duration := func() (caddy.Duration, error) {
		var s string
		if !d.AllArgs(&s) {
			return 0, d.ArgErr()
		}
		v, err := caddy.ParseDuration(s)
		if err != nil || v <= 0 {
			return 0, d.Errf("%s must be a positive duration, got %q", d.Val(), s)
		}
		return caddy.Duration(v), nil
	}
	count := func() (int, error) {
		var s string
		if !d.AllArgs(&s) {
			return 0, d.ArgErr()
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return 0, d.Errf("%s must be a positive whole number, got %q", d.Val(), s)
		}
		return n, nil
	}
	var err error
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "to":
			if !d.AllArgs(&q.To) {
				return nil, d.ArgErr()
			}
		case "dir":
			if !d.AllArgs(&q.Dir) {
				return nil, d.ArgErr()
			}
		case "concurrency":
			q.Concurrency, err = count()
		case "max_attempts":
			q.MaxAttempts, err = count()
		case "max_age":
			q.MaxAge, err = duration()
		case "timeout":
			q.Timeout, err = duration()
		case "dedup":
			q.Dedup, err = duration()
		default:
			return nil, d.Errf("unrecognized service_webhook queue option %q", d.Val())
		}
		if err != nil {
			return nil, err
		}
	}
	if q.To == "" {
		return nil, d.Err("service_webhook queue needs to: the app's address, such as http://127.0.0.1:3000")
	}
	return q, nil
}
