package emulator

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Defaults applied by New to the zero fields of a Config.
const (
	DefaultAppIdentifier = "demo-app"
	DefaultIssuer        = "service-emulator"
	DefaultTokenLifetime = 2 * time.Hour
	DefaultCodeLifetime  = 60 * time.Second
	DefaultUserID        = 7
)

// ExpiresLayout is the layout of the subscription query's "expires" date,
// always in UTC.
const ExpiresLayout = "2006-01-02 15:04:05"

// ParseActiveUntil reads the end of an organization's active subscription
// as a person writes it in a configuration: the service's own
// "YYYY-MM-DD HH:MM:SS" (UTC), a bare date, or RFC 3339.
func ParseActiveUntil(s string) (time.Time, error) {
	for _, layout := range []string{ExpiresLayout, "2006-01-02", time.RFC3339} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("active_until %q is not a date like \"2030-01-01 00:00:00\"", s)
}

// Config describes the one app the emulator knows and the organizations
// that may install it.
type Config struct {
	// ClientID is the app's OAuth client_id. Required.
	ClientID string
	// ClientSecret is the app's OAuth client_secret. It also signs the
	// access tokens (HS256). Required.
	ClientSecret string
	// RedirectURIs are the registered redirect URLs; the authorization
	// request must name one of them exactly. At least one is required.
	RedirectURIs []string
	// AppIdentifier is the identifier the subscription query knows.
	// Default DefaultAppIdentifier.
	AppIdentifier string
	// Issuer is the iss claim of issued tokens. Default DefaultIssuer.
	Issuer string
	// TokenLifetime is the lifetime of access tokens (expires_in).
	// Default DefaultTokenLifetime.
	TokenLifetime time.Duration
	// CodeLifetime is how long an authorization code can be exchanged.
	// Default DefaultCodeLifetime.
	CodeLifetime time.Duration
	// UserID is the user who approves when the authorization request
	// names none. Default DefaultUserID.
	UserID int64
	// Organizations are the organizations a user may act for, the first
	// one being the default choice. May be empty: tokens then name no
	// organization.
	Organizations []Organization
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Console configures the console: the call log, its page and its
	// API. Its zero value turns it on with its defaults.
	Console ConsoleConfig
}

// Organization is an organization of the service and the state of its
// subscription to the app: active until ActiveUntil when that is set,
// unpaid with SubscribeLink when that is set, missing (no subscription)
// when neither is.
type Organization struct {
	// Domain is the organization's domain, the domain claim of its
	// tokens. Required and unique.
	Domain string
	// ID is the organization's integer id, context.organization_id of
	// its tokens. Required (positive) and unique.
	ID int64
	// ActiveUntil is the end of an active subscription. The query
	// reports it as configured, even when it has passed, so that a
	// gateway's handling of a lapsed date can be tried.
	ActiveUntil time.Time
	// SubscribeLink is the checkout page of an unpaid subscription.
	SubscribeLink string
}

// Server is the emulated service. Its zero value is not usable: build it
// with New. A Server is safe for concurrent use.
type Server struct {
	cfg       Config
	redirects map[string]bool
	parser    *jwt.Parser

	// orgMu guards the organizations, which the console can add to and
	// whose subscriptions it can change while the emulator runs.
	orgMu    sync.RWMutex
	orgs     []*Organization
	byDomain map[string]*Organization
	byID     map[int64]*Organization

	outage atomic.Bool
	delay  atomic.Int64 // time.Duration

	// faults are the console's switches for the emulator's own endpoints.
	faults faults
	// console is the call log and its page, nil when it is off.
	console *console

	mu      sync.Mutex
	codes   map[string]*codeGrant
	refresh map[string]*refreshGrant
	queries map[string]int
	// installs are the app's installations, by organization domain
	// (see InstallApp); nil until the first one.
	installs map[string]*appInstall
	// lastSecrets are the app secrets of uninstalled installations, by
	// domain: a stale sender signs with them.
	lastSecrets map[string]string
}

