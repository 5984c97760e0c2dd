package caddymodule

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/servicegate/servicegate/descriptor"
)

// Expand turns the descriptor and the settings into routes: one per
// declared module, the spill path, the descriptor, the public paths and
// "*" for the rest.
func (a *ServiceApp) Expand(desc *descriptor.Descriptor) ([]AppRoute, error) {
	var x appExpansion
	for _, hook := range desc.Webhooks {
		if err := a.expandWebhook(&x, hook); err != nil {
			return nil, err
		}
	}
	if a.Installations == nil && desc.Events.Any() {
		x.defects = append(x.defects, eventsWithoutInstallations(desc))
	}
	if a.Installations != nil {
		x.routes = append(x.routes, lifecycleRoutes(desc)...)
	}
	for _, f := range desc.FileFormats {
		if err := a.expandFileModule(&x, descriptor.KindCustomFileFormat, f.Module); err != nil {
			return nil, err
		}
	}
	for _, p := range desc.PreExports {
		if err := a.expandFileModule(&x, descriptor.KindFilePreExport, p.Module); err != nil {
			return nil, err
		}
	}
	a.expandServed(&x)
	if err := a.expandGuard(&x, desc); err != nil {
		return nil, err
	}
	if len(x.defects) > 0 {
		return nil, fmt.Errorf("service_app: %s", strings.Join(x.defects, "; "))
	}
	return x.routes, nil
}

// appExpansion is an expansion under way: the routes made so far, the
// defects found, and the first file module's limits, whose spill path is
// the spill route's.
type appExpansion struct {
	routes  []AppRoute
	defects []string
	spill   *ServiceLimits
}

// expandWebhook makes the route of a webhook module.
func (a *ServiceApp) expandWebhook(x *appExpansion, hook descriptor.Webhook) error {
	wh, err := cloneSettings(a.Webhooks, hook.Key, new(ServiceWebhook))
	if err != nil {
		return err
	}
	if len(wh.Secrets) == 0 && wh.SecretsFile == "" {
		wh.Secrets, wh.SecretsFile = slices.Clone(a.AppSecrets), a.SecretsFile
	}
	if len(wh.Secrets) == 0 && wh.SecretsFile == "" && a.Installations == nil {
		x.defects = append(x.defects, fmt.Sprintf("webhook module %q needs app_secret, secrets_file or installations", hook.Key))
	}
	wh.ModuleKeys = []string{hook.Key}
	wh.Events = slices.Clone(hook.Events)
	x.routes = append(x.routes, AppRoute{Path: hook.Path(), Module: descriptor.KindWebhook, Key: hook.Key, Webhook: wh})
	return nil
}

// expandFileModule makes the route of a file module of kind.
func (a *ServiceApp) expandFileModule(x *appExpansion, kind string, m descriptor.Module) error {
	l, err := cloneSettings(a.Limits, m.Key, new(ServiceLimits))
	if err != nil {
		return err
	}
	l.Contract = kind
	if l.Spill == nil {
		l.Spill = new(SpillOptions)
	}
	if l.Spill.BaseURL == "" {
		l.Spill.BaseURL = a.BaseURL
	}
	if x.spill == nil && l.Spill != nil {
		x.spill = l
	}
	x.routes = append(x.routes, AppRoute{Path: m.Path(), Module: kind, Key: m.Key, Limits: l})
	return nil
}

// expandServed makes the routes answered without a guard: the spill
// downloads, the descriptor and the public paths.
func (a *ServiceApp) expandServed(x *appExpansion) {
	if x.spill != nil {
		// The service downloads spilled payloads without a token; the
		// links are signed, expiring and good for one download.
		x.routes = append(x.routes, AppRoute{Path: cmp.Or(x.spill.Spill.Path, defaultSpillPath) + "*", Serve: appServeSpill})
	}
	if dp := a.DescriptorPath; dp != "off" {
		x.routes = append(x.routes, AppRoute{Path: cmp.Or(dp, appDefaultDescriptorPath), Serve: appServeDescriptor})
	}
	for _, p := range a.Public {
		x.routes = append(x.routes, AppRoute{Path: p, Serve: appServePublic})
	}
}

// expandGuard makes the "*" route: the token check, with the sign-in and
// the subscription check when they are set.
func (a *ServiceApp) expandGuard(x *appExpansion, desc *descriptor.Descriptor) error {
	guard := AppRoute{Path: "*"}
	auth, err := cloneSettings(map[string]*ServiceAuth{"": a.Auth}, "", new(ServiceAuth))
	if err != nil {
		return err
	}
	if auth.HS256Secret == "" && auth.PublicKey == "" && auth.JWKSURL == "" {
		auth.HS256Secret = a.ClientSecret
	}
	if auth.HS256Secret == "" && auth.PublicKey == "" && auth.JWKSURL == "" {
		x.defects = append(x.defects, "client_secret is required to verify the service's tokens (or auth { public_key | jwks_url })")
	}
	if len(auth.Audience) == 0 && a.ClientID != "" {
		auth.Audience = []string{a.ClientID}
	}
	if auth.FromQuery == "" {
		auth.FromQuery, auth.StripQuery = appDefaultFromQuery, true
	}
	if auth.ClaimHeaders == nil {
		auth.ClaimHeaders = maps.Clone(appDefaultClaimHeaders)
	}
	guard.Auth = auth
	if guard.SignIn, err = a.expandSignIn(x); err != nil {
		return err
	}
	if guard.Subscription, err = a.expandSubscription(x, desc); err != nil {
		return err
	}
	x.routes = append(x.routes, guard)
	return nil
}

