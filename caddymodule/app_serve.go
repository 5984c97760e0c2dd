package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/approute"
	"github.com/servicegate/servicegate/installations"
	"github.com/servicegate/servicegate/webhook"
)

// ServeHTTP hands the request to the app's router (see approute.Router):
// the route of its path, the guard, or 503 while the descriptor is
// awaited; a request that passes its checks and finds nothing behind
// service_app (no reverse_proxy) is answered 502, never Caddy's empty 200,
// and one whose app cannot be reached is answered 502 with a message
// saying so.
func (a *ServiceApp) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if ok, err := a.started(w, r); !ok {
		return err
	}
	r, call := emulatorCall(r)
	if call != nil {
		next = passedOn(call, r.Header.Clone(), next)
	}
	if err := a.router.Load().Serve(w, r, next); err != nil {
		return a.unreachable(w, r, err)
	}
	return nil
}

// unreachable answers a request whose app reverse_proxy could not connect
// to (it then writes nothing and returns a 502 around the dial error) with
// a refusal naming the app's address and the cause, so that the client
// and the service's user see why. A lifecycle call the app gave no answer
// to otherwise (a connection closed, a timeout) is answered 502 with a
// message naming the app's failure and saying that nothing was changed.
// Any other error is returned as it is.
func (a *ServiceApp) unreachable(w http.ResponseWriter, r *http.Request, err error) error {
	var herr caddyhttp.HandlerError
	var dial reverseproxy.DialError
	if !errors.As(err, &herr) || herr.StatusCode != http.StatusBadGateway || !errors.As(herr.Err, &dial) {
		var none *installations.NoAnswer
		if errors.As(err, &none) {
			a.logger.Error("the app gave no answer to a lifecycle call", zap.String("path", r.URL.Path), zap.Error(none.Err))
			return refuse(w, r, http.StatusBadGateway, none.Message())
		}
		return err
	}
	var address string // the upstream's host and port (or socket path): no URL, no credentials
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		address, _ = repl.GetString("http.reverse_proxy.upstream.hostport")
	}
	a.logger.Error("the app could not be reached", zap.String("upstream", address), zap.String("path", r.URL.Path), zap.Error(dial))
	return refuse(w, r, http.StatusBadGateway, approute.UnreachableMessage(address, dial))
}

// appNoUpstreamWarning says, at adapt and at the first such request, that
// service_app has nothing after it to pass requests on to the app.
const appNoUpstreamWarning = "service_app has no handler after it in this site: add reverse_proxy to the app; until then every request that passes its checks is answered 502"

// appIdentityHeaders are the headers the gateway sets for the app of
// routes and tells it to trust, which a client's request never brings to
// the app (see approute.Config.Identity): the claim headers and the
// sign-in's user and organization headers, by default and as the routes
// name them, the organization headers of a webhook delivery, and the
// default app token header (the configured one comes with AppTokens).
// The defaults are in even when the routes name others, since the README
// names them to apps.
func appIdentityHeaders(routes []AppRoute) []string {
	names := []string{oauthDefaultUserHeader, oauthDefaultOrgHeader, webhook.HeaderDomain, webhook.HeaderOrgID, appDefaultTokenHeader}
	for _, rt := range routes {
		if rt.Auth != nil {
			for name := range rt.Auth.ClaimHeaders {
				names = append(names, name)
			}
		}
		if s := rt.SignIn; s != nil {
			for _, name := range []string{s.UserHeader, s.OrganizationHeader} {
				if name != oauthHeaderOff {
					names = append(names, name)
				}
			}
		}
	}
	return names
}

// newRouter is a router that answers with Caddy's refusals, watches for
// the end of Caddy's chain, and keeps the identity headers from clients.
func (a *ServiceApp) newRouter(starting bool, identity []string) *approute.Router {
	cfg := approute.Config{
		Starting: starting,
		Identity: identity,
		Refuse:   refuse,
		Unhandled: func(r *http.Request) bool {
			return caddyhttp.GetVar(r.Context(), "unhandled") == true
		},
		NoUpstream: func(r *http.Request) {
			a.logger.Error(appNoUpstreamWarning, zap.String("path", r.URL.Path))
		},
	}
	if a.inst != nil && a.inst.header != "" {
		logger := a.inst.logger
		cfg.AppTokens = &approute.AppTokens{
			Header: a.inst.header,
			Book:   a.inst.book,
			Verified: func(r *http.Request) installations.Org {
				if v, ok := verifiedFrom(r); ok {
					return v.Org
				}
				return installations.Org{}
			},
			Failed: func(org string, err error) {
				logger.Warn("the request goes on without an app token", zap.String("organization", org), zap.Error(err))
			},
		}
	}
	return approute.New(cfg)
}

// routed is a Caddy handler as a handler of the router.
func routed(h caddyhttp.MiddlewareHandler) approute.Handler {
	return func(w http.ResponseWriter, r *http.Request, next approute.Next) error {
		return h.ServeHTTP(w, r, next)
	}
}