// New checks cfg, fills in its defaults and returns a Server for it.
func New(cfg Config) (*Server, error) {
	if cfg.ClientID == "" {
		return nil, errors.New("emulator: a client_id is required")
	}
	if cfg.ClientSecret == "" {
		return nil, errors.New("emulator: a client_secret is required")
	}
	if len(cfg.RedirectURIs) == 0 {
		return nil, errors.New("emulator: at least one redirect URI is required")
	}
	if cfg.AppIdentifier == "" {
		cfg.AppIdentifier = DefaultAppIdentifier
	}
	if cfg.Issuer == "" {
		cfg.Issuer = DefaultIssuer
	}
	if cfg.TokenLifetime == 0 {
		cfg.TokenLifetime = DefaultTokenLifetime
	}
	if cfg.CodeLifetime == 0 {
		cfg.CodeLifetime = DefaultCodeLifetime
	}
	if cfg.TokenLifetime < time.Second || cfg.CodeLifetime < 0 {
		return nil, errors.New("emulator: the token lifetime must be at least one second and the code lifetime positive")
	}
	if cfg.UserID == 0 {
		cfg.UserID = DefaultUserID
	}
	if cfg.UserID < 0 {
		return nil, errors.New("emulator: the user id must be positive")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{
		redirects: make(map[string]bool, len(cfg.RedirectURIs)),
		byDomain:  make(map[string]*Organization, len(cfg.Organizations)),
		byID:      make(map[int64]*Organization, len(cfg.Organizations)),
		cfg:       cfg, // complete below; the console reads it
		codes:     make(map[string]*codeGrant),
		refresh:   make(map[string]*refreshGrant),
		queries:   make(map[string]int),
	}
	for _, u := range cfg.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return nil, fmt.Errorf("emulator: redirect URI %q: %w", u, err)
		}
		s.redirects[u] = true
	}
	cfg.RedirectURIs = append([]string(nil), cfg.RedirectURIs...)
	for _, org := range cfg.Organizations {
		if err := s.addOrganization(org); err != nil {
			return nil, fmt.Errorf("emulator: %w", err)
		}
	}
	s.cfg = cfg
	s.parser = newParser(cfg)
	if !cfg.Console.Off {
		c, err := newConsole(s, cfg.Console)
		if err != nil {
			return nil, fmt.Errorf("emulator: console: %w", err)
		}
		s.console = c
	}
	return s, nil
}

func checkRedirectURI(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme == "" || u.Host == "" {
		return errors.New("not an absolute URL")
	}
	if u.Fragment != "" {
		return errors.New("a redirect URI has no fragment")
	}
	return nil
}

// The paths the emulator answers.
const (
	authorizePath      = "/oauth/authorize"
	tokenPath          = "/oauth/token"
	applicationsPrefix = "/api/v2/applications/"
	subscriptionSuffix = "/subscription"
)

// Handle answers r when its path is one of the emulator's and reports
// whether it did; other requests are left untouched for the caller to pass
// on.
func (s *Server) Handle(w http.ResponseWriter, r *http.Request) bool {
	switch p := r.URL.Path; {
	case p == authorizePath:
		s.answered(w, r, kindAuthorize, s.serveAuthorize)
	case p == tokenPath:
		s.answered(w, r, kindToken, s.serveToken)
	case p == LifecyclePath:
		if s.guard(w, r) {
			s.serveLifecycle(w, r)
		}
	case strings.HasPrefix(p, applicationsPrefix) && strings.HasSuffix(p, subscriptionSuffix) &&
		len(p) > len(applicationsPrefix)+len(subscriptionSuffix):
		app := p[len(applicationsPrefix) : len(p)-len(subscriptionSuffix)]
		if strings.Contains(app, "/") {
			return false
		}
		s.answered(w, r, kindSubscription, func(w http.ResponseWriter, r *http.Request) { s.serveSubscription(w, r, app) })
	case s.console != nil && (p == ConsolePath || strings.HasPrefix(p, consoleAssetsPrefix) || strings.HasPrefix(p, APIPrefix)):
		s.console.serve(w, r)
	default:
		return false
	}
	return true
}

// ServeHTTP answers the emulator's paths, a page pointing to the console
// at /, and 404 for every other path.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.Handle(w, r) {
		return
	}
	if r.URL.Path == "/" {
		s.WriteIndex(w, r)
		return
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not found"})
}

// Queries returns how many subscription queries with a valid token have
// arrived for an organization, named by its domain, or by its decimal id
// for tokens that carry no domain.
func (s *Server) Queries(organization string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[organization]
}

// SetOutage makes the subscription query answer 503 (true) or answer
// normally again (false), for outage tests.
func (s *Server) SetOutage(down bool) { s.outage.Store(down) }

// SetDelay makes the subscription query wait d before it answers (0: no
// wait), for timeout tests. The wait ends early when the request is
// cancelled.
func (s *Server) SetDelay(d time.Duration) { s.delay.Store(int64(d)) }

func (s *Server) countQuery(organization string) {
	s.mu.Lock()
	s.queries[organization]++
	s.mu.Unlock()
}

// organizationKey is the key Queries counts under.
func organizationKey(domain string, id int64) string {
	if domain != "" {
		return domain
	}
	return strconv.FormatInt(id, 10)
}
