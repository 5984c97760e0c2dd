package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/approute"
	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/health"
)

// Defaults of service_app.
const (
	appDefaultDescriptorPath = "/manifest.json"
	appDefaultFromQuery      = "jwtToken"
	appAllModules            = "*"
	appDefaultScope          = "project" // what sign_in asks for unless its block names scopes
)

// appDefaultClaimHeaders are the upstream headers service_app sets from a
// verified token, the same the sign-in sets from a session.
var appDefaultClaimHeaders = map[string]string{
	oauthDefaultUserHeader: "sub",
	oauthDefaultOrgHeader:  "domain",
}

// ServiceApp fronts one app of the service from its descriptor. It routes
// every request of the site itself, with the handlers the app's modules
// need, so that nothing is left open:
//
//   - each webhook module's url: service_webhook, with the module's key as
//     the only X-Module-Key and its events as the allow-list;
//   - each custom-file-format and file-pre-export module's url:
//     service_limits with the module contract of its kind, answers over
//     the size limit spilled to signed URLs (served under the spill path);
//   - the descriptor path: the descriptor, read-only, with the fields the
//     gateway knows (base address, client id) filled in;
//   - the public paths: passed on as they are;
//   - every other request: service_auth (Authorization header or the
//     jwtToken query parameter, audience the client id), then
//     service_subscription for a paid app; with sign_in, browser requests
//     without a token go through service_oauth first.
//
// Requests that pass go on to the next handler (reverse_proxy to the app).
// The handlers are the same modules a site can use one by one, with their
// metrics, placeholders and refusals.
type ServiceApp struct {
	// Descriptor is the app descriptor: a JSON file, or an address on the
	// app such as http://127.0.0.1:3000/manifest.json. An address is read
	// when the config loads; the last good copy is kept in Caddy's data
	// directory and used while the app cannot answer. Without one, an
	// address that does not answer leaves the site answering 503 with
	// Retry-After while it is read again in the background, with backoff.
	// Required.
	Descriptor string `json:"descriptor,omitempty"`

	// DescriptorPath is where the descriptor is served to the service.
	// Default "/manifest.json"; "off" serves none.
	DescriptorPath string `json:"descriptor_path,omitempty"`

	// BaseURL is the app's public base address (scheme, host and any path
	// prefix), filled in as the descriptor's baseUrl when it has none and
	// the base of the sign-in's relative redirect_uri and of spill links
	// (unless spill_base_url is set). Default: the
	// site's own host name (a request's Host header only picks among the
	// site's names) with the scheme and port the request came in on; a
	// site without a host name needs it. Set it behind a proxy.
	BaseURL string `json:"base_url,omitempty"`

	// ClientID is the app's OAuth client_id: the audience of the tokens
	// and the client of the sign-in. {env.*} placeholders are resolved at
	// load. Required.
	ClientID string `json:"client_id,omitempty"`

	// ClientSecret is the app's OAuth client_secret: it verifies the
	// tokens (HS256) and runs the sign-in. {env.*} and {file.*}
	// placeholders are resolved at load. Required unless Auth names a
	// public_key or jwks_url.
	ClientSecret string `json:"client_secret,omitempty"`

	// AppSecrets are the app secrets that sign webhook deliveries; any one
	// matching passes (rotation). Required when the descriptor declares a
	// webhook module, unless SecretsFile is given.
	AppSecrets []string `json:"app_secrets,omitempty"`

	// SecretsFile is service_webhook's per-organization secrets file.
	SecretsFile string `json:"secrets_file,omitempty"`

	// Service is the service's address: the base of the subscription
	// query and, unless AuthURL is set, of the OAuth server. Required with
	// Subscription or SignIn.
	Service string `json:"service,omitempty"`

	// AuthURL is the OAuth server's address, when it is not Service.
	AuthURL string `json:"auth_url,omitempty"`

	// AppIdentifier is the app identifier of the subscription query.
	// Default: the descriptor's identifier.
	AppIdentifier string `json:"app_identifier,omitempty"`

	// Public are path patterns (as Caddy's path matcher takes them)
	// passed on without a token, such as static assets.
	Public []string `json:"public,omitempty"`

	// Subscription, when set, checks the subscription of a paid app; its
	// fields are service_subscription's settings, with app_identifier and
	// base_url filled in from the settings above.
	Subscription *ServiceSubscription `json:"subscription,omitempty"`

	// SignIn, when set, runs the service's sign-in for browser requests
	// without a token; its fields are service_oauth's settings, with the
	// client and the OAuth server filled in from the settings above.
	SignIn *ServiceOAuth `json:"sign_in,omitempty"`

	// Auth holds service_auth settings for the token check; the key, the
	// audience, from_query and strip_query, and the claim headers
	// X-Service-User-Id (sub) and X-Service-Domain (domain) are filled in
	// when not set.
	Auth *ServiceAuth `json:"auth,omitempty"`

	// Webhooks holds service_webhook settings for webhook modules, by
	// module key, or "*" for every webhook module. The secrets, the module
	// key and the events always come from above and from the descriptor.
	Webhooks map[string]*ServiceWebhook `json:"webhooks,omitempty"`

	// Limits holds service_limits settings for file modules, by module
	// key, or "*" for every file module. The contract is always the
	// module's kind; spill is on unless set otherwise.
	Limits map[string]*ServiceLimits `json:"limits,omitempty"`

	// Health is the path of the health check, answered to GET and HEAD
	// without a token: 200 {"status":"ok",…} when the app can serve, 503
	// with the reason when it cannot, and the state of each part.
	// Default "/servicegate/health"; "off" answers none.
	Health string `json:"health,omitempty"`
	// Installations, when set, keeps each organization's installation
	// of the app: see AppInstallations. Required when the descriptor
	// declares lifecycle events.
	Installations *AppInstallations `json:"installations,omitempty"`

	// Routes is what the descriptor and the settings above expand to, one
	// route per path: the Caddyfile adapter writes it when it can read the
	// descriptor, so that `caddy adapt` shows it. When it is empty, the
	// expansion is made when the config loads.
	Routes []AppRoute `json:"routes,omitempty"`

	// router routes the site's requests: while the descriptor, an
	// address that did not answer at load, is read in the background, a
	// router that answers 503; then the app's.
	router      *atomic.Pointer[approute.Router]
	stopWaiting context.CancelFunc
	waitDone    chan struct{}

	desc       *descriptor.Descriptor
	descState  health.Descriptor // what the health check reports of desc
	clientID   string
	baseURL    string
	cleanups   []caddy.CleanerUpper
	logger     *zap.Logger
	descriptor []byte // the filled descriptor when BaseURL is set
	site       *siteOrigin
	inst       *appInstallations
	proof      *lifecycleProof
	// start, set when the routes hold stores on disk, makes the routes
	// once: at the config's start, or at the first request (see
	// provisionAtStart).
	start func() error
}

