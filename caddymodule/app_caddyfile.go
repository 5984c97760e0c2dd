package caddymodule

import (
	"context"
	"errors"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/descriptor"
)

func init() {
	caddy.RegisterModule(ServiceApp{})
	httpcaddyfile.RegisterHandlerDirective("service_app", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		a := new(ServiceApp)
		if err := a.UnmarshalCaddyfile(h.Dispenser); err != nil {
			return nil, err
		}
		return a, nil
	})
}

// appAdaptTimeout bounds the read of a descriptor by address while the
// Caddyfile is adapted.
const appAdaptTimeout = 5 * time.Second

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	service_app {
//		descriptor <file|address>       # the app descriptor (required)
//		descriptor_path <path>|off      # where the service reads it; default /manifest.json
//		base_url <url>                  # the app's public address; default: from the request
//		client_id <client_id>
//		client_secret <secret>          # verifies tokens (HS256), runs the sign-in
//		app_secret <secret...>          # repeatable: webhook signatures (rotation)
//		secrets_file <path>             # per-organization webhook secrets
//		service <url>                   # the service: subscription query and OAuth server
//		auth_url <url>                  # the OAuth server, when it is not service
//		app_identifier <id>             # default: the descriptor's identifier
//		public <path...>                # repeatable: passed on without a token
//		subscription [{ … }]            # a paid app; the block takes service_subscription's settings
//		sign_in [{ … }]                 # browser sign-in; the block takes service_oauth's settings
//		auth { … }                      # service_auth's settings for the token check
//		webhook [<key>] { … }           # service_webhook's settings, for one module or all
//		limits [<key>] { … }            # service_limits' settings, for one file module or all
//	}
//
// When the descriptor can be read while adapting, its defects are reported
// with the file and line of this directive, and the routes it expands to
// are written into the config, so `caddy adapt` shows them.
func (a *ServiceApp) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	start := d.Token()
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		var err error
		switch sub := d.Val(); sub {
		case "descriptor":
			err = appOneArg(d, &a.Descriptor)
		case "descriptor_path":
			err = appOneArg(d, &a.DescriptorPath)
		case "base_url":
			err = appOneArg(d, &a.BaseURL)
		case "client_id":
			err = appOneArg(d, &a.ClientID)
		case "client_secret":
			err = appOneArg(d, &a.ClientSecret)
		case "secrets_file":
			err = appOneArg(d, &a.SecretsFile)
		case "service":
			err = appOneArg(d, &a.Service)
		case "auth_url":
			err = appOneArg(d, &a.AuthURL)
		case "app_identifier":
			err = appOneArg(d, &a.AppIdentifier)
		case "app_secret":
			err = appArgs(d, &a.AppSecrets)
		case "public":
			err = appArgs(d, &a.Public)
		case "subscription":
			if a.Subscription != nil {
				return d.Errf("%s given twice", sub)
			}
			a.Subscription = new(ServiceSubscription)
			err = appNested(d, "", a.Subscription)
		case "sign_in":
			if a.SignIn != nil {
				return d.Errf("%s given twice", sub)
			}
			a.SignIn = new(ServiceOAuth)
			err = appNested(d, "", a.SignIn)
		case "auth":
			if a.Auth != nil {
				return d.Errf("%s given twice", sub)
			}
			a.Auth = new(ServiceAuth)
			err = appNested(d, "", a.Auth)
		case "webhook":
			err = appKeyed(d, &a.Webhooks)
		case "limits":
			err = appKeyed(d, &a.Limits)
		default:
			return d.Errf("unrecognized service_app option %q", sub)
		}
		if err != nil {
			return err
		}
	}
	if a.Descriptor == "" {
		return errAt(start, "service_app needs descriptor: the app descriptor file, or its address on the app")
	}
	return a.expandWhileAdapting(start)
}

// expandWhileAdapting reads the descriptor, when it can, and writes its
// routes into the config; a defect is reported at the directive's line.
func (a *ServiceApp) expandWhileAdapting(at caddyfile.Token) error {
	ctx, cancel := context.WithTimeout(context.Background(), appAdaptTimeout)
	defer cancel()
	desc, err := loadDescriptor(ctx, a.Descriptor, nil)
	var defects *descriptor.Defects
	switch {
	case errors.As(err, &defects):
		return errAt(at, err.Error())
	case err != nil && !descriptor.IsAddress(a.Descriptor):
		return errAt(at, err.Error())
	case err != nil:
		// The app is not up yet: the routes are made when the config loads.
		return nil
	}
	routes, err := a.Expand(desc)
	if err != nil {
		return errAt(at, err.Error())
	}
	a.Routes = routes
	return nil
}

// errAt is an error that names the file and line of tok.
func errAt(tok caddyfile.Token, msg string) error {
	d := caddyfile.NewDispenser([]caddyfile.Token{tok})
	d.Next()
	return d.Err(msg)
}

func appOneArg(d *caddyfile.Dispenser, dst *string) error {
	if *dst != "" {
		return d.Errf("%s given twice", d.Val())
	}
	if !d.AllArgs(dst) {
		return d.ArgErr()
	}
	return nil
}

func appArgs(d *caddyfile.Dispenser, dst *[]string) error {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	*dst = append(*dst, args...)
	return nil
}

// appNested parses the sub-directive's block (if any) with the Caddyfile
// parser of the handler it configures, so that every setting is spelled
// and checked as in that handler's own directive. A key after the
// sub-directive's name is left out of what that parser sees.
func appNested(d *caddyfile.Dispenser, key string, into caddyfile.Unmarshaler) error {
	seg := d.NextSegment()
	if key != "" {
		seg = append(seg[:1:1], seg[2:]...)
	}
	if len(seg) > 1 && seg[1].Text != "{" {
		return d.ArgErr()
	}
	return into.UnmarshalCaddyfile(caddyfile.NewDispenser(seg))
}

// appKeyed parses `<sub> [<key>] { … }` into settings by module key ("*"
// without a key).
func appKeyed[T any, PT interface {
	*T
	caddyfile.Unmarshaler
}](d *caddyfile.Dispenser, dst *map[string]*T) error {
	key := appAllModules
	if d.NextArg() {
		key = d.Val()
		d.Prev()
	}
	if _, dup := (*dst)[key]; dup {
		return d.Errf("%s settings for %q given twice", d.Val(), key)
	}
	v := PT(new(T))
	k := ""
	if key != appAllModules {
		k = key
	}
	if err := appNested(d, k, v); err != nil {
		return err
	}
	if *dst == nil {
		*dst = make(map[string]*T)
	}
	(*dst)[key] = (*T)(v)
	return nil
}

// Interface guard.
var _ caddyfile.Unmarshaler = (*ServiceApp)(nil)
