package wake

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestLoopRunsWhenPokedAndEndsWithContext(t *testing.T) {
	s := New()
	ctx, cancel := context.WithCancel(context.Background())
	var steps atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Loop(ctx, func() time.Duration { steps.Add(1); return time.Hour })
	}()
	deadline := time.Now().Add(5 * time.Second)
	for steps.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	s.Poke()
	s.Poke() // a second poke while one is pending does not block
	for steps.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if steps.Load() < 2 {
		t.Fatalf("a poke did not run the step again: %d steps", steps.Load())
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not end with its context")
	}
}

func TestLoopRunsWhenTheWaitHasPassed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan struct{}, 3)
	go New().Loop(ctx, func() time.Duration { ran <- struct{}{}; return time.Millisecond })
	for range 3 {
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("the step did not run again after its wait")
		}
	}
}
