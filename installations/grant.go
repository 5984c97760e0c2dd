package installations

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/servicegate/servicegate/oauth"
)

// ErrRefused is the service refusing to issue an app token for an
// installation: its app secret is not one the service gave (invalid_grant,
// or another refusal that names no client).
var ErrRefused = errors.New("the service refused the installation's app secret")

// ErrClientRefused is the service refusing the gateway's own credentials
// (invalid_client): service_app's client_id or client_secret is wrong, and
// no installation can be proved until they are fixed. It wraps ErrRefused.
var ErrClientRefused = fmt.Errorf("%w: the service refused service_app's client_id/client_secret (invalid_client)", ErrRefused)

// ServiceGrant returns a BookConfig.Grant that asks the service's token
// endpoint with the service_app grant through c. A refusal wraps
// ErrRefused; any other error means the service could not be asked.
func ServiceGrant(c *oauth.Client, now func() time.Time) func(context.Context, *Installation) (Token, error) {
	if now == nil {
		now = time.Now
	}
	return func(ctx context.Context, in *Installation) (Token, error) {
		issued := now()
		t, err := c.AppToken(ctx, oauth.AppGrant{AppID: in.AppID, AppSecret: in.AppSecret, Domain: in.Domain, UserID: in.UserID}, issued)
		var refused *oauth.RefusedError
		if errors.As(err, &refused) {
			if refused.Code == "invalid_client" || (refused.Code == "" && refused.Status == http.StatusUnauthorized) {
				return Token{}, fmt.Errorf("%w (%v)", ErrClientRefused, err)
			}
			return Token{}, fmt.Errorf("%w (%v)", ErrRefused, err)
		}
		if err != nil {
			return Token{}, err
		}
		return Token{AccessToken: t.AccessToken, IssuedAt: issued, Expires: t.Expiry}, nil
	}
}
