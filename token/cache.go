package token

import (
	"sync"
	"time"
)

// Cache remembers values derived from verified tokens, keyed by the token,
// until a deadline (the token's exp), holding at most a fixed number of
// entries. Each entry is remembered with the generation of the keys that
// verified it (Verifier.Generation, read before the token was verified)
// and is found only under that generation: once a key set drops or changes
// a key, every token remembered under the older set must be verified
// again. A hit costs a map look-up under a read lock and allocates
// nothing. It is safe for concurrent use.
type Cache[V any] struct {
	size int
	now  func() time.Time

	mu      sync.RWMutex
	entries map[string]cacheEntry[V]
}

type cacheEntry[V any] struct {
	value    V
	deadline time.Time
	gen      uint64
}

// evictProbe is how many entries a full cache looks at for an expired one
// before it drops an arbitrary one instead.
const evictProbe = 8

// NewCache returns a cache of at most size entries (size must be positive)
// with now as its clock (nil means time.Now).
func NewCache[V any](size int, now func() time.Time) *Cache[V] {
	if now == nil {
		now = time.Now
	}
	return &Cache[V]{size: size, now: now, entries: make(map[string]cacheEntry[V])}
}

// Get returns the value remembered for token under the key generation gen,
// if its deadline has not passed.
func (c *Cache[V]) Get(token string, gen uint64) (V, bool) {
	c.mu.RLock()
	e, ok := c.entries[token]
	c.mu.RUnlock()
	if !ok || e.gen != gen || !c.now().Before(e.deadline) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// Put remembers value for token until deadline, valid under the key
// generation gen. A deadline already passed is not stored. When the cache
// is full an expired entry, or one of an older generation, makes room, or
// else an arbitrary one (Go's map order is random), so the cost of a Put
// stays constant however the cache is used.
func (c *Cache[V]) Put(token string, value V, deadline time.Time, gen uint64) {
	now := c.now()
	if !now.Before(deadline) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[token]; !ok && len(c.entries) >= c.size {
		c.evictOne(now, gen)
	}
	c.entries[token] = cacheEntry[V]{value: value, deadline: deadline, gen: gen}
}

// Len reports how many entries the cache holds, expired ones included.
func (c *Cache[V]) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}

// evictOne drops one entry: among the first evictProbe it looks at, one
// that can no longer be found (expired, or of a generation before gen),
// else the first.
func (c *Cache[V]) evictOne(now time.Time, gen uint64) {
	var victim string
	seen := 0
	for k, e := range c.entries {
		if !now.Before(e.deadline) || e.gen < gen {
			victim = k
			break
		}
		if seen == 0 {
			victim = k
		}
		if seen++; seen >= evictProbe {
			break
		}
	}
	delete(c.entries, victim)
}
