package caddymodule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/subscription"
)

func init() {
	caddy.RegisterModule(ServiceApp{})
	httpcaddyfile.RegisterHandlerDirective("service_app", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		a := new(ServiceApp)
		h.Next()
		at := h.Token()
		h.Reset()
		if err := a.UnmarshalCaddyfile(h.Dispenser); err != nil {
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

// addAdaptWarning adds w to the warnings the Caddyfile adapter returns
// (`caddy adapt` prints them, `caddy run` logs them). httpcaddyfile keeps
// them in an unexported field of the helper, with no method for a
// directive to add one; when Caddy changes that field, the warning is
// logged instead.
func addAdaptWarning(h httpcaddyfile.Helper, w caddyconfig.Warning) {
	f := reflect.ValueOf(&h).Elem().FieldByName("warnings")
	if f.IsValid() && f.Type() == reflect.TypeFor[*[]caddyconfig.Warning]() {
		if ws := *(**[]caddyconfig.Warning)(unsafe.Pointer(f.UnsafeAddr())); ws != nil {
			*ws = append(*ws, w)
			return
		}
	}
	caddy.Log().Warn(w.Message, zap.String("file", w.File), zap.Int("line", w.Line))
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
	d.Next() // the directive name
	start := d.Token()
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	var nested []appBlock
	for d.NextBlock(0) {
		var err error
		switch sub := d.Val(); sub {
		case "descriptor":
			err = appOneArg(d, &a.Descriptor)
		case "descriptor_path":
			err = appOneArg(d, &a.DescriptorPath)
		case "health":
			err = appOneArg(d, &a.Health)
		case "base_url":
			err = appOneArg(d, &a.BaseURL)
		case "client_id":
			err = appOneArg(d, &a.ClientID)
		case "client_secret":
			at := d.Token()
			if err = appOneArg(d, &a.ClientSecret); err == nil {
				warnUnsetEnv(at, "service_app", a.ClientSecret)
			}
		case "secrets_file":
			err = appOneArg(d, &a.SecretsFile)
		case "service":
			if err = appOneArg(d, &a.Service); err == nil {
				err = appAddressErr(d, "service", a.Service)
			}
		case "auth_url":
			if err = appOneArg(d, &a.AuthURL); err == nil {
				err = appAddressErr(d, "auth_url", a.AuthURL)
			}
		case "app_identifier":
			err = appOneArg(d, &a.AppIdentifier)
		case "app_secret":
			at, n := d.Token(), len(a.AppSecrets)
			if err = appArgs(d, &a.AppSecrets); err == nil {
				warnUnsetEnv(at, "service_app", a.AppSecrets[n:]...)
			}
		case "public":
			err = appArgs(d, &a.Public)
		case "installations":
			err = a.parseInstallations(d)
		case "subscription", "sign_in", "auth":
			if seen[sub] {
				return d.Errf("%s given twice", sub)
			}
			seen[sub] = true
			nested = append(nested, appBlock{sub: sub, seg: appSegment(d, "")})
		case "webhook", "limits":
			key := appAllModules
			if d.NextArg() {
				key = d.Val()
				d.Prev()
			}
			if seen[sub+" "+key] {
				return d.Errf("%s settings for %q given twice", sub, key)
			}
			seen[sub+" "+key] = true
			nested = append(nested, appBlock{sub: sub, key: key, seg: appSegment(d, key)})
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
	for _, b := range nested {
		if err := a.parseNested(b); err != nil {
			return err
		}
	}
	return a.expandWhileAdapting(start)
}

// expandWhileAdapting reads the descriptor, when it can, and writes its
// routes into the config; a defect is reported at the directive's line.
func (a *ServiceApp) expandWhileAdapting(at caddyfile.Token) error {
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
	a.Routes = routes
	return nil
}

// errAt is an error that names the file and line of tok.
func errAt(tok caddyfile.Token, msg string) error {
	d := caddyfile.NewDispenser([]caddyfile.Token{tok})
	d.Next()
	return d.Err(msg)
}

// appAddressErr refuses, at the sub-directive's file and line, a service
// address that is not an http(s) URL.
func appAddressErr(d *caddyfile.Dispenser, name, value string) error {
	if err := checkServiceAddress(name, value); err != nil {
		return d.Err(err.Error())
	}
	return nil
}

// checkServiceAddress is the one check of service and auth_url, for the
// Caddyfile and for a JSON config: an http(s) URL, or a value holding
// placeholders (checked by the handlers once resolved). An address without
// a scheme, the usual slip, is answered with what to write.
func checkServiceAddress(name, value string) error {
	if value == "" || strings.ContainsAny(value, "{}") {
		return nil
	}
	err := subscription.ValidateBaseURL(value)
	if err == nil {
		return nil
	}
	if !strings.Contains(value, "://") {
		return fmt.Errorf("service_app: %s %q has no scheme: write %s http://%s (or https://)", name, value, name, value)
	}
	return fmt.Errorf("service_app: %s: %w", name, err)
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

// parseNested reads a nested block with the Caddyfile parser of the handler
// it configures, so that every setting is spelled and checked as in that
// handler's own directive. What service_app supplies itself (secrets, the
// service's address, the contract) is set before the parser reads the
// block, so that the parser's completeness checks pass, and taken out
// again after unless the block set it: the settings keep only what the
// user wrote.
func (a *ServiceApp) parseNested(b appBlock) error {
	d := caddyfile.NewDispenser(b.seg)
	if len(b.seg) > 1 && b.seg[1].Text != "{" {
		d.Next()
		d.Next()
		return d.ArgErr()
	}
	sets := func(names ...string) bool { return segmentSets(b.seg, names...) }
	const placeholder = "http://service.invalid"
	switch b.sub {
	case "subscription":
		s := new(ServiceSubscription)
		base, id := !sets("base_url"), !sets("app_identifier")
		if base {
			s.BaseURL = cmp.Or(a.Service, placeholder)
		}
		if id {
			s.AppIdentifier = cmp.Or(a.AppIdentifier, "app")
		}
		if err := s.UnmarshalCaddyfile(d); err != nil {
			return err
		}
		if base {
			s.BaseURL = ""
		}
		if id {
			s.AppIdentifier = ""
		}
		a.Subscription = s
	case "sign_in":
		s := new(ServiceOAuth)
		client, secret, auth, scopes := !sets("client_id"), !sets("client_secret"), !sets("auth_url"), !sets("scopes")
		if client {
			s.ClientID = cmp.Or(a.ClientID, "client")
		}
		if secret {
			s.ClientSecret = cmp.Or(a.ClientSecret, "secret")
		}
		if auth {
			s.AuthURL = cmp.Or(a.AuthURL, a.Service, placeholder)
		}
		if scopes {
			s.Scopes = []string{"project"}
		}
		if err := s.UnmarshalCaddyfile(d); err != nil {
			return err
		}
		if client {
			s.ClientID = ""
		}
		if secret {
			s.ClientSecret = ""
		}
		if auth {
			s.AuthURL = ""
		}
		if scopes {
			s.Scopes = nil
		}
		a.SignIn = s
	case "auth":
		s := new(ServiceAuth)
		key := !sets("hs256_secret", "public_key", "jwks_url")
		if key {
			s.HS256Secret = cmp.Or(a.ClientSecret, "secret")
		}
		if err := s.UnmarshalCaddyfile(d); err != nil {
			return err
		}
		if key {
			s.HS256Secret = ""
		}
		a.Auth = s
	case "webhook":
		s := new(ServiceWebhook)
		secrets := !sets("secret", "secrets_file")
		if secrets {
			s.Secrets = []string{"secret"}
		}
		if err := s.UnmarshalCaddyfile(d); err != nil {
			return err
		}
		if secrets {
			s.Secrets = nil
		}
		if a.Webhooks == nil {
			a.Webhooks = map[string]*ServiceWebhook{}
		}
		a.Webhooks[b.key] = s
	case "limits":
		s := new(ServiceLimits)
		contract := !sets("contract")
		if contract {
			s.Contract = descriptor.KindCustomFileFormat
		}
		if err := s.UnmarshalCaddyfile(d); err != nil {
			return err
		}
		if contract {
			s.Contract = ""
		}
		if a.Limits == nil {
			a.Limits = map[string]*ServiceLimits{}
		}
		a.Limits[b.key] = s
	}
	return nil
}

// segmentSets tells whether a nested block has one of the sub-directives
// names: a token that starts a line inside the block.
func segmentSets(seg caddyfile.Segment, names ...string) bool {
	for i := 2; i < len(seg); i++ {
		if seg[i].Line != seg[i-1].Line && slices.Contains(names, seg[i].Text) {
			return true
		}
	}
	return false
}

// Interface guard.
var _ caddyfile.Unmarshaler = (*ServiceApp)(nil)
