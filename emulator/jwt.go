package emulator

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Token describes an access token to mint.
type Token struct {
	// Issuer is the iss claim.
	Issuer string
	// Audience is the aud claim, the app's client_id.
	Audience string
	// UserID is the user the token acts for: sub (as a string) and
	// context.user_id.
	UserID int64
	// OrganizationID is context.organization_id.
	OrganizationID int64
	// Domain is the organization's domain; the domain claim is left out
	// when it is empty.
	Domain string
	// IssuedAt is iat; the zero time means now.
	IssuedAt time.Time
	// Lifetime is exp - iat. Required (at least one second).
	Lifetime time.Duration
	// ID is jti; a random one is made when it is empty.
	ID string
}

// MintToken returns t as an HS256 JWT signed with secret, the client
// secret of the app (what service_auth's hs256_secret verifies). Its claims
// are exactly iss, sub, aud, domain (when set), context
// {organization_id, user_id}, iat, exp and jti.
func MintToken(secret string, t Token) (string, error) {
	if secret == "" {
		return "", errors.New("mint token: the secret is empty")
	}
	if t.Lifetime < time.Second {
		return "", errors.New("mint token: the lifetime must be at least one second")
	}
	if t.IssuedAt.IsZero() {
		t.IssuedAt = time.Now()
	}
	if t.ID == "" {
		t.ID = rand.Text()
	}
	iat := t.IssuedAt.Unix()
	claims := jwt.MapClaims{
		"iss": t.Issuer,
		"sub": strconv.FormatInt(t.UserID, 10),
		"aud": t.Audience,
		"context": map[string]int64{
			"organization_id": t.OrganizationID,
			"user_id":         t.UserID,
		},
		"iat": iat,
		"exp": iat + int64(t.Lifetime/time.Second),
		"jti": t.ID,
	}
	if t.Domain != "" {
		claims["domain"] = t.Domain
	}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	return signed, nil
}

// tokenOrganization is what the subscription query needs from a verified
// token.
type tokenOrganization struct {
	domain string
	id     int64
}

// errInvalidToken is the one verification error callers see: the reasons
// stay inside, since they are shown to whoever sent the token.
var errInvalidToken = errors.New("the access token is invalid or has expired")

// newParser returns the parser of the emulator's own access tokens: HS256
// with the client secret, its issuer and audience, exp required, iat not in
// the future. The options set its validator, so the parser is never changed
// by parsing and may be shared.
func newParser(cfg Config) *jwt.Parser {
	return jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.ClientID),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(cfg.Now),
		jwt.WithJSONNumber(),
	)
}

// verifyToken checks an access token the emulator issued.
func (s *Server) verifyToken(raw string) (tokenOrganization, error) {
	claims := jwt.MapClaims{}
	if _, err := s.parser.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) {
		return []byte(s.cfg.ClientSecret), nil
	}); err != nil {
		return tokenOrganization{}, errInvalidToken
	}
	var org tokenOrganization
	if d, ok := claims["domain"].(string); ok {
		org.domain = d
	}
	if ctx, ok := claims["context"].(map[string]any); ok {
		if n, ok := ctx["organization_id"].(json.Number); ok {
			org.id, _ = n.Int64()
		}
	}
	return org, nil
}
