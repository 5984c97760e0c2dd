package descriptor

import (
	"context"
	"time"
)

// Backoff is how long Await waits between attempts: First after the first
// failure, twice as long after each next one, never more than Max.
type Backoff struct {
	First, Max time.Duration
}

// DefaultBackoff retries soon after an orchestrated start (the gateway
// before the app) and at most every 30 seconds after that.
var DefaultBackoff = Backoff{First: 500 * time.Millisecond, Max: 30 * time.Second}

// Await calls attempt until it succeeds or ctx ends, waiting as backoff
// says between attempts. failed, when set, hears of each failure and of
// the wait before the next attempt. It returns attempt's result, or
// ctx's error.
func Await[T any](ctx context.Context, backoff Backoff, attempt func(context.Context) (T, error), failed func(err error, wait time.Duration)) (T, error) {
	wait := backoff.First
	for {
		v, err := attempt(ctx)
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			var zero T
			return zero, ctx.Err()
		}
		if failed != nil {
			failed(err, wait)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			var zero T
			return zero, ctx.Err()
		case <-timer.C:
		}
		wait = min(2*wait, backoff.Max)
	}
}
