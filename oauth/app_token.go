package oauth

import (
	"context"
	"time"
)

// AppGrant names an installation of the app, for the service_app grant.
type AppGrant struct {
	// AppID and AppSecret are the app's id and the secret the service
	// gave the installation.
	AppID, AppSecret string
	// Domain is the organization's domain (empty in the standard
	// edition); UserID the user who installed the app.
	Domain, UserID string
}

// AppToken asks the service for an app token of an installation with the
// service_app grant: the app acting for the organization, with no user
// present. A refused grant (a made-up or revoked app secret) is a
// *RefusedError; the answer is the token response of the other grants.
func (c *Client) AppToken(ctx context.Context, g AppGrant, now time.Time) (Token, error) {
	return c.tokenRequest(ctx, map[string]string{
		"grant_type":    "service_app",
		"client_id":     c.ClientID,
		"client_secret": c.ClientSecret,
		"app_id":        g.AppID,
		"app_secret":    g.AppSecret,
		"domain":        g.Domain,
		"user_id":       g.UserID,
	}, now)
}
