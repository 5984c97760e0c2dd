package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/servicegate/servicegate/token"
	"go.uber.org/zap"
)

// refused answers a token that did not verify.
func (a *ServiceAuth) refused(w http.ResponseWriter, r *http.Request, err error, fromQuery bool) error {
	reason := err.Error() // one of token's reasons: short, never the token
	if errors.Is(err, token.ErrKeysUnavailable) {
		a.counters.inc(authKeysUnavailable)
		setAuthError(r, reason)
		a.logger.Warn("bearer token not checked: no signing keys", zap.String("reason", reason))
		return refuse(w, r, http.StatusServiceUnavailable, "Sign-in cannot be checked right now: the signing keys are unavailable. Try again in a moment.")
	}
	a.counters.inc(authInvalidToken)
	a.logRefusal(r, reason, zap.Bool("from_query", fromQuery))
	return a.unauthorized(w, r, reason, true)
}

// logRefusal writes at DEBUG why a request was refused and what a token
// must carry (audience, issuer), so that whoever sets up the app can see
// which setting to change; never the token.
func (a *ServiceAuth) logRefusal(r *http.Request, reason string, fields ...zap.Field) {
	if ce := a.logger.Check(zap.DebugLevel, "bearer token refused"); ce != nil {
		ce.Write(append(append([]zap.Field{zap.String("reason", reason), zap.String("path", r.URL.Path)}, a.expected...), fields...)...)
	}
}

// unauthorized answers 401 with an RFC 6750 challenge; error="invalid_token"
// only when a token was sent.
func (a *ServiceAuth) unauthorized(w http.ResponseWriter, r *http.Request, reason string, sent bool) error {
	setAuthError(r, reason)
	challenge := a.challenge
	message := messageNoToken
	if sent {
		challenge += `, error="invalid_token", error_description="` + reason + `"`
		message = "Your access token was refused (" + reason + "). Sign in again."
	}
	w.Header().Set("WWW-Authenticate", challenge)
	return refuse(w, r, http.StatusUnauthorized, message)
}

// badRequest answers 400 with error="invalid_request" (RFC 6750 3.1).
func (a *ServiceAuth) badRequest(w http.ResponseWriter, r *http.Request, problem string) error {
	setAuthError(r, problem)
	w.Header().Set("WWW-Authenticate", a.challenge+`, error="invalid_request", error_description="`+problem+`"`)
	return refuse(w, r, http.StatusBadRequest, "The request is malformed: "+problem+".")
}

func setAuthError(r *http.Request, reason string) {
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set(authErrorVar, reason)
	}
}

// defaultRealm is the realm of the WWW-Authenticate challenges of
// service_auth and service_subscription.
const defaultRealm = "service"

// bearerChallenge is the RFC 6750 challenge for realm (defaultRealm when
// empty); realm has passed validQuotedText.
func bearerChallenge(realm string) string {
	if realm == "" {
		realm = defaultRealm
	}
	return `Bearer realm="` + realm + `"`
}

// validQuotedText reports whether s can sit inside an HTTP quoted-string
// without escapes.
func validQuotedText(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
