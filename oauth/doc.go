// Package oauth runs the service's OAuth 2.0 authorization-code flow on
// behalf of apps that do not run it themselves: it builds the authorization
// request, checks the state the user comes back with, exchanges the code for
// a token pair, keeps the pair in a server-side session named by a random
// id, and refreshes the access token with the refresh_token grant shortly
// before it expires (once per session, however many requests need it).
//
// The package knows nothing of Caddy: a Manager takes its Client, Store and
// clock as values. The browser only ever holds the session id; the tokens
// stay in the Store.
package oauth
