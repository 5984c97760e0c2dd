package subscription

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable time source for caches under test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2029, 6, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// counting returns a query function answering a (or err) and counting its
// calls.
func counting(a Answer, err error) (func(context.Context) (Answer, error), *atomic.Int64) {
	n := new(atomic.Int64)
	return func(context.Context) (Answer, error) {
		n.Add(1)
		return a, err
	}, n
}

var policy = Policy{NegativeTTL: 30 * time.Second, Timeout: time.Second}

func orgKey(org string) Key {
	return Key{BaseURL: "https://api.example", App: "app", Organization: org}
}

func TestCacheKeepsActiveUntilExpires(t *testing.T) {
	clk := newClock()
	c := NewCache(10, clk.now)
	expires := clk.now().Add(time.Hour)
	q, n := counting(Answer{Status: Active, Expires: expires}, nil)
	k := orgKey("acme")

	for i := 0; i < 3; i++ {
		a, err := c.Resolve(context.Background(), k, policy, q)
		if err != nil || a.Status != Active {
			t.Fatalf("answer %+v, %v", a, err)
		}
	}
	if n.Load() != 1 {
		t.Fatalf("%d queries, want 1", n.Load())
	}
	clk.advance(time.Hour - time.Nanosecond)
	if _, ok := c.Lookup(k); !ok {
		t.Fatal("answer gone one nanosecond before expires")
	}
	clk.advance(time.Nanosecond)
	if _, ok := c.Lookup(k); ok {
		t.Fatal("answer still trusted at expires")
	}
	if _, err := c.Resolve(context.Background(), k, policy, q); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 2 {
		t.Fatalf("%d queries, want a second one at expires", n.Load())
	}
}

func TestCacheMaxAgeCapsActive(t *testing.T) {
	clk := newClock()
	c := NewCache(10, clk.now)
	q, n := counting(Answer{Status: Active, Expires: clk.now().Add(24 * time.Hour)}, nil)
	p := policy
	p.MaxAge = time.Minute
	k := orgKey("acme")
	_, _ = c.Resolve(context.Background(), k, p, q)
	clk.advance(59 * time.Second)
	_, _ = c.Resolve(context.Background(), k, p, q)
	if n.Load() != 1 {
		t.Fatalf("%d queries within max_age, want 1", n.Load())
	}
	clk.advance(time.Second)
	_, _ = c.Resolve(context.Background(), k, p, q)
	if n.Load() != 2 {
		t.Fatalf("%d queries after max_age, want 2", n.Load())
	}
}

func TestCacheNegativeTTL(t *testing.T) {
	for _, a := range []Answer{
		{Status: Unpaid, SubscribeLink: "https://x.example/"},
		{Status: NotFound},
	} {
		t.Run(a.Status.String(), func(t *testing.T) {
			clk := newClock()
			c := NewCache(10, clk.now)
			q, n := counting(a, nil)
			k := orgKey("acme")
			got, _ := c.Resolve(context.Background(), k, policy, q)
			if got != a {
				t.Fatalf("answer %+v", got)
			}
			clk.advance(policy.NegativeTTL - time.Nanosecond)
			_, _ = c.Resolve(context.Background(), k, policy, q)
			if n.Load() != 1 {
				t.Fatalf("%d queries within negative_ttl", n.Load())
			}
			clk.advance(time.Nanosecond)
			_, _ = c.Resolve(context.Background(), k, policy, q)
			if n.Load() != 2 {
				t.Fatalf("%d queries after negative_ttl, want 2", n.Load())
			}

			zero := Policy{Timeout: time.Second}
			c2 := NewCache(10, clk.now)
			_, _ = c2.Resolve(context.Background(), k, zero, q)
			if c2.Len() != 0 {
				t.Fatal("a zero negative_ttl kept the answer")
			}
		})
	}
}

