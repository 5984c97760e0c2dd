package caddymodule

import (
	"context"
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
	"github.com/servicegate/servicegate/spans"
	"github.com/servicegate/servicegate/subscription"
)

// Defaults of service_subscription.
const (
	defaultSubscriptionNegativeTTL = 30 * time.Second
	defaultSubscriptionTimeout     = 10 * time.Second
	defaultSubscriptionCacheSize   = 10000
)

// The on_error policies.
const (
	onErrorDeny  = "deny"
	onErrorAllow = "allow"
	onErrorStale = "stale"
)

// subscriptionNow is the clock of service_subscription; tests move it.
var subscriptionNow = time.Now

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
	staleGrace  time.Duration
	challenge   string // WWW-Authenticate value without a token
	badToken    string // WWW-Authenticate value for a refused token
	cache       *subscription.Cache
	cacheKey    int
	client      *subscription.Client
	transport   *http.Transport
	shared      *cluster.Subscriptions // nil without the servicegate app
	logger      *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (ServiceSubscription) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_subscription",
		New: func() caddy.Module { return new(ServiceSubscription) },
	}
}

// Provision resolves config-time placeholders, applies defaults and takes
// the shared cache.
func (h *ServiceSubscription) Provision(ctx caddy.Context) error {
	// Caddy validates after provisioning; an empty base_url would fail
	// below with a less helpful message.
	if err := h.Validate(); err != nil {
		return err
	}
	h.logger = ctx.Logger()
	repl := caddy.NewReplacer()
	h.app = repl.ReplaceKnown(h.AppIdentifier, "")
	if h.app == "" {
		return errors.New("service_subscription: app_identifier is empty once its placeholders are resolved")
	}
	h.base = repl.ReplaceKnown(h.BaseURL, "")
	h.dynamicBase = strings.ContainsAny(h.base, "{}")
	if !h.dynamicBase {
		if err := subscription.ValidateBaseURL(h.base); err != nil {
			return fmt.Errorf("service_subscription base_url: %w", err)
		}
	}

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
	h.staleGrace = time.Duration(h.StaleGrace)

	h.challenge = bearerChallenge(h.Realm)
	h.badToken = h.challenge + `, error="invalid_token"`

	loc := time.UTC
	if h.TimeZone != "" {
		var err error
		if loc, err = time.LoadLocation(h.TimeZone); err != nil {
			return fmt.Errorf("service_subscription time_zone: %w", err)
		}
	}
	h.transport = http.DefaultTransport.(*http.Transport).Clone()
	h.client = &subscription.Client{
		HTTP: &http.Client{
			Transport: h.transport,
			// A redirect is an unusable answer; following it would
			// send the token elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Location: loc,
	}

	h.cacheKey = h.CacheSize
	if h.cacheKey <= 0 {
		h.cacheKey = defaultSubscriptionCacheSize
	}
	size := h.cacheKey
	v, _, err := subscriptionCaches.LoadOrNew(size, func() (caddy.Destructor, error) {
		return subscriptionSharedCache{subscription.NewCache(size, func() time.Time { return subscriptionNow() })}, nil
	})
	if err != nil {
		return fmt.Errorf("service_subscription cache: %w", err)
	}
	h.cache = v.(subscriptionSharedCache).Cache

	app, err := servicegateApp(ctx)
	if err != nil {
		return fmt.Errorf("service_subscription: %w", err)
	}
	if app != nil {
		h.shared = app.Subscriptions()
	}

	registerSubscriptionMetrics(ctx.GetMetricsRegistry())
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
	case !validQuotedText(h.Realm):
		return errors.New(`service_subscription: realm must be printable text without " or \`)
	}
	switch h.OnError {
	case "", onErrorDeny, onErrorAllow:
		if h.StaleGrace != 0 {
			return errors.New(`service_subscription: stale_grace is only used with on_error "stale"`)
		}
	case onErrorStale:
		if h.StaleGrace <= 0 {
			return errors.New(`service_subscription: on_error "stale" needs a grace period above zero`)
		}
	default:
		return fmt.Errorf(`service_subscription: on_error %q is not one of deny, allow, stale`, h.OnError)
	}
	return nil
}

// Cleanup lets go of the shared cache and closes idle connections.
func (h *ServiceSubscription) Cleanup() error {
	if h.transport != nil {
		h.transport.CloseIdleConnections()
	}
	if h.cache != nil {
		_, _ = subscriptionCaches.Delete(h.cacheKey)
	}
	return nil
}

// ServeHTTP lets the request through when the organization's subscription
// is active, and answers it otherwise.
func (h *ServiceSubscription) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	var tok, org string
	if v, ok := verifiedFrom(r); ok {
		tok, org = v.Token, v.Organization
	} else {
		tok = subscriptionBearerToken(r.Header.Get("Authorization"))
	}
	if tok == "" {
		w.Header().Set("WWW-Authenticate", h.challenge)
		return refuse(w, r, http.StatusUnauthorized, messageNoToken)
	}

	base := h.base
	if h.dynamicBase {
		var err error
		if base, err = h.expandBase(r); err != nil {
			h.logger.Warn("subscription query not sent: the service address is not usable for this request",
				zap.String("organization", org), zap.Error(err))
			return refuse(w, r, http.StatusForbidden, "The subscription of your organization cannot be checked: the service address for it is not valid.")
		}
	}

	key := subscription.Key{BaseURL: base, App: h.app, Organization: org}
	if org == "" {
		key.Token = subscription.TokenHash(tok)
	}
	ctx, span := spans.Start(r.Context(), "servicegate.subscription.check")
	defer span.End() // ended before next on the way through
	a, hit := h.cache.Lookup(key)
	span.Bool("servicegate.subscription.cache_hit", hit)
	if hit {
		subscriptionCacheHits.Inc()
		span.String("servicegate.subscription.answer", a.Status.String())
		if a.Status == subscription.Active {
			// Lookup trusts an active answer only before it expires.
			span.End()
			return next.ServeHTTP(w, r)
		}
		return h.refuseAnswer(w, r, a)
	}
	subscriptionCacheMisses.Inc()

	// ours tells whether the query Resolve ran (if any) carried this
	// request's token; the write happens before Resolve returns.
	ours := false
	a, err := h.cache.Resolve(ctx, key, h.policy, func(ctx context.Context) (subscription.Answer, error) {
		direct := func(ctx context.Context) (subscription.Answer, error) {
			ours = true
			return h.query(ctx, base, org, tok)
		}
		if h.shared != nil {
			// The answer of another instance, or this query shared
			// with them; Redis failing, this query alone.
			return h.shared.Resolve(ctx, key, h.policy, direct)
		}
		return direct(ctx)
	})
	if err == nil && a.Status == subscription.Unauthorized && !ours {
		// The service refused the token of another member of the
		// organization, whose query this request shared: that says
		// nothing about this request's token, so ask with it.
		qctx, cancel := context.WithTimeout(ctx, h.policy.Timeout)
		a, err = h.query(qctx, base, org, tok)
		cancel()
	}
	if err != nil {
		span.Fail("no usable answer from the service")
		span.End()
		return h.serviceFailed(w, r, next, key, err)
	}
	span.String("servicegate.subscription.answer", a.Status.String())
	if a.ActiveAt(subscriptionNow()) {
		span.End()
		return next.ServeHTTP(w, r)
	}
	return h.refuseAnswer(w, r, a)
}

// paymentRequiredBody is the JSON answer to an unpaid organization.
type paymentRequiredBody struct {
	errorBody
	SubscribeLink string `json:"subscribe_link,omitempty"`
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*ServiceSubscription)(nil)
	_ caddy.Validator             = (*ServiceSubscription)(nil)
	_ caddy.CleanerUpper          = (*ServiceSubscription)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceSubscription)(nil)
	_ caddyfile.Unmarshaler       = (*ServiceSubscription)(nil)
)
