package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/servicegate/servicegate/emulator"
	"github.com/servicegate/servicegate/token"
	"go.uber.org/zap"
)

// report counts the outcome of a request and, for a refusal, sets
// {http.auth.service.error} and logs why.
func (a *ServiceAuth) report(r *http.Request, o token.Outcome, why token.Refusal) {
	a.counters.inc(authOutcome(o))
	switch o {
	case token.Remembered, token.Verified:
		return
	case token.NoToken:
		a.logRefusal(r, why.Reason)
	case token.InvalidToken:
		a.logRefusal(r, why.Reason, zap.Bool("from_query", why.FromQuery))
	case token.KeysUnavailable:
		a.logger.Warn("bearer token not checked: no signing keys", zap.String("reason", why.Reason))
	}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set(authErrorVar, why.Reason)
	}
}

// logRefusal writes at DEBUG why a request was refused and what a token
// must carry (audience, issuer), so that whoever sets up the app can see
// which setting to change; never the token.
func (a *ServiceAuth) logRefusal(r *http.Request, reason string, fields ...zap.Field) {
	emulator.GatewayCallFrom(r.Context()).Refused(reason)
	if ce := a.logger.Check(zap.DebugLevel, "bearer token refused"); ce != nil {
		ce.Write(append(append([]zap.Field{zap.String("reason", reason), zap.String("path", r.URL.Path)}, a.expected...), fields...)...)
	}
}
