package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/emulator"
	"github.com/servicegate/servicegate/respond"
)

// errorBody is the shape of every refusal servicegate writes:
// {"error":{"message":"…"}}.
type errorBody = respond.ErrorBody

// refuse answers a refused request. When the server has handle_errors routes
// it returns a caddyhttp.Error carrying status and message so those routes
// can reshape the answer ({http.error.status_code}, {http.error.message});
// otherwise it writes status with the JSON body {"error":{"message":…}}
// itself, so a refusal is never an empty page. Headers set on w before the
// call (WWW-Authenticate, Location, …) are kept either way.
//
// message is shown to people: it must never hold a secret, a token, a
// signature or a body.
func refuse(w http.ResponseWriter, r *http.Request, status int, message string) error {
	emulator.GatewayCallFrom(r.Context()).Refused(message)
	if hasErrorRoutes(r) {
		return caddyhttp.Error(status, errors.New(message))
	}
	respond.Error(w, status, message)
	return nil
}

// hasErrorRoutes reports whether the server handling r has handle_errors
// routes that would write an answer for a returned error.
func hasErrorRoutes(r *http.Request) bool {
	srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	return ok && srv != nil && srv.Errors != nil && len(srv.Errors.Routes) > 0
}
