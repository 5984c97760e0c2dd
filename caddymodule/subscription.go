package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/cluster"
	"github.com/servicegate/servicegate/subscription"
	"github.com/servicegate/servicegate/token"
)

// Defaults of service_subscription.
const (
	defaultSubscriptionNegativeTTL = 30 * time.Second
	defaultSubscriptionTimeout     = 10 * time.Second
	defaultSubscriptionCacheSize   = 10000
)

// The on_error policies, as the config names them.
const (
	onErrorDeny  = string(subscription.Deny)
	onErrorAllow = string(subscription.Allow)
	onErrorStale = string(subscription.Stale)
)

// subscriptionCaches holds the subscription caches, one per cache size,
// shared by every handler of that size and kept across config reloads (the
// new config takes its reference before the old one lets go).
var subscriptionCaches = caddy.NewUsagePool()

// subscriptionSharedCache is a subscription cache held in subscriptionCaches.
type subscriptionSharedCache struct{ *subscription.Cache }

// Destruct lets the cache go; it holds no resources besides memory.
func (subscriptionSharedCache) Destruct() error { return nil }

// ServiceSubscription asks the service whether the organization behind a
// request's access token has paid for the app, and lets the request through
// only when it has. Answers are cached: an active subscription until its
// expires date (or max_age), an unpaid or missing one for negative_ttl.
//
// The token and organization come from service_auth when it ran before this
// handler; otherwise the token is taken from the Authorization header and
// answers are cached per token. An unpaid organization gets 402 with the
// subscribe link (JSON, or a small HTML page for browsers), an app without a
// subscription for the organization 403, a token the service refuses 401.
// When the service cannot answer, on_error decides.
//
// With the servicegate app (global option servicegate { redis … }) the
// instances of a cluster share answers through Redis: a local hit still
// makes no Redis call; a local miss reads the answer another instance
// stored, or makes the one query of the cluster. Redis failing, the
// handler answers as a lone instance would.
type ServiceSubscription struct {
	// AppIdentifier is the app's identifier in the service, as used in
	// the subscription query path. Required. {env.*} and {file.*}
	// placeholders are resolved when the config loads.
	AppIdentifier string `json:"app_identifier,omitempty"`

	// BaseURL is the service API base address, e.g.
	// https://api.service.example. Required. It may hold request
	// placeholders, e.g. https://{http.service.organization}.api.service.example
	// for the enterprise edition; their values must be non-empty and
	// made of letters, digits, '.', '-' and '_', and the expanded URL
	// must be http(s) with a host and no user info, or the request is
	// refused without a query. Only use placeholders whose values are
	// verified (set by service_auth): whoever controls base_url decides
	// whom the token is sent to and what the answer is.
	BaseURL string `json:"base_url,omitempty"`

	// NegativeTTL is how long unpaid (402) and missing (400, 404) answers
	// are cached. Default 30s.
	NegativeTTL caddy.Duration `json:"negative_ttl,omitempty"`

	// Timeout bounds one subscription query. With the servicegate app it
	// also bounds how long an instance waits for the query another
	// instance is making for the same organization. Default 10s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// OnError says what happens to a request when the service cannot give
	// a usable answer (unreachable, timeout, 5xx, unexpected status,
	// unreadable body): "deny" answers 503 (the default), "allow" lets
	// the request through, "stale" lets it through when the expires date
	// of the organization's last active answer passed less than
	// StaleGrace ago (or has not passed; max_age does not count here) and
	// answers 503 otherwise.
	OnError string `json:"on_error,omitempty"`

	// StaleGrace is how long after its expires date an active answer is
	// still trusted while the service cannot answer. Required with on_error
	// "stale".
	StaleGrace caddy.Duration `json:"stale_grace,omitempty"`

	// MaxAge caps how long an active answer is trusted before the service
	// is asked again, even when expires is later. Default: until expires.
	MaxAge caddy.Duration `json:"max_age,omitempty"`

	// CacheSize is the most answers kept; when full, the least recently
	// used goes. Handlers with the same size share one cache. Default
	// 10000.
	CacheSize int `json:"cache_size,omitempty"`

	// TimeZone is the IANA time zone of expires dates written without an
	// offset ("YYYY-MM-DD HH:MM:SS"). Default UTC.
	TimeZone string `json:"time_zone,omitempty"`

	// Realm is the realm of the WWW-Authenticate challenge sent with 401
	// answers. Default "service".
	Realm string `json:"realm,omitempty"`

	app         string
	base        string // BaseURL with config-time placeholders resolved
	dynamicBase bool   // base holds request placeholders
	policy      subscription.Policy
	onError     string
	cache       *subscription.Cache
	cacheKey    int
	client      *subscription.Client
	shared      *cluster.Subscriptions // nil without the servicegate app
	logger      *zap.Logger
	// now is the clock the expires dates are read by: time.Now unless a
	// test sets one before Provision.
	now     func() time.Time
	check   subscription.HandlerConfig // the request pipeline's config
	handler *subscription.Handler
}

