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
	caddy.RegisterModule(ServiceEmulator{})
	httpcaddyfile.RegisterHandlerDirective("service_emulator", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(ServiceEmulator)
		return m, m.UnmarshalCaddyfile(h.Dispenser)
	})
}

// ServiceEmulator is the service_emulator handler. Not implemented yet.
type ServiceEmulator struct{}

// CaddyModule returns the Caddy module information.
func (ServiceEmulator) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_emulator",
		New: func() caddy.Module { return new(ServiceEmulator) },
	}
}

// Provision refuses to load: the handler is not implemented yet.
func (*ServiceEmulator) Provision(caddy.Context) error {
	return errors.New("service_emulator: not implemented yet")
}

// ServeHTTP passes the request on.
func (*ServiceEmulator) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return next.ServeHTTP(w, r)
}

// UnmarshalCaddyfile accepts the directive and skips its block.
func (*ServiceEmulator) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	for d.Next() {
		for d.NextBlock(0) {
		}
	}
	return nil
}

var (
	_ caddy.Provisioner           = (*ServiceEmulator)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceEmulator)(nil)
	_ caddyfile.Unmarshaler       = (*ServiceEmulator)(nil)
)
