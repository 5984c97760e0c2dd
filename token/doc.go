// Package token verifies the service's JWT-shaped bearer tokens and extracts
// their claims. It has no Caddy import.
//
// A [Verifier] checks a token's signature with [Keys] (an HMAC secret, a
// public key, or a JSON Web Key Set fetched by [JWKS]) under an algorithm
// allow-list derived from those keys, then checks exp (required), nbf, iat,
// the issuer and the audience. [FromAuthorization] takes the token out of an
// Authorization header value, and [Cache] remembers verified tokens until
// they expire, each only under the key generation that verified it
// ([Verifier.Generation], [Rotating]): a key withdrawn from a JWKS ends the
// tokens remembered under it.
//
// A [Handler] is the request pipeline of a bearer token check: it takes the
// token from the Authorization header (or a query parameter), verifies or
// remembers it, sets the claim headers and passes the request on, or
// refuses it with an RFC 6750 challenge; refusals and outcomes go to
// callbacks of its [HandlerConfig].
//
// Errors returned by Verify are one of the Err* values of this package: their
// text is a short reason that never contains the token.
package token
