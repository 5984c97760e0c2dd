package caddymodule

import (
	"errors"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(ServiceOAuth{})
	httpcaddyfile.RegisterHandlerDirective("service_oauth", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(ServiceOAuth)
		return m, m.UnmarshalCaddyfile(adaptDispenser(h))
	})
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	service_oauth {
//		client_id <id>
//		client_secret <secret>
//		auth_url <url>
//		scopes <scope...>
//		redirect_uri <path or url>
//		logout_path <path>
//		logout_redirect <path or url>
//		cookie_name <name>
//		cookie_secure on|off
//		cookie_domain <domain>
//		cookie_path <path>
//		session_lifetime <duration>
//		session_store memory|storage|redis
//		max_sessions <n>
//		user_header <name>|off
//		organization_header <name>|off
//		timeout <duration>
//	}
func (m *ServiceOAuth) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if err := parseDirective(d, m.subdirectives()); err != nil {
		return err
	}
	if m.ClientID == "" || m.ClientSecret == "" || m.AuthURL == "" || len(m.Scopes) == 0 {
		return directiveErr(d, errors.New("service_oauth needs client_id, client_secret, auth_url and scopes"))
	}
	return directiveErr(d, m.Validate())
}

// subdirectives is the table of service_oauth's sub-directives, for its
// directive and service_app's sign_in block.
func (m *ServiceOAuth) subdirectives() map[string]subdirective {
	return map[string]subdirective{
		"client_id":     once(stringArg(&m.ClientID)),
		"client_secret": once(secretArg("service_oauth", &m.ClientSecret)),
		"auth_url":      once(urlArg(&m.AuthURL, baseURL)),
		"scopes":        repeatable(appendArgs(&m.Scopes)),
		"redirect_uri":  once(urlArg(&m.RedirectURI, pathOrURL)),
		"logout_path":   once(stringArg(&m.LogoutPath)),
		"cookie_secure": once(func(d *caddyfile.Dispenser) error {
			m.CookieSecure = new(bool)
			return onOffTo(m.CookieSecure)(d)
		}),
		"logout_redirect":     once(urlArg(&m.LogoutRedirect, pathOrURL)),
		"cookie_name":         once(stringArg(&m.CookieName)),
		"cookie_domain":       once(stringArg(&m.CookieDomain)),
		"cookie_path":         once(stringArg(&m.CookiePath)),
		"user_header":         once(stringArg(&m.UserHeader)),
		"organization_header": once(stringArg(&m.OrganizationHeader)),
		"session_store": once(func(d *caddyfile.Dispenser) (err error) {
			if m.SessionStore, err = oneArg(d); err == nil && m.SessionStore != oauthStoreMemory && m.SessionStore != oauthStoreStorage && m.SessionStore != oauthStoreRedis {
				return d.Errf("session_store must be memory, storage or redis, not %q", m.SessionStore)
			}
			return err
		}),
		"max_sessions":     once(intTo(&m.MaxSessions, 1)),
		"session_lifetime": once(durationTo(&m.SessionLifetime)),
		"timeout":          once(durationTo(&m.Timeout)),
	}
}
