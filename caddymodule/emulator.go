package caddymodule

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/emulator"
)

// ServiceEmulator serves a small, honest emulator of the service on the
// paths the service uses: GET/POST /oauth/authorize, POST /oauth/token and
// GET /api/v2/applications/{id}/subscription. Every other request goes on
// to the next handler, so one site can hold the emulator and an app.
//
// It is a development tool for demos, tests and app development on one
// machine: its codes and tokens live in memory and it approves whatever
// it is asked to. Never use it in production.
type ServiceEmulator struct {
	// ClientID is the OAuth client_id of the one app the emulator knows,
	// and the aud claim of the tokens it issues. Required.
	ClientID string `json:"client_id,omitempty"`

	// ClientSecret is the app's OAuth client_secret. It also signs the
	// access tokens (HS256), so service_auth verifies them with
	// hs256_secret set to the same value. {env.*} and {file.*}
	// placeholders are resolved at load. Required.
	ClientSecret string `json:"client_secret,omitempty"`

	// RedirectURIs are the app's registered redirect URLs; an
	// authorization request must name one of them exactly. At least one
	// is required.
	RedirectURIs []string `json:"redirect_uris,omitempty"`

	// AppIdentifier is the app identifier the subscription query knows;
	// other identifiers are answered 400 "Application not found".
	// Default "demo-app".
	AppIdentifier string `json:"app_identifier,omitempty"`

	// Issuer is the iss claim of issued tokens. Default "service-emulator".
	Issuer string `json:"issuer,omitempty"`

	// TokenLifetime is the lifetime of access tokens (expires_in).
	// Default 2h.
	TokenLifetime caddy.Duration `json:"token_lifetime,omitempty"`

	// CodeLifetime is how long an authorization code can be exchanged.
	// Default 60s.
	CodeLifetime caddy.Duration `json:"code_lifetime,omitempty"`

	// Organizations are the organizations a user may act for on the
	// consent page, the first being the default, with the state of each
	// one's subscription.
	Organizations []EmulatedOrganization `json:"organizations,omitempty"`

	// Console configures the emulator's console (GET /emulator/console
	// and the JSON API under /emulator/api/). It is on unless Off is set.
	Console *EmulatorConsole `json:"console,omitempty"`

	server *emulator.Server
	key    string

	// site holds the host names of the emulator's site, found at the
	// first request for the console: it answers them and loopback.
	site *emulatorHosts
}

type emulatorHosts struct {
	once  sync.Once
	hosts []string
	// done is closed when this config's emulator is cleaned up: the
	// console's event streams end, and pages reconnect to the next.
	done chan struct{}
}

// EmulatorConsole configures the emulator's console: a page and a JSON
// API that show every call the emulator takes part in (what it sends the
// app through the gateway, what it answers the gateway) with the
// gateway's verdict, and that drive installations, subscriptions,
// deliveries, file jobs and faults.
type EmulatorConsole struct {
	// Off turns the console off.
	Off bool `json:"off,omitempty"`

	// Keep is how many calls the console keeps, the oldest dropped
	// first. Default 1000.
	Keep int `json:"keep,omitempty"`

	// App is the app's base address as the service reaches it: the
	// gateway in front of it, where the console sends lifecycle calls,
	// deliveries and file jobs, and reads the app's descriptor
	// (/manifest.json). Default: the origin of the first redirect URI.
	App string `json:"app,omitempty"`
}

// emulators keeps each emulator across config reloads while its own
// configuration stays the same, so that a reload for another reason does
// not drop the codes and refresh tokens it has issued.
var emulators = caddy.NewUsagePool()

// pooledEmulator is an emulator in the pool.
type pooledEmulator struct{ *emulator.Server }

// Destruct lets the pool drop the emulator; it holds nothing to release.
func (pooledEmulator) Destruct() error { return nil }

