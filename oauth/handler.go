package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/servicegate/servicegate/internal/names"
	"github.com/servicegate/servicegate/respond"
)

// StateCookieSuffix names the login state cookie: the session cookie's name
// with this suffix.
const StateCookieSuffix = "_state"

// Event is a step of the sign-in flow or the end of a session, told to
// HandlerConfig.Report with the error that came with it, if any.
type Event int

// The events of a Handler.
const (
	// LoginStarted: a browser without a session was sent to sign in.
	LoginStarted Event = iota
	// LoginCompleted: the code was exchanged, a session began.
	LoginCompleted
	// LoginDeclined: the user declined (access_denied).
	LoginDeclined
	// LoginFailed: the service answered another error (no error
	// reported), refused the code (a *RefusedError), or could not be
	// reached to exchange it.
	LoginFailed
	// LoginBadState: the callback's state was unknown, used, expired or
	// another browser's.
	LoginBadState
	// Unauthenticated: a client that wants no page and has no session was
	// refused with 401.
	Unauthenticated
	// SessionEnded: the service refused to refresh the session's tokens;
	// the session is gone.
	SessionEnded
	// Logout: the user signed out; the error says the session could not
	// be forgotten in the store.
	Logout
	// SessionUnavailable: the session could not be read or refreshed (the
	// store or the token endpoint failed); the request was refused 503.
	SessionUnavailable
	// LoginUnavailable: a login could not be started (the store failed);
	// the request was refused 503.
	LoginUnavailable
	// NumEvents is the number of events, for arrays indexed by Event.
	NumEvents
)

var eventText = [NumEvents]string{
	LoginStarted:       "login started",
	LoginCompleted:     "login completed",
	LoginDeclined:      "login declined",
	LoginFailed:        "login failed",
	LoginBadState:      "login with a bad state",
	Unauthenticated:    "request without a session refused",
	SessionEnded:       "session ended: the service refused to refresh its tokens",
	Logout:             "logout",
	SessionUnavailable: "session could not be read or refreshed",
	LoginUnavailable:   "login could not be started",
}

// String says what happened, for a log line.
func (e Event) String() string { return names.Of(eventText[:], e, "event") }

// Next is the handler after a Handler; caddyhttp.Handler is one.
type Next interface {
	ServeHTTP(http.ResponseWriter, *http.Request) error
}

// nextFunc is a function used as a Next.
type nextFunc func(http.ResponseWriter, *http.Request) error

// ServeHTTP calls f.
func (f nextFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) error { return f(w, r) }

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// Manager keeps logins and sessions and talks to the authorization
	// server. Required.
	Manager *Manager

	// CallbackPath is the path of the redirect URI, where the service
	// sends the user back. Required.
	CallbackPath string
	// RedirectURI is the absolute redirect_uri of authorization requests;
	// empty builds it from Origin and CallbackPath.
	RedirectURI string
	// Origin is the scheme and host (and any port) of the site a request
	// is for, from which the redirect_uri is built when RedirectURI is
	// empty; an error refuses the sign-in with its message. It must not
	// take the request's Host header as it comes: the client chooses it.
	// One of RedirectURI and Origin is required.
	Origin func(*http.Request) (string, error)
	// LogoutPath forgets the session on a same-origin POST and redirects
	// to LogoutRedirect; a GET shows a page with a button that POSTs.
	// Required, and not CallbackPath.
	LogoutPath string
	// LogoutRedirect is where signing out sends the user. Default "/".
	LogoutRedirect string

	// CookieName names the session cookie; the login state cookie is
	// CookieName + StateCookieSuffix. Required.
	CookieName string
	// CookiePath and CookieDomain are the Path and Domain attributes of
	// the session cookie. Default path "/", no domain.
	CookiePath, CookieDomain string
	// Secure sets the Secure attribute of the cookies.
	Secure bool

	// UserHeader and OrganizationHeader are the headers that carry the
	// session's user and organization to the next handler, after every
	// inbound copy is removed; empty sends none.
	UserHeader, OrganizationHeader string

	// Refuse answers a request the flow refuses outside of a page (401
	// without a session, 405, 503) with status and a message for a
	// person, and returns what Serve returns. Headers such as Allow and
	// Retry-After are already set on w. Default: respond.Error, and nil.
	Refuse func(w http.ResponseWriter, r *http.Request, status int, message string) error
	// Report, when set, is told each event of the flow, for metrics and
	// logs. err never holds a token or a secret.
	Report func(ev Event, err error)
	// RequestURI is the path and query the client asked for, where the
	// user goes back after signing in. Default r.URL.RequestURI(); a
	// server that rewrites requests gives the one before rewriting.
	RequestURI func(*http.Request) string
}

