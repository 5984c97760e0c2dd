package caddymodule

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/caddyserver/caddy/v2"
)

// How service_app loads the handlers of its routes: as the Caddy modules
// they are, at load or (for a descriptor read later) by hand, each wired
// with what the app shares with it.

// moduleLoader loads a handler of service_app's routes: the Caddy module
// id, from its JSON config, provisioned and validated.
type moduleLoader func(id string, raw json.RawMessage) (any, error)

// loadHandlers loads the route's handlers, in the order they run, as the
// Caddy modules they are, and puts the loaded ones in the route.
func (rt *AppRoute) loadHandlers(load moduleLoader) error {
	err := loadHandler(load, &rt.Webhook)
	if err == nil {
		err = loadHandler(load, &rt.Limits)
	}
	if err == nil {
		err = loadHandler(load, &rt.SignIn)
	}
	if err == nil {
		err = loadHandler(load, &rt.Auth)
	}
	if err == nil {
		err = loadHandler(load, &rt.Subscription)
	}
	return err
}

// loadHandler loads *h, when set, and puts the loaded module in its place.
func loadHandler[M any, T interface {
	*M
	caddy.Module
}](load moduleLoader, h *T) error {
	if *h == nil {
		return nil
	}
	raw, err := json.Marshal(*h)
	if err != nil {
		return err
	}
	v, err := load(string((*h).CaddyModule().ID), raw)
	if err != nil {
		return err
	}
	*h = v.(T)
	return nil
}

// loadLate loads the handlers of routes made after Provision, from a
// descriptor read in the background. It provisions and validates them by
// hand, and Cleanup releases them, because Caddy cannot own them: the
// caddy.Context's list of modules must not change once Provision has
// returned (Caddy goes on loading the config with it, and walks it when
// the config unloads), and a context of their own (caddy.NewContext) has
// a metrics registry of its own, which no metrics endpoint serves.
func (a *ServiceApp) loadLate(ctx caddy.Context) moduleLoader {
	return func(id string, raw json.RawMessage) (any, error) {
		info, err := caddy.GetModule(id)
		if err != nil {
			return nil, err
		}
		m := info.New()
		if err := json.Unmarshal(raw, m); err != nil {
			return nil, err
		}
		if p, ok := m.(caddy.Provisioner); ok {
			err = p.Provision(a.wiring(ctx))
		}
		if v, ok := m.(caddy.Validator); ok && err == nil {
			err = v.Validate()
		}
		c, _ := m.(caddy.CleanerUpper)
		switch {
		case err != nil && c != nil:
			return nil, errors.Join(err, c.Cleanup())
		case err != nil:
			return nil, err
		case c != nil:
			a.cleanups = append(a.cleanups, c)
		}
		return m, nil
	}
}

// appWiringKey holds, in the context service_app loads its handlers with,
// the app that loads them.
type appWiringKey struct{}

// wiring is ctx for the handlers of the app's routes: it names the app, so
// that each handler gets what the app shares with it (see wire).
func (a *ServiceApp) wiring(ctx caddy.Context) caddy.Context {
	ctx.Context = context.WithValue(ctx.Context, appWiringKey{}, a)
	return ctx
}

// wireForServiceApp gives m, a handler that service_app loads for one of
// its routes, what the app shares with its handlers: the site's origin and
// the installations. The handlers call it first in Provision; for a
// handler of a site's own route it does nothing.
func wireForServiceApp(ctx caddy.Context, m caddy.Module) {
	if a, ok := ctx.Value(appWiringKey{}).(*ServiceApp); ok {
		a.wire(m)
	}
}

// wire gives m what the app shares with the handlers of its routes.
func (a *ServiceApp) wire(m caddy.Module) {
	switch m := m.(type) {
	case *ServiceWebhook:
		m.origin = a.origin
		if a.inst != nil {
			m.installations = a.inst.book
			if a.inst.header != "" {
				m.appToken = installationBooks.QueuedToken(a.inst.where, a.inst.header)
			}
		}
	case *ServiceLimits:
		m.origin = a.origin
	case *ServiceOAuth:
		m.origin = a.origin
	}
}
