package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"golang.org/x/net/http/httpguts"
)

func init() {
	caddy.RegisterModule(ServiceAuth{})
	httpcaddyfile.RegisterHandlerDirective("service_auth", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		a := new(ServiceAuth)
		return a, a.UnmarshalCaddyfile(h.Dispenser)
	})
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	service_auth {
//		hs256_secret <secret>              # or: public_key <pem file>, or: jwks_url <url>
//		jwks_refresh <duration>            # default 10m
//		jwks_min_interval <duration>       # default 30s
//		audience <aud...>                  # repeatable
//		issuer <iss>
//		leeway <duration>                  # default 30s
//		from_query <param>
//		strip_query
//		realm <realm>                      # default "service"
//		claim_header <Header> <claim.path> # repeatable
//		organization_claims <path...>      # default: domain context.organization_id
//		cache_size <n>                     # default 10000; 0 disables
//	}
func (a *ServiceAuth) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	oneArg := func(dst *string) error {
		if !d.NextArg() {
			return d.ArgErr()
		}
		*dst = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
		return nil
	}
	duration := func() (caddy.Duration, error) {
		var s string
		if err := oneArg(&s); err != nil {
			return 0, err
		}
		dur, err := caddy.ParseDuration(s)
		if err != nil {
			return 0, d.Errf("%s: %v", d.Val(), err)
		}
		if dur < 0 {
			return 0, d.Errf("%s must not be negative", s)
		}
		return caddy.Duration(dur), nil
	}
	for d.NextBlock(0) {
		var err error
		switch sub := d.Val(); sub {
		case "hs256_secret":
			err = oneArg(&a.HS256Secret)
		case "public_key":
			err = oneArg(&a.PublicKey)
		case "jwks_url":
			err = oneArg(&a.JWKSURL)
		case "jwks_refresh":
			a.JWKSRefresh, err = duration()
		case "jwks_min_interval":
			a.JWKSMinInterval, err = duration()
		case "audience":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			a.Audience = append(a.Audience, args...)
		case "issuer":
			err = oneArg(&a.Issuer)
		case "leeway":
			var l caddy.Duration
			l, err = duration()
			a.Leeway = &l
		case "from_query":
			err = oneArg(&a.FromQuery)
		case "strip_query":
			if d.NextArg() {
				return d.ArgErr()
			}
			a.StripQuery = true
		case "realm":
			err = oneArg(&a.Realm)
			if err == nil && !validQuotedText(a.Realm) {
				return d.Errf(`realm must be printable text without " or \`)
			}
		case "claim_header":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.ArgErr()
			}
			if !httpguts.ValidHeaderFieldName(args[0]) {
				return d.Errf("claim_header: %q is not a valid header name", args[0])
			}
			if a.ClaimHeaders == nil {
				a.ClaimHeaders = make(map[string]string)
			}
			if _, dup := a.ClaimHeaders[args[0]]; dup {
				return d.Errf("claim_header %s given twice", args[0])
			}
			a.ClaimHeaders[args[0]] = args[1]
		case "organization_claims":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			a.OrganizationClaims = args
		case "cache_size":
			var s string
			if err = oneArg(&s); err == nil {
				n, convErr := strconv.Atoi(s)
				if convErr != nil || n < 0 {
					return d.Errf("cache_size %q: want a whole number, 0 or more", s)
				}
				a.CacheSize = &n
			}
		default:
			return d.Errf("unrecognized service_auth sub-directive %q", sub)
		}
		if err != nil {
			return err
		}
	}
	if d.Next() {
		return d.Errf("service_auth: only one block is allowed")
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*ServiceAuth)(nil)
