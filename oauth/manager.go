package oauth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sync/singleflight"
)

// Defaults applied by a Manager to its zero fields.
const (
	DefaultSessionLifetime = 24 * time.Hour
	DefaultLoginLifetime   = 10 * time.Minute
	DefaultRefreshBefore   = time.Minute
	DefaultRefreshWait     = 15 * time.Second
	// refreshPoll is how often a Manager waiting for another instance's
	// refresh looks at the session.
	refreshPoll = 20 * time.Millisecond
)

// Locker makes one refresh per session across the instances that share a
// Store: only the holder of a session's lock refreshes it, the others wait
// for the session it writes back. Lock tries to take the lock named name
// for at most ttl; held is false when another holder has it. unlock
// releases it (only if it is still the caller's). Implementations are safe
// for concurrent use.
type Locker interface {
	Lock(ctx context.Context, name string, ttl time.Duration) (unlock func(), held bool, err error)
}

// Errors of a Manager. Other errors (an unreachable token endpoint, a
// failing store) are worth retrying later.
var (
	// ErrNoSession: the id names no live session.
	ErrNoSession = errors.New("no session")
	// ErrSessionEnded: the authorization server refused to refresh the
	// session's tokens, and the session is gone.
	ErrSessionEnded = errors.New("the session has ended: the refresh token was refused")
	// ErrBadState: the state of a callback is unknown, already used,
	// expired, or not the one this browser was given.
	ErrBadState = errors.New("the sign-in state is unknown, already used, or not this browser's")
)

// loginPrefix keeps logins in progress apart from sessions when they share
// one Store.
const loginPrefix = "login:"

func (m *Manager) logins() Store {
	if m.Logins != nil {
		return m.Logins
	}
	return m.Store
}

// Manager runs the flow: logins in progress, sessions, refresh. Set its
// fields before first use and do not change them after; a Manager is safe
// for concurrent use.
type Manager struct {
	// Client talks to the authorization server. Required.
	Client *Client
	// Store keeps sessions. Required.
	Store Store
	// Logins keeps logins in progress, under their states. Default Store.
	// A separate store keeps a flood of logins that are never finished
	// from pushing sessions out of a bounded Store.
	Logins Store
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// SessionLifetime bounds a session. Default DefaultSessionLifetime.
	SessionLifetime time.Duration
	// LoginLifetime bounds a login in progress. Default DefaultLoginLifetime.
	LoginLifetime time.Duration
	// RefreshBefore is how long before its expiry an access token is
	// refreshed. Default DefaultRefreshBefore.
	RefreshBefore time.Duration
	// Locker, when set, makes one refresh per session across every
	// Manager sharing Store (and the lock names): the others wait for the
	// session the refresh writes back. Default none: one refresh per
	// session in this process.
	Locker Locker
	// RefreshWait bounds a refresh across instances: the lock is held at
	// most this long, and another instance's refresh is waited for at most
	// this long. Default DefaultRefreshWait; it should exceed the token
	// request's timeout.
	RefreshWait time.Duration

	refreshes singleflight.Group
}

func (m *Manager) now() time.Time {
	if m.Now == nil {
		return time.Now()
	}
	return m.Now()
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// NewID returns a random identifier of 256 bits, URL-safe.
func NewID() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Begin starts a login that will come back to redirectURI and then send
// the user to returnTo. It returns the state (to bind to the browser, e.g.
// in a cookie) and the authorization request's address.
func (m *Manager) Begin(ctx context.Context, redirectURI, returnTo string) (state, authorizeURL string, err error) {
	state = NewID()
	login := Session{
		ReturnTo:    returnTo,
		RedirectURI: redirectURI,
		Expires:     m.now().Add(orDefault(m.LoginLifetime, DefaultLoginLifetime)),
	}
	if err := m.logins().Put(ctx, loginPrefix+state, login); err != nil {
		return "", "", fmt.Errorf("starting a login: %w", err)
	}
	return state, m.Client.AuthorizeURL(redirectURI, state), nil
}

// takeLogin checks that state came back to the browser it was bound to
// (boundState, from that browser's cookie), and removes the login so the
// state cannot be used twice.
func (m *Manager) takeLogin(ctx context.Context, state, boundState string) (Session, error) {
	if state == "" || len(state) != len(boundState) || subtle.ConstantTimeCompare([]byte(state), []byte(boundState)) != 1 {
		return Session{}, ErrBadState
	}
	login, ok, err := m.logins().Get(ctx, loginPrefix+state)
	if err != nil {
		return Session{}, fmt.Errorf("reading a login: %w", err)
	}
	if !ok {
		return Session{}, ErrBadState
	}
	if err := m.logins().Delete(ctx, loginPrefix+state); err != nil {
		return Session{}, fmt.Errorf("ending a login: %w", err)
	}
	if !m.now().Before(login.Expires) {
		return Session{}, ErrBadState
	}
	return login, nil
}

// Abandon ends the login of state (the user declined, or the server
// answered an error) and returns where the user was going, so a page can
// offer to try again. ok is false when the state is not good.
func (m *Manager) Abandon(ctx context.Context, state, boundState string) (returnTo string, ok bool) {
	login, err := m.takeLogin(ctx, state, boundState)
	if err != nil {
		return "", false
	}
	return login.ReturnTo, true
}

// Complete finishes the login of state with the code the user came back
// with: it checks the state against boundState, exchanges the code, and
// keeps a new session. It returns the session's id and the session, whose
// ReturnTo says where the user was going.
func (m *Manager) Complete(ctx context.Context, state, boundState, code string) (id string, s Session, err error) {
	login, err := m.takeLogin(ctx, state, boundState)
	if err != nil {
		return "", Session{}, err
	}
	now := m.now()
	tok, err := m.Client.Exchange(ctx, code, login.RedirectURI, now)
	if err != nil {
		return "", Session{}, fmt.Errorf("code exchange: %w", err)
	}
	s = newSession(tok, now.Add(orDefault(m.SessionLifetime, DefaultSessionLifetime)))
	s.ReturnTo = login.ReturnTo
	id = NewID()
	stored := s
	stored.ReturnTo = ""
	if err := m.Store.Put(ctx, id, stored); err != nil {
		return "", Session{}, fmt.Errorf("keeping a session: %w", err)
	}
	return id, s, nil
}

// newSession names the user and organization of tok's access token.
func newSession(tok Token, expires time.Time) Session {
	s := Session{Token: tok, Expires: expires}
	claims, ok := decodeClaims(tok.AccessToken)
	if !ok {
		return s
	}
	ctxClaims, _ := claims["context"].(map[string]any)
	s.UserID = claimString(ctxClaims["user_id"])
	if s.UserID == "" {
		s.UserID = claimString(claims["sub"])
	}
	s.Organization = claimString(claims["domain"])
	if s.Organization == "" {
		s.Organization = claimString(ctxClaims["organization_id"])
	}
	return s
}

// claimString is a string claim, or an integer one written in decimal.
func claimString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		if v == float64(int64(v)) {
			return strconv.FormatInt(int64(v), 10)
		}
	}
	return ""
}

