package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/servicegate/servicegate/installations"
)

// Installations is an installations.Store in Redis, shared by every
// instance: one hash of sealed records per app, <prefix>installations:<app
// digest>, and a channel on which every change is announced, so that each
// instance drops its local copy of the organization at once (see
// OnChange). Records are sealed before they reach it: Redis never holds a
// secret or a token in clear.
type Installations struct {
	c       *Client
	app     string
	scope   string // the app's digest
	key     string // the hash
	channel string // without the prefix, as Publish and Listen take it
	lockKey string // + organization: the lock of a token renewal
}

// lockWait is how often a token renewal waiting for another instance's
// looks again.
const lockWait = 25 * time.Millisecond

// Installations returns the shared installations of the app named by
// app (its client id, say).
func (c *Client) Installations(app string) *Installations {
	sum := sha256.Sum256([]byte(app))
	scope := hex.EncodeToString(sum[:8])
	return &Installations{c: c, app: app, scope: scope, key: c.prefix + "installations:" + scope,
		channel: "installations:" + scope + ":changed", lockKey: c.prefix + "installations:" + scope + ":lock:"}
}

// putScript stores a field of the hash; a script, so that it runs on the
// connection that then waits for the replicas (see Client.durable).
var putScript = redis.NewScript(`redis.call("HSET", KEYS[1], ARGV[1], ARGV[2]) return 1`)

// Put implements installations.Store, and announces the change. An
// installation is stored before it is confirmed to the service: with
// replicas set, it counts as stored only once that many replicas have it
// (else ErrReplicas, which the lifecycle call answers 503).
func (s *Installations) Put(organization string, sealed []byte) error {
	ctx := context.Background()
	if _, err := s.c.durable(ctx, OpSet, s.key, putScript, []string{s.key}, organization, sealed); err != nil {
		return err
	}
	return s.c.Publish(ctx, s.channel, organization)
}

// replaceScript sets a field of the hash only when it exists.
var replaceScript = redis.NewScript(`if redis.call("HEXISTS", KEYS[1], ARGV[1]) == 1 then redis.call("HSET", KEYS[1], ARGV[1], ARGV[2]) return 1 end return 0`)

// Replace implements installations.Replacer: the record is stored only
// while the organization has one, and the change announced.
func (s *Installations) Replace(organization string, sealed []byte) (bool, error) {
	ctx := context.Background()
	var kept int64
	if err := s.c.Call(ctx, OpSet, func(ctx context.Context) error {
		var err error
		kept, err = replaceScript.Run(ctx, s.c.rdb, []string{s.key}, organization, sealed).Int64()
		return err
	}); err != nil {
		return false, err
	}
	if kept == 0 {
		return false, nil
	}
	return true, s.c.Publish(ctx, s.channel, organization)
}

// swapScript replaces a field of the hash only while it holds ARGV[2].
var swapScript = redis.NewScript(`if redis.call("HGET", KEYS[1], ARGV[1]) == ARGV[2] then redis.call("HSET", KEYS[1], ARGV[1], ARGV[3]) return 1 end return 0`)

// swapBatch is how many records one round trip seals again.
const swapBatch = 500

