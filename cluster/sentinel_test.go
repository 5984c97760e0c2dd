package cluster

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/cluster/redistest"
	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/oauth"
	"github.com/servicegate/servicegate/subscription"
)

// Through Sentinel, the client follows a promotion by itself, and tells of
// the primary once when it first connects and once when it changes.
func TestSentinelPrimaryChangeIsToldOnce(t *testing.T) {
	sn := redistest.StartSentinel(t, 1)
	var mu sync.Mutex
	var told []string
	c, err := New(Options{
		Sentinel: &Sentinel{Master: sn.Master, Addrs: sn.Addrs()},
		Timeout:  time.Second,
		OnPrimary: func(was, now string) {
			mu.Lock()
			told = append(told, was+" → "+now)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	set := func() error {
		return c.Call(context.Background(), OpSet, func(ctx context.Context) error {
			return c.rdb.Set(ctx, c.prefix+"k", "v", time.Minute).Err()
		})
	}
	for range 20 {
		if err := set(); err != nil {
			t.Fatal(err)
		}
	}
	first := sn.Primary()
	first.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for set() != nil {
		if time.Now().After(deadline) {
			t.Fatal("no write succeeded within 30 s of the primary's death")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 20 {
		if err := set(); err != nil {
			t.Fatal(err)
		}
	}
	now := sn.AgreedPrimaryAddr()
	mu.Lock()
	defer mu.Unlock()
	// On a loaded machine the sentinels may promote twice (a new primary
	// too slow to answer within a second), so what the client told is
	// checked as a chain of changes, each told once, from the first
	// primary to the one the sentinels agree on now.
	if len(told) < 2 || told[0] != " → "+first.Addr {
		t.Fatalf("told %q, want the first primary %s then its change", told, first.Addr)
	}
	from := first.Addr
	for _, change := range told[1:] {
		if want := from + " → "; !strings.HasPrefix(change, want) || change == want+from {
			t.Errorf("told %q: %q is not one change from %s", told, change, from)
		}
		from = strings.TrimPrefix(change, from+" → ")
	}
	if from != now {
		t.Errorf("told %q, want a chain ending at %s, the primary the sentinels agree on", told, now)
	}
}

// After a promotion, what instances share works again by itself within
// 10 s: a sign-in's session written on one instance and read on another, a
// spill link minted on one and taken on the other, a subscription answer
// asked once for both.
func TestSentinelSharedWorkRecoversWithin10sOfThePromotion(t *testing.T) {
	sn := redistest.StartSentinel(t, 1)
	var instances [2]*Client
	for i := range instances {
		c, err := New(Options{Sentinel: &Sentinel{Master: sn.Master, Addrs: sn.Addrs()}, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		instances[i] = c
	}
	a, b := instances[0], instances[1]
	round := 0
	shared := func() error {
		round++
		ctx := context.Background()
		id := oauth.NewID()
		sess := oauth.Session{UserID: "42", Organization: "acme.example", Expires: time.Now().Add(time.Minute).UTC()}
		if err := a.OAuthStore(OAuthSessions, nil).Put(ctx, id, sess); err != nil {
			return fmt.Errorf("session put: %w", err)
		}
		if _, ok, err := b.OAuthStore(OAuthSessions, nil).Get(ctx, id); err != nil || !ok {
			return fmt.Errorf("session get: ok=%v %v", ok, err)
		}
		w, name, err := a.Spill(spillLinks).Create(contract.KindStrings)
		if err != nil {
			return fmt.Errorf("spill create: %w", err)
		}
		_, _ = io.WriteString(w, "payload")
		if err := w.Close(); err != nil {
			return fmt.Errorf("spill store: %w", err)
		}
		q, _ := url.ParseQuery(a.Spill(spillLinks).Link(name))
		p, err := b.Spill(spillLinks).Take(name, q)
		if err != nil {
			return fmt.Errorf("spill take: %w", err)
		}
		p.Close()
		var queries atomic.Int32
		query := func(context.Context) (subscription.Answer, error) { queries.Add(1); return active(time.Hour), nil }
		k := testKey
		k.Organization = fmt.Sprintf("org%d", round)
		for _, c := range instances {
			if _, err := c.Subscriptions().Resolve(withTimeout(t), k, testPolicy, query); err != nil {
				return fmt.Errorf("subscription: %w", err)
			}
		}
		if n := queries.Load(); n != 1 {
			return fmt.Errorf("%d subscription queries for two instances, want 1 (shared)", n)
		}
		return nil
	}
	if err := shared(); err != nil {
		t.Fatalf("before the failover: %v", err)
	}
	first := sn.Primary()
	first.Stop()
	var promoted time.Time
	deadline := time.Now().Add(40 * time.Second)
	for {
		if promoted.IsZero() {
			if addr := sn.PrimaryAddr(); addr != "" && addr != first.Addr {
				promoted = time.Now()
			}
		}
		err := shared()
		if err == nil && !promoted.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shared work still failing 40 s after the kill (promoted: %v): %v", !promoted.IsZero(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if took := time.Since(promoted); took > 10*time.Second {
		t.Errorf("shared work recovered %s after the promotion, want within 10 s", took)
	}
	t.Logf("shared work recovered %s after the promotion", time.Since(promoted).Round(time.Millisecond))
}
