package caddymodule

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/servicegate/servicegate/oauth"
)

// Defaults of service_oauth.
const (
	oauthDefaultCallback    = "/oauth/callback"
	oauthDefaultLogout      = "/oauth/logout"
	oauthDefaultCookie      = "servicegate_session"
	oauthDefaultMaxSessions = 10000
	oauthDefaultTimeout     = 10 * time.Second
	oauthDefaultUserHeader  = "X-Service-User-Id"
	oauthDefaultOrgHeader   = "X-Service-Domain"
	oauthHeaderOff          = "off"
	oauthStoreMemory        = "memory"
	oauthStoreStorage       = "storage"
	oauthStoreRedis         = "redis"
	oauthStoragePrefix      = "servicegate/oauth_sessions"
	oauthLoginsPrefix       = "servicegate/oauth_logins"
	oauthSweepEvery         = time.Hour
	// oauthRefreshSlack is how much longer than a token request a refresh
	// lock lives, and another instance's refresh is waited for.
	oauthRefreshSlack = 5 * time.Second
)

// ServiceOAuth runs the service's OAuth 2.0 authorization-code flow at the
// gateway, for apps that do not run it themselves. A browser without a
// session is sent to the service to sign in and comes back to the callback
// path; the gateway exchanges the code, keeps the token pair in a
// server-side session and gives the browser only a cookie naming it.
// Requests of a session go on with Authorization: Bearer <access token>
// and the session's user and organization headers; an access token within
// a minute of its expiry is refreshed first. API clients (no text/html in
// Accept) without a session get 401, never a redirect.
//
// The gateway obtained the access token itself from the token endpoint but
// has not verified its signature: place service_auth after service_oauth
// when the app, or service_subscription, should rely on verified claims.
type ServiceOAuth struct {
	// ClientID is the app's OAuth client_id. Required.
	ClientID string `json:"client_id,omitempty"`

	// ClientSecret is the app's OAuth client_secret. {env.*} and {file.*}
	// placeholders are resolved at load. Required.
	ClientSecret string `json:"client_secret,omitempty"`

	// AuthURL is the authorization server's address ({auth_url}); users
	// are sent to {auth_url}/oauth/authorize and codes exchanged at
	// {auth_url}/oauth/token. Required.
	AuthURL string `json:"auth_url,omitempty"`

	// Scopes are the scopes asked for. At least one is required.
	Scopes []string `json:"scopes,omitempty"`

	// RedirectURI is the callback: a path on this site (the absolute
	// redirect_uri is then built from the site's own host name, or
	// service_app's base_url, never from the request's Host header; a
	// site without a host name refuses), or an absolute URL whose path
	// is the callback path. It must be one of
	// the app's registered redirect URLs. Default "/oauth/callback".
	RedirectURI string `json:"redirect_uri,omitempty"`

	// LogoutPath forgets the session (server side and cookie) on a POST
	// from the site's own pages and redirects to LogoutRedirect; a GET
	// shows a page whose button sends that POST. Default "/oauth/logout".
	LogoutPath string `json:"logout_path,omitempty"`

	// LogoutRedirect is where the logout path sends the user. Default "/".
	LogoutRedirect string `json:"logout_redirect,omitempty"`

	// CookieName names the session cookie; the login state cookie is
	// CookieName + "_state". Default "servicegate_session".
	CookieName string `json:"cookie_name,omitempty"`

	// CookieSecure sets the Secure attribute of the cookies. Default true;
	// set false only for plain-HTTP development on localhost.
	CookieSecure *bool `json:"cookie_secure,omitempty"`

	// CookieDomain is the Domain attribute of the session cookie. Default
	// none (the cookie goes to this host only).
	CookieDomain string `json:"cookie_domain,omitempty"`

	// CookiePath is the Path attribute of the session cookie. Default "/".
	CookiePath string `json:"cookie_path,omitempty"`

	// SessionLifetime bounds a session, whatever its tokens allow; the
	// user signs in again after it. Default 24h.
	SessionLifetime caddy.Duration `json:"session_lifetime,omitempty"`

	// MaxSessions bounds the sessions (and logins in progress) held in
	// memory. Default 10000.
	MaxSessions int `json:"max_sessions,omitempty"`

	// SessionStore is where sessions and logins in progress live:
	// "memory" (they survive config reloads but not a restart), "storage"
	// (Caddy's configured storage, so a restart or a second instance
	// sharing the storage keeps them) or "redis" (the Redis server of the
	// servicegate global option, shared by every instance, each entry
	// living as long as its session or login; one refresh per session
	// across the instances). In storage and Redis, entries are named by a
	// hash of the session id and encrypted with a key derived from it.
	// Default "redis" when the servicegate global option names a Redis
	// server, else "memory".
	SessionStore string `json:"session_store,omitempty"`

	// UserHeader is the upstream header that carries the session's user
	// id; inbound copies are removed. "off" sends none. Default
	// "X-Service-User-Id".
	UserHeader string `json:"user_header,omitempty"`

	// OrganizationHeader is the upstream header that carries the
	// session's organization (domain, else organization id); inbound
	// copies are removed. "off" sends none. Default "X-Service-Domain".
	OrganizationHeader string `json:"organization_header,omitempty"`

	// Timeout bounds one token request. Default 10s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	manager      *oauth.Manager
	flow         *oauth.Handler
	callbackPath string
	redirectURI  string // absolute, or "" to build from the request
	secure       bool
	poolKey      string
	logger       *zap.Logger
	events       oauthEvents
	// origin builds the redirect_uri of a relative RedirectURI;
	// service_app sets it to its own, else it is the site's.
	origin func(*http.Request) (string, error)
}

