package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/servicegate/servicegate/subscription"
)

// Key spaces and channel of the subscription answers.
const (
	subscriptionKeys    = "subscription:"
	subscriptionLocks   = "subscription-lock:"
	subscriptionForgets = "subscription-forget"
	// digestLen is the length of the hex digest of (base URL, app) in a key.
	digestLen = 32
)

// DefaultPoll is how often an instance waiting for another instance's
// query looks for its answer.
const DefaultPoll = 10 * time.Millisecond

// defaultLockTTL bounds a lock taken by a query without its own deadline.
const defaultLockTTL = 10 * time.Second

// Subscriptions shares subscription answers between instances: an answer
// one instance got from the service is kept in Redis for as long as the
// policy trusts it, so the cluster asks the service once per organization
// and period; a lock with expiry makes the other instances wait for the
// one query in flight; a purge reaches every instance through pub/sub.
//
// Every Redis failure falls back to what a lone instance does: the
// caller's query runs directly.
type Subscriptions struct {
	c *Client
	// Poll is how often a waiting instance looks for the answer.
	Poll time.Duration
}

// Subscriptions returns the subscription sharing on c.
func (c *Client) Subscriptions() *Subscriptions {
	return &Subscriptions{c: c, Poll: DefaultPoll}
}

// record is an answer as kept in Redis.
type record struct {
	Status  subscription.Status `json:"s"`
	Expires time.Time           `json:"e,omitzero"`
	Link    string              `json:"l,omitempty"`
	Message string              `json:"m,omitempty"`
	// Until is when the instance that stored the answer stops trusting
	// it; the others do not trust it longer.
	Until time.Time `json:"u,omitzero"`
}

// Resolve returns the shared answer for k when there is one; otherwise one
// instance of the cluster runs query (its own, or this caller's), keeps the
// answer under p and the others read it. ctx bounds the wait; the query
// runs under ctx too. When Redis fails, query runs directly.
func (s *Subscriptions) Resolve(ctx context.Context, k subscription.Key, p subscription.Policy, query func(context.Context) (subscription.Answer, error)) (subscription.Answer, error) {
	key, lock := s.keys(k)
	var wait *time.Timer
	for {
		a, found, err := s.get(ctx, key)
		if err != nil {
			return query(ctx)
		}
		if found {
			return a, nil
		}
		held, token, err := s.c.lock(ctx, lock, lockTTL(ctx))
		if err != nil {
			return query(ctx)
		}
		if held {
			// The holder before may have written its answer and
			// released the lock between the look-up and the lock.
			if a, found, err := s.get(ctx, key); err == nil && found {
				s.c.unlock(ctx, lock, token)
				return a, nil
			}
			a, err := query(ctx)
			if err == nil {
				s.put(ctx, key, a, p)
			}
			s.c.unlock(ctx, lock, token)
			return a, err
		}
		// Another instance is asking; its answer (or its lock's
		// release, when it got none worth sharing) comes soon.
		if wait == nil {
			wait = time.NewTimer(s.Poll)
			defer wait.Stop()
		} else {
			wait.Reset(s.Poll)
		}
		select {
		case <-ctx.Done():
			return subscription.Answer{}, fmt.Errorf("waiting for the subscription query of another instance: %w", ctx.Err())
		case <-wait.C:
		}
	}
}

// lockTTL is how long a lock lives: as long as the query it guards may
// take, so that an instance that dies while asking holds nobody up longer.
func lockTTL(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		if ttl := time.Until(d); ttl > time.Millisecond {
			return ttl
		}
		return time.Millisecond
	}
	return defaultLockTTL
}