func TestCacheKeepsNoErrorsNoUnauthorizedNoPastExpires(t *testing.T) {
	clk := newClock()
	for name, q := range map[string]func(context.Context) (Answer, error){
		"error":        func(context.Context) (Answer, error) { return Answer{}, errors.New("down") },
		"unauthorized": func(context.Context) (Answer, error) { return Answer{Status: Unauthorized}, nil },
		"past expires": func(context.Context) (Answer, error) {
			return Answer{Status: Active, Expires: clk.now().Add(-time.Second)}, nil
		},
		"expires now": func(context.Context) (Answer, error) { return Answer{Status: Active, Expires: clk.now()}, nil },
	} {
		c := NewCache(10, clk.now)
		_, _ = c.Resolve(context.Background(), orgKey("acme"), policy, q)
		if c.Len() != 0 {
			t.Errorf("%s: answer kept", name)
		}
	}
}

func TestCacheErrorKeepsPreviousActiveForStale(t *testing.T) {
	clk := newClock()
	c := NewCache(10, clk.now)
	k := orgKey("acme")
	ok, _ := counting(Answer{Status: Active, Expires: clk.now().Add(time.Hour)}, nil)
	down, _ := counting(Answer{}, errors.New("down"))
	_, _ = c.Resolve(context.Background(), k, policy, ok)

	clk.advance(time.Hour) // lapsed
	if _, err := c.Resolve(context.Background(), k, policy, down); err == nil {
		t.Fatal("no error from a failing query")
	}
	grace := 10 * time.Minute
	clk.advance(grace - time.Nanosecond)
	if _, ok := c.Stale(k, grace); !ok {
		t.Fatal("lapsed answer not available within grace")
	}
	clk.advance(time.Nanosecond)
	if _, ok := c.Stale(k, grace); ok {
		t.Fatal("lapsed answer available after grace")
	}

	unpaid, _ := counting(Answer{Status: Unpaid, SubscribeLink: "https://x.example/"}, nil)
	_, _ = c.Resolve(context.Background(), k, policy, unpaid)
	if _, ok := c.Stale(k, 24*time.Hour); ok {
		t.Fatal("stale Active answer survived an Unpaid answer")
	}
}

