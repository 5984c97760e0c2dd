package caddymodule

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// errorBody is the shape of every refusal servicegate writes:
// {"error":{"message":"…"}}, the shape the service shows to its users.
type errorBody struct {
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
}

// jsonError returns the JSON refusal body for a message.
func jsonError(message string) []byte {
	var b errorBody
	b.Error.Message = message
	out, _ := json.Marshal(b) // a struct of strings always marshals
	return out
}

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
	if hasErrorRoutes(r) {
		return caddyhttp.Error(status, errors.New(message))
	}
	writeJSON(w, status, jsonError(message))
	return nil
}

// writeJSON writes a complete JSON answer.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// hasErrorRoutes reports whether the server handling r has handle_errors
// routes that would write an answer for a returned error.
func hasErrorRoutes(r *http.Request) bool {
	srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	return ok && srv != nil && srv.Errors != nil && len(srv.Errors.Routes) > 0
}
