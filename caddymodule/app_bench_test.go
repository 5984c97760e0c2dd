package caddymodule

import (
	"context"
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// BenchmarkServiceAppAPI compares the hot path of an API request (a
// remembered token, a cached paid subscription) through service_app with
// the same two handlers chained by hand, as a route of service_auth and
// service_subscription compiles to.
func BenchmarkServiceAppAPI(b *testing.B) {
	svc := newSubscriptionService(&testing.T{}, 200, `{"expires":"2099-01-01 00:00:00"}`)
	defer svc.Close()
	path := appDescriptorFile(b)
	app := &ServiceApp{
		Descriptor: path, ClientID: "client-id", ClientSecret: testClientSecret, AppSecrets: []string{"s"},
		Service: svc.URL, Subscription: &ServiceSubscription{},
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := app.Provision(ctx); err != nil {
		b.Fatal(err)
	}
	defer app.Cleanup()

	// The same settings, chained by hand.
	routes, err := app.Expand(app.desc)
	if err != nil {
		b.Fatal(err)
	}
	guard := routes[len(routes)-1]
	auth, sub := guard.Auth, guard.Subscription
	if err := auth.Provision(ctx); err != nil {
		b.Fatal(err)
	}
	if err := sub.Provision(ctx); err != nil {
		b.Fatal(err)
	}
	defer sub.Cleanup()

	b.Run("by-hand", func(b *testing.B) {
		// benchmarkAuth's next handler is nopHandler{}: the rest of the
		// chain after service_auth is made once, as Caddy does.
		rest := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return sub.ServeHTTP(w, r, nopHandler{})
		})
		benchmarkAuth(b, handChain{auth, rest})
	})
	b.Run("service_app", func(b *testing.B) {
		benchmarkAuth(b, app)
	})
}

// handChain is service_auth then the rest of a route made once, the way
// Caddy compiles a route of service_auth and service_subscription.
type handChain struct {
	auth *ServiceAuth
	rest caddyhttp.Handler
}

func (c handChain) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	return c.auth.ServeHTTP(w, r, c.rest)
}
