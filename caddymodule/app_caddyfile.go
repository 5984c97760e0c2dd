package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/descriptor"
)

func init() {
	caddy.RegisterModule(ServiceApp{})
	httpcaddyfile.RegisterHandlerDirective("service_app", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		a := new(ServiceApp)
		h.Next()
		at := h.Token()
		h.Reset()
		if err := a.UnmarshalCaddyfile(adaptDispenser(h)); err != nil {
			return nil, err
		}
		if !h.IsNamedRoute() && !siteHasUpstream(h) {
			addAdaptWarning(h, caddyconfig.Warning{File: at.File, Line: at.Line, Directive: "service_app",
				Message: appNoUpstreamWarning})
		}
		return a, nil
	})
}

// appUpstreamDirectives are the directives after which a request of a site
// is answered by something other than Caddy's empty end of chain.
var appUpstreamDirectives = []string{
	"reverse_proxy", "php_fastcgi", "file_server", "respond", "static_response", "redir", "error", "abort",
	"handle", "handle_path", "route", "invoke",
}

// siteHasUpstream tells whether the site block of h has a directive that
// answers requests: without one, service_app passes them to nothing.
// httpcaddyfile gives a directive no view of its site's other directives,
// so the block's directive names are read from the helper's (unexported)
// parent block; when Caddy changes that field, the answer is yes and no
// warning is given.
func siteHasUpstream(h httpcaddyfile.Helper) bool {
	segs := reflect.ValueOf(h).FieldByName("parentBlock")
	if !segs.IsValid() {
		return true
	}
	if segs = segs.FieldByName("Segments"); !segs.IsValid() || segs.Kind() != reflect.Slice {
		return true
	}
	for i := range segs.Len() {
		seg := segs.Index(i)
		if seg.Kind() != reflect.Slice || seg.Len() == 0 {
			continue
		}
		text := seg.Index(0).FieldByName("Text")
		if !text.IsValid() || text.Kind() != reflect.String {
			return true
		}
		if slices.Contains(appUpstreamDirectives, text.String()) {
			return true
		}
	}
	return false
}

// appAdaptTimeout bounds the read of a descriptor by address while the
// Caddyfile is adapted.
const appAdaptTimeout = 5 * time.Second

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	service_app {
//		descriptor <file|address>       # the app descriptor (required)
//		descriptor_path <path>|off      # where the service reads it; default /manifest.json
//		base_url <url>                  # the app's public address; default: the site's host name
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
//		health <path>|off               # the health check; default /servicegate/health
//		installations { … }             # keep each organization's installation (see parseInstallations)
//	}
//
// When the descriptor can be read while adapting, its defects are reported
// with the file and line of this directive, and the routes it expands to
// are written into the config, so `caddy adapt` shows them.
func (a *ServiceApp) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	var nested []appBlock
	if err := parseDirective(d, a.subdirectives(&nested)); err != nil {
		return err
	}
	d.Reset()
	d.Next() // the directive name: the line of what concerns it whole
	start := d.Token()
	if a.Descriptor == "" {
		return errAt(start, "service_app needs descriptor: the app descriptor file, or its address on the app")
	}
	for _, b := range nested {
		if err := a.parseNested(d, b); err != nil {
			return err
		}
	}
	return a.expandWhileAdapting(d, start)
}

// subdirectives is the table of service_app's sub-directives. The nested
// blocks of the handlers it composes are collected in nested, to be read
// once the rest is known.
func (a *ServiceApp) subdirectives(nested *[]appBlock) map[string]subdirective {
	block := repeatable(func(d *caddyfile.Dispenser) error {
		b := appBlock{sub: d.Val()}
		if b.sub == "webhook" || b.sub == "limits" {
			b.key = appAllModules
			if d.NextArg() {
				b.key = d.Val()
				d.Prev()
			}
		}
		for _, other := range *nested {
			if other.sub == b.sub && other.key == b.key {
				if b.key == "" {
					return d.Errf("%s given twice", b.sub)
				}
				return d.Errf("%s settings for %q given twice", b.sub, b.key)
			}
		}
		b.seg = appSegment(d, b.key)
		*nested = append(*nested, b)
		return nil
	})
	return map[string]subdirective{
		"descriptor":      once(urlArg(&a.Descriptor, fileOrURL)),
		"descriptor_path": once(stringArg(&a.DescriptorPath)),
		"health":          once(stringArg(&a.Health)),
		"base_url":        once(urlArg(&a.BaseURL, baseURL)),
		"client_id":       once(stringArg(&a.ClientID)),
		"client_secret":   once(secretArg("service_app", &a.ClientSecret)),
		"secrets_file":    once(stringArg(&a.SecretsFile)),
		"service":         once(urlArg(&a.Service, baseURL)),
		"auth_url":        once(urlArg(&a.AuthURL, baseURL)),
		"app_identifier":  once(stringArg(&a.AppIdentifier)),
		"app_secret":      repeatable(secretArgs("service_app", &a.AppSecrets)),
		"public":          repeatable(appendArgs(&a.Public)),
		// parseInstallations refuses a second block itself.
		"installations": repeatable(a.parseInstallations),
		"subscription":  block,
		"sign_in":       block,
		"auth":          block,
		"webhook":       block,
		"limits":        block,
	}
}

