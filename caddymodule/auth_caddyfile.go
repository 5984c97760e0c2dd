package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/token"
)

func init() {
	caddy.RegisterModule(ServiceAuth{})
	httpcaddyfile.RegisterHandlerDirective("service_auth", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		a := new(ServiceAuth)
		return a, a.UnmarshalCaddyfile(adaptDispenser(h))
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
	if err := parseDirective(d, a.subdirectives()); err != nil {
		return err
	}
	return directiveErr(d, a.Validate())
}

// subdirectives is the table of service_auth's sub-directives, for its
// directive and service_app's auth block.
func (a *ServiceAuth) subdirectives() map[string]subdirective {
	return map[string]subdirective{
		"hs256_secret":      once(secretArg("service_auth", &a.HS256Secret)),
		"public_key":        once(stringArg(&a.PublicKey)),
		"jwks_url":          once(urlArg(&a.JWKSURL, anyURL)),
		"jwks_refresh":      once(zeroOrMoreDurationTo(&a.JWKSRefresh)),
		"jwks_min_interval": once(zeroOrMoreDurationTo(&a.JWKSMinInterval)),
		"audience":          repeatable(appendArgs(&a.Audience)),
		"issuer":            once(stringArg(&a.Issuer)),
		"leeway": once(func(d *caddyfile.Dispenser) error {
			a.Leeway = new(caddy.Duration)
			return zeroOrMoreDurationTo(a.Leeway)(d)
		}),
		"from_query": once(stringArg(&a.FromQuery)),
		"strip_query": once(func(d *caddyfile.Dispenser) error {
			a.StripQuery = true
			return noArg(d)
		}),
		"realm": once(func(d *caddyfile.Dispenser) (err error) {
			if a.Realm, err = oneArg(d); err == nil && !token.ValidRealm(a.Realm) {
				return d.Errf(`realm must be printable text without " or \`)
			}
			return err
		}),
		"claim_header":        repeatable(a.parseClaimHeader),
		"organization_claims": once(appendArgs(&a.OrganizationClaims)),
		"cache_size": once(func(d *caddyfile.Dispenser) error {
			n, err := intArg(d, 0)
			a.CacheSize = &n
			return err
		}),
	}
}

// parseClaimHeader reads "claim_header <Header> <claim.path>".
func (a *ServiceAuth) parseClaimHeader(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) != 2 {
		return d.ArgErr()
	}
	if err := checkClaimHeader(args[0], args[1]); err != nil {
		return d.Err(err.Error())
	}
	if a.ClaimHeaders == nil {
		a.ClaimHeaders = make(map[string]string)
	}
	if _, dup := a.ClaimHeaders[args[0]]; dup {
		return d.Errf("claim_header %s given more than once", args[0])
	}
	a.ClaimHeaders[args[0]] = args[1]
	return nil
}

var _ caddyfile.Unmarshaler = (*ServiceAuth)(nil)
