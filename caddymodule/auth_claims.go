package caddymodule

import (
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/servicegate/servicegate/installations"
	"github.com/servicegate/servicegate/token"
)

// authEntry is what Caddy needs of a verified token, built once per token
// (token.Entry.Data) and shared by every request that carries it.
type authEntry struct {
	verified Verified
	claims   token.Claims
	// values holds the rendered placeholders, stored as interfaces so that
	// serving them allocates nothing.
	values  map[string]any
	replace caddy.ReplacerFunc
}

// newAuthEntry renders the placeholders of a verified token.
func newAuthEntry(e *token.Entry) any {
	ae := &authEntry{
		verified: Verified{Token: e.Token, Organization: e.Organization, Org: installations.OrgOf(e.Claims)},
		claims:   e.Claims,
		values:   make(map[string]any, len(e.Claims)+2),
	}
	for name, v := range e.Claims {
		ae.values[authUserPrefix+name] = token.Render(v)
	}
	if sub, ok := e.Claims.String("sub"); ok {
		ae.values[authUserID] = sub
	}
	if e.Organization != "" {
		ae.values[organizationVarName] = e.Organization
	}
	ae.replace = ae.placeholder
	return ae
}

// passAuthEntry leaves the token's placeholders and what it verified for
// the handlers after service_auth.
func passAuthEntry(r *http.Request, e *token.Entry) {
	ae := e.Data.(*authEntry)
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Map(ae.replace)
	}
	setVerified(r, &ae.verified)
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
