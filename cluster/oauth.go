package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/servicegate/servicegate/oauth"
)

// Key spaces of the OAuth logins in progress, sessions and refresh locks.
const (
	OAuthSessions = "oauth-session:"
	OAuthLogins   = "oauth-login:"
	oauthLocks    = "oauth-lock:"
)

// OAuthStore is an oauth.Store in Redis, shared by every instance using the
// same server and prefix: a login begun on one instance completes on
// another, and a session is known to all. Entries are named by a hash of
// their key and sealed as oauth.StorageStore seals them (oauth.Seal), so a
// reader of Redis learns neither session ids nor tokens; each lives in
// Redis until its Expires (a login's lifetime, a session's lifetime). Its
// Lock (an oauth.Locker) makes one refresh per session across the cluster.
//
// Every Redis failure is returned as an error (a *CallError) after at
// most the Client's timeout: a session is never taken for absent because
// Redis could not be asked.
type OAuthStore struct {
	c     *Client
	space string
	now   func() time.Time
}

// OAuthStore returns the store of key space space (OAuthSessions or
// OAuthLogins) on c, reading the clock now (c's clock when nil) to turn an
// entry's Expires into its time to live.
func (c *Client) OAuthStore(space string, now func() time.Time) *OAuthStore {
	if now == nil {
		now = c.opts.Now
	}
	return &OAuthStore{c: c, space: space, now: now}
}

// key is the Redis key of a session key.
func (s *OAuthStore) key(key string) string {
	return s.c.prefix + s.space + oauth.EntryName(key)
}

// Get loads and opens the entry under key.
func (s *OAuthStore) Get(ctx context.Context, key string) (oauth.Session, bool, error) {
	rkey := s.key(key)
	var sealed []byte
	err := s.c.Call(ctx, OpGet, func(ctx context.Context) error {
		var err error
		sealed, err = s.c.rdb.Get(ctx, rkey).Bytes()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return oauth.Session{}, false, nil
	}
	if err != nil {
		return oauth.Session{}, false, err
	}
	sess, err := oauth.Open(key, rkey, sealed)
	if err != nil {
		return oauth.Session{}, false, err
	}
	return sess, true, nil
}

// Put seals sess and keeps it under key until sess.Expires; an entry
// already expired is deleted.
func (s *OAuthStore) Put(ctx context.Context, key string, sess oauth.Session) error {
	ttl := sess.Expires.Sub(s.now())
	if ttl < time.Millisecond {
		return s.Delete(ctx, key)
	}
	rkey := s.key(key)
	sealed, err := oauth.Seal(key, rkey, sess)
	if err != nil {
		return err
	}
	return s.c.Call(ctx, OpSet, func(ctx context.Context) error {
		return s.c.rdb.Set(ctx, rkey, sealed, ttl).Err()
	})
}

// Delete removes the entry under key; a missing entry is not an error.
func (s *OAuthStore) Delete(ctx context.Context, key string) error {
	rkey := s.key(key)
	return s.c.Call(ctx, OpForget, func(ctx context.Context) error {
		return s.c.rdb.Del(ctx, rkey).Err()
	})
}

// Lock takes the lock named name for ttl when nobody holds it (SET NX PX),
// for oauth.Manager's Locker. The Manager names locks by a hash of the
// session id, never the id itself.
func (s *OAuthStore) Lock(ctx context.Context, name string, ttl time.Duration) (unlock func(), held bool, err error) {
	key := s.c.prefix + oauthLocks + name
	held, token, err := s.c.lock(ctx, key, ttl)
	if err != nil || !held {
		return nil, false, err
	}
	return func() { s.c.unlock(ctx, key, token) }, true, nil
}

var (
	_ oauth.Store  = (*OAuthStore)(nil)
	_ oauth.Locker = (*OAuthStore)(nil)
)