// Handler runs the service's authorization-code flow in front of an app.
// A browser without a session is sent to the service to sign in and comes
// back to the callback path; the handler exchanges the code, keeps the
// token pair in a server-side session and gives the browser only a cookie
// naming it. Requests of a session go on to the next handler with
// Authorization: Bearer <access token> and the session's user and
// organization headers, without the handler's cookies; an access token
// within a minute of its expiry is refreshed first. Clients that want no
// HTML page (respond.WantsHTML) without a session get 401, never a
// redirect.
type Handler struct {
	cfg             HandlerConfig
	stateCookie     string
	sessionMaxAge   int
	stateMaxAge     int
	refuse          func(http.ResponseWriter, *http.Request, int, string) error
	report          func(Event, error)
	requestURI      func(*http.Request) string
	sessionTemplate http.Cookie
}

// NewHandler checks cfg and returns its Handler.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Manager == nil || cfg.Manager.Client == nil || cfg.Manager.Store == nil {
		return nil, errors.New("a Manager with a Client and a Store is required")
	}
	if !strings.HasPrefix(cfg.CallbackPath, "/") || !strings.HasPrefix(cfg.LogoutPath, "/") {
		return nil, errors.New("the callback and logout paths must start with /")
	}
	if cfg.CallbackPath == cfg.LogoutPath {
		return nil, errors.New("the callback and logout paths must differ")
	}
	if cfg.RedirectURI == "" && cfg.Origin == nil {
		return nil, errors.New("a RedirectURI or an Origin is required: the request's Host header is the client's to choose")
	}
	if cfg.LogoutRedirect == "" {
		cfg.LogoutRedirect = "/"
	}
	if cfg.CookiePath == "" {
		cfg.CookiePath = "/"
	}
	h := &Handler{
		cfg:           cfg,
		stateCookie:   cfg.CookieName + StateCookieSuffix,
		sessionMaxAge: int(orDefault(cfg.Manager.SessionLifetime, DefaultSessionLifetime) / time.Second),
		stateMaxAge:   int(orDefault(cfg.Manager.LoginLifetime, DefaultLoginLifetime) / time.Second),
		refuse:        cfg.Refuse,
		report:        cfg.Report,
		requestURI:    cfg.RequestURI,
	}
	h.sessionTemplate = http.Cookie{
		Name:     cfg.CookieName,
		Path:     cfg.CookiePath,
		Domain:   cfg.CookieDomain,
		HttpOnly: true,
		Secure:   cfg.Secure,
		SameSite: http.SameSiteLaxMode,
	}
	if err := h.sessionTemplate.Valid(); err != nil {
		return nil, fmt.Errorf("the session cookie (name %q, path %q, domain %q) is not valid: %w",
			cfg.CookieName, cfg.CookiePath, cfg.CookieDomain, err)
	}
	if err := h.stateCookieOf("", cfg.CallbackPath).Valid(); err != nil {
		return nil, fmt.Errorf("the state cookie (name %q, path %q) is not valid: %w", h.stateCookie, cfg.CallbackPath, err)
	}
	if h.refuse == nil {
		h.refuse = respond.Refuse
	}
	if h.report == nil {
		h.report = func(Event, error) {}
	}
	if h.requestURI == nil {
		h.requestURI = func(r *http.Request) string { return r.URL.RequestURI() }
	}
	return h, nil
}

// Serve answers the callback and logout paths, passes requests of a live
// session on to next, and sends the others to sign in (or refuses them).
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, next Next) error {
	switch r.URL.Path {
	case h.cfg.CallbackPath:
		return h.serveCallback(w, r)
	case h.cfg.LogoutPath:
		return h.serveLogout(w, r)
	}
	if id := cookieValue(r.Header, h.cfg.CookieName); id != "" {
		s, err := h.cfg.Manager.Session(r.Context(), id)
		switch {
		case err == nil:
			h.passOn(r, s)
			return next.ServeHTTP(w, r)
		case errors.Is(err, ErrSessionEnded):
			h.report(SessionEnded, err)
			h.clearCookie(w, h.cfg.CookieName, h.cfg.CookiePath)
		case errors.Is(err, ErrNoSession):
			h.clearCookie(w, h.cfg.CookieName, h.cfg.CookiePath)
		default:
			h.report(SessionUnavailable, err)
			w.Header().Set("Retry-After", "5")
			return h.refuse(w, r, http.StatusServiceUnavailable,
				"Your session could not be checked with the service just now. Please try again in a moment.")
		}
	}
	return h.signIn(w, r)
}

// Wrap is the Handler in front of next, as an http.Handler for a Go app.
// An error returned by next is answered 500.
func (h *Handler) Wrap(next http.Handler) http.Handler {
	then := nextFunc(func(w http.ResponseWriter, r *http.Request) error {
		next.ServeHTTP(w, r)
		return nil
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h.Serve(w, r, then); err != nil {
			respond.Error(w, http.StatusInternalServerError, "The request could not be answered.")
		}
	})
}

