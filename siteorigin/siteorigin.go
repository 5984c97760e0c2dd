// Package siteorigin builds the public origin (scheme, host and port) of
// a site from the host names it was configured for, never from a
// request's Host header alone, so that what is built from it (an app
// descriptor's baseUrl, a redirect_uri, spill links, the Host of a queued
// delivery) points only where the configuration says. The Host header
// only picks among the site's names.
package siteorigin

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// ErrNoHost refuses to build an address for a site that was given no host
// name: the Host header is the client's to choose.
var ErrNoHost = errors.New("this site's public address is not known: its address names no host " +
	"and the Host header of a request is the client's to choose")

// Scheme is the scheme a request came in with: "https" over TLS, else
// "http".
func Scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// Of is the origin for r of a site named by hosts: the host name hosts
// give (see Host), the scheme r came in with, and the port it came in on
// (not one it names), left out when it is the scheme's own. ErrNoHost
// when hosts give none.
func Of(r *http.Request, hosts []string) (string, error) {
	host, ok := Host(hosts, r.Host)
	if !ok {
		return "", ErrNoHost
	}
	scheme, port := Scheme(r), ""
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

// Host picks the host name of hosts the request is for: the one its Host
// header names (a wildcard's match included), else the only one. Hosts
// with placeholders are known only per request and are skipped.
func Host(hosts []string, requestHost string) (string, bool) {
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
			if MatchHost(h, name) {
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

// MatchHost matches name against a host pattern whose "*" labels stand
// for one label each, as Caddy's host matcher does.
func MatchHost(pattern, name string) bool {
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
