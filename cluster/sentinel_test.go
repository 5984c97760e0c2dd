package cluster

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/servicegate/servicegate/cluster/redistest"
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
	second := sn.PrimaryAddr()
	mu.Lock()
	defer mu.Unlock()
	if want := []string{" → " + first.Addr, first.Addr + " → " + second}; !slices.Equal(told, want) {
		t.Errorf("told %q, want %q", told, want)
	}
}
