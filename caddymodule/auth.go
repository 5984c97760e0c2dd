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
	caddy.RegisterModule(ServiceAuth{})
	httpcaddyfile.RegisterHandlerDirective("service_auth", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(ServiceAuth)
		return m, m.UnmarshalCaddyfile(h.Dispenser)
	})
}

// ServiceAuth is the service_auth handler. Not implemented yet.
type ServiceAuth struct{}

// CaddyModule returns the Caddy module information.
func (ServiceAuth) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_auth",
		New: func() caddy.Module { return new(ServiceAuth) },
	}
}

// Provision refuses to load: the handler is not implemented yet.
func (*ServiceAuth) Provision(caddy.Context) error {
	return errors.New("service_auth: not implemented yet")
}

// ServeHTTP passes the request on.
func (*ServiceAuth) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return next.ServeHTTP(w, r)
}

// UnmarshalCaddyfile accepts the directive and skips its block.
func (*ServiceAuth) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	for d.Next() {
		for d.NextBlock(0) {
		}
	}
	return nil
}

var (
	_ caddy.Provisioner           = (*ServiceAuth)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceAuth)(nil)
	_ caddyfile.Unmarshaler       = (*ServiceAuth)(nil)
)