// passOn puts the session's access token and names on the request for the
// handlers after this one, removing inbound copies, and keeps the session
// cookies from the app.
func (h *Handler) passOn(r *http.Request, s Session) {
	hd := r.Header
	setHeader(hd, "Authorization", "Bearer "+s.AccessToken)
	if h.cfg.UserHeader != "" {
		setHeader(hd, h.cfg.UserHeader, s.UserID)
	}
	if h.cfg.OrganizationHeader != "" {
		setHeader(hd, h.cfg.OrganizationHeader, s.Organization)
	}
	stripCookies(hd, h.cfg.CookieName, h.stateCookie)
}

// Carries reports whether header carries one of the handler's cookies:
// the session's or the login state's.
func (h *Handler) Carries(header http.Header) bool {
	return cookieValue(header, h.cfg.CookieName) != "" || cookieValue(header, h.stateCookie) != ""
}

// StripCookies removes the handler's cookies (the session's and the login
// state's) from header and keeps every other cookie. A server that passes
// requests to the app by other ways than Serve (public paths, requests
// with a token of their own) calls it, so that the app never receives
// the session cookie.
func (h *Handler) StripCookies(header http.Header) {
	stripCookies(header, h.cfg.CookieName, h.stateCookie)
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
// others, so a request of a session costs no allocation here. Values are
// taken as sent (session ids and states are URL-safe).
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

// signIn answers a request without a session: browsers are sent to sign
// in, other clients get 401.
func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) error {
	if !respond.WantsHTML(r.Header) {
		h.report(Unauthenticated, nil)
		w.Header().Set("Cache-Control", "no-store")
		return h.refuse(w, r, http.StatusUnauthorized,
			"Sign in with the service first: this address needs a session, and the request has none.")
	}
	returnTo, status := "/", http.StatusSeeOther
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		returnTo, status = safeReturn(h.requestURI(r)), http.StatusFound
	}
	redirectURI, err := h.redirectFor(r)
	if err != nil {
		h.report(LoginUnavailable, err)
		return h.refuse(w, r, http.StatusInternalServerError, "Signing in is not set up on this site: "+err.Error())
	}
	state, authorizeURL, err := h.cfg.Manager.Begin(r.Context(), redirectURI, returnTo)
	if err != nil {
		h.report(LoginUnavailable, err)
		w.Header().Set("Retry-After", "5")
		return h.refuse(w, r, http.StatusServiceUnavailable, "Signing in is not possible just now. Please try again in a moment.")
	}
	h.report(LoginStarted, nil)
	http.SetCookie(w, h.stateCookieOf(state, h.cfg.CallbackPath))
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", authorizeURL)
	w.WriteHeader(status)
	return nil
}

// stateCookieOf binds a login's state to the browser.
func (h *Handler) stateCookieOf(state, path string) *http.Cookie {
	return &http.Cookie{
		Name:     h.stateCookie,
		Value:    state,
		Path:     path,
		MaxAge:   h.stateMaxAge,
		HttpOnly: true,
		Secure:   h.cfg.Secure,
		SameSite: http.SameSiteLaxMode,
	}
}