// expandSignIn is the guard's sign-in, nil without sign_in.
func (a *ServiceApp) expandSignIn(x *appExpansion) (*ServiceOAuth, error) {
	if a.SignIn == nil {
		return nil, nil
	}
	s, err := cloneSettings(map[string]*ServiceOAuth{"": a.SignIn}, "", new(ServiceOAuth))
	if err != nil {
		return nil, err
	}
	s.ClientID = cmp.Or(s.ClientID, a.ClientID)
	s.ClientSecret = cmp.Or(s.ClientSecret, a.ClientSecret)
	s.AuthURL = cmp.Or(s.AuthURL, a.AuthURL, a.Service)
	if len(s.Scopes) == 0 {
		s.Scopes = []string{appDefaultScope}
	}
	if s.AuthURL == "" {
		x.defects = append(x.defects, "sign_in needs the service's address (service or auth_url)")
	}
	return s, nil
}

// expandSubscription is the guard's subscription check, nil without
// subscription.
func (a *ServiceApp) expandSubscription(x *appExpansion, desc *descriptor.Descriptor) (*ServiceSubscription, error) {
	if a.Subscription == nil {
		return nil, nil
	}
	sub, err := cloneSettings(map[string]*ServiceSubscription{"": a.Subscription}, "", new(ServiceSubscription))
	if err != nil {
		return nil, err
	}
	sub.AppIdentifier = cmp.Or(sub.AppIdentifier, a.AppIdentifier, desc.Identifier)
	sub.BaseURL = cmp.Or(sub.BaseURL, a.Service)
	if sub.AppIdentifier == "" {
		x.defects = append(x.defects, "subscription needs app_identifier: the descriptor has no identifier")
	}
	if sub.BaseURL == "" {
		x.defects = append(x.defects, "subscription needs the service's address (service)")
	}
	return sub, nil
}

// cloneSettings is a deep copy of the settings for key (else for "*",
// else a zero value), so that each route's handler owns its own.
func cloneSettings[T any](settings map[string]*T, key string, zero *T) (*T, error) {
	src, ok := settings[key]
	if !ok || src == nil {
		src = settings[appAllModules]
	}
	if src == nil {
		return zero, nil
	}
	data, err := json.Marshal(src)
	if err != nil {
		return nil, fmt.Errorf("service_app: settings of %q: %w", key, err)
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("service_app: settings of %q: %w", key, err)
	}
	return out, nil
}

// sameRoutes tells whether two expansions route the same paths to the same
// modules.
func sameRoutes(a, b []AppRoute) bool {
	key := func(rs []AppRoute) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Path+" "+r.Module+" "+r.Key+" "+r.Serve+" "+r.Event)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}

// lifecycleRoutes are the routes of desc's lifecycle calls, in the order
// of the service's interface.
func lifecycleRoutes(desc *descriptor.Descriptor) []AppRoute {
	var routes []AppRoute
	for _, ev := range [...]struct{ name, path string }{
		{descriptor.EventInstalled, desc.Events.Installed},
		{descriptor.EventUninstall, desc.Events.Uninstall},
		{descriptor.EventSubscriptionPaid, desc.Events.SubscriptionPaid},
	} {
		if ev.path != "" {
			routes = append(routes, AppRoute{Path: ev.path, Serve: appServeLifecycle, Event: ev.name})
		}
	}
	return routes
}

// withEarlierLifecycle is the routes of the config, with desc's lifecycle
// routes added when the config has installations and no lifecycle route:
// a config adapted by an earlier version of servicegate, which routed the
// lifecycle calls when the config loaded, so they stay answered.
func (a *ServiceApp) withEarlierLifecycle(routes []AppRoute, desc *descriptor.Descriptor) []AppRoute {
	if a.Installations == nil || slices.ContainsFunc(routes, func(rt AppRoute) bool { return rt.Serve == appServeLifecycle }) {
		return routes
	}
	return append(slices.Clip(routes), lifecycleRoutes(desc)...)
}

// withLifecycleOf is desc with the lifecycle paths of routes, the routes
// in use: the installations answer the paths the site routes to them,
// also when the descriptor changed since the config was adapted. A
// lifecycle route of no known call, or of one routed twice, is refused:
// the installations would pass its requests on unanswered. Without
// installations it is desc, whose events are then a defect.
func (a *ServiceApp) withLifecycleOf(desc *descriptor.Descriptor, routes []AppRoute) (*descriptor.Descriptor, error) {
	if a.Installations == nil {
		return desc, nil
	}
	d := *desc
	d.Events = descriptor.Events{}
	paths := map[string]*string{descriptor.EventInstalled: &d.Events.Installed, descriptor.EventUninstall: &d.Events.Uninstall,
		descriptor.EventSubscriptionPaid: &d.Events.SubscriptionPaid}
	for _, rt := range routes {
		if rt.Serve != appServeLifecycle {
			continue
		}
		p, ok := paths[rt.Event]
		switch {
		case !ok:
			return nil, fmt.Errorf("service_app: route %s: event %q is not a lifecycle call of the service (installed, uninstall, subscription_paid)", rt.Path, rt.Event)
		case *p != "":
			return nil, fmt.Errorf("service_app: the lifecycle call %s has two routes, %s and %s", rt.Event, *p, rt.Path)
		}
		*p = rt.Path
	}
	return &d, nil
}
