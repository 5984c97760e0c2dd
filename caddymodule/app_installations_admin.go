package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegate/servicegate/installations"
	"github.com/servicegate/servicegate/respond"
)

func init() {
	caddy.RegisterModule(InstallationsAdmin{})
}

// InstallationsAdmin is the admin API of service_app's installations. No
// answer holds an app secret; only the token endpoint gives a token.
//
//	POST   /service/installations/token  {"organization": "<domain or id>"} → {"access_token", "expires_at"}
//	GET    /service/installations        every installation: organization id, domain, baseUrl, times
//	DELETE /service/installations?organization=<domain or id>
type InstallationsAdmin struct{}

// CaddyModule returns the Caddy module information.
func (InstallationsAdmin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.service_installations",
		New: func() caddy.Module { return new(InstallationsAdmin) },
	}
}

// Routes returns the admin routes of the module.
func (InstallationsAdmin) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/service/installations", Handler: caddy.AdminHandlerFunc(installationsList)},
		{Pattern: "/service/installations/token", Handler: caddy.AdminHandlerFunc(installationsToken)},
	}
}

// installationBooks holds the books of the loaded configs, by store: the
// latest config's book of each.
var installationBooks installations.Books

// installationsHeld is the number of installations held by the loaded
// configs.
var installationsHeld = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
	Namespace: "servicegate", Subsystem: "installations", Name: "held",
	Help: "Installations of the app held by service_app (organizations that installed it).",
}, func() float64 { return float64(installationBooks.Len()) })

func installationsList(w http.ResponseWriter, r *http.Request) error {
	switch r.Method {
	case http.MethodGet:
		out, err := installationBooks.List()
		if err != nil {
			return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: fmt.Errorf("listing the installations: %w", err)}
		}
		body, _ := respond.MarshalJSON(out)
		respond.JSON(w, http.StatusOK, body)
		return nil
	case http.MethodDelete:
		org := r.URL.Query().Get("organization")
		if org == "" {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: errors.New("name the installation to remove: ?organization=<domain or id>")}
		}
		removed, err := installationBooks.Remove(org)
		if err != nil {
			return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: err}
		}
		if removed == 0 {
			return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no installation of organization %q", org)}
		}
		body, _ := respond.MarshalJSON(map[string]any{"organization": org, "removed": removed})
		respond.JSON(w, http.StatusOK, body)
		return nil
	default:
		w.Header().Set("Allow", "GET, DELETE")
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errors.New("use GET, or DELETE ?organization=<domain or id>")}
	}
}

func installationsToken(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errors.New(`use POST {"organization": "<domain or id>"}`)}
	}
	var body struct {
		Organization string `json:"organization"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil || body.Organization == "" {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: errors.New(`send {"organization": "<domain or id>"}`)}
	}
	tok, expires, err := installationBooks.Token(r.Context(), body.Organization)
	switch {
	case errors.Is(err, installations.ErrNotFound):
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no installation of organization %q", body.Organization)}
	case err != nil:
		w.Header().Set("Retry-After", "30")
		return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: errors.New("the service did not issue an app token for this organization; try again later")}
	}
	out, _ := respond.MarshalJSON(struct {
		AccessToken string    `json:"access_token"`
		ExpiresAt   time.Time `json:"expires_at"`
	}{tok, expires.UTC()})
	respond.JSON(w, http.StatusOK, out)
	return nil
}

// Interface guard.
var _ caddy.AdminRouter = (*InstallationsAdmin)(nil)
