// Package wake is the scheduler loop the webhook queues share: do what is
// due, then sleep until the next thing is due or someone signals that
// there is new work.
package wake

import (
	"context"
	"time"
)

// Signal wakes a Loop. Make one with New.
type Signal chan struct{}

// New returns a Signal that remembers one wake-up while the loop is busy.
func New() Signal { return make(Signal, 1) }

// Poke wakes the loop waiting on s without blocking.
func (s Signal) Poke() {
	select {
	case s <- struct{}{}:
	default:
	}
}

// Loop calls step until ctx ends, again as soon as s is poked or once
// the wait that step returned has passed.
func (s Signal) Loop(ctx context.Context, step func() time.Duration) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Reset(step())
		select {
		case <-ctx.Done():
			return
		case <-s:
		case <-timer.C:
		}
	}
}
