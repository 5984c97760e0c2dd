package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/servicegate/servicegate/respond"
)

func init() {
	caddy.RegisterModule(SubscriptionAdmin{})
}

// SubscriptionAdmin is an admin API endpoint that forgets the cached
// subscription answers of an organization at once, e.g. right after it
// paid:
//
//	DELETE /service/subscription/cache?organization=<key>
//	POST   /service/subscription/cache   {"organization":"<key>"}
//
// The organization key is the one service_auth verified (the domain claim,
// else the organization id). Answers cached per token (no service_auth
// before service_subscription) are not reachable this way; they live at
// most negative_ttl. The answer is {"organization":…,"forgotten":<n>}.
type SubscriptionAdmin struct{}

// CaddyModule returns the Caddy module information.
func (SubscriptionAdmin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.service_subscription",
		New: func() caddy.Module { return new(SubscriptionAdmin) },
	}
}

// Routes returns the admin routes of the module.
func (SubscriptionAdmin) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{
		Pattern: "/service/subscription/cache",
		Handler: caddy.AdminHandlerFunc(forgetSubscriptions),
	}}
}

// forgetSubscriptions handles the admin endpoint.
func forgetSubscriptions(w http.ResponseWriter, r *http.Request) error {
	var org string
	switch r.Method {
	case http.MethodDelete:
		org = r.URL.Query().Get("organization")
	case http.MethodPost:
		var body struct {
			Organization string `json:"organization"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf(`reading {"organization":…}: %w`, err)}
		}
		org = body.Organization
	default:
		w.Header().Set("Allow", "DELETE, POST")
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errors.New("use DELETE ?organization=<key> or POST {\"organization\":…}")}
	}
	if org == "" {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: errors.New("the organization to forget is missing")}
	}
	forgotten := 0
	subscriptionCaches.Range(func(_, v any) bool {
		if c, ok := v.(subscriptionSharedCache); ok {
			forgotten += c.Forget(org)
		}
		return true
	})
	out, _ := respond.MarshalJSON(struct {
		Organization string `json:"organization"`
		Forgotten    int    `json:"forgotten"`
	}{org, forgotten})
	respond.JSON(w, http.StatusOK, out)
	return nil
}

// Interface guards.
var _ caddy.AdminRouter = SubscriptionAdmin{}
