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
	caddy.RegisterModule(ServiceLimits{})
	httpcaddyfile.RegisterHandlerDirective("service_limits", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(ServiceLimits)
		return m, m.UnmarshalCaddyfile(h.Dispenser)
	})
}

// ServiceLimits is the service_limits handler. Not implemented yet.
type ServiceLimits struct{}

// CaddyModule returns the Caddy module information.
func (ServiceLimits) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_limits",
		New: func() caddy.Module { return new(ServiceLimits) },
	}
}

// Provision refuses to load: the handler is not implemented yet.
func (*ServiceLimits) Provision(caddy.Context) error {
	return errors.New("service_limits: not implemented yet")
}

// ServeHTTP passes the request on.
func (*ServiceLimits) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return next.ServeHTTP(w, r)
}

// UnmarshalCaddyfile accepts the directive and skips its block.
func (*ServiceLimits) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	for d.Next() {
		for d.NextBlock(0) {
		}
	}
	return nil
}

var (
	_ caddy.Provisioner           = (*ServiceLimits)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceLimits)(nil)
	_ caddyfile.Unmarshaler       = (*ServiceLimits)(nil)
)
