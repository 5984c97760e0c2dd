package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/servicegate/servicegate/oauth"
)

// withoutSession is the next handler for a request of the site: with
// sign_in and a request that carries the sign-in's cookies, the app gets
// the request without them, whichever route passed it on (public paths,
// requests with a token, module routes). Requests without those cookies
// keep next as it is, so the hot path allocates nothing here.
func (a *ServiceApp) withoutSession(r *http.Request, next caddyhttp.Handler) caddyhttp.Handler {
	if a.guard == nil || a.guard.SignIn == nil || a.guard.SignIn.flow == nil || !a.guard.SignIn.flow.Carries(r.Header) {
		return next
	}
	return sessionStripped{next: next, flow: a.guard.SignIn.flow}
}

// sessionStripped removes the sign-in's cookies from what it passes on.
type sessionStripped struct {
	next caddyhttp.Handler
	flow *oauth.Handler
}

func (s sessionStripped) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	s.flow.StripCookies(r.Header)
	return s.next.ServeHTTP(w, r)
}
