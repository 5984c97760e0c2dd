package subscription

import (
	"context"
	"crypto/sha256"
	"hash/maphash"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sync/singleflight"
)

// Key identifies one cached answer: the service (base URL, expanded), the
// app, and whose subscription it is. That is the verified organization
// when there is one; otherwise the SHA-256 of the token, so that an
// unverified claim never selects an answer and the token is not kept.
type Key struct {
	// BaseURL is the service base URL the query goes to.
	BaseURL string
	// App is the app identifier.
	App string
	// Organization is the verified organization key; empty when the
	// answer is keyed by Token.
	Organization string
	// Token is the SHA-256 of the bearer token when Organization is empty.
	Token [sha256.Size]byte
}

// TokenHash is the value of Key.Token for a bearer token.
func TokenHash(token string) [sha256.Size]byte {
	// Hashing runs on every request without service_auth: read the
	// string's bytes in place rather than copy them. Sum256 neither keeps
	// nor changes its input.
	return sha256.Sum256(unsafe.Slice(unsafe.StringData(token), len(token)))
}

// flightKey is k as a string for the singleflight group; each part is
// length-prefixed so that no two keys meet.
func (k Key) flightKey() string {
	var b strings.Builder
	b.Grow(len(k.BaseURL) + len(k.App) + len(k.Organization) + 2*sha256.Size + 16)
	for _, s := range [...]string{k.BaseURL, k.App, k.Organization} {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	if k.Organization == "" {
		const hexDigits = "0123456789abcdef"
		for _, c := range k.Token {
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		}
	}
	return b.String()
}

// Policy says how long answers are trusted and how long one query may take.
type Policy struct {
	// NegativeTTL is how long Unpaid and NotFound answers are kept. Zero
	// keeps them not at all.
	NegativeTTL time.Duration
	// MaxAge caps how long an Active answer is trusted before the service
	// is asked again, even when its expires date is later. Zero means
	// until expires.
	MaxAge time.Duration
	// Timeout bounds one query. Zero means no bound besides the query
	// function's own.
	Timeout time.Duration
}

// Cache keeps subscription answers, at most a fixed number of them; when
// full, the least recently used answer goes. Its methods are safe for
// concurrent use.
//
// An answer costs little memory beyond its organization key: entries are
// filed by a hash of their Key (and checked against the Key on a hit, so
// two keys of one hash never share an answer), the base URL and app of
// the entries of one service are kept once, and an answer keeps only what
// callers read back.
type Cache struct {
	now     func() time.Time
	size    int
	seed    maphash.Seed
	flights singleflight.Group

	mu      sync.Mutex
	entries map[uint64]*entry
	scopes  map[scopeKey]*scope
	lru     entry // sentinel: lru.next is the most recently used
}

// scopeKey is the service and app of a Key; scope keeps it once for all
// the entries that share it, and counts them.
type scopeKey struct{ baseURL, app string }

type scope struct {
	scopeKey
	entries int
}

type entry struct {
	hash  uint64
	scope *scope
	// id is the organization, or with byToken the SHA-256 of the token.
	id      string
	byToken bool
	status  Status
	// expires is the Active answer's expires date, until when it stops
	// being trusted (expires capped by MaxAge for Active, the negative
	// TTL for the others); both in Unix nanoseconds.
	expires, until int64
	// text is the SubscribeLink of an Unpaid answer, or the Message of a
	// NotFound one.
	text       string
	prev, next *entry
}

// matches tells whether e holds the answer for k.
func (e *entry) matches(k Key) bool {
	if e.scope.baseURL != k.BaseURL || e.scope.app != k.App {
		return false
	}
	if k.Organization != "" {
		return !e.byToken && e.id == k.Organization
	}
	return e.byToken && e.id == string(k.Token[:])
}

// answer is the answer e holds.
func (e *entry) answer() Answer {
	a := Answer{Status: e.status}
	switch e.status {
	case Active:
		a.Expires = time.Unix(0, e.expires).UTC()
	case Unpaid:
		a.SubscribeLink = e.text
	case NotFound:
		a.Message = e.text
	}
	return a
}

// NewCache returns a cache of at most size answers (at least 1) that reads
// the time from now (time.Now when nil).
func NewCache(size int, now func() time.Time) *Cache {
	if size < 1 {
		size = 1
	}
	if now == nil {
		now = time.Now
	}
	c := &Cache{now: now, size: size, seed: maphash.MakeSeed(), entries: make(map[uint64]*entry), scopes: make(map[scopeKey]*scope)}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// Lookup returns the answer kept for k while it is trusted. An Active
// answer is trusted until the earlier of its expires date and its MaxAge;
// the others until their negative TTL ends.
func (c *Cache) Lookup(k Key) (Answer, bool) {
	now := c.now().UnixNano()
	h := maphash.Comparable(c.seed, k)
	c.mu.Lock()
	e, ok := c.entries[h]
	if !ok || now >= e.until || !e.matches(k) {
		c.mu.Unlock()
		return Answer{}, false
	}
	c.touch(e)
	a := e.answer()
	c.mu.Unlock()
	return a, true
}

// Stale returns the Active answer kept for k when its expires date passed
// less than grace ago (or has not passed): what a caller may trust while
// the service cannot answer. It goes by expires, not by MaxAge: an answer
// that is only due for a re-check still names a paid subscription.
func (c *Cache) Stale(k Key, grace time.Duration) (Answer, bool) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[maphash.Comparable(c.seed, k)]
	if !ok || !e.matches(k) || e.status != Active || !now.Before(time.Unix(0, e.expires).Add(grace)) {
		return Answer{}, false
	}
	return e.answer(), true
}

// Resolve returns the answer for k: the one kept while it is trusted, else
// the result of query. Concurrent calls for one key share one query. The
// query runs under a context that keeps ctx's values but not its
// cancellation (other callers may be waiting for it), bounded by
// p.Timeout; a caller whose ctx ends stops waiting and gets ctx's error.
//
// Answers are kept per p; errors and Unauthorized answers (which say
// something about one token, not about the organization) are not kept,
// and neither is an Active answer whose expires date has passed.
func (c *Cache) Resolve(ctx context.Context, k Key, p Policy, query func(context.Context) (Answer, error)) (Answer, error) {
	if a, ok := c.Lookup(k); ok {
		return a, nil
	}
	ch := c.flights.DoChan(k.flightKey(), func() (any, error) {
		// A flight for k may have ended between the look-up above and
		// the start of this one.
		if a, ok := c.Lookup(k); ok {
			return a, nil
		}
		qctx := context.WithoutCancel(ctx)
		if p.Timeout > 0 {
			var cancel context.CancelFunc
			qctx, cancel = context.WithTimeout(qctx, p.Timeout)
			defer cancel()
		}
		a, err := query(qctx)
		if err != nil {
			return Answer{}, err
		}
		c.store(k, a, p)
		return a, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return Answer{}, res.Err
		}
		return res.Val.(Answer), nil
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	}
}

// store keeps a for k according to p.
func (c *Cache) store(k Key, a Answer, p Policy) {
	until, ok := p.TrustUntil(a, c.now())
	if !ok {
		return
	}

	h := maphash.Comparable(c.seed, k)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[h]
	switch {
	case ok && e.matches(k):
		c.touch(e)
	case ok:
		// Another key of the same hash: the newer answer takes its place.
		c.remove(e)
		fallthrough
	default:
		for len(c.entries) >= c.size {
			c.remove(c.lru.prev)
		}
		e = &entry{hash: h, scope: c.scope(k)}
		if k.Organization != "" {
			e.id = k.Organization
		} else {
			e.id, e.byToken = string(k.Token[:]), true
		}
		c.entries[h] = e
		c.link(e)
	}
	e.status, e.until, e.expires, e.text = a.Status, nanos(until), 0, ""
	switch a.Status {
	case Active:
		e.expires = nanos(a.Expires)
	case Unpaid:
		e.text = a.SubscribeLink
	case NotFound:
		e.text = a.Message
	}
}

// scope is the one scope of k's base URL and app, counting one more
// entry. c.mu is held.
func (c *Cache) scope(k Key) *scope {
	sk := scopeKey{k.BaseURL, k.App}
	s, ok := c.scopes[sk]
	if !ok {
		s = &scope{scopeKey: sk}
		c.scopes[sk] = s
	}
	s.entries++
	return s
}

// nanos is t in Unix nanoseconds, a date past 2262 (which they cannot
// hold) as the last one they can.
func nanos(t time.Time) int64 {
	if t.After(lastNano) {
		return math.MaxInt64
	}
	return t.UnixNano()
}

var lastNano = time.Unix(0, math.MaxInt64)

// Forget drops every answer kept for the organization (under any base URL
// and app) and returns how many there were.
func (c *Cache) Forget(organization string) int {
	if organization == "" {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.entries {
		if !e.byToken && e.id == organization {
			c.remove(e)
			n++
		}
	}
	return n
}

// Len returns how many answers are kept.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// touch makes e the most recently used entry. c.mu is held.
func (c *Cache) touch(e *entry) {
	if c.lru.next == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	c.link(e)
}

// link puts e first in the LRU list. c.mu is held.
func (c *Cache) link(e *entry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

// remove drops e. c.mu is held.
func (c *Cache) remove(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	delete(c.entries, e.hash)
	if e.scope.entries--; e.scope.entries == 0 {
		delete(c.scopes, e.scope.scopeKey)
	}
}