// Swap implements installations.Swapper: records sealed again, each only
// while it still holds what was read, in pipelined batches. It announces
// nothing: every instance's local copy still holds what they hold.
func (s *Installations) Swap(records []installations.Swap) (int, error) {
	ctx := context.Background()
	n := 0
	for start := 0; start < len(records); start += swapBatch {
		batch := records[start:min(start+swapBatch, len(records))]
		err := s.c.Call(ctx, OpSet, func(ctx context.Context) error {
			if err := swapScript.Load(ctx, s.c.rdb).Err(); err != nil {
				return err
			}
			pipe := s.c.rdb.Pipeline()
			cmds := make([]*redis.Cmd, 0, len(batch))
			for _, r := range batch {
				if r.New == nil {
					continue
				}
				cmds = append(cmds, swapScript.EvalSha(ctx, pipe, []string{s.key}, r.Organization, r.Old, r.New))
			}
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			for _, c := range cmds {
				if v, err := c.Int64(); err == nil && v == 1 {
					n++
				}
			}
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// registered is what <prefix>installations:apps holds of one app's hash:
// its client id and its descriptor's identifier, as JSON; an earlier
// version wrote the client id alone.
type registered struct {
	App        string `json:"app"`
	Identifier string `json:"identifier,omitempty"`
}

// parseRegistered reads a value of <prefix>installations:apps.
func parseRegistered(v string) registered {
	var r registered
	if json.Unmarshal([]byte(v), &r) != nil || r.App == "" {
		return registered{App: v}
	}
	return r
}

// Register records, in <prefix>installations:apps, that this hash is the
// app's, whose descriptor has identifier, and returns the hashes of the
// same app under another client id that hold records, each named by its
// client id: see installations.RegisterFile. Other apps' hashes, and those
// whose identifier is not known, are not named.
func (s *Installations) Register(ctx context.Context, identifier string) (others []string, err error) {
	apps := s.c.prefix + "installations:apps"
	me, _ := json.Marshal(registered{App: s.app, Identifier: identifier})
	var known map[string]string
	err = s.c.Call(ctx, OpSet, func(ctx context.Context) error {
		if err := s.c.rdb.HSet(ctx, apps, s.scope, string(me)).Err(); err != nil {
			return err
		}
		var err error
		known, err = s.c.rdb.HGetAll(ctx, apps).Result()
		return err
	})
	if err != nil {
		return nil, err
	}
	for scope, v := range known {
		other := parseRegistered(v)
		if scope == s.scope || other.App == s.app || !installations.SameApp(identifier, other.Identifier) {
			continue
		}
		var n int64
		_ = s.c.Call(ctx, OpGet, func(ctx context.Context) error {
			var err error
			n, err = s.c.rdb.HLen(ctx, s.c.prefix+"installations:"+scope).Result()
			return err
		})
		if n > 0 {
			others = append(others, other.App+" ("+s.c.prefix+"installations:"+scope+")")
		}
	}
	sort.Strings(others)
	return others, nil
}

// formatKey is the key of the hash's installations.Format.
func (s *Installations) formatKey() string { return s.key + ":format" }

// Format implements installations.Formats.
func (s *Installations) Format() (f installations.Format, known bool, err error) {
	var raw []byte
	err = s.c.Call(context.Background(), OpGet, func(ctx context.Context) error {
		var err error
		raw, err = s.c.rdb.Get(ctx, s.formatKey()).Bytes()
		return err
	})
	switch {
	case errors.Is(err, redis.Nil):
		return f, false, nil
	case err != nil:
		return f, false, err
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return f, false, fmt.Errorf("the installations format in %s: %w", s.formatKey(), err)
	}
	return f, true, nil
}

// SetFormat implements installations.Formats.
func (s *Installations) SetFormat(f installations.Format) error {
	raw, _ := json.Marshal(f)
	return s.c.Call(context.Background(), OpSet, func(ctx context.Context) error {
		return s.c.rdb.Set(ctx, s.formatKey(), raw, 0).Err()
	})
}

// Ping implements installations.Pinger.
func (s *Installations) Ping(ctx context.Context) error {
	return s.c.Call(ctx, OpGet, func(ctx context.Context) error { return s.c.rdb.Ping(ctx).Err() })
}

// Get implements installations.Store.
func (s *Installations) Get(organization string) ([]byte, error) {
	var out []byte
	err := s.c.Call(context.Background(), OpGet, func(ctx context.Context) error {
		var err error
		out, err = s.c.rdb.HGet(ctx, s.key, organization).Bytes()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return nil, installations.ErrNotFound
	}
	return out, err
}

// Delete implements installations.Store, and announces the change.
func (s *Installations) Delete(organization string) error {
	ctx := context.Background()
	if err := s.c.Call(ctx, OpForget, func(ctx context.Context) error {
		return s.c.rdb.HDel(ctx, s.key, organization).Err()
	}); err != nil {
		return err
	}
	return s.c.Publish(ctx, s.channel, organization)
}

// Each implements installations.Store.
func (s *Installations) Each(fn func(organization string, sealed []byte) error) error {
	var all map[string]string
	err := s.c.Call(context.Background(), OpGet, func(ctx context.Context) error {
		var err error
		all, err = s.c.rdb.HGetAll(ctx, s.key).Result()
		return err
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	for org, sealed := range all {
		if err := fn(org, []byte(sealed)); err != nil {
			return err
		}
	}
	return nil
}

// Close implements installations.Store; the Client is closed by its owner.
func (s *Installations) Close() error { return nil }

// OnChange calls fn with the organization of every Put and Delete, on any
// instance, until stop is called: what installations.Book.Refresh takes.
func (s *Installations) OnChange(fn func(organization string)) (stop func()) {
	return s.c.Listen(s.channel, fn)
}

// Lock takes the cluster-wide lock of an organization's token renewal,
// waiting while another instance holds it, until ctx ends: one instance
// asks the service, the others then read the token it stored. The lock
// expires by itself after ttl, should its holder die.
func (s *Installations) Lock(ctx context.Context, organization string, ttl time.Duration) (unlock func(), err error) {
	key := s.lockKey + organization
	for {
		held, token, err := s.c.lock(ctx, key, ttl)
		if err != nil {
			return nil, err
		}
		if held {
			return func() { s.c.unlock(ctx, key, token) }, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(lockWait):
		}
	}
}

// Interface guards.
var (
	_ installations.Store    = (*Installations)(nil)
	_ installations.Replacer = (*Installations)(nil)
	_ installations.Swapper  = (*Installations)(nil)
	_ installations.Pinger   = (*Installations)(nil)
)