// EmulatedOrganization is one organization of the emulated service. Its
// subscription is active until ActiveUntil when that is set, unpaid with
// SubscribeLink when that is set, and missing (404) when neither is.
type EmulatedOrganization struct {
	// Domain is the organization's domain, the domain claim of its tokens.
	Domain string `json:"domain"`

	// ID is the organization's integer id, context.organization_id of its
	// tokens.
	ID int64 `json:"id"`

	// ActiveUntil is the end of an active subscription, as
	// "YYYY-MM-DD HH:MM:SS" (UTC), "YYYY-MM-DD" or RFC 3339. The query
	// answers 200 {"expires": …} with it.
	ActiveUntil string `json:"active_until,omitempty"`

	// SubscribeLink is the checkout page of an unpaid subscription. The
	// query answers 402 {"subscribe_link": …} with it.
	SubscribeLink string `json:"subscribe_link,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (ServiceEmulator) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_emulator",
		New: func() caddy.Module { return new(ServiceEmulator) },
	}
}

// Provision resolves placeholders and builds the emulator.
func (m *ServiceEmulator) Provision(ctx caddy.Context) error {
	repl := caddy.NewReplacer()
	// ReplaceKnown, not ReplaceOrErr: an error naming an unknown
	// placeholder would quote part of a literal secret.
	secret, err := resolveSecret("service_emulator: client_secret", m.ClientSecret)
	if err != nil {
		return err
	}
	cfg := emulator.Config{
		ClientID:      repl.ReplaceKnown(m.ClientID, ""),
		ClientSecret:  secret,
		RedirectURIs:  m.RedirectURIs,
		AppIdentifier: m.AppIdentifier,
		Issuer:        m.Issuer,
		TokenLifetime: time.Duration(m.TokenLifetime),
		CodeLifetime:  time.Duration(m.CodeLifetime),
	}
	for _, u := range m.RedirectURIs {
		if err := checkAddress("redirect_uri", u, anyURL); err != nil {
			return fmt.Errorf("service_emulator: %w", err)
		}
	}
	if c := m.Console; c != nil {
		if err := checkAddress("console app", c.App, anyURL); err != nil {
			return fmt.Errorf("service_emulator: %w", err)
		}
		cfg.Console = emulator.ConsoleConfig{Off: c.Off, Keep: c.Keep, App: repl.ReplaceKnown(c.App, "")}
	}
	cfg.Console.Gateway = emulatorVerdicts
	cfg.Console.ForgetSubscription = forgetEmulatedSubscription
	cfg.Console.Conformance = emulatorConformance
	for _, org := range m.Organizations {
		if err := checkAddress("organization "+org.Domain+": unpaid", org.SubscribeLink, anyURL); err != nil {
			return fmt.Errorf("service_emulator: %w", err)
		}
		o := emulator.Organization{Domain: org.Domain, ID: org.ID, SubscribeLink: org.SubscribeLink}
		if org.ActiveUntil != "" {
			if o.ActiveUntil, err = emulator.ParseActiveUntil(org.ActiveUntil); err != nil {
				return fmt.Errorf("service_emulator: organization %s: %w", org.Domain, err)
			}
		}
		cfg.Organizations = append(cfg.Organizations, o)
	}
	// The key is a digest of the resolved configuration, so a changed
	// secret makes a new emulator too.
	keyJSON, err := json.Marshal(struct {
		Module           *ServiceEmulator
		ClientID, Secret string
	}{m, cfg.ClientID, cfg.ClientSecret})
	if err != nil {
		return fmt.Errorf("service_emulator: %w", err)
	}
	sum := sha256.Sum256(keyJSON)
	key := hex.EncodeToString(sum[:])
	pooled, _, err := emulators.LoadOrNew(key, func() (caddy.Destructor, error) {
		srv, err := emulator.New(cfg)
		return pooledEmulator{srv}, err
	})
	if err != nil {
		return fmt.Errorf("service_emulator: %w", err)
	}
	m.server, m.key, m.site = pooled.(pooledEmulator).Server, key, &emulatorHosts{done: make(chan struct{})}
	ctx.Logger().Warn("service_emulator is a development stand-in for the service: never use it in production",
		zap.String("client_id", cfg.ClientID),
		zap.Strings("redirect_uris", cfg.RedirectURIs),
		zap.Int("organizations", len(cfg.Organizations)))
	return nil
}

// Cleanup releases this config's use of the pooled emulator.
func (m *ServiceEmulator) Cleanup() error {
	if m.site != nil {
		close(m.site.done)
	}
	if m.key != "" {
		_, _ = emulators.Delete(m.key)
	}
	return nil
}

// ServeHTTP answers the emulator's paths and passes every other request
// on; a GET of / that nothing after it answers gets a page pointing to
// the console.
func (m *ServiceEmulator) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if strings.HasPrefix(r.URL.Path, "/emulator/") {
		r = r.WithContext(emulator.WithStreamsEnd(emulator.WithSiteHosts(r.Context(), m.siteHosts(r)), m.site.done))
	}
	if m.server.Handle(w, r) {
		return nil
	}
	if r.URL.Path != "/" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return next.ServeHTTP(w, r)
	}
	if err := next.ServeHTTP(w, r); err != nil || caddyhttp.GetVar(r.Context(), "unhandled") != true {
		return err
	}
	m.server.WriteIndex(w, r.WithContext(emulator.WithSiteHosts(r.Context(), m.siteHosts(r))))
	return nil
}

// siteHosts are the host names of the emulator's site: those of the host
// matchers above it, looked up once.
func (m *ServiceEmulator) siteHosts(r *http.Request) []string {
	m.site.once.Do(func() {
		if srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv != nil {
			m.site.hosts, _ = hostsAbove(srv.Routes, m, nil)
		}
	})
	return m.site.hosts
}

var (
	_ caddy.Provisioner           = (*ServiceEmulator)(nil)
	_ caddy.CleanerUpper          = (*ServiceEmulator)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceEmulator)(nil)
	_ caddyfile.Unmarshaler       = (*ServiceEmulator)(nil)
)
