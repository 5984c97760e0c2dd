// Package approute routes every request of an app's site to the checks the
// app's modules need, so that nothing is left open: the health check and
// the sign-in's own paths as they are, each module url (in every spelling
// a lenient router takes for it) to its module's handler, prefixes, the
// app descriptor, the public paths, and every other request through the
// guard: sign-in for a browser without a token, the token check, the
// subscription check. A request that passes and finds nothing behind the
// router is answered 502, never an empty 200. It knows nothing of Caddy:
// handlers, refusals and reports are values of its Config.
package approute

import (
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/servicegate/servicegate/respond"
	"github.com/servicegate/servicegate/urlpath"
)

// Next is the handler after the router: the app. caddyhttp.Handler is one.
type Next interface {
	ServeHTTP(http.ResponseWriter, *http.Request) error
}

// Handler is the handler of a route: it checks the request and passes it
// on to next, or answers it.
type Handler func(w http.ResponseWriter, r *http.Request, next Next) error

// What a site answers while its descriptor is awaited.
const (
	retryAfter      = "5"
	startingMessage = "The app is starting: the gateway has not been able to read its descriptor yet. Try again in a few seconds."
)

// noUpstreamMessage answers a request that passed its checks and found
// nothing behind the router to pass it on to the app.
const noUpstreamMessage = "The app is not connected to this gateway: its site has no reverse_proxy to the app after service_app, so the request was not passed on."

// errNoUpstream is a request that reached the end of the server's chain
// after passing the router's checks.
var errNoUpstream = errors.New("no handler after service_app passes the request on to the app")

// Config configures a Router. Every field is optional.
type Config struct {
	// Starting: the app's descriptor has not been read yet; every
	// request is answered 503 with Retry-After, but the health check's.
	Starting bool

	// Refuse answers a refused request with status and a message for a
	// person, and returns what Serve returns. Headers such as Allow and
	// Retry-After are already set on w. Default: respond.Error, and nil.
	Refuse func(w http.ResponseWriter, r *http.Request, status int, message string) error

	// Unhandled tells whether the request has reached the end of the
	// server's chain without an answer (Caddy marks it "unhandled"): a
	// request still unhandled after next passed its checks and found no
	// app behind the router, and is answered 502.
	Unhandled func(*http.Request) bool

	// NoUpstream is told of the first request answered 502 because
	// nothing behind the router passes it on to the app.
	NoUpstream func(*http.Request)

	// AppTokens, when set, gives the app the app token of the
	// organization a request is for.
	AppTokens *AppTokens

	// Identity are the headers the gateway sets for the app and tells it
	// to trust (the token's claims, the sign-in's user and organization,
	// a webhook delivery's organization); AppTokens' Header is one too.
	// On every route, before its handler runs, every inbound copy of
	// them is removed (in any spelling an app's stack may read as the
	// same header: another case, "_" for "-"), and so are the tokens of
	// the Connection header that name them, which would make a proxy
	// after the router drop them as hop-by-hop. On a webhook delivery's
	// route, webhook.HeaderDomain and webhook.HeaderOrgID as the service
	// spells them are left to the delivery check, which keeps them only
	// when the signature vouches for them.
	//
	// No request trailer carries them either: on the routes where the app
	// is told to trust headers (the guard's, a webhook delivery's) every
	// request trailer is removed, on the others every one named as an
	// identity header (in any spelling).
	Identity []string
}

// Session is the sign-in's session cookies; *oauth.Handler is one.
type Session interface {
	// Carries tells whether h holds one of the sign-in's cookies.
	Carries(h http.Header) bool
	// StripCookies removes the sign-in's cookies from h.
	StripCookies(h http.Header)
}

// Guard is the route of every request that no other route takes.
type Guard struct {
	// SignIn, when set, runs the sign-in for a browser's request without
	// a token (see SignsIn); Auth follows it.
	SignIn Handler
	// Session is the sign-in's cookies, removed from every request passed
	// on to the app, whichever route passed it on. Optional.
	Session Session
	// SessionCookie names the sign-in's session cookie: a request that
	// carries it is a signed-in browser's.
	SessionCookie string
	// Auth checks the request's token. Required.
	Auth Handler
	// FromQuery is the query parameter that may carry the token.
	FromQuery string
	// Subscription, when set, checks the subscription after Auth.
	Subscription Handler
}

// Router routes the requests of one app's site. Build it with New and its
// adding methods, then serve with Serve; it must not change once it
// serves.
type Router struct {
	cfg            Config
	healthPath     string
	health         Handler
	exact          map[string]Handler
	modules        map[string]module // by urlpath.Canonical
	prefixes       []prefix
	descPath       string
	descriptor     Handler
	public         func(*http.Request) bool
	guard          Guard
	identity       identity
	noUpstreamOnce sync.Once
}

// module is the route of one module url: the url as declared, which the
// app receives whatever spelling of it the request used, its handler, and
// whether it receives webhook deliveries.
type module struct {
	path     string
	handler  Handler
	delivery bool
}

// prefix is the route of the paths that start with prefix.
type prefix struct {
	prefix   string
	handler  Handler
	delivery bool
}

