package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"golang.org/x/net/http/httpguts"

	"github.com/servicegate/servicegate/token"
)

// Defaults of service_auth.
const (
	defaultAuthLeeway    = 30 * time.Second
	defaultAuthCacheSize = 10000
)

// Placeholders service_auth sets.
const (
	authUserPrefix      = "http.auth.user."
	authUserID          = "http.auth.user.id"
	authErrorVar        = "http.auth.service.error"
	organizationVarName = "http.service.organization"
)

// ServiceAuth verifies the bearer token of every request: a JWT signed by
// the service (with the app's client secret, a public key, or a key of a
// JSON Web Key Set). A request without a valid token is refused with 401
// and a WWW-Authenticate challenge (RFC 6750). A request with one goes on
// with the token's claims as placeholders and, through claim_headers, as
// upstream headers; inbound copies of those headers are always removed.
//
// Placeholders set for later handlers:
//
//	{http.auth.user.id}            the sub claim
//	{http.auth.user.<claim>}       any claim; dotted paths reach nested ones
//	{http.service.organization}    the organization key (see organization_claims)
//	{http.auth.service.error}      on refusal: why, in a few words (never the token)
//
// Verified tokens are remembered (cache_size of them, each until its exp) so
// that repeated requests cost a map look-up, not a signature check. A
// token is remembered only under the key set that verified it: once a
// JWKS refresh withdraws or changes a key, every remembered token is
// checked again, so a withdrawn key stops working at once.
type ServiceAuth struct {
	// HS256Secret is the secret of HS256/HS384/HS512 tokens: the app's
	// client secret. Accepts {env.*} and {file.*} placeholders. Exactly one
	// of hs256_secret, public_key and jwks_url is required.
	HS256Secret string `json:"hs256_secret,omitempty"`

	// PublicKey is the path of a PEM file holding the public key (or a
	// certificate) of RS*/PS* (RSA, at least 2048 bits), ES* (ECDSA P-256,
	// P-384, P-521) or EdDSA (Ed25519) tokens. The algorithms accepted are
	// those that fit the key.
	PublicKey string `json:"public_key,omitempty"`

	// JWKSURL is the address of a JSON Web Key Set. The set is fetched at
	// start, every jwks_refresh, and when a token names a kid the set
	// lacks (at most once per jwks_min_interval). The last good set stays in
	// use when a fetch fails.
	JWKSURL string `json:"jwks_url,omitempty"`

	// JWKSRefresh is how often the key set is fetched. Default: 10m.
	JWKSRefresh caddy.Duration `json:"jwks_refresh,omitempty"`

	// JWKSMinInterval is the least time between two fetches of the key set
	// caused by unknown kids, so that tokens with random kids cannot flood
	// the key server. Default: 30s.
	JWKSMinInterval caddy.Duration `json:"jwks_min_interval,omitempty"`

	// Audience, when set, must share a value with the token's aud claim (a
	// string or an array). Usually the app's client id.
	Audience []string `json:"audience,omitempty"`

	// Issuer, when set, must equal the token's iss claim.
	Issuer string `json:"issuer,omitempty"`

	// Leeway is the clock skew allowed on exp, nbf and iat. Default: 30s.
	Leeway *caddy.Duration `json:"leeway,omitempty"`

	// FromQuery names a query parameter that may carry the token when the
	// request has no Authorization: Bearer header (which wins when both
	// are present).
	FromQuery string `json:"from_query,omitempty"`

	// StripQuery removes every from_query parameter from the request
	// passed on, whether or not it carried the token used (a token in the
	// Authorization header wins, and a second token in the query must not
	// reach the app unverified). Default: off (the app sees the URL it
	// would see without the gateway).
	StripQuery bool `json:"strip_query,omitempty"`

	// Realm is the realm of the WWW-Authenticate challenge. Default: "service".
	Realm string `json:"realm,omitempty"`

	// ClaimHeaders maps an upstream request header to a claim path (such as
	// "sub" or "context.organization_id"). Every inbound copy of these
	// headers is deleted from every request (also those refused, and those
	// whose token lacks the claim; names are compared ignoring case and
	// treating "_" as "-"), then set from the verified claim when present.
	// With claim headers, no request trailer is passed on: stacks that
	// merge trailers into headers would read one as a claim header.
	ClaimHeaders map[string]string `json:"claim_headers,omitempty"`

	// OrganizationClaims are the claim paths tried, in order, for the
	// organization key: the first holding a non-empty string or a number
	// wins. Default: ["domain", "context.organization_id"].
	OrganizationClaims []string `json:"organization_claims,omitempty"`

	// CacheSize is how many verified tokens are remembered, each until its
	// exp or until the key set withdraws or changes a key; 0 disables the
	// cache. Default: 10000.
	CacheSize *int `json:"cache_size,omitempty"`

	verifier *token.Verifier
	jwks     *token.JWKS
	cache    *token.Cache[*token.Entry]
	handler  *token.Handler
	expected []zap.Field // what a token must carry, for the DEBUG line of a refusal
	logger   *zap.Logger
	counters authCounters
	stopJWKS context.CancelFunc // nil without jwks_url
	jwksDone <-chan struct{}    // closed when the refresh loop has ended
}