// AppRoute is one route of service_app: a path and what guards it.
type AppRoute struct {
	// Path is the request path: exact, or a prefix ending in "*"; "*"
	// alone is every other request.
	Path string `json:"path"`

	// Module is the kind of the descriptor's module the route serves
	// (webhook, custom-file-format, file-pre-export).
	Module string `json:"module,omitempty"`

	// Key is the key of the descriptor's module the route serves.
	Key string `json:"key,omitempty"`

	// Serve is what answers the path without a guard: "descriptor" (the
	// app descriptor), "public" (passed on as it is), "spill" (the
	// payloads of file modules' answers that went by URL, served by the
	// file modules' service_limits) or "lifecycle" (the service's
	// lifecycle call Event, answered by the installations).
	Serve string `json:"serve,omitempty"`

	// Event is the lifecycle call a "lifecycle" route answers, as the
	// descriptor's events name it: installed, uninstall or
	// subscription_paid.
	Event string `json:"event,omitempty"`

	// The handlers of the route follow, in the order they run.

	// Webhook checks the signature, module key and events of a webhook
	// module's deliveries.
	Webhook *ServiceWebhook `json:"webhook,omitempty"`

	// Limits holds a file module's jobs and answers to the service's
	// limits and module contract.
	Limits *ServiceLimits `json:"limits,omitempty"`

	// SignIn sends a browser without a token through the service's sign-in
	// first (with sign_in).
	SignIn *ServiceOAuth `json:"sign_in,omitempty"`

	// Auth verifies the service's bearer token on a guarded path.
	Auth *ServiceAuth `json:"auth,omitempty"`

	// Subscription checks the organization's subscription after the token
	// (with subscription).
	Subscription *ServiceSubscription `json:"subscription,omitempty"`
}

// What an AppRoute serves without a guard.
const (
	appServeDescriptor = "descriptor"
	appServePublic     = "public"
	appServeSpill      = "spill"
	appServeLifecycle  = "lifecycle"
)

// CaddyModule returns the Caddy module information.
func (ServiceApp) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_app",
		New: func() caddy.Module { return new(ServiceApp) },
	}
}

// appDescriptorDir keeps the last good copy of descriptors read from an
// address.
func appDescriptorDir() string {
	return filepath.Join(caddy.AppDataDir(), "servicegate", "descriptors")
}

// loadDescriptor reads the descriptor; the error names every defect.
func loadDescriptor(ctx context.Context, source string, logger *zap.Logger) (*descriptor.Loaded, error) {
	loaded, err := (&descriptor.Loader{Dir: appDescriptorDir()}).Load(ctx, caddy.NewReplacer().ReplaceKnown(source, ""))
	if err != nil {
		return nil, err
	}
	if loaded.Stale && logger != nil {
		logger.Warn("the app descriptor could not be read; its last good copy is in use",
			zap.String("descriptor", source), zap.Error(loaded.Err))
	}
	return loaded, nil
}

