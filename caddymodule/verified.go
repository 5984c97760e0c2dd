package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/installations"
)

// verifiedVar is the request variable under which service_auth leaves the
// verified token for the handlers after it (service_subscription).
const verifiedVar = "servicegate.verified"

// Verified is what service_auth leaves for later handlers of the same
// request: the token it verified and the organization key taken from the
// token's verified claims.
type Verified struct {
	// Token is the raw bearer token, as received.
	Token string
	// Organization is the organization key: the domain claim when it is
	// a non-empty string, else the organization id claim. Empty when the
	// token names no organization.
	Organization string
	// Org is the organization the token's verified claims name, its id
	// and its domain kept apart (see installations.OrgOf).
	Org installations.Org
}

// String keeps the token out of anything that prints the variable, such as
// a {http.vars.servicegate.verified} placeholder.
func (v *Verified) String() string { return v.Organization }

// setVerified records v for the rest of the request. v may be shared by
// many requests (it may come from a cache) and must not be changed after.
func setVerified(r *http.Request, v *Verified) {
	caddyhttp.SetVar(r.Context(), verifiedVar, v)
}

// verifiedFrom returns what service_auth verified for r, if it ran.
func verifiedFrom(r *http.Request) (*Verified, bool) {
	v, ok := caddyhttp.GetVar(r.Context(), verifiedVar).(*Verified)
	return v, ok && v != nil
}
