package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/oauth"
)

// Defaults of service_oauth.
const (
	oauthDefaultCallback     = "/oauth/callback"
	oauthDefaultLogout       = "/oauth/logout"
	oauthDefaultCookie       = "servicegate_session"
	oauthDefaultMaxSessions  = 10000
	oauthDefaultTimeout      = 10 * time.Second
	oauthDefaultUserHeader   = "X-Service-User-Id"
	oauthDefaultOrgHeader    = "X-Service-Domain"
	oauthHeaderOff           = "off"
	oauthStoreMemory         = "memory"
	oauthStoreStorage        = "storage"
	oauthStateCookieSuffix   = "_state"
	oauthStoragePrefix       = "servicegate/oauth_sessions"
	oauthLoginsPrefix        = "servicegate/oauth_logins"
	oauthSweepEvery          = time.Hour
	oauthLoginLifetimeSecond = int(oauth.DefaultLoginLifetime / time.Second)
)

// oauthSkew moves service_oauth's clock, for tests of expiry and refresh.
var oauthSkew atomic.Int64

// oauthNow is service_oauth's clock.
func oauthNow() time.Time { return time.Now().Add(time.Duration(oauthSkew.Load())) }

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
	// redirect_uri is then built from the request's scheme and host), or
	// an absolute URL whose path is the callback path. It must be one of
	// the app's registered redirect URLs. Default "/oauth/callback".
	RedirectURI string `json:"redirect_uri,omitempty"`

	// LogoutPath forgets the session (server side and cookie) and
	// redirects to LogoutRedirect. Default "/oauth/logout".
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

	// SessionStore is where sessions live: "memory" (default; they survive
	// config reloads but not a restart) or "storage" (Caddy's configured
	// storage, so a restart or a second instance sharing the storage keeps
	// them; entries are named by a hash of the session id and encrypted
	// with a key derived from it).
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
	callbackPath string
	redirectURI  string // absolute, or "" to build from the request
	stateCookie  string
	secure       bool
	poolKey      string
	logger       *zap.Logger
	events       oauthEvents
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
	m.logger = ctx.Logger()
	m.events = newOAuthEvents(ctx.GetMetricsRegistry())
	repl := caddy.NewReplacer()
	secret := repl.ReplaceKnown(m.ClientSecret, "")
	clientID := repl.ReplaceKnown(m.ClientID, "")
	authURL := strings.TrimSuffix(repl.ReplaceKnown(m.AuthURL, ""), "/")
	if secret == "" {
		return errors.New("service_oauth: client_secret is empty (is its environment variable or file set?)")
	}
	if clientID == "" {
		return errors.New("service_oauth: client_id is empty")
	}
	if m.RedirectURI == "" {
		m.RedirectURI = oauthDefaultCallback
	}
	if m.LogoutPath == "" {
		m.LogoutPath = oauthDefaultLogout
	}
	if m.LogoutRedirect == "" {
		m.LogoutRedirect = "/"
	}
	if m.CookieName == "" {
		m.CookieName = oauthDefaultCookie
	}
	if m.CookiePath == "" {
		m.CookiePath = "/"
	}
	if m.SessionLifetime == 0 {
		m.SessionLifetime = caddy.Duration(oauth.DefaultSessionLifetime)
	}
	if m.MaxSessions == 0 {
		m.MaxSessions = oauthDefaultMaxSessions
	}
	if m.SessionStore == "" {
		m.SessionStore = oauthStoreMemory
	}
	if m.UserHeader == "" {
		m.UserHeader = oauthDefaultUserHeader
	}
	if m.OrganizationHeader == "" {
		m.OrganizationHeader = oauthDefaultOrgHeader
	}
	if m.Timeout == 0 {
		m.Timeout = caddy.Duration(oauthDefaultTimeout)
	}
	m.secure = m.CookieSecure == nil || *m.CookieSecure
	m.stateCookie = m.CookieName + oauthStateCookieSuffix
	if err := m.Validate(); err != nil {
		return err
	}
	if strings.HasPrefix(m.RedirectURI, "/") {
		m.callbackPath = m.RedirectURI
	} else {
		u, _ := url.Parse(m.RedirectURI) // checked by Validate
		m.callbackPath, m.redirectURI = u.Path, m.RedirectURI
	}

	var store, logins oauth.Store
	switch m.SessionStore {
	case oauthStoreStorage:
		// Logins go to the storage too, so that a login begun on one
		// instance can finish on another.
		store = oauth.NewStorageStore(ctx.Storage(), oauthStoragePrefix)
		logins = oauth.NewStorageStore(ctx.Storage(), oauthLoginsPrefix)
		go sweepOAuthStorage(ctx, ctx.Storage(), time.Duration(m.SessionLifetime), m.logger)
	default:
		sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%d", authURL, clientID, m.CookieName, m.MaxSessions))
		m.poolKey = hex.EncodeToString(sum[:])
		pooled, _, err := oauthStores.LoadOrNew(m.poolKey, func() (caddy.Destructor, error) {
			return pooledSessionStore{
				sessions: oauth.NewMemoryStore(m.MaxSessions, oauthNow),
				logins:   oauth.NewMemoryStore(m.MaxSessions, oauthNow),
			}, nil
		})
		if err != nil {
			return fmt.Errorf("service_oauth: %w", err)
		}
		store, logins = pooled.(pooledSessionStore).sessions, pooled.(pooledSessionStore).logins
	}
	m.manager = &oauth.Manager{
		Client: &oauth.Client{
			AuthURL:      authURL,
			ClientID:     clientID,
			ClientSecret: secret,
			Scopes:       m.Scopes,
			HTTP:         &http.Client{Timeout: time.Duration(m.Timeout)},
		},
		Store:           store,
		Logins:          logins,
		Now:             oauthNow,
		SessionLifetime: time.Duration(m.SessionLifetime),
	}
	return nil
}

