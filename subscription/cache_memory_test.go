package subscription

import (
	"context"
	"fmt"
	"hash/maphash"
	"runtime"
	"testing"
	"time"
)

// BenchmarkCacheBytesPerOrganization measures the heap one cached
// organization costs beyond its key, with 100,000 of them cached.
func BenchmarkCacheBytesPerOrganization(b *testing.B) {
	const n = 100000
	orgs := make([]string, n)
	for i := range orgs {
		orgs[i] = fmt.Sprintf("org%06d.example", i)
	}
	expires := time.Now().Add(time.Hour)
	active := func(context.Context) (Answer, error) { return Answer{Status: Active, Expires: expires}, nil }
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := NewCache(n, nil)
		for _, o := range orgs {
			if _, err := c.Resolve(context.Background(), Key{BaseURL: "https://api.service.example", App: "demo-app", Organization: o}, Policy{}, active); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/org")
		runtime.KeepAlive(c)
	}
}

// TestCacheKeysOfOneHashNeverShareAnAnswer: entries are filed by a hash of
// their key; a key whose hash meets another's finds no answer of the
// other, and storing it replaces the other.
func TestCacheKeysOfOneHashNeverShareAnAnswer(t *testing.T) {
	c := NewCache(10, nil)
	p := Policy{NegativeTTL: time.Minute}
	paid := Key{BaseURL: "https://s", App: "a", Organization: "paid"}
	other := Key{BaseURL: "https://s", App: "a", Organization: "other"}
	c.store(paid, Answer{Status: Active, Expires: time.Now().Add(time.Hour)}, p)

	// File paid's entry under other's hash, as a collision would.
	c.mu.Lock()
	e := c.entries[maphash.Comparable(c.seed, paid)]
	delete(c.entries, e.hash)
	e.hash = maphash.Comparable(c.seed, other)
	c.entries[e.hash] = e
	c.mu.Unlock()
	if a, ok := c.Lookup(other); ok {
		t.Fatalf("a key of the same hash found another's answer: %+v", a)
	}
	if _, ok := c.Stale(other, time.Hour); ok {
		t.Fatal("Stale gave another key's answer")
	}
	c.store(other, Answer{Status: Unpaid, SubscribeLink: "https://pay"}, p)
	if a, ok := c.Lookup(other); !ok || a.Status != Unpaid || a.SubscribeLink != "https://pay" {
		t.Fatalf("after storing: %+v %v", a, ok)
	}
	if c.Len() != 1 {
		t.Errorf("%d entries, want the newer one only", c.Len())
	}
	// A token-keyed answer never answers for an organization of the same id.
	var tok Key
	tok.BaseURL, tok.App = "https://s", "a"
	copy(tok.Token[:], "paid")
	if _, ok := c.Lookup(tok); ok {
		t.Error("a token key found an organization's answer")
	}
}

// TestCacheFarFutureExpires: an expires date past what nanoseconds hold
// is kept as the latest they can.
func TestCacheFarFutureExpires(t *testing.T) {
	c := NewCache(10, nil)
	k := Key{BaseURL: "https://s", App: "a", Organization: "o"}
	far := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	c.store(k, Answer{Status: Active, Expires: far}, Policy{})
	a, ok := c.Lookup(k)
	if !ok || a.Status != Active || a.Expires.Year() < 2262 {
		t.Fatalf("%+v %v", a, ok)
	}
}