// New returns a router with no routes.
func New(cfg Config) *Router {
	if cfg.Refuse == nil {
		cfg.Refuse = respond.Refuse
	}
	var token string
	if cfg.AppTokens != nil {
		token = cfg.AppTokens.Header
	}
	return &Router{cfg: cfg, exact: map[string]Handler{}, modules: map[string]module{},
		identity: newIdentity(cfg.Identity, token)}
}

// Starting tells whether the router answers 503 while the app's
// descriptor is awaited.
func (rt *Router) Starting() bool { return rt.cfg.Starting }

// Health routes path, as it is, to the health check h, before any other
// route and while Starting too.
func (rt *Router) Health(path string, h Handler) {
	rt.healthPath, rt.health = path, h
	rt.exact[path] = h
}

// Exact routes path, as it is, to h.
func (rt *Router) Exact(path string, h Handler) { rt.exact[path] = h }

// Module routes a module url, in every spelling a lenient router takes
// for it (case, trailing slash, ;param, encoding), to h, which gets the
// request with the url as declared. When a url routed before is one path
// with path, it routes nothing and returns that url.
func (rt *Router) Module(path string, h Handler) (taken string) {
	return rt.module(path, h, false)
}

// module files the route of a module url; see Module and Webhook.
func (rt *Router) module(path string, h Handler, delivery bool) (taken string) {
	key := urlpath.Canonical(path)
	if other, ok := rt.modules[key]; ok {
		return other.path
	}
	rt.modules[key] = module{path, h, delivery}
	return ""
}

// Webhook is Module for a webhook module's url: the delivery's
// organization headers are left to h (see Config.Identity), and with
// AppTokens, the deliveries h verified carry the app token of the
// organization they name.
func (rt *Router) Webhook(path string, h Handler) (taken string) {
	return rt.module(path, rt.deliveries(h), true)
}

// Prefix routes every path that starts with p to h.
func (rt *Router) Prefix(p string, h Handler) {
	rt.prefixes = append(rt.prefixes, prefix{p, h, false})
}

// WebhookPrefix is Prefix for a webhook handler, as Webhook is Module.
func (rt *Router) WebhookPrefix(p string, h Handler) {
	rt.prefixes = append(rt.prefixes, prefix{p, rt.deliveries(h), true})
}

// deliveries is h, a webhook handler, with AppTokens when they are set.
func (rt *Router) deliveries(h Handler) Handler {
	if t := rt.cfg.AppTokens; t != nil && t.Header != "" {
		return t.delivery(h)
	}
	return h
}

// Public passes the requests match takes on to the app without checks.
func (rt *Router) Public(match func(*http.Request) bool) { rt.public = match }

// Guard sets the route of every other request.
func (rt *Router) Guard(g Guard) { rt.guard = g }

// Takes tells whether path has a route of its own: an exact path, a module
// url in any spelling, or the descriptor's path.
func (rt *Router) Takes(path string) bool {
	_, exact := rt.exact[path]
	_, module := rt.modules[urlpath.Canonical(path)]
	return exact || module || (rt.descriptor != nil && path == rt.descPath)
}

// Serve hands the request to the route of its path. A path that an app's
// decoder could read as leaving one of its segments is refused first, so
// that no route (a public prefix least of all) can be left by another
// spelling of "..". A request that passes its checks and finds nothing
// behind the router is answered 502: a webhook delivery nobody received is
// not acknowledged.
func (rt *Router) Serve(w http.ResponseWriter, r *http.Request, next Next) error {
	if err := urlpath.Check(r.URL.EscapedPath()); err != nil {
		return rt.cfg.Refuse(w, r, http.StatusBadRequest, err.Error())
	}
	if rt.cfg.Starting {
		if rt.health != nil && r.URL.Path == rt.healthPath {
			return rt.health(w, r, next)
		}
		w.Header().Set("Retry-After", retryAfter)
		return rt.cfg.Refuse(w, r, http.StatusServiceUnavailable, startingMessage)
	}
	next = rt.withoutSession(r, next)
	c := chains.Get().(*chain)
	c.rt, c.next, c.stage = rt, next, stageApp
	err := rt.route(w, r, c)
	*c = chain{}
	chains.Put(c)
	if errors.Is(err, errNoUpstream) {
		if rt.cfg.NoUpstream != nil {
			rt.noUpstreamOnce.Do(func() { rt.cfg.NoUpstream(r) })
		}
		return rt.cfg.Refuse(w, r, http.StatusBadGateway, noUpstreamMessage)
	}
	return err
}

// route runs the route of the request's path, after removing the identity
// headers the client sent, and the trailers that could stand for them;
// end continues to the next handler.
func (rt *Router) route(w http.ResponseWriter, r *http.Request, end *chain) error {
	h, delivery := rt.handlerOf(r)
	rt.identity.remove(r.Header, delivery)
	switch {
	case h != nil:
		rt.identity.dropTrailers(r, delivery)
		return h(w, r, end)
	case rt.public != nil && rt.public(r):
		rt.identity.dropTrailers(r, false)
		return end.ServeHTTP(w, r)
	}
	rt.identity.dropTrailers(r, true)
	return rt.serveGuarded(w, r, end)
}