// get reads the shared answer kept under key.
func (s *Subscriptions) get(ctx context.Context, key string) (subscription.Answer, bool, error) {
	var raw []byte
	err := s.c.Call(ctx, OpGet, func(ctx context.Context) error {
		var err error
		raw, err = s.c.rdb.Get(ctx, key).Bytes()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return subscription.Answer{}, false, nil
	}
	if err != nil {
		return subscription.Answer{}, false, err
	}
	var r record
	if json.Unmarshal(raw, &r) != nil || r.Status < subscription.Active || r.Status > subscription.NotFound {
		// Not an answer this version wrote: ask again, and overwrite it.
		return subscription.Answer{}, false, nil
	}
	a := subscription.Answer{Status: r.Status, Expires: r.Expires, SubscribeLink: r.Link, Message: r.Message, TrustedUntil: r.Until}
	if now := s.c.opts.Now(); !r.Until.IsZero() && !now.Before(r.Until) || a.Status == subscription.Active && !a.ActiveAt(now) {
		return subscription.Answer{}, false, nil
	}
	return a, true, nil
}

// put keeps a under key for as long as p trusts it.
func (s *Subscriptions) put(ctx context.Context, key string, a subscription.Answer, p subscription.Policy) {
	now := s.c.opts.Now()
	until, ok := p.TrustUntil(a, now)
	if !ok {
		return
	}
	ttl := until.Sub(now)
	if ttl < time.Millisecond {
		return
	}
	raw, _ := json.Marshal(record{Status: a.Status, Expires: a.Expires, Link: a.SubscribeLink, Message: a.Message, Until: until})
	_ = s.c.Call(ctx, OpSet, func(ctx context.Context) error {
		return s.c.rdb.Set(ctx, key, raw, ttl).Err()
	})
}

// Forget deletes the shared answers of organization (under every base URL
// and app) and tells every instance to forget theirs (see OnForget). It
// returns how many shared answers there were. It finds them with SCAN
// MATCH, whose cost grows with the number of keys in the Redis database:
// fine for a purge by hand or after a payment, not for every request.
func (s *Subscriptions) Forget(ctx context.Context, organization string) (int, error) {
	if organization == "" {
		return 0, nil
	}
	pattern := globEscape(s.c.prefix+subscriptionKeys) + strings.Repeat("?", digestLen) + ":o:" + globEscape(organization)
	var keys []string
	err := s.c.Call(ctx, OpForget, func(ctx context.Context) error {
		return s.c.scan(ctx, pattern, func(key string) { keys = append(keys, key) })
	})
	if err != nil {
		return 0, err
	}
	n := 0
	if len(keys) > 0 {
		// One UNLINK a key: in a Redis Cluster the answers of one
		// organization sit on several nodes.
		err = s.c.Call(ctx, OpForget, func(ctx context.Context) error {
			cmds, err := s.c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range keys {
					p.Unlink(ctx, k)
				}
				return nil
			})
			for _, cmd := range cmds {
				n += int(cmd.(*redis.IntCmd).Val())
			}
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	return n, s.c.Publish(ctx, subscriptionForgets, organization)
}

// OnForget calls fn with the organization of every Forget, on any
// instance, until stop is called.
func (s *Subscriptions) OnForget(fn func(organization string)) (stop func()) {
	return s.c.Listen(subscriptionForgets, fn)
}

// keys returns the Redis keys of k's answer and of its lock:
// <prefix>subscription:<digest of base URL and app>:o:<organization>, or
// :t:<token hash> for answers kept per token.
func (s *Subscriptions) keys(k subscription.Key) (key, lock string) {
	h := sha256.New()
	for _, part := range [...]string{k.BaseURL, k.App} {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	var sum [sha256.Size]byte
	digest := hex.EncodeToString(h.Sum(sum[:0]))[:digestLen]
	var who string
	if k.Organization != "" {
		who = "o:" + k.Organization
	} else {
		who = "t:" + hex.EncodeToString(k.Token[:])
	}
	return s.c.prefix + subscriptionKeys + digest + ":" + who,
		s.c.prefix + subscriptionLocks + digest + ":" + who
}

// globEscape escapes the characters Redis' SCAN MATCH treats as special.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\', '^', '-':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
