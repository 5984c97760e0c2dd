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
	for _, addr := range [][2]string{{"service", a.Service}, {"auth_url", a.AuthURL}} {
		if err := checkServiceAddress(addr[0], addr[1]); err != nil {
			return nil, err
		}
	}
	var routes []AppRoute
	var defects []string
	for _, hook := range desc.Webhooks {
		wh, err := cloneSettings(a.Webhooks, hook.Key, new(ServiceWebhook))
		if err != nil {
			return nil, err
		}
		if len(wh.Secrets) == 0 && wh.SecretsFile == "" {
			wh.Secrets, wh.SecretsFile = slices.Clone(a.AppSecrets), a.SecretsFile
		}
		if len(wh.Secrets) == 0 && wh.SecretsFile == "" && a.Installations == nil {
			defects = append(defects, fmt.Sprintf("webhook module %q needs app_secret, secrets_file or installations", hook.Key))
		}
		wh.ModuleKeys = []string{hook.Key}
		wh.Events = slices.Clone(hook.Events)
		routes = append(routes, AppRoute{Path: hook.Path(), Module: descriptor.KindWebhook, Key: hook.Key, Webhook: wh})
	}
	if a.Installations == nil && desc.Events.Any() {
		defects = append(defects, eventsWithoutInstallations(desc))
	}
	var spill *ServiceLimits
	fileRoute := func(kind string, m descriptor.Module) error {
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
		if spill == nil && l.Spill != nil {
			spill = l
		}
		routes = append(routes, AppRoute{Path: m.Path(), Module: kind, Key: m.Key, Limits: l})
		return nil
	}
	for _, f := range desc.FileFormats {
		if err := fileRoute(descriptor.KindCustomFileFormat, f.Module); err != nil {
			return nil, err
		}
	}
	for _, p := range desc.PreExports {
		if err := fileRoute(descriptor.KindFilePreExport, p.Module); err != nil {
			return nil, err
		}
	}
	if spill != nil {
		// The service downloads spilled payloads without a token; the
		// links are signed, expiring and good for one download.
		routes = append(routes, AppRoute{Path: cmp.Or(spill.Spill.Path, defaultSpillPath) + "*", Serve: appServeSpill})
	}
	if dp := a.DescriptorPath; dp != "off" {
		if dp == "" {
			dp = appDefaultDescriptorPath
		}
		routes = append(routes, AppRoute{Path: dp, Serve: appServeDescriptor})
	}
	for _, p := range a.Public {
		routes = append(routes, AppRoute{Path: p, Serve: appServePublic})
	}

	guard := AppRoute{Path: "*"}
	auth, err := cloneSettings(map[string]*ServiceAuth{"": a.Auth}, "", new(ServiceAuth))
	if err != nil {
		return nil, err
	}
	if auth.HS256Secret == "" && auth.PublicKey == "" && auth.JWKSURL == "" {
		auth.HS256Secret = a.ClientSecret
	}
	if auth.HS256Secret == "" && auth.PublicKey == "" && auth.JWKSURL == "" {
		defects = append(defects, "client_secret is required to verify the service's tokens (or auth { public_key | jwks_url })")
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

	authURL := a.AuthURL
	if authURL == "" {
		authURL = a.Service
	}
	if a.SignIn != nil {
		s, err := cloneSettings(map[string]*ServiceOAuth{"": a.SignIn}, "", new(ServiceOAuth))
		if err != nil {
			return nil, err
		}
		s.ClientID = cmp.Or(s.ClientID, a.ClientID)
		s.ClientSecret = cmp.Or(s.ClientSecret, a.ClientSecret)
		s.AuthURL = cmp.Or(s.AuthURL, authURL)
		if len(s.Scopes) == 0 {
			s.Scopes = []string{appDefaultScope}
		}
		if s.AuthURL == "" {
			defects = append(defects, "sign_in needs the service's address (service or auth_url)")
		}
		guard.SignIn = s
	}
	if a.Subscription != nil {
		sub, err := cloneSettings(map[string]*ServiceSubscription{"": a.Subscription}, "", new(ServiceSubscription))
		if err != nil {
			return nil, err
		}
		sub.AppIdentifier = cmp.Or(sub.AppIdentifier, a.AppIdentifier, desc.Identifier)
		sub.BaseURL = cmp.Or(sub.BaseURL, a.Service)
		if sub.AppIdentifier == "" {
			defects = append(defects, "subscription needs app_identifier: the descriptor has no identifier")
		}
		if sub.BaseURL == "" {
			defects = append(defects, "subscription needs the service's address (service)")
		}
		guard.Subscription = sub
	}
	routes = append(routes, guard)
	if len(defects) > 0 {
		return nil, fmt.Errorf("service_app: %s", strings.Join(defects, "; "))
	}
	return routes, nil
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
			out = append(out, r.Path+" "+r.Module+" "+r.Key+" "+r.Serve)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}