// handlerOf is the handler of the route of the request's path, and
// whether the route receives webhook deliveries; nil for a public path or
// the guard.
func (rt *Router) handlerOf(r *http.Request) (h Handler, delivery bool) {
	path := r.URL.Path
	if h, ok := rt.exact[path]; ok {
		return h, false
	}
	if m, ok := rt.modules[urlpath.Canonical(path)]; ok {
		if path != m.path {
			// Another spelling of the module url: the app gets the url
			// it declared, the one the checks were made for.
			r.URL.Path, r.URL.RawPath = m.path, ""
		}
		return m.handler, m.delivery
	}
	for _, p := range rt.prefixes {
		if strings.HasPrefix(path, p.prefix) {
			return p.handler, p.delivery
		}
	}
	if rt.descriptor != nil && path == rt.descPath {
		return rt.descriptor, false
	}
	return nil, false
}

// serveGuarded runs the guard: sign-in (for a request without a token),
// token, subscription, then next, with the app token when AppTokens is
// set. The chain between the handlers is a pooled value, so the hot path
// allocates nothing of its own.
func (rt *Router) serveGuarded(w http.ResponseWriter, r *http.Request, c *chain) error {
	t := rt.cfg.AppTokens
	if t == nil || t.Header == "" {
		return rt.runGuard(w, r, c)
	}
	n := tokenNexts.Get().(*tokenNext)
	*n = tokenNext{tokens: t, next: c.next}
	c.next = n
	err := rt.runGuard(w, r, c)
	*n = tokenNext{}
	tokenNexts.Put(n)
	return err
}

// runGuard starts the guard's chain: with the sign-in, or with the token
// check.
func (rt *Router) runGuard(w http.ResponseWriter, r *http.Request, c *chain) error {
	if rt.guard.SignIn != nil && rt.SignsIn(r) {
		c.stage = stageAuth
		return rt.guard.SignIn(w, r, c)
	}
	c.stage = stageSubscription
	return rt.guard.Auth(w, r, c)
}

// SignsIn tells whether a request goes through the sign-in: it brings no
// token of its own (which the token check checks directly), and it is a
// browser's (it asks for a page) or a signed-in browser's (it carries the
// session cookie). An API client without a token gets the token check's
// 401 with its challenge, never a redirect.
func (rt *Router) SignsIn(r *http.Request) bool {
	if r.Header.Get("Authorization") != "" {
		return false
	}
	q := rt.guard.FromQuery
	raw := r.URL.RawQuery
	if q != "" && (strings.HasPrefix(raw, q+"=") || strings.Contains(raw, "&"+q+"=")) {
		return false
	}
	return respond.WantsHTML(r.Header) || strings.Contains(r.Header.Get("Cookie"), rt.guard.SessionCookie+"=")
}

// chains pools the chains of requests.
var chains = sync.Pool{New: func() any { return new(chain) }}

// chain continues a request after a handler of its route: after the
// sign-in it runs the token check, after the token check the
// subscription, then the next handler, watching for the end of the
// server's chain.
type chain struct {
	rt    *Router
	next  Next
	stage int
}

// The stages of a chain: what it runs when it is called.
const (
	stageApp = iota
	stageAuth
	stageSubscription
)

// ServeHTTP runs the next stage of the request.
func (c *chain) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	g := &c.rt.guard
	switch c.stage {
	case stageAuth:
		c.stage = stageSubscription
		return g.Auth(w, r, c)
	case stageSubscription:
		c.stage = stageApp
		if g.Subscription != nil {
			return g.Subscription(w, r, c)
		}
	}
	return c.rt.passOn(w, r, c.next)
}

// passOn calls next, and returns errNoUpstream when that was the end of
// the server's chain (which marks the request unhandled and writes
// nothing): nothing after the router passes the request on to the app.
func (rt *Router) passOn(w http.ResponseWriter, r *http.Request, next Next) error {
	unhandled := rt.cfg.Unhandled
	if unhandled == nil {
		return next.ServeHTTP(w, r)
	}
	before := unhandled(r)
	err := next.ServeHTTP(w, r)
	if err == nil && !before && unhandled(r) {
		return errNoUpstream
	}
	return err
}

// withoutSession is the next handler for a request of the site: with a
// Session and a request that carries the sign-in's cookies, the app gets
// the request without them, whichever route passed it on (public paths,
// requests with a token, module routes). Requests without those cookies
// keep next as it is, so the hot path allocates nothing here.
func (rt *Router) withoutSession(r *http.Request, next Next) Next {
	s := rt.guard.Session
	if s == nil || !s.Carries(r.Header) {
		return next
	}
	return sessionStripped{next: next, session: s}
}

// sessionStripped removes the sign-in's cookies from what it passes on.
type sessionStripped struct {
	next    Next
	session Session
}

func (s sessionStripped) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	s.session.StripCookies(r.Header)
	return s.next.ServeHTTP(w, r)
}