// Validate checks the configuration.
func (m *ServiceOAuth) Validate() error {
	switch {
	case m.AuthURL == "":
		return errors.New("service_oauth: auth_url is required")
	case len(m.Scopes) == 0:
		return errors.New("service_oauth: at least one scope is required")
	case m.SessionStore != oauthStoreMemory && m.SessionStore != oauthStoreStorage:
		return fmt.Errorf("service_oauth: session_store must be memory or storage, not %q", m.SessionStore)
	case m.MaxSessions < 0:
		return errors.New("service_oauth: max_sessions must be positive")
	case m.SessionLifetime < 0 || m.Timeout < 0:
		return errors.New("service_oauth: session_lifetime and timeout must be positive")
	case !strings.HasPrefix(m.LogoutPath, "/"):
		return fmt.Errorf("service_oauth: logout_path %q must be a path starting with /", m.LogoutPath)
	case !isCookieName(m.CookieName):
		return fmt.Errorf("service_oauth: cookie_name %q is not a valid cookie name", m.CookieName)
	}
	if !strings.HasPrefix(m.RedirectURI, "/") {
		u, err := url.Parse(m.RedirectURI)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" {
			return fmt.Errorf("service_oauth: redirect_uri %q must be a path or an absolute http(s) URL", m.RedirectURI)
		}
		if !strings.HasPrefix(u.Path, "/") {
			return fmt.Errorf("service_oauth: redirect_uri %q needs a path", m.RedirectURI)
		}
	}
	if m.RedirectURI == m.LogoutPath {
		return errors.New("service_oauth: redirect_uri and logout_path must differ")
	}
	return nil
}

func isCookieName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", c) {
			return false
		}
	}
	return true
}