// CaddyModule returns the Caddy module information.
func (ServiceSubscription) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_subscription",
		New: func() caddy.Module { return new(ServiceSubscription) },
	}
}

// Provision resolves config-time placeholders, applies defaults, takes the
// shared cache and builds the request pipeline.
func (h *ServiceSubscription) Provision(ctx caddy.Context) error {
	// Caddy validates after provisioning; an empty base_url would fail
	// below with a less helpful message.
	if err := h.Validate(); err != nil {
		return err
	}
	h.logger = ctx.Logger(h) // its own name, also when service_app provisions it itself
	if err := h.resolveConfig(); err != nil {
		return err
	}
	var err error
	if h.client, err = subscription.NewClient(h.TimeZone); err != nil {
		return fmt.Errorf("service_subscription time_zone: %w", err)
	}
	if err := h.takeCache(); err != nil {
		return err
	}
	app, err := servicegateApp(ctx)
	if err != nil {
		return fmt.Errorf("service_subscription: %w", err)
	}
	if app != nil {
		h.shared = app.Subscriptions()
	}
	registerSubscriptionMetrics(ctx.GetMetricsRegistry())
	return h.newHandler()
}

// resolveConfig resolves the config-time placeholders and applies the
// defaults.
func (h *ServiceSubscription) resolveConfig() error {
	repl := caddy.NewReplacer()
	h.app = repl.ReplaceKnown(h.AppIdentifier, "")
	if h.app == "" {
		return errors.New("service_subscription: app_identifier is empty once its placeholders are resolved")
	}
	base, err := resolvedAddress("base_url", h.BaseURL, baseURL)
	if err != nil {
		return fmt.Errorf("service_subscription: %w", err)
	}
	h.base = base
	h.dynamicBase = strings.ContainsAny(h.base, "{}")
	h.policy = subscription.Policy{
		NegativeTTL: time.Duration(h.NegativeTTL),
		Timeout:     time.Duration(h.Timeout),
		MaxAge:      time.Duration(h.MaxAge),
	}
	if h.policy.NegativeTTL == 0 {
		h.policy.NegativeTTL = defaultSubscriptionNegativeTTL
	}
	if h.policy.Timeout == 0 {
		h.policy.Timeout = defaultSubscriptionTimeout
	}
	h.onError = h.OnError
	if h.onError == "" {
		h.onError = onErrorDeny
	}
	return nil
}

// takeCache takes the cache of this handler's size from subscriptionCaches.
// A new cache reads the clock of the config that makes it.
func (h *ServiceSubscription) takeCache() error {
	h.cacheKey = h.CacheSize
	if h.cacheKey <= 0 {
		h.cacheKey = defaultSubscriptionCacheSize
	}
	size, now := h.cacheKey, h.now
	v, _, err := subscriptionCaches.LoadOrNew(size, func() (caddy.Destructor, error) {
		return subscriptionSharedCache{subscription.NewCache(size, now)}, nil
	})
	if err != nil {
		return fmt.Errorf("service_subscription cache: %w", err)
	}
	h.cache = v.(subscriptionSharedCache).Cache
	return nil
}

