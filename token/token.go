package token

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MaxLength is the longest token accepted, in bytes. Longer tokens are
// refused before any parsing: the service's tokens are far smaller, and a
// bound keeps a hostile request from costing more than a small one.
const MaxLength = 16 << 10

// Reasons a token is refused. Their text is short, names no secret and no
// part of the token, and fits an RFC 6750 error_description.
var (
	ErrTooLarge        = errors.New("token too large")
	ErrMalformed       = errors.New("malformed token")
	ErrAlgorithm       = errors.New("signing algorithm not allowed")
	ErrUnknownKey      = errors.New("unknown signing key")
	ErrKeysUnavailable = errors.New("signing keys unavailable")
	ErrSignature       = errors.New("invalid signature")
	ErrNoExpiry        = errors.New("token has no expiry")
	ErrExpired         = errors.New("token expired")
	ErrNotYetValid     = errors.New("token not yet valid")
	ErrIssuedInFuture  = errors.New("token issued in the future")
	ErrIssuer          = errors.New("wrong issuer")
	ErrAudience        = errors.New("wrong audience")
	ErrClaims          = errors.New("invalid claims")
)

// Options are the claim checks a Verifier makes besides the signature.
type Options struct {
	// Issuer, when set, must equal the iss claim.
	Issuer string
	// Audience, when set, must share one value with the aud claim (a
	// string or an array of strings).
	Audience []string
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Verifier verifies tokens. It is safe for concurrent use.
type Verifier struct {
	keys   Keys
	rot    Rotating // keys, when they change while in use; else nil
	algs   []string
	issuer string
	parser *jwt.Parser
}

// NewVerifier returns a Verifier that accepts tokens signed by keys, with
// one of the algorithms keys.Algorithms() lists, whose claims pass opts.
func NewVerifier(keys Keys, opts Options) *Verifier {
	algs := slices.Clone(keys.Algorithms())
	popts := []jwt.ParserOption{
		jwt.WithValidMethods(algs),
		jwt.WithJSONNumber(),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(opts.Leeway),
	}
	if opts.Now != nil {
		popts = append(popts, jwt.WithTimeFunc(opts.Now))
	}
	if opts.Issuer != "" {
		popts = append(popts, jwt.WithIssuer(opts.Issuer))
	}
	if len(opts.Audience) > 0 {
		popts = append(popts, jwt.WithAudience(slices.Clone(opts.Audience)...))
	}
	rot, _ := keys.(Rotating)
	return &Verifier{keys: keys, rot: rot, algs: algs, issuer: opts.Issuer, parser: jwt.NewParser(popts...)}
}

// Generation is the generation of the verifier's keys (see Rotating); 0
// for keys that never change. Read it before Verify and remember a
// verified token only under it (Cache.Put): should the keys change during
// the check, the token is checked again at its next use rather than
// trusted under keys that may have dropped the one that verified it.
func (v *Verifier) Generation() uint64 {
	if v.rot == nil {
		return 0
	}
	return v.rot.Generation()
}

// Verify checks raw and returns its claims. ctx bounds any key fetch the
// check needs. The error is one of this package's Err* values.
func (v *Verifier) Verify(ctx context.Context, raw string) (Claims, error) {
	if len(raw) > MaxLength {
		return nil, ErrTooLarge
	}
	claims := jwt.MapClaims{}
	tok, err := v.parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		alg := t.Method.Alg()
		if !slices.Contains(v.algs, alg) {
			return nil, ErrAlgorithm
		}
		kid, _ := t.Header["kid"].(string)
		return v.keys.Key(ctx, alg, kid)
	})
	if err != nil {
		return nil, v.reason(tok, claims, err)
	}
	return Claims(claims), nil
}

// reason maps an error of the JWT library to this package's reasons.
func (v *Verifier) reason(tok *jwt.Token, claims jwt.MapClaims, err error) error {
	ours := []error{ErrAlgorithm, ErrUnknownKey, ErrKeysUnavailable}
	for _, e := range ours {
		if errors.Is(err, e) {
			return e
		}
	}
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return ErrMalformed
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// An alg the library does not know, or none at all.
		return ErrAlgorithm
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		if tok == nil || tok.Method == nil || !slices.Contains(v.algs, tok.Method.Alg()) {
			return ErrAlgorithm
		}
		return ErrSignature
	}
	// Claims: report the first failing check in a fixed order.
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return ErrExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return ErrNotYetValid
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return ErrIssuedInFuture
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return ErrIssuer
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return ErrAudience
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		// exp is always required; iss and aud when configured.
		if _, ok := claims["exp"]; !ok {
			return ErrNoExpiry
		}
		if iss, _ := claims["iss"].(string); v.issuer != "" && iss == "" {
			return ErrIssuer
		}
		return ErrAudience
	}
	return ErrClaims
}
