package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/approute"
	"github.com/servicegate/servicegate/installations"
)

// ServeHTTP hands the request to the app's router (see approute.Router):
// the route of its path, the guard, or 503 while the descriptor is
// awaited; a request that passes its checks and finds nothing behind
// service_app (no reverse_proxy) is answered 502, never Caddy's empty 200.
func (a *ServiceApp) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return a.router.Load().Serve(w, r, next)
}

// appNoUpstreamWarning says, at adapt and at the first such request, that
// service_app has nothing after it to pass requests on to the app.
const appNoUpstreamWarning = "service_app has no handler after it in this site: add reverse_proxy to the app; until then every request that passes its checks is answered 502"

// newRouter is a router that answers with Caddy's refusals and watches
// for the end of Caddy's chain.
func (a *ServiceApp) newRouter(starting bool) *approute.Router {
	cfg := approute.Config{
		Starting: starting,
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
