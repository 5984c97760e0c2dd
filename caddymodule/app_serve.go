package caddymodule

import (
	"net/http"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/servicegate/servicegate/respond"
)

// ServeHTTP hands the request to the route of its path.
func (a *ServiceApp) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	path := r.URL.Path
	a.stripAppToken(r)
	if h, ok := a.exact[path]; ok {
		return h.ServeHTTP(w, r, next)
	}
	for _, p := range a.prefixes {
		if strings.HasPrefix(path, p.prefix) {
			return p.handler.ServeHTTP(w, r, next)
		}
	}
	if path == a.descPath {
		return a.serveDescriptor(w, r)
	}
	if a.public != nil && a.public.Match(r) {
		return next.ServeHTTP(w, r)
	}
	return a.serveGuardedWithToken(w, r, next)
}

// serveGuarded runs the "*" route: sign-in (for a request without a
// token), token, subscription, then next. The chain between the handlers
// is a pooled value, so the hot path allocates nothing of its own.
func (a *ServiceApp) serveGuarded(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	g := a.guard
	c := appChains.Get().(*appChain)
	c.app, c.next, c.signedIn = a, next, false
	var err error
	if g.SignIn != nil && a.signsIn(r) {
		c.signedIn = true
		err = g.SignIn.ServeHTTP(w, r, c)
	} else {
		err = g.Auth.ServeHTTP(w, r, c)
	}
	*c = appChain{}
	appChains.Put(c)
	return err
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

// appChains pools the chains of guarded requests.
var appChains = sync.Pool{New: func() any { return new(appChain) }}

// appChain continues a guarded request after a handler: after the sign-in
// it runs the token check, after the token check the subscription, then
// the next handler.
type appChain struct {
	app      *ServiceApp
	next     caddyhttp.Handler
	signedIn bool
}

func (c *appChain) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	g := c.app.guard
	if c.signedIn {
		c.signedIn = false
		return g.Auth.ServeHTTP(w, r, c)
	}
	if g.Subscription != nil {
		return g.Subscription.ServeHTTP(w, r, c.next)
	}
	return c.next.ServeHTTP(w, r)
}

// serveDescriptor answers the descriptor, read-only.
func (a *ServiceApp) serveDescriptor(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return refuse(w, r, http.StatusMethodNotAllowed, "The app descriptor is read-only.")
	}
	body := a.descriptor
	if body == nil {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		var err error
		if body, err = a.desc.Filled(scheme+"://"+r.Host, a.clientID); err != nil {
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