// newHandler builds the request pipeline: Caddy's request variables,
// placeholders, error routes and metrics are handed to it as callbacks.
func (h *ServiceSubscription) newHandler() error {
	h.check = subscription.HandlerConfig{
		App:             h.app,
		BaseURL:         h.base,
		Verified:        verifiedToken,
		Policy:          h.policy,
		OnError:         subscription.OnError(h.onError),
		StaleGrace:      time.Duration(h.StaleGrace),
		Cache:           h.cache,
		Client:          h.client,
		Now:             h.now,
		Challenge:       token.Challenge(h.Realm),
		Refuse:          refuse,
		PaymentRequired: writePaymentRequired,
		Abandoned:       func(err error) error { return caddyhttp.Error(499, err) },
		Report:          h.report,
	}
	if h.dynamicBase {
		h.check.Base = h.expandBase
	}
	if h.shared != nil {
		h.check.Shared = h.shared
	}
	var err error
	if h.handler, err = subscription.NewHandler(h.check); err != nil {
		return fmt.Errorf("service_subscription: %w", err)
	}
	return nil
}

// Validate checks the config.
func (h *ServiceSubscription) Validate() error {
	switch {
	case h.AppIdentifier == "":
		return errors.New("service_subscription: app_identifier is required")
	case h.BaseURL == "":
		return errors.New("service_subscription: base_url is required")
	}
	return h.checkSettings()
}

// checkSettings checks the settings given, and not that the required ones
// are: service_app supplies those of its subscription block.
func (h *ServiceSubscription) checkSettings() error {
	switch {
	case h.NegativeTTL < 0, h.Timeout < 0, h.MaxAge < 0, h.StaleGrace < 0:
		return errors.New("service_subscription: durations must not be negative")
	case h.CacheSize < 0:
		return errors.New("service_subscription: cache_size must not be negative")
	case !token.ValidRealm(h.Realm):
		return errors.New(`service_subscription: realm must be printable text without " or \`)
	}
	if err := subscription.OnError(h.OnError).Validate(time.Duration(h.StaleGrace)); err != nil {
		return fmt.Errorf("service_subscription: %w", err)
	}
	return nil
}

// Cleanup lets go of the shared cache and closes idle connections.
func (h *ServiceSubscription) Cleanup() error {
	if h.client != nil {
		h.client.CloseIdleConnections()
	}
	if h.cache != nil {
		_, _ = subscriptionCaches.Delete(h.cacheKey)
	}
	return nil
}

// ServeHTTP lets the request through when the organization's subscription
// is active, and answers it otherwise.
func (h *ServiceSubscription) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	r, _ = emulatorCall(r)
	return h.handler.Serve(w, r, next)
}

// verifiedToken is the token and organization service_auth verified for r,
// if it ran.
func verifiedToken(r *http.Request) (tok, org string, ok bool) {
	v, ok := verifiedFrom(r)
	if !ok {
		return "", "", false
	}
	return v.Token, v.Organization, true
}

// expandBase expands the request placeholders of base_url and validates the
// result. Each value must pass subscription.ValidBaseValue, so a value can
// neither move the query to another host nor into the path.
func (h *ServiceSubscription) expandBase(r *http.Request) (string, error) {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return "", errors.New("no replacer in the request context")
	}
	base, err := repl.ReplaceFunc(h.base, func(variable string, val any) (any, error) {
		s := caddy.ToString(val)
		if !subscription.ValidBaseValue(s) {
			return nil, fmt.Errorf("placeholder {%s} is empty or holds characters a host name cannot", variable)
		}
		return s, nil
	})
	if err != nil {
		return "", err
	}
	if err := subscription.ValidateBaseURL(base); err != nil {
		return "", err
	}
	return base, nil
}

// writePaymentRequired writes the 402 answer and sets the
// {http.service.subscribe_link} placeholder to link.
func writePaymentRequired(w http.ResponseWriter, r *http.Request, message, link string) {
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set("http.service.subscribe_link", link)
	}
	subscription.WritePaymentRequired(w, r, message, link)
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*ServiceSubscription)(nil)
	_ caddy.Validator             = (*ServiceSubscription)(nil)
	_ caddy.CleanerUpper          = (*ServiceSubscription)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceSubscription)(nil)
	_ caddyfile.Unmarshaler       = (*ServiceSubscription)(nil)
)
