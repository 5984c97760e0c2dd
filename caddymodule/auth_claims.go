package caddymodule

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/servicegate/servicegate/token"
	"golang.org/x/net/http/httpguts"
)

// authEntry is everything a request with a verified token needs, built once
// per token and shared by every request that carries it.
type authEntry struct {
	verified *Verified
	claims   token.Claims
	// values holds the rendered placeholders, stored as interfaces so that
	// serving them allocates nothing.
	values  map[string]any
	headers []string // value of each configured header; "" when absent
	present []bool
	replace caddy.ReplacerFunc
}

// dropClaimHeaders deletes every inbound copy of the claim headers, also
// those spelled with "_" for "-", which some upstream stacks (CGI, PHP,
// WSGI) read as the same header.
func (a *ServiceAuth) dropClaimHeaders(h http.Header) {
	if len(a.headers) == 0 {
		return
	}
	for name := range h {
		for _, want := range a.headers {
			if sameHeaderName(name, want) {
				delete(h, name)
				break
			}
		}
	}
}

// sameHeaderName compares header names ignoring case, with "_" equal to "-".
func sameHeaderName(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if x == '_' {
			x = '-'
		}
		if y == '_' {
			y = '-'
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// newEntry renders what requests with this token need.
func (a *ServiceAuth) newEntry(raw string, claims token.Claims) *authEntry {
	e := &authEntry{
		claims:  claims,
		values:  make(map[string]any, len(claims)+2),
		headers: make([]string, len(a.headers)),
		present: make([]bool, len(a.headers)),
	}
	for name, v := range claims {
		e.values[authUserPrefix+name] = token.Render(v)
	}
	if sub, ok := claims.String("sub"); ok {
		e.values[authUserID] = sub
	}
	org := organization(claims, a.orgPaths)
	if org != "" {
		e.values[organizationVarName] = org
	}
	for i, path := range a.paths {
		if v, ok := claims.Lookup(path); ok && v != nil {
			// A value no HTTP/1 message can carry is left out, rather than
			// failing the request at the proxy.
			if s := token.Render(v); httpguts.ValidHeaderFieldValue(s) {
				e.headers[i], e.present[i] = s, true
			}
		}
	}
	e.verified = &Verified{Token: raw, Organization: org}
	e.replace = e.placeholder
	return e
}

// placeholder serves this token's placeholders; dotted claim paths not
// among the top-level claims are looked up as they are asked for.
func (e *authEntry) placeholder(key string) (any, bool) {
	if v, ok := e.values[key]; ok {
		return v, true
	}
	if path, ok := strings.CutPrefix(key, authUserPrefix); ok && strings.Contains(path, ".") {
		if s, ok := e.claims.String(path); ok {
			return s, true
		}
	}
	return nil, false
}

// organization returns the first non-empty string or number at paths.
func organization(claims token.Claims, paths []string) string {
	for _, p := range paths {
		v, _ := claims.Lookup(p)
		switch v.(type) {
		case string, json.Number, float64:
			if s := token.Render(v); s != "" {
				return s
			}
		}
	}
	return ""
}