// expandWhileAdapting reads the descriptor, when it can, and writes its
// routes into the config; a defect is reported at the directive's line,
// and a likely one (a module kind a letter off) warned about there.
func (a *ServiceApp) expandWhileAdapting(d *caddyfile.Dispenser, at caddyfile.Token) error {
	ctx, cancel := context.WithTimeout(context.Background(), appAdaptTimeout)
	defer cancel()
	loaded, err := loadDescriptor(ctx, a.Descriptor, nil)
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
	routes, err := a.Expand(loaded.Descriptor)
	if err != nil {
		return errAt(at, err.Error())
	}
	for _, likely := range loaded.Descriptor.LikelyDefects() {
		adaptWarn(d, at, "service_app", "the app descriptor: "+likely)
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

// checkAddresses checks service_app's addresses as the Caddyfile's are
// checked, once their placeholders are resolved.
func (a *ServiceApp) checkAddresses() error {
	for _, addr := range []struct {
		name, value string
		form        addressForm
	}{
		{"descriptor", a.Descriptor, fileOrURL}, {"base_url", a.BaseURL, baseURL},
		{"service", a.Service, baseURL}, {"auth_url", a.AuthURL, baseURL},
	} {
		if _, err := resolvedAddress(addr.name, addr.value, addr.form); err != nil {
			return fmt.Errorf("service_app: %w", err)
		}
	}
	return nil
}

// appBlock is a nested block of service_app: the settings of one of the
// handlers it composes.
type appBlock struct {
	sub, key string
	seg      caddyfile.Segment
}

// appSegment takes the sub-directive's line and block, leaving a key after
// the sub-directive's name out of it, and checks that nothing else stands
// on the line.
func appSegment(d *caddyfile.Dispenser, key string) caddyfile.Segment {
	seg := d.NextSegment()
	if key != "" && key != appAllModules {
		seg = append(seg[:1:1], seg[2:]...)
	}
	return seg
}

// parseNested reads a nested block with the Caddyfile table of the
// handler it configures, so that every setting is spelled and checked as
// in that handler's own directive. Only the settings given are checked
// here: what service_app supplies itself (secrets, the service's address,
// the contract) is added when the descriptor is expanded, which names
// what is missing, and the completed handler is validated when it loads.
func (a *ServiceApp) parseNested(d *caddyfile.Dispenser, b appBlock) error {
	var settings interface {
		subdirectives() map[string]subdirective
		checkSettings() error
	}
	switch b.sub {
	case "subscription":
		a.Subscription = new(ServiceSubscription)
		settings = a.Subscription
	case "sign_in":
		a.SignIn = new(ServiceOAuth)
		settings = a.SignIn
	case "auth":
		a.Auth = new(ServiceAuth)
		settings = a.Auth
	case "webhook":
		s := new(ServiceWebhook)
		a.Webhooks = mapWith(a.Webhooks, b.key, s)
		settings = s
	case "limits":
		s := new(ServiceLimits)
		a.Limits = mapWith(a.Limits, b.key, s)
		settings = s
	}
	nd := nestedDispenser(d, b.seg)
	if err := parseDirective(nd, settings.subdirectives()); err != nil {
		return err
	}
	return directiveErr(nd, settings.checkSettings())
}

// mapWith is m, made when nil, with v under key.
func mapWith[V any](m map[string]V, key string, v V) map[string]V {
	if m == nil {
		m = map[string]V{}
	}
	m[key] = v
	return m
}

// Interface guard.
var _ caddyfile.Unmarshaler = (*ServiceApp)(nil)
