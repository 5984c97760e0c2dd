package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/servicegate/servicegate/cluster"
	"github.com/servicegate/servicegate/respond"
)

func init() {
	caddy.RegisterModule(new(SubscriptionAdmin))
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
//
// With the servicegate app (several instances sharing Redis) the
// organization's shared answers are deleted too, and every instance is told
// to forget its own; the answer then also holds "shared":<n>, the number
// of shared answers deleted. When Redis cannot be reached, this instance
// has forgotten its answers and the endpoint answers 503 saying that the
// others have not.
type SubscriptionAdmin struct {
	shared *cluster.Subscriptions
}

// CaddyModule returns the Caddy module information.
func (*SubscriptionAdmin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.service_subscription",
		New: func() caddy.Module { return new(SubscriptionAdmin) },
	}
}

// Provision finds the servicegate app of the config being loaded.
func (a *SubscriptionAdmin) Provision(ctx caddy.Context) error {
	app, err := servicegateApp(ctx)
	if err != nil {
		return err
	}
	if app != nil {
		a.shared = app.Subscriptions()
	}
	return nil
}

// Routes returns the admin routes of the module.
func (a *SubscriptionAdmin) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{
		Pattern: "/service/subscription/cache",
		Handler: caddy.AdminHandlerFunc(a.forgetSubscriptions),
	}}
}

// forgetSubscriptions handles the admin endpoint.
func (a *SubscriptionAdmin) forgetSubscriptions(w http.ResponseWriter, r *http.Request) error {
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
	forgotten := forgetLocalSubscriptions(org)
	if a.shared == nil {
		out, _ := respond.MarshalJSON(struct {
			Organization string `json:"organization"`
			Forgotten    int    `json:"forgotten"`
		}{org, forgotten})
		respond.JSON(w, http.StatusOK, out)
		return nil
	}
	shared, err := a.shared.Forget(r.Context(), org)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: fmt.Errorf(
			"forgot %d answers of this instance, but the other instances could not be told: %w", forgotten, err)}
	}
	out, _ := respond.MarshalJSON(struct {
		Organization string `json:"organization"`
		Forgotten    int    `json:"forgotten"`
		Shared       int    `json:"shared"`
	}{org, forgotten, shared})
	respond.JSON(w, http.StatusOK, out)
	return nil
}

// forgetLocalSubscriptions drops the answers this process keeps for org,
// in every subscription cache, and returns how many there were.
func forgetLocalSubscriptions(org string) int {
	forgotten := 0
	subscriptionCaches.Range(func(_, v any) bool {
		if c, ok := v.(subscriptionSharedCache); ok {
			forgotten += c.Forget(org)
		}
		return true
	})
	return forgotten
}

// Interface guards.
var (
	_ caddy.AdminRouter = (*SubscriptionAdmin)(nil)
	_ caddy.Provisioner = (*SubscriptionAdmin)(nil)
)
