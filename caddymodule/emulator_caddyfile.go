package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(ServiceEmulator{})
	httpcaddyfile.RegisterHandlerDirective("service_emulator", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(ServiceEmulator)
		return m, m.UnmarshalCaddyfile(h.Dispenser)
	})
}

// UnmarshalCaddyfile sets up the emulator from Caddyfile tokens:
//
//	service_emulator {
//		client_id <id>
//		client_secret <secret>
//		redirect_uri <url...>
//		app_identifier <identifier>
//		issuer <iss>
//		token_lifetime <duration>
//		code_lifetime <duration>
//		organization <domain> {
//			id <integer>
//			active_until <date> | unpaid <subscribe_link> | missing
//		}
//	}
func (m *ServiceEmulator) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch name := d.Val(); name {
		case "client_id", "client_secret", "app_identifier", "issuer":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			switch name {
			case "client_id":
				m.ClientID = v
			case "client_secret":
				m.ClientSecret = v
			case "app_identifier":
				m.AppIdentifier = v
			case "issuer":
				m.Issuer = v
			}
		case "redirect_uri":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			m.RedirectURIs = append(m.RedirectURIs, args...)
		case "token_lifetime", "code_lifetime":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("%s %q is not a positive duration", name, v)
			}
			if name == "token_lifetime" {
				m.TokenLifetime = caddy.Duration(dur)
			} else {
				m.CodeLifetime = caddy.Duration(dur)
			}
		case "organization":
			org, err := unmarshalEmulatedOrganization(d)
			if err != nil {
				return err
			}
			for _, other := range m.Organizations {
				if other.Domain == org.Domain {
					return d.Errf("organization %s is configured twice", org.Domain)
				}
			}
			m.Organizations = append(m.Organizations, org)
		default:
			return d.Errf("unrecognized service_emulator sub-directive %q", name)
		}
	}
	if m.ClientID == "" || m.ClientSecret == "" || len(m.RedirectURIs) == 0 {
		return d.Err("service_emulator needs client_id, client_secret and at least one redirect_uri")
	}
	return nil
}

// unmarshalEmulatedOrganization reads "organization <domain> { … }".
func unmarshalEmulatedOrganization(d *caddyfile.Dispenser) (EmulatedOrganization, error) {
	var org EmulatedOrganization
	if !d.NextArg() {
		return org, d.ArgErr()
	}
	org.Domain = d.Val()
	if d.NextArg() {
		return org, d.ArgErr()
	}
	states := 0
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch name := d.Val(); name {
		case "id":
			var v string
			if !d.AllArgs(&v) {
				return org, d.ArgErr()
			}
			id, err := strconv.ParseInt(v, 10, 64)
			if err != nil || id <= 0 {
				return org, d.Errf("organization %s: id %q is not a positive integer", org.Domain, v)
			}
			org.ID = id
		case "active_until":
			var v string
			if !d.AllArgs(&v) {
				return org, d.ArgErr()
			}
			if _, err := parseActiveUntil(v); err != nil {
				return org, d.Errf("organization %s: %v", org.Domain, err)
			}
			org.ActiveUntil = v
			states++
		case "unpaid":
			var v string
			if !d.AllArgs(&v) {
				return org, d.ArgErr()
			}
			org.SubscribeLink = v
			states++
		case "missing":
			if d.NextArg() {
				return org, d.ArgErr()
			}
			states++
		default:
			return org, d.Errf("unrecognized organization sub-directive %q", name)
		}
	}
	if org.ID == 0 {
		return org, d.Errf("organization %s needs an id", org.Domain)
	}
	if states > 1 {
		return org, d.Errf("organization %s: give one of active_until, unpaid or missing", org.Domain)
	}
	return org, nil
}