// CaddyModule returns the Caddy module information.
func (ServiceAuth) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_auth",
		New: func() caddy.Module { return new(ServiceAuth) },
	}
}

// Provision resolves placeholders in the secrets and settings, loads the
// key and builds the request pipeline.
func (a *ServiceAuth) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger(a) // its own name, also when service_app provisions it itself
	a.counters = newAuthCounters(ctx.GetMetricsRegistry())
	if err := a.checkKeySources(); err != nil {
		return err
	}
	keys, err := a.loadKeys(ctx)
	if err != nil {
		return err
	}
	if err := a.newVerifier(keys); err != nil {
		return err
	}
	size := defaultAuthCacheSize
	if a.CacheSize != nil {
		size = *a.CacheSize
	}
	if size > 0 {
		a.cache = token.NewCache[*token.Entry](size, nil)
	}
	a.handler, err = token.NewHandler(token.HandlerConfig{
		Verifier:           a.verifier,
		Cache:              a.cache,
		FromQuery:          a.FromQuery,
		StripQuery:         a.StripQuery,
		ClaimHeaders:       a.ClaimHeaders,
		OrganizationClaims: a.OrganizationClaims,
		Challenge:          token.Challenge(a.Realm),
		Refuse:             refuse,
		Prepare:            newAuthEntry,
		Pass:               passAuthEntry,
		Report:             a.report,
	})
	if err != nil {
		return fmt.Errorf("service_auth: %w", err)
	}
	return nil
}

// loadKeys returns the keys of the one key source configured; with
// jwks_url it starts the refresh loop, which Cleanup stops.
func (a *ServiceAuth) loadKeys(ctx caddy.Context) (token.Keys, error) {
	switch {
	case a.HS256Secret != "":
		secret, err := resolveSecret("service_auth: hs256_secret", a.HS256Secret)
		if err != nil {
			return nil, err
		}
		return token.HMAC([]byte(secret)), nil
	case a.PublicKey != "":
		path := caddy.NewReplacer().ReplaceKnown(a.PublicKey, "")
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("service_auth: reading public_key: %w", err)
		}
		pub, err := token.ParsePublicKeyPEM(data)
		if err != nil {
			return nil, fmt.Errorf("service_auth: public_key %s: %w", path, err)
		}
		keys, err := token.PublicKey(pub)
		if err != nil {
			return nil, fmt.Errorf("service_auth: public_key %s: %w", path, err)
		}
		return keys, nil
	}
	u, err := resolvedAddress("jwks_url", a.JWKSURL, anyURL)
	if err != nil {
		return nil, fmt.Errorf("service_auth: %w", err)
	}
	a.jwks = token.NewJWKS(u, token.JWKSOptions{
		Refresh:     time.Duration(a.JWKSRefresh),
		MinInterval: time.Duration(a.JWKSMinInterval),
		OnError: func(err error) {
			a.logger.Warn("fetching the JWKS failed; any key set fetched before stays in use", zap.Error(err))
		},
	})
	// Cleanup stops the refresh loop and waits for it; the config's
	// context ending stops it too.
	runCtx, stop := context.WithCancel(ctx)
	a.stopJWKS, a.jwksDone = stop, a.jwks.Start(runCtx)
	return a.jwks, nil
}

