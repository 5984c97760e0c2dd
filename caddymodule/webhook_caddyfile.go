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
		return m, m.UnmarshalCaddyfile(adaptDispenser(h))
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
//		timeout <duration>            # how long the app may take to acknowledge; default 30s
//		queue {                       # store, answer the service, deliver to the app with retries
//			to <url>                  # the app, e.g. http://127.0.0.1:3000 (required)
//			store disk|redis          # default: redis with the servicegate app's redis option, else disk
//			dir <path>                # store disk; default: servicegate/webhook-queue in Caddy's data directory
//			concurrency <n>           # deliveries in flight toward the app; default 8
//			max_age <duration>        # give up after; default 72h
//			max_attempts <n>          # give up after; default: no limit but max_age
//			timeout <duration>        # one attempt; default: the timeout above
//			dedup <duration>          # drop identical deliveries within; default off
//		}
//	}
func (m *ServiceWebhook) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if err := parseDirective(d, m.subdirectives()); err != nil {
		return err
	}
	return directiveErr(d, m.Validate())
}

// subdirectives is the table of service_webhook's sub-directives, for its
// directive and service_app's webhook blocks.
func (m *ServiceWebhook) subdirectives() map[string]subdirective {
	return map[string]subdirective{
		"secret":       repeatable(secretArgs("service_webhook", &m.Secrets)),
		"secrets_file": once(stringArg(&m.SecretsFile)),
		"secrets_poll": once(durationTo(&m.SecretsPoll)),
		"module_key":   repeatable(appendArgs(&m.ModuleKeys)),
		"events":       repeatable(appendArgs(&m.Events)),
		"max_size":     once(sizeTo(&m.MaxSize)),
		"read_timeout": once(durationTo(&m.ReadTimeout)),
		"timeout":      once(durationTo(&m.Timeout)),
		"queue": once(func(d *caddyfile.Dispenser) (err error) {
			m.Queue, err = unmarshalWebhookQueue(d)
			return err
		}),
	}
}

// unmarshalWebhookQueue parses service_webhook's queue block.
func unmarshalWebhookQueue(d *caddyfile.Dispenser) (*WebhookQueue, error) {
	q := new(WebhookQueue)
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	err := parseBlock(d, "service_webhook queue", map[string]subdirective{
		"to":           once(urlArg(&q.To, originURL)),
		"store":        once(stringArg(&q.Store)),
		"dir":          once(stringArg(&q.Dir)),
		"concurrency":  once(intTo(&q.Concurrency, 1)),
		"max_attempts": once(intTo(&q.MaxAttempts, 1)),
		"max_age":      once(durationTo(&q.MaxAge)),
		"timeout":      once(durationTo(&q.Timeout)),
		"dedup":        once(durationTo(&q.Dedup)),
	})
	if err != nil {
		return nil, err
	}
	if q.To == "" {
		return nil, d.Err("service_webhook queue needs to: the app's address, such as http://127.0.0.1:3000")
	}
	return q, nil
}
