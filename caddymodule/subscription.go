package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(ServiceSubscription{})
	httpcaddyfile.RegisterHandlerDirective("service_subscription", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(ServiceSubscription)
		return m, m.UnmarshalCaddyfile(h.Dispenser)
	})
}

// ServiceSubscription is the service_subscription handler. Not implemented yet.
type ServiceSubscription struct{}

// CaddyModule returns the Caddy module information.
func (ServiceSubscription) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_subscription",
		New: func() caddy.Module { return new(ServiceSubscription) },
	}
}

// Provision refuses to load: the handler is not implemented yet.
func (*ServiceSubscription) Provision(caddy.Context) error {
	return errors.New("service_subscription: not implemented yet")
}

// ServeHTTP passes the request on.
func (*ServiceSubscription) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return next.ServeHTTP(w, r)
}

// UnmarshalCaddyfile accepts the directive and skips its block.
func (*ServiceSubscription) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	for d.Next() {
		for d.NextBlock(0) {
		}
	}
	return nil
}

var (
	_ caddy.Provisioner           = (*ServiceSubscription)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceSubscription)(nil)
	_ caddyfile.Unmarshaler       = (*ServiceSubscription)(nil)
)