// redirectFor is the absolute redirect_uri for a request.
func (h *Handler) redirectFor(r *http.Request) (string, error) {
	if h.cfg.RedirectURI != "" {
		return h.cfg.RedirectURI, nil
	}
	origin, err := h.cfg.Origin(r)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(origin, "/") + h.cfg.CallbackPath, nil
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
func (h *Handler) serveCallback(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return h.refuse(w, r, http.StatusMethodNotAllowed, "The sign-in callback takes GET.")
	}
	q := r.URL.Query()
	state := q.Get("state")
	bound := ""
	if c, err := r.Cookie(h.stateCookie); err == nil {
		bound = c.Value
	}
	h.clearCookie(w, h.stateCookie, h.cfg.CallbackPath)

	if oauthErr := q.Get("error"); oauthErr != "" {
		returnTo, ok := h.cfg.Manager.Abandon(r.Context(), state, bound)
		if !ok {
			returnTo = "/"
		}
		if oauthErr == "access_denied" {
			h.report(LoginDeclined, nil)
			writePage(w, http.StatusForbidden, "Sign-in declined",
				"You declined to let this app use your account, so it cannot be opened.", returnTo)
			return nil
		}
		h.report(LoginFailed, nil)
		writePage(w, http.StatusBadRequest, "Sign-in failed",
			"The service could not sign you in ("+errorCode(oauthErr)+").", returnTo)
		return nil
	}

	id, s, err := h.cfg.Manager.Complete(r.Context(), state, bound, q.Get("code"))
	var refused *RefusedError
	switch {
	case err == nil:
	case errors.Is(err, ErrBadState):
		h.report(LoginBadState, nil)
		// Back to a used callback with the back button: a browser that
		// is signed in already just goes on.
		if id := cookieValue(r.Header, h.cfg.CookieName); id != "" {
			if _, err := h.cfg.Manager.Session(r.Context(), id); err == nil {
				w.Header().Set("Cache-Control", "no-store")
				w.Header().Set("Location", "/")
				w.WriteHeader(http.StatusSeeOther)
				return nil
			}
		}
		writePage(w, http.StatusBadRequest, "Sign-in link expired",
			"This sign-in link is not valid here any more: it was already used, it expired, or it was started in another browser.", "/")
		return nil
	case errors.As(err, &refused):
		h.report(LoginFailed, refused)
		writePage(w, http.StatusForbidden, "Sign-in refused",
			"The service did not accept this sign-in. It may have taken too long.", "/")
		return nil
	default:
		h.report(LoginFailed, err)
		msg := "The service could not be reached to finish signing you in."
		var answered *AnsweredError
		if errors.As(err, &answered) {
			msg = fmt.Sprintf("The service answered %d when asked to finish signing you in. Try again in a moment.", answered.Status)
		}
		writePage(w, http.StatusBadGateway, "Sign-in failed", msg, "/")
		return nil
	}
	h.report(LoginCompleted, nil)
	c := h.sessionTemplate
	c.Value, c.MaxAge = id, h.sessionMaxAge
	http.SetCookie(w, &c)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", safeReturn(s.ReturnTo))
	w.WriteHeader(http.StatusSeeOther)
	return nil
}

// errorCode keeps an error code from the query only when it looks like
// one, so the page never reflects arbitrary text.
func errorCode(s string) string {
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

// serveLogout ends the session on a same-site POST and sends the user
// on. A GET (a link, or a cross-site image or redirect) ends nothing: it
// shows a page whose button POSTs to the logout path.
func (h *Handler) serveLogout(w http.ResponseWriter, r *http.Request) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.writeLogoutPage(w, http.StatusOK, "Sign out of this app on this browser?")
		return nil
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		return h.refuse(w, r, http.StatusMethodNotAllowed, "Sign out with the button of the sign-out page (a POST).")
	}
	if !sameOrigin(r) {
		w.Header().Set("Cache-Control", "no-store")
		if respond.WantsHTML(r.Header) {
			h.writeLogoutPage(w, http.StatusForbidden,
				"The request to sign out came from another site, so you are still signed in. Sign out here if you meant to.")
			return nil
		}
		return h.refuse(w, r, http.StatusForbidden,
			"Signing out takes a POST from this site's own pages: the request came from another site, or said from where it came in no header (Sec-Fetch-Site, Origin or Referer).")
	}
	var err error
	if c, cerr := r.Cookie(h.cfg.CookieName); cerr == nil {
		err = h.cfg.Manager.End(context.WithoutCancel(r.Context()), c.Value)
	}
	h.report(Logout, err)
	h.clearCookie(w, h.cfg.CookieName, h.cfg.CookiePath)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", h.cfg.LogoutRedirect)
	w.WriteHeader(http.StatusSeeOther)
	return nil
}

// writeLogoutPage writes the page with the sign-out button.
func (h *Handler) writeLogoutPage(w http.ResponseWriter, status int, message string) {
	respond.WritePage(w, status, respond.Page{Title: "Sign out", Message: message, Action: h.cfg.LogoutPath, ActionText: "Sign out"})
}

// sameOrigin reports whether a browser sent r from this site's own pages:
// by Sec-Fetch-Site when the browser sends it (same-origin, or none for
// the user's own action), else by the host of Origin or Referer. A
// request that says nothing of where it came from is not.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default:
		return false
	}
	from := r.Header.Get("Origin")
	if from == "" || from == "null" {
		from = r.Header.Get("Referer")
	}
	u, err := url.Parse(from)
	return from != "" && err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// clearCookie tells the browser to drop one of the handler's cookies.
func (h *Handler) clearCookie(w http.ResponseWriter, name, path string) {
	c := &http.Cookie{Name: name, Path: path, MaxAge: -1, HttpOnly: true, Secure: h.cfg.Secure, SameSite: http.SameSiteLaxMode}
	if name == h.cfg.CookieName {
		c.Domain = h.cfg.CookieDomain
	}
	http.SetCookie(w, c)
}

// writePage writes a small page for a person in a browser, with a link to
// try again.
func writePage(w http.ResponseWriter, status int, title, message, again string) {
	respond.WritePage(w, status, respond.Page{Title: title, Message: message, Link: safeReturn(again), LinkText: "Try again"})
}
