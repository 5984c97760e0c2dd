// Package oauth runs the service's OAuth 2.0 authorization-code flow on
// behalf of apps that do not run it themselves: it builds the authorization
// request, checks the state the user comes back with, exchanges the code for
// a token pair, keeps the pair in a server-side session named by a random
// id, and refreshes the access token with the refresh_token grant shortly
// before it expires (once per session, however many requests need it).
//
// A Handler is the flow in front of an app: it answers the callback and
// logout paths, sends browsers without a session to sign in, refuses other
// clients, and passes the requests of a session on with its access token.
// A Manager keeps the logins and sessions of a Handler; a Client talks to
// the authorization server.
//
// The package knows nothing of Caddy: a Manager takes its Client, Store and
// clock as values, and a Handler its refusals and reports as callbacks. The
// browser only ever holds the session id; the tokens stay in the Store.
package oauth
