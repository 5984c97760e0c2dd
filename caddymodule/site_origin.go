package caddymodule

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/siteorigin"
)

// siteOrigin is the public origin (scheme, host and port) of the site a
// handler serves, built from the host names the site was configured for
// (the host matchers of the routes above the handler) and never from the
// Host header alone, so that what is built from it (the descriptor's
// baseUrl, a redirect_uri, spill links) points only where the
// configuration says. The routes are looked up at the first request, once.
type siteOrigin struct {
	// fix says what to set instead when the site has no host name, e.g.
	// "set base_url in service_app".
	fix string

	once  sync.Once
	hosts []string
}

// of is the origin for r of the site handler serves (see siteorigin.Of).
func (s *siteOrigin) of(r *http.Request, handler caddyhttp.MiddlewareHandler) (string, error) {
	s.once.Do(func() {
		if srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv != nil {
			s.hosts, _ = hostsAbove(srv.Routes, handler, nil)
		}
	})
	origin, err := siteorigin.Of(r, s.hosts)
	if err != nil {
		return "", fmt.Errorf("%w; %s, or name the site by its host", err, s.fix)
	}
	return origin, nil
}

// hostsAbove finds handler in routes (and their subroutes) and returns the
// host names of the innermost host matchers above it; hosts are those of
// the routes around routes.
func hostsAbove(routes caddyhttp.RouteList, handler caddyhttp.MiddlewareHandler, hosts []string) ([]string, bool) {
	for _, rt := range routes {
		h := hosts
		if own := routeHosts(rt.MatcherSets); own != nil {
			h = own
		}
		for _, hd := range rt.Handlers {
			if hd == handler {
				return h, true
			}
			if sub, ok := hd.(*caddyhttp.Subroute); ok {
				if found, ok := hostsAbove(sub.Routes, handler, h); ok {
					return found, true
				}
			}
		}
	}
	return nil, false
}

// routeHosts is the host names a route matches, or nil when one of its
// matcher sets takes any host.
func routeHosts(sets caddyhttp.MatcherSets) []string {
	var hosts []string
	for _, set := range sets {
		var own []string
		for _, m := range set {
			switch m := m.(type) {
			case *caddyhttp.MatchHost:
				own = append(own, *m...)
			case caddyhttp.MatchHost:
				own = append(own, m...)
			}
		}
		if own == nil {
			return nil
		}
		hosts = append(hosts, own...)
	}
	return hosts
}

// origin is the app's public address for r: base_url, else the site's.
func (a *ServiceApp) origin(r *http.Request) (string, error) {
	if a.baseURL != "" {
		return a.baseURL, nil
	}
	return a.site.of(r, a)
}

// warnHostless logs, at load, that a site of the server has no host name,
// so that what needs the site's public address (what names) is refused
// there until what s.fix says is set.
func (s *siteOrigin) warnHostless(ctx caddy.Context, logger *zap.Logger, what string) {
	srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok || srv == nil {
		return
	}
	for _, rt := range srv.Routes {
		if routeHosts(rt.MatcherSets) == nil {
			logger.Warn("a site of this server has no host name in its address, so "+what+
				" is refused there: the Host header of a request is the client's to choose; "+s.fix,
				zap.Strings("listen", srv.Listen))
			return
		}
	}
}
