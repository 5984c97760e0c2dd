package caddymodule

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// errNoSiteHost refuses to build an address for a site that was given no
// host name: the Host header is the client's to choose.
var errNoSiteHost = errors.New("this site's public address is not known: its address names no host " +
	"and the Host header of a request is the client's to choose")

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

// of is the origin for r of the site handler serves.
func (s *siteOrigin) of(r *http.Request, handler caddyhttp.MiddlewareHandler) (string, error) {
	s.once.Do(func() {
		if srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv != nil {
			s.hosts, _ = hostsAbove(srv.Routes, handler, nil)
		}
	})
	host, ok := siteHost(s.hosts, r.Host)
	if !ok {
		return "", fmt.Errorf("%w; %s, or name the site by its host", errNoSiteHost, s.fix)
	}
	scheme, port := "http", ""
	if r.TLS != nil {
		scheme = "https"
	}
	// The port is the one the request came in on, not one it names.
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok &&
		!(scheme == "http" && addr.Port == 80) && !(scheme == "https" && addr.Port == 443) {
		port = strconv.Itoa(addr.Port)
	}
	if port != "" {
		return scheme + "://" + net.JoinHostPort(host, port), nil
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host, nil
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

// siteHost picks the host name of hosts the request is for: the one its
// Host header names (a wildcard's match included), else the only one.
func siteHost(hosts []string, requestHost string) (string, bool) {
	name := strings.ToLower(requestHost)
	if h, _, err := net.SplitHostPort(name); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.Trim(name, "[]"), ".")
	var plain []string
	for _, h := range hosts {
		h = strings.ToLower(h)
		switch {
		case strings.Contains(h, "{"):
			// A placeholder: known only per request.
		case strings.Contains(h, "*"):
			if wildcardMatch(h, name) {
				return name, true
			}
		case h == name:
			return h, true
		default:
			plain = append(plain, h)
		}
	}
	if len(plain) == 1 {
		return plain[0], true
	}
	return "", false
}

// wildcardMatch matches name against a host pattern whose "*" labels
// stand for one label each, as Caddy's host matcher does.
func wildcardMatch(pattern, name string) bool {
	p, n := strings.Split(pattern, "."), strings.Split(name, ".")
	if len(p) != len(n) {
		return false
	}
	for i := range p {
		if p[i] != "*" && p[i] != n[i] || n[i] == "" {
			return false
		}
	}
	return true
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
