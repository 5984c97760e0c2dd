package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(ServiceOAuth{})
	httpcaddyfile.RegisterHandlerDirective("service_oauth", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(ServiceOAuth)
		return m, m.UnmarshalCaddyfile(h.Dispenser)
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
//		session_store memory|storage
//		max_sessions <n>
//		user_header <name>|off
//		organization_header <name>|off
//		timeout <duration>
//	}
func (m *ServiceOAuth) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		name := d.Val()
		if name == "scopes" {
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			m.Scopes = append(m.Scopes, args...)
			continue
		}
		var v string
		if !d.AllArgs(&v) {
			return d.ArgErr()
		}
		switch name {
		case "client_id":
			m.ClientID = v
		case "client_secret":
			m.ClientSecret = v
		case "auth_url":
			m.AuthURL = v
		case "redirect_uri":
			m.RedirectURI = v
		case "logout_path":
			m.LogoutPath = v
		case "logout_redirect":
			m.LogoutRedirect = v
		case "cookie_name":
			m.CookieName = v
		case "cookie_domain":
			m.CookieDomain = v
		case "cookie_path":
			m.CookiePath = v
		case "user_header":
			m.UserHeader = v
		case "organization_header":
			m.OrganizationHeader = v
		case "cookie_secure":
			switch v {
			case "on":
				on := true
				m.CookieSecure = &on
			case "off":
				off := false
				m.CookieSecure = &off
			default:
				return d.Errf("cookie_secure must be on or off, not %q", v)
			}
		case "session_store":
			if v != oauthStoreMemory && v != oauthStoreStorage {
				return d.Errf("session_store must be memory or storage, not %q", v)
			}
			m.SessionStore = v
		case "max_sessions":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("max_sessions %q is not a positive integer", v)
			}
			m.MaxSessions = n
		case "session_lifetime", "timeout":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("%s %q is not a positive duration", name, v)
			}
			if name == "timeout" {
				m.Timeout = caddy.Duration(dur)
			} else {
				m.SessionLifetime = caddy.Duration(dur)
			}
		default:
			return d.Errf("unrecognized service_oauth subdirective %q", name)
		}
	}
	if m.ClientID == "" || m.ClientSecret == "" || m.AuthURL == "" || len(m.Scopes) == 0 {
		return d.Err("service_oauth needs client_id, client_secret, auth_url and scopes")
	}
	return nil
}
