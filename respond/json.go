package respond

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// ContentTypeJSON is the Content-Type of the JSON answers written here.
const ContentTypeJSON = "application/json; charset=utf-8"

// ErrorBody is the shape of every refusal servicegate writes:
// {"error":{"message":"…"}}, the shape the service shows to its users.
type ErrorBody struct {
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
}

// ErrorJSON returns the JSON refusal body for a message, ending with a
// newline.
func ErrorJSON(message string) []byte {
	var b ErrorBody
	b.Error.Message = message
	out, _ := MarshalJSON(b) // a struct of strings always marshals
	return out
}

// MarshalJSON encodes v as JSON ending with a newline, as Caddy's own JSON
// answers and most APIs end. HTML-sensitive characters are escaped
// (\u003c, \u0026), as encoding/json does by default.
func MarshalJSON(v any) ([]byte, error) {
	out, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// Error writes status with the JSON refusal body for message. message is
// shown to people: it must never hold a secret, a token, a signature or a
// body.
func Error(w http.ResponseWriter, status int, message string) {
	JSON(w, status, ErrorJSON(message))
}

// Refuse answers with status and a JSON error holding message, and
// returns nil: the refusal the request pipelines use when their caller
// gives none of its own.
func Refuse(w http.ResponseWriter, _ *http.Request, status int, message string) error {
	Error(w, status, message)
	return nil
}

// JSON writes a complete JSON answer that no cache keeps, with the
// Content-Type ContentTypeJSON. body is encoded JSON; a final newline is
// added when it has none.
func JSON(w http.ResponseWriter, status int, body []byte) {
	JSONAs(w, status, ContentTypeJSON, body)
}

// JSONAs is JSON with another Content-Type of the JSON family, for an
// answer that must look like another server's (the service emulator's
// "application/json").
func JSONAs(w http.ResponseWriter, status int, contentType string, body []byte) {
	if len(body) == 0 || body[len(body)-1] != '\n' {
		body = append(body[:len(body):len(body)], '\n')
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
