package installations

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/servicegate/servicegate/respond"
)

// AdminError is a request of the admin API refused: the status and what
// went wrong or what to send instead, for the operator.
type AdminError struct {
	Status int
	Err    error
}

func (e *AdminError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *AdminError) Unwrap() error { return e.Err }

// refused is an *AdminError.
func refused(status int, err error) error { return &AdminError{Status: status, Err: err} }

// ServeInstallations answers the admin API's installations: GET lists
// every installation (organization id, domain, baseUrl, times; never a
// secret), DELETE ?organization=<domain or id> removes one. A refusal is
// an *AdminError.
func (s *Books) ServeInstallations(w http.ResponseWriter, r *http.Request) error {
	switch r.Method {
	case http.MethodGet:
		out, err := s.List()
		if err != nil {
			return refused(http.StatusServiceUnavailable, fmt.Errorf("listing the installations: %w", err))
		}
		body, _ := respond.MarshalJSON(out)
		respond.JSON(w, http.StatusOK, body)
		return nil
	case http.MethodDelete:
		org := r.URL.Query().Get("organization")
		if org == "" {
			return refused(http.StatusBadRequest, errors.New("name the installation to remove: ?organization=<domain or id>"))
		}
		removed, err := s.Remove(org)
		if err != nil {
			return refused(http.StatusServiceUnavailable, err)
		}
		if removed == 0 {
			return refused(http.StatusNotFound, fmt.Errorf("no installation of organization %q", org))
		}
		body, _ := respond.MarshalJSON(map[string]any{"organization": org, "removed": removed})
		respond.JSON(w, http.StatusOK, body)
		return nil
	default:
		w.Header().Set("Allow", "GET, DELETE")
		return refused(http.StatusMethodNotAllowed, errors.New("use GET, or DELETE ?organization=<domain or id>"))
	}
}

// ServeToken answers the admin API's token endpoint: POST
// {"organization": "<domain or id>"} → {"access_token", "expires_at"}, the
// organization's app token. A refusal is an *AdminError.
func (s *Books) ServeToken(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		return refused(http.StatusMethodNotAllowed, errors.New(`use POST {"organization": "<domain or id>"}`))
	}
	var body struct {
		Organization string `json:"organization"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil || body.Organization == "" {
		return refused(http.StatusBadRequest, errors.New(`send {"organization": "<domain or id>"}`))
	}
	tok, expires, err := s.Token(r.Context(), body.Organization)
	switch {
	case errors.Is(err, ErrNotFound):
		return refused(http.StatusNotFound, fmt.Errorf("no installation of organization %q", body.Organization))
	case err != nil:
		w.Header().Set("Retry-After", "30")
		return refused(http.StatusServiceUnavailable, errors.New("the service did not issue an app token for this organization; try again later"))
	}
	out, _ := respond.MarshalJSON(struct {
		AccessToken string    `json:"access_token"`
		ExpiresAt   time.Time `json:"expires_at"`
	}{tok, expires.UTC()})
	respond.JSON(w, http.StatusOK, out)
	return nil
}
