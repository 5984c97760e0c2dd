package cluster

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servicegate/servicegate/cluster/redistest"
)

// TestPing: a health check's ping succeeds while Redis answers, fails
// (counted as OpPing, the address named, no URL) while it does not, and
// succeeds again once it is back.
func TestPing(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	var failed []Op
	c := newClient(t, srv, Options{Timeout: 300 * time.Millisecond, OnError: func(op Op, _ error) {
		mu.Lock()
		failed = append(failed, op)
		mu.Unlock()
	}})
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("Redis up: %v", err)
	}
	srv.Stop()
	err := c.Ping(context.Background())
	if err == nil {
		t.Fatal("Redis down: the ping succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, "redis ping at "+srv.Addr) || strings.Contains(msg, "redis://") {
		t.Errorf("error %q", msg)
	}
	mu.Lock()
	pings := 0
	for _, op := range failed { // the pub/sub listener reports its own
		if op == OpPing {
			pings++
		}
	}
	if pings != 1 || OpPing.String() != "ping" {
		t.Errorf("failures reported: %v, want one ping", failed)
	}
	mu.Unlock()
	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for c.Ping(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("Redis back: the ping still fails")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