func TestCacheStaleGoesByExpiresNotMaxAge(t *testing.T) {
	clk := newClock()
	c := NewCache(10, clk.now)
	k := orgKey("acme")
	p := Policy{NegativeTTL: time.Minute, MaxAge: time.Minute}
	ok, _ := counting(Answer{Status: Active, Expires: clk.now().Add(24 * time.Hour)}, nil)
	_, _ = c.Resolve(context.Background(), k, p, ok)

	grace := 10 * time.Minute
	clk.advance(time.Hour) // past max_age and max_age+grace, well before expires
	if _, found := c.Lookup(k); found {
		t.Fatal("the answer is trusted past max_age")
	}
	if _, found := c.Stale(k, grace); !found {
		t.Fatal("an outage after max_age refuses a subscription that has not expired")
	}
	clk.advance(23*time.Hour + grace)
	if _, found := c.Stale(k, grace); found {
		t.Fatal("the answer is trusted past expires + grace")
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	clk := newClock()
	c := NewCache(2, clk.now)
	q, n := counting(Answer{Status: Active, Expires: clk.now().Add(time.Hour)}, nil)
	_, _ = c.Resolve(context.Background(), orgKey("a"), policy, q)
	_, _ = c.Resolve(context.Background(), orgKey("b"), policy, q)
	c.Lookup(orgKey("a")) // a is now more recent than b
	_, _ = c.Resolve(context.Background(), orgKey("c"), policy, q)
	if c.Len() != 2 {
		t.Fatalf("%d entries, want 2", c.Len())
	}
	if _, ok := c.Lookup(orgKey("b")); ok {
		t.Fatal("b survived, want it evicted")
	}
	if _, ok := c.Lookup(orgKey("a")); !ok {
		t.Fatal("a evicted")
	}
	if n.Load() != 3 {
		t.Fatalf("%d queries", n.Load())
	}
}

func TestCacheForget(t *testing.T) {
	clk := newClock()
	c := NewCache(10, clk.now)
	q, _ := counting(Answer{Status: Unpaid, SubscribeLink: "https://x.example/"}, nil)
	k1, k2 := orgKey("acme"), orgKey("acme")
	k2.App = "other-app"
	tok := Key{BaseURL: "https://api.example", App: "app", Token: TokenHash("t")}
	for _, k := range []Key{k1, k2, orgKey("globex"), tok} {
		_, _ = c.Resolve(context.Background(), k, policy, q)
	}
	if got := c.Forget("acme"); got != 2 {
		t.Fatalf("forgot %d, want 2", got)
	}
	if got := c.Forget(""); got != 0 {
		t.Fatalf("forgot %d for the empty organization", got)
	}
	if c.Len() != 2 {
		t.Fatalf("%d left, want 2", c.Len())
	}
	if _, ok := c.Lookup(k1); ok {
		t.Fatal("acme still cached")
	}
}

func TestCacheKeysByTokenHash(t *testing.T) {
	clk := newClock()
	c := NewCache(10, clk.now)
	q, n := counting(Answer{Status: Active, Expires: clk.now().Add(time.Hour)}, nil)
	a := Key{BaseURL: "https://api.example", App: "app", Token: TokenHash("token-a")}
	b := Key{BaseURL: "https://api.example", App: "app", Token: TokenHash("token-b")}
	_, _ = c.Resolve(context.Background(), a, policy, q)
	_, _ = c.Resolve(context.Background(), b, policy, q)
	_, _ = c.Resolve(context.Background(), a, policy, q)
	if n.Load() != 2 {
		t.Fatalf("%d queries, want one per token", n.Load())
	}
	if a.flightKey() == b.flightKey() {
		t.Fatal("two tokens share a flight key")
	}
	x := Key{BaseURL: "ab", App: "c"}
	y := Key{BaseURL: "a", App: "bc"}
	if x.flightKey() == y.flightKey() {
		t.Fatal("flight keys meet")
	}
}

func TestCacheOneQueryForManyConcurrentMisses(t *testing.T) {
	clk := newClock()
	c := NewCache(10, clk.now)
	release := make(chan struct{})
	var n atomic.Int64
	q := func(context.Context) (Answer, error) {
		n.Add(1)
		<-release
		return Answer{Status: Active, Expires: clk.now().Add(time.Hour)}, nil
	}
	const callers = 1000
	var started, done sync.WaitGroup
	started.Add(callers)
	done.Add(callers)
	var active atomic.Int64
	for i := 0; i < callers; i++ {
		go func() {
			defer done.Done()
			started.Done()
			a, err := c.Resolve(context.Background(), orgKey("acme"), policy, q)
			if err == nil && a.Status == Active {
				active.Add(1)
			}
		}()
	}
	started.Wait()
	time.Sleep(20 * time.Millisecond) // let the callers reach the flight; the count below holds either way
	close(release)
	done.Wait()
	if n.Load() != 1 {
		t.Fatalf("%d queries for %d concurrent misses, want 1", n.Load(), callers)
	}
	if active.Load() != callers {
		t.Fatalf("%d callers got the answer, want %d", active.Load(), callers)
	}
}

func TestCacheCallerCancellationDoesNotCancelTheQuery(t *testing.T) {
	clk := newClock()
	c := NewCache(10, clk.now)
	release := make(chan struct{})
	finished := make(chan error, 1)
	q := func(ctx context.Context) (Answer, error) {
		<-release
		finished <- ctx.Err()
		return Answer{Status: Active, Expires: clk.now().Add(time.Hour)}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Resolve(ctx, orgKey("acme"), policy, q)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	close(release)
	if err := <-finished; err != nil {
		t.Fatalf("the query's context ended with the caller's: %v", err)
	}
	// The answer of the finished query is kept for the next caller.
	deadline := time.Now().Add(5 * time.Second)
	for c.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if _, ok := c.Lookup(orgKey("acme")); !ok {
		t.Fatal("answer of the abandoned query not kept")
	}
}

func TestCacheQueryTimeout(t *testing.T) {
	c := NewCache(10, nil)
	p := Policy{Timeout: 20 * time.Millisecond}
	_, err := c.Resolve(context.Background(), orgKey("acme"), p, func(ctx context.Context) (Answer, error) {
		<-ctx.Done()
		return Answer{}, ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want a deadline error", err)
	}
}

func BenchmarkCacheLookupHit(b *testing.B) {
	c := NewCache(10000, nil)
	k := orgKey("acme")
	q, _ := counting(Answer{Status: Active, Expires: time.Now().Add(time.Hour)}, nil)
	_, _ = c.Resolve(context.Background(), k, policy, q)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.Lookup(k); !ok {
			b.Fatal("miss")
		}
	}
}
