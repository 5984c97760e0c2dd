package caddymodule

import (
	"errors"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/emulator"
)

func init() {
	caddy.RegisterModule(ServiceEmulator{})
	httpcaddyfile.RegisterHandlerDirective("service_emulator", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(ServiceEmulator)
		return m, m.UnmarshalCaddyfile(adaptDispenser(h))
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
//		console off | console {
//			keep <calls>
//			app <url>
//		}
//	}
func (m *ServiceEmulator) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	err := parseDirective(d, map[string]subdirective{
		"client_id":      once(stringArg(&m.ClientID)),
		"client_secret":  once(secretArg("service_emulator", &m.ClientSecret)),
		"app_identifier": once(stringArg(&m.AppIdentifier)),
		"issuer":         once(stringArg(&m.Issuer)),
		"redirect_uri":   repeatable(urlArgs(&m.RedirectURIs, anyURL)),
		"token_lifetime": once(func(d *caddyfile.Dispenser) (err error) {
			// Tokens carry whole seconds (exp, iat).
			if m.TokenLifetime, err = durationArg(d, false); err == nil && time.Duration(m.TokenLifetime) < time.Second {
				return d.Errf("token_lifetime %s is shorter than the one second a token's exp can tell", time.Duration(m.TokenLifetime))
			}
			return err
		}),
		"code_lifetime": once(durationTo(&m.CodeLifetime)),
		"console": once(func(d *caddyfile.Dispenser) error {
			c, err := unmarshalEmulatorConsole(d)
			m.Console = c
			return err
		}),
		"organization": repeatable(func(d *caddyfile.Dispenser) error {
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
			return nil
		}),
	})
	if err != nil {
		return err
	}
	if m.ClientID == "" || m.ClientSecret == "" || len(m.RedirectURIs) == 0 {
		return directiveErr(d, errors.New("service_emulator needs client_id, client_secret and at least one redirect_uri"))
	}
	return nil
}

// unmarshalEmulatedOrganization reads "organization <domain> { … }".
func unmarshalEmulatedOrganization(d *caddyfile.Dispenser) (EmulatedOrganization, error) {
	var org EmulatedOrganization
	var err error
	if org.Domain, err = oneArg(d); err != nil {
		return org, err
	}
	states := 0
	state := func(parse func(d *caddyfile.Dispenser) error) subdirective {
		return once(func(d *caddyfile.Dispenser) error {
			states++
			return parse(d)
		})
	}
	err = parseBlock(d, "organization", map[string]subdirective{
		"id": once(func(d *caddyfile.Dispenser) error {
			v, err := oneArg(d)
			if err != nil {
				return err
			}
			id, err := strconv.ParseInt(v, 10, 64)
			if err != nil || id <= 0 {
				return d.Errf("organization %s: id %q is not a positive integer", org.Domain, v)
			}
			org.ID = id
			return nil
		}),
		"active_until": state(func(d *caddyfile.Dispenser) error {
			v, err := oneArg(d)
			if err != nil {
				return err
			}
			if _, err := emulator.ParseActiveUntil(v); err != nil {
				return d.Errf("organization %s: %v", org.Domain, err)
			}
			org.ActiveUntil = v
			return nil
		}),
		"unpaid":  state(urlArg(&org.SubscribeLink, anyURL)),
		"missing": state(noArg),
	})
	if err != nil {
		return org, err
	}
	if org.ID == 0 {
		return org, d.Errf("organization %s needs an id", org.Domain)
	}
	if states > 1 {
		return org, d.Errf("organization %s: give one of active_until, unpaid or missing", org.Domain)
	}
	return org, nil
}

// unmarshalEmulatorConsole reads "console off" or "console { … }".
func unmarshalEmulatorConsole(d *caddyfile.Dispenser) (*EmulatorConsole, error) {
	c := &EmulatorConsole{}
	if d.NextArg() {
		if d.Val() != "off" {
			return nil, d.Errf("console takes off, or a block; not %q", d.Val())
		}
		if d.NextArg() || d.NextBlock(d.Nesting()) {
			return nil, d.Err("console off takes nothing more")
		}
		c.Off = true
		return c, nil
	}
	err := parseBlock(d, "console", map[string]subdirective{
		"keep": once(func(d *caddyfile.Dispenser) (err error) {
			if c.Keep, err = intArg(d, 1); err == nil && c.Keep > emulator.MaxKeep {
				return d.Errf("keep %d is more than the %d calls the console keeps at most", c.Keep, emulator.MaxKeep)
			}
			return err
		}),
		"app": once(stringArg(&c.App)),
	})
	return c, err
}