// Provision reads the descriptor, expands it into routes unless the config
// holds them, and provisions every handler of every route.
func (a *ServiceApp) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	a.router = new(atomic.Pointer[approute.Router])
	if a.Descriptor == "" {
		return errors.New("service_app: descriptor is required: the app descriptor file, or its address on the app")
	}
	if err := a.checkAddresses(); err != nil {
		return err
	}
	loaded, err := loadDescriptor(ctx, a.Descriptor, a.logger)
	if err == nil {
		a.descState = descriptorState(loaded)
		sg, err := servicegateApp(ctx)
		if err != nil {
			return fmt.Errorf("service_app: %w", err)
		}
		if a.opensStores(ctx, sg != nil && sg.Client() != nil) {
			return a.provisionAtStart(ctx, loaded.Descriptor)
		}
		return a.provisionRoutes(ctx, loaded.Descriptor, a.wiring(ctx).LoadModuleByID)
	}
	if !descriptor.Awaitable(a.Descriptor, err) {
		// A missing or defective file, or an answer that is no
		// descriptor: a mistake to fix, not an app still starting.
		return fmt.Errorf("service_app: %w", err)
	}
	// The app does not answer yet (the gateway started first): the site
	// answers 503 until the descriptor is read in the background.
	a.logger.Warn("the app descriptor could not be read and there is no last good copy; the site answers 503 until it is read, trying again in the background",
		zap.String("descriptor", a.descriptorLabel()), zap.Error(err))
	if err := a.provisionWaitingHealth(ctx); err != nil {
		return err
	}
	wctx, stop := context.WithCancel(ctx)
	a.stopWaiting, a.waitDone = stop, make(chan struct{})
	go a.awaitDescriptor(wctx, ctx, err)
	return nil
}

// awaitDescriptor reads the descriptor with backoff until it is read, then
// makes the routes and lets the site serve.
func (a *ServiceApp) awaitDescriptor(wctx context.Context, ctx caddy.Context, awaited error) {
	defer close(a.waitDone)
	loader := &descriptor.Loader{Dir: appDescriptorDir()}
	desc, err := loader.Await(wctx, caddy.NewReplacer().ReplaceKnown(a.Descriptor, ""), awaited,
		func(err error) {
			a.logger.Warn("the app descriptor still cannot be used; the site answers 503", zap.String("descriptor", a.descriptorLabel()), zap.Error(err))
		},
		func(err error, wait time.Duration) {
			a.logger.Debug("the app descriptor could not be read; trying again", zap.Duration("wait", wait), zap.Error(err))
		})
	if err != nil {
		return // the config is unloading
	}
	a.descState = health.Descriptor{State: health.DescriptorRead, At: time.Now()}
	if err := a.provisionRoutes(ctx, desc, a.loadLate(ctx)); err != nil {
		a.logger.Error("the app descriptor was read but its routes could not be made; the site answers 503 until the config is fixed and reloaded",
			zap.String("descriptor", a.descriptorLabel()), zap.Error(err))
		return
	}
	a.logger.Info("the app descriptor was read; the site serves the app", zap.String("descriptor", a.descriptorLabel()))
}

// DescriptorReady tells whether service_app has read its descriptor and
// routes the site; until then every request is answered 503.
func (a *ServiceApp) DescriptorReady() bool {
	if a.router == nil {
		return true
	}
	rt := a.router.Load()
	return rt == nil || !rt.Starting()
}

// descriptorLabel names the descriptor in logs and metrics, without the
// credentials an address may hold.
func (a *ServiceApp) descriptorLabel() string { return descriptor.Label(a.Descriptor) }

// Validate checks what Provision does not.
func (a *ServiceApp) Validate() error {
	if a.DescriptorPath != "" && a.DescriptorPath != "off" && !strings.HasPrefix(a.DescriptorPath, "/") {
		return fmt.Errorf("service_app: descriptor_path must start with /, got %q", a.DescriptorPath)
	}
	if a.Health != "" && a.Health != "off" && !strings.HasPrefix(a.Health, "/") {
		return fmt.Errorf("service_app: health must be a path starting with /, or off; got %q", a.Health)
	}
	return nil
}

// Cleanup stops reading the descriptor in the background and releases
// what the handlers hold.
func (a *ServiceApp) Cleanup() error {
	if a.stopWaiting != nil {
		a.stopWaiting()
		<-a.waitDone
	}
	appHealth.Delete(a)
	return a.cleanupHandlers()
}

// cleanupHandlers releases what the handlers hold.
func (a *ServiceApp) cleanupHandlers() error {
	cleanups := a.cleanups
	a.cleanups = nil
	var errs []error
	for _, c := range cleanups {
		errs = append(errs, c.Cleanup())
	}
	return errors.Join(errs...)
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*ServiceApp)(nil)
	_ caddy.Validator             = (*ServiceApp)(nil)
	_ caddy.CleanerUpper          = (*ServiceApp)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceApp)(nil)
)
