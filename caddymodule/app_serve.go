package caddymodule

import (
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/respond"
	"github.com/servicegate/servicegate/urlpath"
)

// ServeHTTP hands the request to the route of its path. A path that an
// app's decoder could read as leaving one of its segments is refused
// first, so that no route (a public prefix least of all) can be left by
// another spelling of "..". While the descriptor is awaited every request
// is answered 503 with Retry-After. A request that passes its checks and finds
// nothing behind service_app (no reverse_proxy) is answered 502, never
// Caddy's empty 200: a webhook delivery nobody received is not
// acknowledged.
func (a *ServiceApp) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if err := urlpath.Check(r.URL.EscapedPath()); err != nil {
		return refuse(w, r, http.StatusBadRequest, err.Error())
	}
	if !a.DescriptorReady() {
		if hc := a.waitingHealth; hc != nil && hc.path != "" && r.URL.Path == hc.path {
			return appHealthHandler{hc}.ServeHTTP(w, r, next)
		}
		w.Header().Set("Retry-After", appRetryAfter)
		return refuse(w, r, http.StatusServiceUnavailable, appStartingMessage)
	}
	next = a.withoutSession(r, next)
	c := appChains.Get().(*appChain)
	c.app, c.next, c.stage = a, next, appStageApp
	err := a.route(w, r, c)
	*c = appChain{}
	appChains.Put(c)
	if errors.Is(err, errAppNoUpstream) {
		a.noUpstreamOnce.Do(func() {
			a.logger.Error("service_app has no handler after it: add reverse_proxy to the app after service_app in this site; until then requests that pass their checks are answered 502",
				zap.String("path", r.URL.Path))
		})
		return refuse(w, r, http.StatusBadGateway, appNoUpstreamMessage)
	}
	return err
}

// What a site answers while its descriptor is awaited.
const (
	appRetryAfter      = "5"
	appStartingMessage = "The app is starting: the gateway has not been able to read its descriptor yet. Try again in a few seconds."
)

// errAppNoUpstream is a request that reached the end of Caddy's chain
// after passing service_app's checks.
var errAppNoUpstream = errors.New("service_app: no handler after it passes the request on to the app")

// appNoUpstreamMessage answers errAppNoUpstream.
const appNoUpstreamMessage = "The app is not connected to this gateway: its site has no reverse_proxy to the app after service_app, so the request was not passed on."

// route runs the route of the request's path; end continues to the next
// handler.
func (a *ServiceApp) route(w http.ResponseWriter, r *http.Request, end *appChain) error {
	path := r.URL.Path
	a.stripAppToken(r)
	if h, ok := a.exact[path]; ok {
		return h.ServeHTTP(w, r, end)
	}
	if m, ok := a.modules[urlpath.Canonical(path)]; ok {
		if path != m.path {
			// Another spelling of the module url: the app gets the url
			// it declared, the one the checks were made for.
			r.URL.Path, r.URL.RawPath = m.path, ""
		}
		return m.handler.ServeHTTP(w, r, end)
	}
	for _, p := range a.prefixes {
		if strings.HasPrefix(path, p.prefix) {
			return p.handler.ServeHTTP(w, r, end)
		}
	}
	if path == a.descPath {
		return a.serveDescriptor(w, r)
	}
	if a.public != nil && a.public.Match(r) {
		return end.ServeHTTP(w, r)
	}
	return a.serveGuardedWithToken(w, r, end)
}

// serveGuarded runs the "*" route: sign-in (for a request without a
// token), token, subscription, then next. The chain between the handlers
// is a pooled value, so the hot path allocates nothing of its own.
func (a *ServiceApp) serveGuarded(w http.ResponseWriter, r *http.Request, c *appChain) error {
	g := a.guard
	if g.SignIn != nil && a.signsIn(r) {
		c.stage = appStageAuth
		return g.SignIn.ServeHTTP(w, r, c)
	}
	c.stage = appStageSubscription
	return g.Auth.ServeHTTP(w, r, c)
}

// signsIn tells whether a request goes through the sign-in: it brings no
// token of its own (which service_auth checks directly), and it is a
// browser's (it asks for a page) or a signed-in browser's (it carries the
// session cookie). An API client without a token gets service_auth's 401
// with its challenge, never a redirect.
func (a *ServiceApp) signsIn(r *http.Request) bool {
	if r.Header.Get("Authorization") != "" {
		return false
	}
	q := a.guard.Auth.FromQuery
	raw := r.URL.RawQuery
	if q != "" && (strings.HasPrefix(raw, q+"=") || strings.Contains(raw, "&"+q+"=")) {
		return false
	}
	return respond.WantsHTML(r.Header) || strings.Contains(r.Header.Get("Cookie"), a.guard.SignIn.CookieName+"=")
}

// appChains pools the chains of requests.
var appChains = sync.Pool{New: func() any { return new(appChain) }}

// appChain continues a request after a handler of its route: after the
// sign-in it runs the token check, after the token check the
// subscription, then the next handler, watching for the end of Caddy's
// chain.
type appChain struct {
	app   *ServiceApp
	next  caddyhttp.Handler
	stage int
}

// The stages of an appChain: what it runs when it is called.
const (
	appStageApp = iota
	appStageAuth
	appStageSubscription
)

func (c *appChain) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	g := c.app.guard
	switch c.stage {
	case appStageAuth:
		c.stage = appStageSubscription
		return g.Auth.ServeHTTP(w, r, c)
	case appStageSubscription:
		c.stage = appStageApp
		if g.Subscription != nil {
			return g.Subscription.ServeHTTP(w, r, c)
		}
	}
	return passOn(w, r, c.next)
}

// passOn calls next, and returns errAppNoUpstream when that was the end of
// Caddy's chain (which marks the request "unhandled" and writes nothing):
// nothing after service_app passes the request on to the app.
func passOn(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	before := caddyhttp.GetVar(r.Context(), "unhandled") == true
	err := next.ServeHTTP(w, r)
	if err == nil && !before && caddyhttp.GetVar(r.Context(), "unhandled") == true {
		return errAppNoUpstream
	}
	return err
}

// serveDescriptor answers the descriptor, read-only.
func (a *ServiceApp) serveDescriptor(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return refuse(w, r, http.StatusMethodNotAllowed, "The app descriptor is read-only.")
	}
	body := a.descriptor
	if body == nil {
		origin, err := a.origin(r)
		if err != nil {
			return refuse(w, r, http.StatusInternalServerError, "The app descriptor cannot be served: "+err.Error())
		}
		if body, err = a.desc.Filled(origin, a.clientID); err != nil {
			return caddyhttp.Error(http.StatusInternalServerError, err)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
	return nil
}