// Session returns the session named by id with an access token that is
// valid for at least RefreshBefore, refreshing it first when needed.
// Concurrent calls for one session refresh once. It returns ErrNoSession
// for an unknown or expired id and ErrSessionEnded when the refresh was
// refused (the session is then gone).
func (m *Manager) Session(ctx context.Context, id string) (Session, error) {
	s, err := m.live(ctx, id)
	if err != nil {
		return Session{}, err
	}
	if m.fresh(s) {
		return s, nil
	}
	v, err, _ := m.refreshes.Do(id, func() (any, error) {
		// The request that started the refresh may go away; the refresh
		// is for every request of the session.
		return m.refresh(context.WithoutCancel(ctx), id)
	})
	if err != nil {
		// The access token may still be good for a little while: an
		// unreachable token endpoint does not stop the user at once.
		if !errors.Is(err, ErrSessionEnded) && !errors.Is(err, ErrNoSession) && m.now().Before(s.Expiry) {
			return s, nil
		}
		return Session{}, err
	}
	return v.(Session), nil
}

// live loads the session and checks it has not ended.
func (m *Manager) live(ctx context.Context, id string) (Session, error) {
	if id == "" {
		return Session{}, ErrNoSession
	}
	s, ok, err := m.Store.Get(ctx, id)
	if err != nil {
		return Session{}, fmt.Errorf("reading a session: %w", err)
	}
	if !ok || s.AccessToken == "" {
		return Session{}, ErrNoSession
	}
	if !m.now().Before(s.Expires) {
		_ = m.Store.Delete(ctx, id)
		return Session{}, ErrNoSession
	}
	return s, nil
}

func (m *Manager) fresh(s Session) bool {
	return m.now().Add(orDefault(m.RefreshBefore, DefaultRefreshBefore)).Before(s.Expiry)
}

// refresh runs the refresh_token grant for one session, unless another
// instance or an earlier flight already did.
func (m *Manager) refresh(ctx context.Context, id string) (Session, error) {
	s, err := m.live(ctx, id)
	if err != nil {
		return Session{}, err
	}
	if m.fresh(s) {
		return s, nil
	}
	if m.Locker == nil {
		return m.refreshNow(ctx, id, s)
	}
	// One instance of the cluster refreshes; the others look at the
	// session until it is fresh, it is gone, or the lock is theirs.
	wait := orDefault(m.RefreshWait, DefaultRefreshWait)
	name := "refresh:" + EntryName(id)
	deadline := time.Now().Add(wait)
	for {
		unlock, held, err := m.Locker.Lock(ctx, name, wait)
		if err != nil {
			return Session{}, fmt.Errorf("locking a session's refresh: %w", err)
		}
		if held {
			defer unlock()
			// The holder before may have finished between the look and
			// the lock.
			if s, err = m.live(ctx, id); err != nil {
				return Session{}, err
			}
			if m.fresh(s) {
				return s, nil
			}
			return m.refreshNow(ctx, id, s)
		}
		if time.Now().After(deadline) {
			return Session{}, errors.New("another instance's refresh of the session did not finish in time")
		}
		time.Sleep(refreshPoll)
		if s, err = m.live(ctx, id); err != nil {
			return Session{}, err
		}
		if m.fresh(s) {
			return s, nil
		}
	}
}

// refreshNow runs the refresh_token grant for session s named id and
// keeps its result.
func (m *Manager) refreshNow(ctx context.Context, id string, s Session) (Session, error) {
	tok, err := m.Client.Refresh(ctx, s.RefreshToken, m.now())
	if err != nil {
		var refused *RefusedError
		if errors.As(err, &refused) {
			_ = m.Store.Delete(ctx, id)
			return Session{}, fmt.Errorf("%w (%v)", ErrSessionEnded, err)
		}
		return Session{}, fmt.Errorf("refreshing a session: %w", err)
	}
	next := newSession(tok, s.Expires)
	if next.UserID == "" {
		next.UserID = s.UserID
	}
	if next.Organization == "" {
		next.Organization = s.Organization
	}
	if err := m.Store.Put(ctx, id, next); err != nil {
		return Session{}, fmt.Errorf("keeping a refreshed session: %w", err)
	}
	return next, nil
}

// End forgets the session named by id.
func (m *Manager) End(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	if err := m.Store.Delete(ctx, id); err != nil {
		return fmt.Errorf("ending a session: %w", err)
	}
	return nil
}