// oauthStores keeps in-memory session stores across config reloads, so a
// reload does not sign everybody out.
var oauthStores = caddy.NewUsagePool()

type pooledSessionStore struct{ sessions, logins *oauth.MemoryStore }

// Destruct lets the pool drop the store; it holds nothing to release.
func (pooledSessionStore) Destruct() error { return nil }

// CaddyModule returns the Caddy module information.
func (ServiceOAuth) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_oauth",
		New: func() caddy.Module { return new(ServiceOAuth) },
	}
}

// Provision fills in defaults, resolves the secret and sets up the session
// store.
func (m *ServiceOAuth) Provision(ctx caddy.Context) error {
	wireForServiceApp(ctx, m)
	m.logger = ctx.Logger(m) // its own name, also when service_app provisions it itself
	m.events = newOAuthEvents(ctx.GetMetricsRegistry())
	repl := caddy.NewReplacer()
	secret, err := resolveSecret("service_oauth: client_secret", m.ClientSecret)
	if err != nil {
		return err
	}
	authURL, err := resolvedAddress("auth_url", m.AuthURL, baseURL)
	if err != nil {
		return fmt.Errorf("service_oauth: %w", err)
	}
	client := &oauth.Client{
		AuthURL:      strings.TrimSuffix(authURL, "/"),
		ClientID:     repl.ReplaceKnown(m.ClientID, ""),
		ClientSecret: secret,
		Scopes:       m.Scopes,
	}
	if client.ClientID == "" {
		return errors.New("service_oauth: client_id is empty")
	}
	app, err := servicegateApp(ctx)
	if err != nil {
		return fmt.Errorf("service_oauth: %w", err)
	}
	m.fillDefaults(app != nil)
	if err := m.Validate(); err != nil {
		return err
	}
	m.callbackPath, m.redirectURI, _ = oauth.ParseRedirectURI(m.RedirectURI) // checked by Validate
	client.HTTP = &http.Client{Timeout: time.Duration(m.Timeout)}
	m.manager = &oauth.Manager{
		Client:          client,
		RefreshWait:     time.Duration(m.Timeout) + oauthRefreshSlack,
		SessionLifetime: time.Duration(m.SessionLifetime),
	}
	if err := m.openSessionStores(ctx, app); err != nil {
		return err
	}
	return m.startFlow(ctx)
}

// fillDefaults sets every setting left unset to its default; sessions go
// to Redis by default when the servicegate app has a Redis server.
// LogoutRedirect and CookiePath are left to oauth.NewHandler's defaults.
func (m *ServiceOAuth) fillDefaults(redis bool) {
	for _, field := range []struct {
		value *string
		def   string
	}{
		{&m.RedirectURI, oauthDefaultCallback},
		{&m.LogoutPath, oauthDefaultLogout},
		{&m.CookieName, oauthDefaultCookie},
		{&m.SessionStore, map[bool]string{false: oauthStoreMemory, true: oauthStoreRedis}[redis]},
		{&m.UserHeader, oauthDefaultUserHeader},
		{&m.OrganizationHeader, oauthDefaultOrgHeader},
	} {
		*field.value = cmp.Or(*field.value, field.def)
	}
	m.SessionLifetime = cmp.Or(m.SessionLifetime, caddy.Duration(oauth.DefaultSessionLifetime))
	m.MaxSessions = cmp.Or(m.MaxSessions, oauthDefaultMaxSessions)
	m.Timeout = cmp.Or(m.Timeout, caddy.Duration(oauthDefaultTimeout))
	m.secure = m.CookieSecure == nil || *m.CookieSecure
}

