package installations

import (
	"context"
	"errors"

	"github.com/servicegate/servicegate/token"
)

// The claims of the service's tokens that name their organization. An
// installation is stored under the organization these claims of the app
// token the service issued for it name, never under the one its call
// names.
const (
	ClaimOrganizationID = "context.organization_id"
	ClaimDomain         = "domain"
)

// OrgOf is the organization the verified claims of a service token name:
// its id (ClaimOrganizationID, a string or a number, kept in decimal) and
// its domain (ClaimDomain), each empty when the claim is missing.
func OrgOf(claims token.Claims) Org {
	var o Org
	if v, ok := claims.Lookup(ClaimOrganizationID); ok {
		o.ID = token.Render(v)
	}
	if v, ok := claims.String(ClaimDomain); ok {
		o.Domain = v
	}
	return o
}

// Prover verifies an app token the service issued (its signature, issuer,
// audience and lifetime, as service_auth verifies a user's token) and
// returns the organization its claims name. An error means the token
// cannot be trusted.
type Prover func(ctx context.Context, appToken string) (Org, error)

// ErrNotProved is a lifecycle call the service did not vouch for: the app
// token it issued could not be verified, or names another organization
// than the call.
var ErrNotProved = errors.New("the service's app token does not prove the organization of the call")
