package descriptor

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAwait: attempts go on, with growing waits up to the cap, until one
// succeeds; a cancelled context ends the waiting at once.
func TestAwait(t *testing.T) {
	var waits []time.Duration
	n := 0
	v, err := Await(context.Background(), Backoff{First: time.Millisecond, Max: 4 * time.Millisecond},
		func(context.Context) (int, error) {
			if n++; n < 5 {
				return 0, errors.New("not yet")
			}
			return n, nil
		},
		func(_ error, wait time.Duration) { waits = append(waits, wait) })
	if v != 5 || err != nil {
		t.Fatalf("Await = %d, %v", v, err)
	}
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Errorf("waits %v, want %v", waits, want)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Await(ctx, Backoff{First: time.Hour, Max: time.Hour}, func(context.Context) (int, error) { return 0, errors.New("down") }, nil)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Await = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Await went on after its context ended")
	}
}