// openSessionStores gives the manager the stores of session_store: Redis,
// Caddy's storage (swept until the config is unloaded), or memory kept
// across config reloads.
func (m *ServiceOAuth) openSessionStores(ctx caddy.Context, app *Servicegate) error {
	switch m.SessionStore {
	case oauthStoreRedis:
		if app == nil {
			return errors.New("service_oauth: session_store redis needs the servicegate global option with a redis server: { servicegate { redis redis://host:6379/0 } }")
		}
		sessions := app.Client().OAuthStore(cluster.OAuthSessions, nil)
		m.manager.Store, m.manager.Logins, m.manager.Locker = sessions, app.Client().OAuthStore(cluster.OAuthLogins, nil), sessions
	case oauthStoreStorage:
		// Logins go to the storage too, so that a login begun on one
		// instance can finish on another.
		m.manager.Store = oauth.NewStorageStore(ctx.Storage(), oauthStoragePrefix)
		m.manager.Logins = oauth.NewStorageStore(ctx.Storage(), oauthLoginsPrefix)
		go sweepOAuthStorage(ctx, ctx.Storage(), time.Duration(m.SessionLifetime), m.logger)
	default:
		c := m.manager.Client
		sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%d", c.AuthURL, c.ClientID, m.CookieName, m.MaxSessions))
		m.poolKey = hex.EncodeToString(sum[:])
		pooled, _, err := oauthStores.LoadOrNew(m.poolKey, func() (caddy.Destructor, error) {
			return pooledSessionStore{
				sessions: oauth.NewMemoryStore(m.MaxSessions, nil),
				logins:   oauth.NewMemoryStore(m.MaxSessions, nil),
			}, nil
		})
		if err != nil {
			return fmt.Errorf("service_oauth: %w", err)
		}
		m.manager.Store, m.manager.Logins = pooled.(pooledSessionStore).sessions, pooled.(pooledSessionStore).logins
	}
	return nil
}

// startFlow builds the sign-in flow over the manager, its refusals going
// through Caddy's error handling and its events to the metrics and logs.
func (m *ServiceOAuth) startFlow(ctx caddy.Context) error {
	if m.origin == nil {
		site := &siteOrigin{fix: "give redirect_uri as an absolute URL"}
		if m.redirectURI == "" {
			site.warnHostless(ctx, m.logger, "signing in")
		}
		m.origin = func(r *http.Request) (string, error) { return site.of(r, m) }
	}
	flow, err := oauth.NewHandler(oauth.HandlerConfig{
		Manager:            m.manager,
		CallbackPath:       m.callbackPath,
		RedirectURI:        m.redirectURI,
		Origin:             m.origin,
		LogoutPath:         m.LogoutPath,
		LogoutRedirect:     m.LogoutRedirect,
		CookieName:         m.CookieName,
		CookiePath:         m.CookiePath,
		CookieDomain:       m.CookieDomain,
		Secure:             m.secure,
		UserHeader:         headerOrNone(m.UserHeader),
		OrganizationHeader: headerOrNone(m.OrganizationHeader),
		Refuse:             refuse,
		Report:             m.report,
		RequestURI:         originalRequestURI,
	})
	if err != nil {
		return fmt.Errorf("service_oauth: %w", err)
	}
	m.flow = flow
	return nil
}

// headerOrNone is an upstream header name, or "" for "off".
func headerOrNone(name string) string {
	if name == oauthHeaderOff {
		return ""
	}
	return name
}

// Validate checks the configuration: what the flow requires, then the
// settings.
func (m *ServiceOAuth) Validate() error {
	switch {
	case m.AuthURL == "":
		return errors.New("service_oauth: auth_url is required")
	case len(m.Scopes) == 0:
		return errors.New("service_oauth: at least one scope is required")
	}
	return m.checkSettings()
}

