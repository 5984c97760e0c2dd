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
//	}
func (m *ServiceWebhook) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	err := parseDirective(d, map[string]subdirective{
		"secret":       repeatable(appendArgs(&m.Secrets)),
		"secrets_file": once(stringArg(&m.SecretsFile)),
		"secrets_poll": once(durationTo(&m.SecretsPoll)),
		"module_key":   repeatable(appendArgs(&m.ModuleKeys)),
		"events":       repeatable(appendArgs(&m.Events)),
		"max_size":     once(sizeTo(&m.MaxSize)),
	})
	if err != nil {
		return err
	}
	if err := m.Validate(); err != nil {
		return directiveErr(d, err)
	}
	return nil
}