// sweepOAuthStorage deletes, now and then every oauthSweepEvery until the
// config is unloaded, the entries in storage that have surely ended:
// logins not written for a login lifetime, sessions not written for a
// session lifetime (a session is written when it starts and on every
// refresh, and never lives longer than sessionLifetime). Entries the
// browser never came back for are removed this way; the others are
// removed when they end. Several instances sweeping at once is harmless.
func sweepOAuthStorage(ctx caddy.Context, st certmagic.Storage, sessionLifetime time.Duration, logger *zap.Logger) {
	tick := time.NewTicker(oauthSweepEvery)
	defer tick.Stop()
	for {
		n := sweepStorageFolder(ctx, st, oauthLoginsPrefix, oauth.DefaultLoginLifetime) +
			sweepStorageFolder(ctx, st, oauthStoragePrefix, sessionLifetime)
		if n > 0 {
			logger.Info("removed ended sessions and logins from storage", zap.Int("entries", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sweepStorageFolder deletes the entries under prefix not written for
// longer than maxAge, and returns how many it deleted.
func sweepStorageFolder(ctx context.Context, st certmagic.Storage, prefix string, maxAge time.Duration) int {
	keys, err := st.List(ctx, prefix, false)
	if err != nil {
		return 0
	}
	now, n := oauthNow(), 0
	for _, key := range keys {
		info, err := st.Stat(ctx, key)
		if err != nil || !info.IsTerminal || now.Sub(info.Modified) <= maxAge {
			continue
		}
		if st.Delete(ctx, key) == nil {
			n++
		}
	}
	return n
}

// Cleanup releases this config's use of the pooled session store.
func (m *ServiceOAuth) Cleanup() error {
	if m.poolKey != "" {
		_, _ = oauthStores.Delete(m.poolKey)
	}
	return nil
}

// ServeHTTP answers the callback and logout paths, and passes requests of
// a live session on with its access token.
func (m *ServiceOAuth) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	switch r.URL.Path {
	case m.callbackPath:
		return m.serveCallback(w, r)
	case m.LogoutPath:
		return m.serveLogout(w, r)
	}
	if id := cookieValue(r.Header, m.CookieName); id != "" {
		s, err := m.manager.Session(r.Context(), id)
		switch {
		case err == nil:
			m.passOn(r, s)
			return next.ServeHTTP(w, r)
		case errors.Is(err, oauth.ErrSessionEnded):
			m.events.inc(oauthSessionRefused)
			m.logger.Info("session ended: the service refused to refresh its tokens", zap.Error(err))
			m.clearCookie(w, m.CookieName, m.CookiePath)
		case errors.Is(err, oauth.ErrNoSession):
			m.clearCookie(w, m.CookieName, m.CookiePath)
		default:
			m.logger.Error("session could not be read or refreshed", zap.Error(err))
			w.Header().Set("Retry-After", "5")
			return refuse(w, r, http.StatusServiceUnavailable,
				"Your session could not be checked with the service just now. Please try again in a moment.")
		}
	}
	return m.signIn(w, r)
}

// passOn puts the session's access token and names on the request for the
// handlers after this one, removing inbound copies, and keeps the session
// cookies from the app.
func (m *ServiceOAuth) passOn(r *http.Request, s oauth.Session) {
	h := r.Header
	setHeader(h, "Authorization", "Bearer "+s.AccessToken)
	if m.UserHeader != oauthHeaderOff {
		setHeader(h, m.UserHeader, s.UserID)
	}
	if m.OrganizationHeader != oauthHeaderOff {
		setHeader(h, m.OrganizationHeader, s.Organization)
	}
	stripCookies(h, m.CookieName, m.stateCookie)
}

// setHeader replaces every inbound value of a header with v (none when v is
// empty), reusing the inbound slice when there is one.
func setHeader(h http.Header, name, v string) {
	key := http.CanonicalHeaderKey(name)
	switch old := h[key]; {
	case v == "":
		delete(h, key)
	case len(old) > 0:
		old[0] = v
		h[key] = old[:1]
	default:
		h[key] = []string{v}
	}
}

// cookieValue finds a cookie in the Cookie header lines without parsing the
// others. Values are taken as sent (session ids and states are URL-safe).
func cookieValue(h http.Header, name string) string {
	for _, line := range h["Cookie"] {
		for len(line) > 0 {
			var pair string
			pair, line, _ = strings.Cut(line, ";")
			pair = strings.TrimSpace(pair)
			if len(pair) > len(name) && pair[len(name)] == '=' && pair[:len(name)] == name {
				return strings.Trim(pair[len(name)+1:], `"`)
			}
		}
	}
	return ""
}

// stripCookies removes the named cookies from the Cookie header lines.
func stripCookies(h http.Header, names ...string) {
	lines := h["Cookie"]
	found, others := false, false
	for _, line := range lines {
		for part := range strings.SplitSeq(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if slices.Contains(names, name) {
				found = true
			} else if name != "" {
				others = true
			}
		}
	}
	if !found {
		return
	}
	if !others {
		h.Del("Cookie")
		return
	}
	kept := make([]string, 0, len(lines))
	for _, line := range lines {
		var b strings.Builder
		for part := range strings.SplitSeq(line, ";") {
			pair := strings.TrimSpace(part)
			if pair == "" {
				continue
			}
			name, _, _ := strings.Cut(pair, "=")
			if slices.Contains(names, name) {
				continue
			}
			if b.Len() > 0 {
				b.WriteString("; ")
			}
			b.WriteString(pair)
		}
		if b.Len() > 0 {
			kept = append(kept, b.String())
		}
	}
	if len(kept) == 0 {
		h.Del("Cookie")
		return
	}
	h["Cookie"] = kept
}

// wantsHTML tells a browser from an API client.
func wantsHTML(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(v, "text/html") {
			return true
		}
	}
	return false
}

// signIn answers a request without a session: browsers are sent to sign
// in, API clients get 401.
func (m *ServiceOAuth) signIn(w http.ResponseWriter, r *http.Request) error {
	if !wantsHTML(r) {
		m.events.inc(oauthUnauthenticated)
		w.Header().Set("Cache-Control", "no-store")
		return refuse(w, r, http.StatusUnauthorized,
			"Sign in with the service first: this address needs a session, and the request has none.")
	}
	returnTo, status := "/", http.StatusSeeOther
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		returnTo, status = safeReturn(originalRequestURI(r)), http.StatusFound
	}
	state, authorizeURL, err := m.manager.Begin(r.Context(), m.redirectFor(r), returnTo)
	if err != nil {
		m.logger.Error("login could not be started", zap.Error(err))
		return refuse(w, r, http.StatusServiceUnavailable, "Signing in is not possible just now. Please try again in a moment.")
	}
	m.events.inc(oauthLoginStarted)
	http.SetCookie(w, &http.Cookie{
		Name:     m.stateCookie,
		Value:    state,
		Path:     m.callbackPath,
		MaxAge:   oauthLoginLifetimeSecond,
		HttpOnly: true,
		Secure:   m.secure,
		SameSite: http.SameSiteLaxMode,
	})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", authorizeURL)
	w.WriteHeader(status)
	return nil
}

// redirectFor is the absolute redirect_uri for a request.
func (m *ServiceOAuth) redirectFor(r *http.Request) string {
	if m.redirectURI != "" {
		return m.redirectURI
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + m.callbackPath
}

// originalRequestURI is the path and query the client asked for, before
// any rewrite.
func originalRequestURI(r *http.Request) string {
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
		return orig.URL.RequestURI()
	}
	return r.URL.RequestURI()
}

// safeReturn keeps only same-site relative paths: "/x" stays, while
// "//host/x", "/\host", absolute URLs and anything with control characters
// become "/", so the return after login is never an open redirect.
func safeReturn(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") {
		return "/"
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\' {
			return "/"
		}
	}
	return p
}

