package installations

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
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

// query reads the admin request's query: each parameter at most once.
func query(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, refused(http.StatusBadRequest, errors.New("the query string cannot be read"))
	}
	for name, values := range q {
		if len(values) > 1 {
			return nil, refused(http.StatusBadRequest, fmt.Errorf("?%s= is given %d times: give it once", name, len(values)))
		}
	}
	return q, nil
}

// books are the books the request's ?app=<client_id> names: every book
// when it names none and one is all that is asked (any), else that app's.
// An action on one installation must name the app when the config has
// several.
func (s *Books) books(app string, any bool) ([]*Book, error) {
	var all, chosen []*Book
	apps := map[string]bool{}
	s.each(func(b *Book) bool {
		all = append(all, b)
		apps[b.cfg.App] = true
		if b.cfg.App == app {
			chosen = append(chosen, b)
		}
		return true
	})
	switch {
	case app == "" && (any || len(apps) <= 1):
		return all, nil
	case app == "":
		names := make([]string, 0, len(apps))
		for a := range apps {
			names = append(names, a)
		}
		sort.Strings(names)
		return nil, refused(http.StatusBadRequest, fmt.Errorf("several apps keep installations here (%s): name one with ?app=<client_id>", strings.Join(names, ", ")))
	case len(chosen) == 0:
		return nil, refused(http.StatusNotFound, fmt.Errorf("no app with client_id %q keeps installations here", app))
	}
	return chosen, nil
}

// ServeInstallations answers the admin API's installations: GET lists
// every installation (app, organization id, domain, baseUrl, times, key
// state; never a secret), of one app with ?app=<client_id>; DELETE
// ?organization=<domain or id>[&app=<client_id>] removes one (the app is
// required when several keep installations). A refusal is an
// *AdminError.
func (s *Books) ServeInstallations(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	switch r.Method {
	case http.MethodGet:
		books, err := s.books(q.Get("app"), true)
		if err != nil {
			return err
		}
		out := []Summary{}
		for _, b := range books {
			list, err := b.List()
			if err != nil {
				return refused(http.StatusServiceUnavailable, fmt.Errorf("listing the installations: %w", err))
			}
			out = append(out, list...)
		}
		body, _ := respond.MarshalJSON(out)
		respond.JSON(w, http.StatusOK, body)
		return nil
	case http.MethodDelete:
		org := q.Get("organization")
		if org == "" {
			return refused(http.StatusBadRequest, errors.New("name the installation to remove: ?organization=<domain or id>"))
		}
		books, err := s.books(q.Get("app"), false)
		if err != nil {
			return err
		}
		removed := 0
		for _, b := range books {
			o, err := b.Find(org)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err == nil {
				err = b.Remove(o.ID)
			}
			if err != nil {
				return refused(http.StatusServiceUnavailable, err)
			}
			removed++
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
// {"organization": "<domain or id>"}[?app=<client_id>] → {"access_token",
// "expires_at"}, the organization's app token of that app (required when
// several keep installations). A refusal is an *AdminError.
func (s *Books) ServeToken(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		return refused(http.StatusMethodNotAllowed, errors.New(`use POST {"organization": "<domain or id>"}`))
	}
	q, err := query(r)
	if err != nil {
		return err
	}
	var body struct {
		Organization string `json:"organization"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil || body.Organization == "" {
		return refused(http.StatusBadRequest, errors.New(`send {"organization": "<domain or id>"}`))
	}
	books, err := s.books(q.Get("app"), false)
	if err != nil {
		return err
	}
	err = ErrNotFound
	var tok string
	var expires time.Time
	for _, b := range books {
		o, ferr := b.Find(body.Organization)
		if errors.Is(ferr, ErrNotFound) {
			continue
		}
		if ferr != nil {
			return refused(http.StatusBadRequest, ferr)
		}
		tok, expires, err = b.Token(r.Context(), o)
		break
	}
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
