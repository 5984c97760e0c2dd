package caddymodule

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/descriptor"
)

// How service_app leaves its stores on disk to the config's start: a
// config is provisioned by `caddy validate` as by `caddy run`, but only
// started by the latter, and the files (installations, a webhook queue)
// are locked by the Caddy that runs; a validation beside it must not wait
// on that lock.

// opensStores tells whether the app keeps its installations on disk,
// which open when the config starts (a webhook queue on disk opens so by
// itself). A context without a config is never started: it opens them in
// Provision.
func (a *ServiceApp) opensStores(ctx caddy.Context, redis bool) bool {
	ic := a.Installations
	return ic != nil && (ic.Store == "disk" || (ic.Store == "" && !redis)) && hasConfig(ctx)
}

// provisionAtStart checks what can be checked of desc's routes and the
// installations block without opening a store (the expansion, the
// settings of each route's handlers, the installations' key, service and
// client secret), and makes the routes
// when the config starts, or at the first request before that: their
// handlers are then loaded as those of a descriptor read late are.
func (a *ServiceApp) provisionAtStart(ctx caddy.Context, desc *descriptor.Descriptor) error {
	routes, err := a.routesOf(desc)
	if err != nil {
		return err
	}
	lifecycle, err := a.withLifecycleOf(desc, routes)
	if err != nil {
		return err
	}
	for i := range routes {
		if err := routes[i].checkSettings(); err != nil {
			return fmt.Errorf("service_app: route %s: %w", routes[i].Path, err)
		}
	}
	if a.Installations != nil {
		if _, _, err := a.installationsConfig(ctx, lifecycle); err != nil {
			return err
		}
	}
	stores, err := storesStart(ctx)
	if err != nil {
		return err
	}
	_, err = stores.opening(func() error {
		err := a.provisionRoutes(ctx, desc, a.loadLate(ctx))
		if err != nil {
			a.logger.Error("the routes of the app could not be made as the config started", zap.Error(err))
		}
		return err
	})
	a.start = stores.Start
	return err
}

// started makes sure the routes are made before a request is served: a
// request can come before Caddy starts the config's StoresStart (apps
// start in no set order). It answers 503 when they cannot be made.
func (a *ServiceApp) started(w http.ResponseWriter, r *http.Request) (bool, error) {
	if a.start == nil {
		return true, nil
	}
	if err := a.start(); err != nil {
		w.Header().Set("Retry-After", "30")
		return false, refuse(w, r, http.StatusServiceUnavailable, "The gateway could not open what it keeps for this app; its operator must look at Caddy's log.")
	}
	return true, nil
}

// checkSettings checks the settings of the route's handlers as their
// Caddyfile blocks are checked, without provisioning them.
func (rt *AppRoute) checkSettings() error {
	var errs []error
	if rt.Webhook != nil {
		errs = append(errs, rt.Webhook.checkSettings())
	}
	if rt.Limits != nil {
		errs = append(errs, rt.Limits.checkSettings())
	}
	if rt.SignIn != nil {
		errs = append(errs, rt.SignIn.checkSettings())
	}
	if rt.Auth != nil {
		errs = append(errs, rt.Auth.checkSettings())
	}
	if rt.Subscription != nil {
		errs = append(errs, rt.Subscription.checkSettings())
	}
	return errors.Join(errs...)
}