// newVerifier resolves the placeholders of audience and issuer and makes
// the verifier of keys.
func (a *ServiceAuth) newVerifier(keys token.Keys) error {
	repl := caddy.NewReplacer()
	audience := make([]string, 0, len(a.Audience))
	for _, aud := range a.Audience {
		if aud = repl.ReplaceKnown(aud, ""); aud != "" {
			audience = append(audience, aud)
		}
	}
	if len(a.Audience) > 0 && len(audience) == 0 {
		return errors.New("service_auth: audience is empty once its placeholders are resolved")
	}
	issuer := repl.ReplaceKnown(a.Issuer, "")
	if a.Issuer != "" && issuer == "" {
		// Checking no issuer at all would accept tokens of any issuer.
		return errors.New("service_auth: issuer is empty once its placeholders are resolved")
	}
	leeway := defaultAuthLeeway
	if a.Leeway != nil {
		leeway = time.Duration(*a.Leeway)
	}
	a.expected = []zap.Field{zap.Strings("expected_audience", audience), zap.String("expected_issuer", issuer)}
	a.verifier = token.NewVerifier(keys, token.Options{
		Issuer:   issuer,
		Audience: audience,
		Leeway:   leeway,
	})
	return nil
}

// Cleanup stops the JWKS refresh loop and waits for it to end.
func (a *ServiceAuth) Cleanup() error {
	if a.stopJWKS != nil {
		a.stopJWKS()
		<-a.jwksDone
	}
	return nil
}

// Validate checks the configuration.
func (a *ServiceAuth) Validate() error {
	if a.HS256Secret == "" && a.PublicKey == "" && a.JWKSURL == "" {
		return a.checkKeySources()
	}
	return a.checkSettings()
}

// checkSettings checks the settings given, and not that a key is:
// service_app supplies its client_secret when its auth block names none.
func (a *ServiceAuth) checkSettings() error {
	if a.HS256Secret != "" || a.PublicKey != "" || a.JWKSURL != "" {
		if err := a.checkKeySources(); err != nil {
			return err
		}
	}
	if a.CacheSize != nil && *a.CacheSize < 0 {
		return errors.New("service_auth: cache_size must not be negative")
	}
	if a.Leeway != nil && *a.Leeway < 0 {
		return errors.New("service_auth: leeway must not be negative")
	}
	if a.JWKSRefresh < 0 || a.JWKSMinInterval < 0 {
		return errors.New("service_auth: jwks_refresh and jwks_min_interval must not be negative")
	}
	if !token.ValidRealm(a.Realm) {
		return errors.New(`service_auth: realm must be printable text without " or \`)
	}
	for name, path := range a.ClaimHeaders {
		if err := checkClaimHeader(name, path); err != nil {
			return fmt.Errorf("service_auth: %w", err)
		}
	}
	return nil
}

// checkClaimHeader is the check of one claim_header, for Validate and for
// the Caddyfile line that gives it.
func checkClaimHeader(name, path string) error {
	if !httpguts.ValidHeaderFieldName(name) {
		return fmt.Errorf("claim_header %q is not a valid header name", name)
	}
	if path == "" {
		return fmt.Errorf("claim_header %s has no claim path", name)
	}
	return nil
}

func (a *ServiceAuth) checkKeySources() error {
	n := 0
	for _, s := range []string{a.HS256Secret, a.PublicKey, a.JWKSURL} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("service_auth: exactly one of hs256_secret, public_key and jwks_url is required (%d given)", n)
	}
	return nil
}

// ServeHTTP verifies the request's bearer token and passes the request on
// with its trusted claims, or refuses it.
func (a *ServiceAuth) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	r, _ = emulatorCall(r)
	return a.handler.Serve(w, r, next)
}

var (
	_ caddy.Provisioner           = (*ServiceAuth)(nil)
	_ caddy.Validator             = (*ServiceAuth)(nil)
	_ caddy.CleanerUpper          = (*ServiceAuth)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceAuth)(nil)
)