// serveCallback finishes a login.
func (m *ServiceOAuth) serveCallback(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return refuse(w, r, http.StatusMethodNotAllowed, "The sign-in callback takes GET.")
	}
	q := r.URL.Query()
	state := q.Get("state")
	bound := ""
	if c, err := r.Cookie(m.stateCookie); err == nil {
		bound = c.Value
	}
	m.clearCookie(w, m.stateCookie, m.callbackPath)

	if oauthErr := q.Get("error"); oauthErr != "" {
		returnTo, ok := m.manager.Abandon(r.Context(), state, bound)
		if !ok {
			returnTo = "/"
		}
		if oauthErr == "access_denied" {
			m.events.inc(oauthLoginDeclined)
			writeOAuthPage(w, http.StatusForbidden, "Sign-in declined",
				"You declined to let this app use your account, so it cannot be opened.", returnTo)
			return nil
		}
		m.events.inc(oauthLoginFailed)
		writeOAuthPage(w, http.StatusBadRequest, "Sign-in failed",
			"The service could not sign you in ("+oauthErrorCode(oauthErr)+").", returnTo)
		return nil
	}

	id, s, err := m.manager.Complete(r.Context(), state, bound, q.Get("code"))
	var refused *oauth.RefusedError
	switch {
	case err == nil:
	case errors.Is(err, oauth.ErrBadState):
		m.events.inc(oauthLoginBadState)
		// Back to a used callback with the back button: a browser that
		// is signed in already just goes on.
		if id := cookieValue(r.Header, m.CookieName); id != "" {
			if _, err := m.manager.Session(r.Context(), id); err == nil {
				w.Header().Set("Cache-Control", "no-store")
				w.Header().Set("Location", "/")
				w.WriteHeader(http.StatusSeeOther)
				return nil
			}
		}
		writeOAuthPage(w, http.StatusBadRequest, "Sign-in link expired",
			"This sign-in link is not valid here any more: it was already used, it expired, or it was started in another browser.", "/")
		return nil
	case errors.As(err, &refused):
		m.events.inc(oauthLoginFailed)
		m.logger.Warn("code exchange refused", zap.Int("status", refused.Status), zap.String("error", refused.Code))
		writeOAuthPage(w, http.StatusForbidden, "Sign-in refused",
			"The service did not accept this sign-in. It may have taken too long.", "/")
		return nil
	default:
		m.events.inc(oauthLoginFailed)
		m.logger.Error("code exchange failed", zap.Error(err))
		writeOAuthPage(w, http.StatusBadGateway, "Sign-in failed",
			"The service could not be reached to finish signing you in.", "/")
		return nil
	}
	m.events.inc(oauthLoginCompleted)
	http.SetCookie(w, &http.Cookie{
		Name:     m.CookieName,
		Value:    id,
		Path:     m.CookiePath,
		Domain:   m.CookieDomain,
		MaxAge:   int(time.Duration(m.SessionLifetime) / time.Second),
		HttpOnly: true,
		Secure:   m.secure,
		SameSite: http.SameSiteLaxMode,
	})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", safeReturn(s.ReturnTo))
	w.WriteHeader(http.StatusSeeOther)
	return nil
}

