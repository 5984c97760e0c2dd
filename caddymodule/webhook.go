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
	caddy.RegisterModule(ServiceWebhook{})
	httpcaddyfile.RegisterHandlerDirective("service_webhook", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(ServiceWebhook)
		return m, m.UnmarshalCaddyfile(h.Dispenser)
	})
}

// ServiceWebhook is the service_webhook handler. Not implemented yet.
type ServiceWebhook struct{}

// CaddyModule returns the Caddy module information.
func (ServiceWebhook) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_webhook",
		New: func() caddy.Module { return new(ServiceWebhook) },
	}
}

// Provision refuses to load: the handler is not implemented yet.
func (*ServiceWebhook) Provision(caddy.Context) error {
	return errors.New("service_webhook: not implemented yet")
}

// ServeHTTP passes the request on.
func (*ServiceWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return next.ServeHTTP(w, r)
}

// UnmarshalCaddyfile accepts the directive and skips its block.
func (*ServiceWebhook) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	for d.Next() {
		for d.NextBlock(0) {
		}
	}
	return nil
}

var (
	_ caddy.Provisioner           = (*ServiceWebhook)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceWebhook)(nil)
	_ caddyfile.Unmarshaler       = (*ServiceWebhook)(nil)
)