// checkSettings checks the settings given, each unset one standing for
// its default, and not that the required ones are given: service_app
// supplies those of its sign_in block.
func (m *ServiceOAuth) checkSettings() error {
	logoutPath, cookieName := cmp.Or(m.LogoutPath, oauthDefaultLogout), cmp.Or(m.CookieName, oauthDefaultCookie)
	for _, addr := range [][2]string{{"auth_url", m.AuthURL}, {"logout_redirect", m.LogoutRedirect}} {
		form := baseURL
		if addr[0] == "logout_redirect" {
			form = pathOrURL
		}
		if err := checkAddress(addr[0], addr[1], form); err != nil {
			return fmt.Errorf("service_oauth: %w", err)
		}
	}
	switch {
	case m.SessionStore != "" && m.SessionStore != oauthStoreMemory && m.SessionStore != oauthStoreStorage && m.SessionStore != oauthStoreRedis:
		return fmt.Errorf("service_oauth: session_store must be memory, storage or redis, not %q", m.SessionStore)
	case m.MaxSessions < 0:
		return errors.New("service_oauth: max_sessions must be positive")
	case m.SessionLifetime < 0 || m.Timeout < 0:
		return errors.New("service_oauth: session_lifetime and timeout must be positive")
	case !strings.HasPrefix(logoutPath, "/"):
		return fmt.Errorf("service_oauth: logout_path %q must be a path starting with /", logoutPath)
	case (&http.Cookie{Name: cookieName}).Valid() != nil:
		return fmt.Errorf("service_oauth: cookie_name %q is not a valid cookie name", cookieName)
	}
	if err := (&http.Cookie{Name: cookieName, Path: m.CookiePath, Domain: m.CookieDomain}).Valid(); err != nil {
		return fmt.Errorf("service_oauth: cookie_path %q or cookie_domain %q is not valid in a cookie: %v", m.CookiePath, m.CookieDomain, err)
	}
	redirectURI := cmp.Or(m.RedirectURI, oauthDefaultCallback)
	if _, _, err := oauth.ParseRedirectURI(redirectURI); err != nil {
		return fmt.Errorf("service_oauth: %w", err)
	}
	if redirectURI == logoutPath {
		return errors.New("service_oauth: redirect_uri and logout_path must differ")
	}
	return nil
}

// Cleanup releases this config's use of the pooled session store.
func (m *ServiceOAuth) Cleanup() error {
	if m.poolKey != "" {
		_, _ = oauthStores.Delete(m.poolKey)
	}
	return nil
}

// ServeHTTP hands the request to the sign-in flow, which answers the
// callback and logout paths and passes requests of a live session on.
func (m *ServiceOAuth) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	r, _ = emulatorCall(r)
	return m.flow.Serve(w, r, next)
}

// report counts an event of the flow and logs what went wrong with it.
func (m *ServiceOAuth) report(ev oauth.Event, err error) {
	m.events.inc(ev)
	if err == nil {
		return
	}
	var refused *oauth.RefusedError
	var redisDown *cluster.CallError
	switch {
	case errors.As(err, &redisDown):
		// Logged by the Redis client, at most once every 10 s.
	case ev == oauth.SessionEnded:
		m.logger.Info(ev.String(), zap.Error(err))
	case errors.As(err, &refused):
		m.logger.Warn("code exchange refused", zap.Int("status", refused.Status), zap.String("error", refused.Code))
	case ev == oauth.LoginFailed:
		m.logger.Error("code exchange failed", zap.Error(err))
	case ev == oauth.Logout:
		m.logger.Error("session could not be ended", zap.Error(err))
	default:
		m.logger.Error(ev.String(), zap.Error(err))
	}
}

// originalRequestURI is the path and query the client asked for, before
// any rewrite.
func originalRequestURI(r *http.Request) string {
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
		return orig.URL.RequestURI()
	}
	return r.URL.RequestURI()
}

var (
	_ caddy.Provisioner           = (*ServiceOAuth)(nil)
	_ caddy.Validator             = (*ServiceOAuth)(nil)
	_ caddy.CleanerUpper          = (*ServiceOAuth)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceOAuth)(nil)
	_ caddyfile.Unmarshaler       = (*ServiceOAuth)(nil)
)
