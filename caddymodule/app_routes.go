package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/approute"
	"github.com/servicegate/servicegate/descriptor"
)

// How service_app makes its routes: the expansion of the descriptor (or
// the config's routes) filed into the router, the guard of every other
// request, the descriptor served with the gateway's fields filled in.

// provisionRoutes expands desc into routes unless the config holds them,
// loads every handler of every route, and routes the site with them.
func (a *ServiceApp) provisionRoutes(ctx caddy.Context, desc *descriptor.Descriptor, load moduleLoader) error {
	routes, err := a.routesOf(desc)
	if err != nil {
		return err
	}
	a.desc = desc
	repl := caddy.NewReplacer()
	a.clientID = repl.ReplaceKnown(a.ClientID, "")
	a.baseURL = strings.TrimSuffix(repl.ReplaceKnown(a.BaseURL, ""), "/")
	a.site = &siteOrigin{fix: "set base_url in service_app"}
	if a.baseURL == "" {
		a.site.warnHostless(ctx, a.logger, "the descriptor (and the sign-in and spill links)")
	}
	lifecycle, err := a.withLifecycleOf(desc, routes)
	if err != nil {
		return err
	}
	if err := a.provisionInstallations(ctx, lifecycle); err != nil {
		return err
	}
	f := &appRouting{router: a.newRouter(false, appIdentityHeaders(routes))}
	if err := a.routeAll(ctx, f, routes, load); err != nil {
		// Caddy cleans up the modules it loaded, not what the app holds
		// of its own (installations, handlers loaded late).
		_ = a.cleanupHandlers()
		return err
	}
	a.router.Store(f.router)
	return nil
}

// routeAll loads the routes' handlers and routes the site with them.
func (a *ServiceApp) routeAll(ctx caddy.Context, f *appRouting, routes []AppRoute, load moduleLoader) error {
	for i := range routes {
		if err := a.provisionRoute(f, &routes[i], load); err != nil {
			return err
		}
	}
	a.Routes = routes
	if err := a.routeRest(ctx, f); err != nil {
		return err
	}
	return a.provisionHealth(ctx, f)
}

// routesOf is the routes of the config, else desc's expansion.
func (a *ServiceApp) routesOf(desc *descriptor.Descriptor) ([]AppRoute, error) {
	if len(a.Routes) == 0 {
		return a.Expand(desc)
	}
	routes := a.withEarlierLifecycle(a.Routes, desc)
	if fresh, err := a.Expand(desc); err == nil && !sameRoutes(fresh, routes) {
		a.logger.Warn("the app descriptor changed since the config was adapted; the routes of the config are in use until it is adapted again",
			zap.String("descriptor", a.Descriptor))
	}
	return routes, nil
}

// appRouting is what provisionRoute files of the routes: their paths in
// the router, and what routeRest routes once every route is loaded.
type appRouting struct {
	router    *approute.Router
	guard     *AppRoute
	public    caddyhttp.MatchPath
	descPath  string
	spillPath string
}

// provisionRoute loads the handlers of one route and files it under its
// path.
func (a *ServiceApp) provisionRoute(f *appRouting, rt *AppRoute, load moduleLoader) error {
	if err := rt.loadHandlers(load); err != nil {
		return fmt.Errorf("service_app: route %s: %w", rt.Path, err)
	}
	switch {
	case rt.Path == "*":
		if rt.Auth == nil {
			return errors.New("service_app: the \"*\" route must check the token (auth)")
		}
		f.guard = rt
		return nil
	case rt.Serve == appServeDescriptor:
		f.descPath = rt.Path
		f.router.Descriptor(rt.Path, a.descriptorBody)
		return nil
	case rt.Serve == appServePublic:
		f.public = append(f.public, rt.Path)
		return nil
	case rt.Serve == appServeSpill:
		f.spillPath = strings.TrimSuffix(rt.Path, "*")
		return nil
	case rt.Serve == appServeLifecycle:
		return a.routeLifecycle(f.router, rt)
	}
	var h approute.Handler
	switch {
	case rt.Webhook != nil:
		h = routed(rt.Webhook)
	case rt.Limits != nil:
		h = routed(rt.Limits)
	case rt.SignIn != nil:
		h = routed(rt.SignIn)
	default:
		return fmt.Errorf("service_app: route %s has no handler", rt.Path)
	}
	if prefix, ok := strings.CutSuffix(rt.Path, "*"); ok {
		if rt.Webhook != nil {
			f.router.WebhookPrefix(prefix, h)
		} else {
			f.router.Prefix(prefix, h)
		}
		return nil
	}
	file := f.router.Module
	if rt.Webhook != nil {
		file = f.router.Webhook
	}
	if other := file(rt.Path, h); other != "" {
		return fmt.Errorf("service_app: routes %s and %s are one path to the app (they differ only in case, slashes or a ;param)", other, rt.Path)
	}
	return nil
}

// routeRest routes what the routes name beyond their own paths: the public
// paths, the guard and the sign-in's own paths, the spill downloads, and
// the descriptor filled in for base_url.
func (a *ServiceApp) routeRest(ctx caddy.Context, f *appRouting) error {
	if f.public != nil {
		if err := f.public.Provision(ctx); err != nil {
			return fmt.Errorf("service_app: public: %w", err)
		}
		f.router.Public(f.public.Match)
	}
	g := f.guard
	if g == nil {
		return errors.New("service_app: the routes have no \"*\" route guarding every other request")
	}
	guard := approute.Guard{Auth: routed(g.Auth), FromQuery: g.Auth.FromQuery}
	if s := g.SignIn; s != nil {
		guard.SignIn, guard.SessionCookie = routed(s), s.CookieName
		if s.flow != nil {
			guard.Session = s.flow
		}
		// The callback and logout paths belong to the sign-in, token or
		// not; Provision has filled in their defaults.
		f.router.Exact(s.callbackPath, guard.SignIn)
		f.router.Exact(s.LogoutPath, guard.SignIn)
	}
	if g.Subscription != nil {
		guard.Subscription = routed(g.Subscription)
	}
	f.router.Guard(guard)
	if err := a.proveWith(g); err != nil {
		return fmt.Errorf("service_app: installations: %w", err)
	}
	for _, rt := range a.Routes {
		if f.spillPath != "" && rt.Limits != nil && rt.Limits.Spill != nil && rt.Limits.Spill.Path == f.spillPath {
			f.router.Prefix(f.spillPath, routed(rt.Limits))
			break
		}
	}
	var err error
	if a.baseURL != "" && f.descPath != "" {
		if a.descriptor, err = a.desc.Filled(a.baseURL, a.clientID); err != nil {
			return fmt.Errorf("service_app: %w", err)
		}
	}
	return nil
}

// descriptorBody is the descriptor as served for r: filled in with
// base_url, else with the site's origin.
func (a *ServiceApp) descriptorBody(r *http.Request) ([]byte, error) {
	if a.descriptor != nil {
		return a.descriptor, nil
	}
	origin, err := a.origin(r)
	if err != nil {
		return nil, err
	}
	body, err := a.desc.Filled(origin, a.clientID)
	if err != nil {
		return nil, caddyhttp.Error(http.StatusInternalServerError, err)
	}
	return body, nil
}