// oauthErrorCode keeps an error code from the query only when it looks like
// one, so the page never reflects arbitrary text.
func oauthErrorCode(s string) string {
	if len(s) > 40 {
		return "error"
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && c != '_' {
			return "error"
		}
	}
	return s
}

// serveLogout forgets the session and sends the user on.
func (m *ServiceOAuth) serveLogout(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, HEAD, POST")
		return refuse(w, r, http.StatusMethodNotAllowed, "Sign out with GET or POST.")
	}
	m.events.inc(oauthLogout)
	if c, err := r.Cookie(m.CookieName); err == nil {
		if err := m.manager.End(context.WithoutCancel(r.Context()), c.Value); err != nil {
			m.logger.Error("session could not be ended", zap.Error(err))
		}
	}
	m.clearCookie(w, m.CookieName, m.CookiePath)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", m.LogoutRedirect)
	w.WriteHeader(http.StatusSeeOther)
	return nil
}

func (m *ServiceOAuth) clearCookie(w http.ResponseWriter, name, path string) {
	c := &http.Cookie{Name: name, Path: path, MaxAge: -1, HttpOnly: true, Secure: m.secure, SameSite: http.SameSiteLaxMode}
	if name == m.CookieName {
		c.Domain = m.CookieDomain
	}
	http.SetCookie(w, c)
}

var oauthPage = template.Must(template.New("oauth").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body><h1>{{.Title}}</h1><p>{{.Message}}</p>
<p><a href="{{.Again}}">Try again</a></p></body></html>
`))

// writeOAuthPage writes a small page for a person in a browser, with a link
// to try again.
func writeOAuthPage(w http.ResponseWriter, status int, title, message, again string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'")
	w.WriteHeader(status)
	_ = oauthPage.Execute(w, struct{ Title, Message, Again string }{title, message, safeReturn(again)})
}

var (
	_ caddy.Provisioner           = (*ServiceOAuth)(nil)
	_ caddy.Validator             = (*ServiceOAuth)(nil)
	_ caddy.CleanerUpper          = (*ServiceOAuth)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceOAuth)(nil)
	_ caddyfile.Unmarshaler       = (*ServiceOAuth)(nil)
)
