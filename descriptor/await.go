package descriptor

import (
	"context"
	"errors"
	"net/url"
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

// Label names source in logs and metrics, without the credentials an
// address may hold.
func Label(source string) string {
	if u, err := url.Parse(source); err == nil && IsAddress(source) {
		return u.Redacted()
	}
	return source
}

// Awaitable tells whether err, from loading source, is an app that does
// not answer yet (it started after the gateway), worth waiting for: an
// address that could not be read. A missing or defective file, or an
// answer that is no descriptor, is a mistake to fix instead.
func Awaitable(source string, err error) bool {
	var defects *Defects
	return IsAddress(source) && !errors.As(err, &defects)
}

// Await reads source until it is read, with DefaultBackoff, or until ctx
// ends. Each failure is told to retry with the wait before the next
// attempt; changed is told of a failure whose kind (the address does not
// answer, or answers no descriptor) is not the one before, starting from
// awaited, the failure that made the caller wait.
func (l *Loader) Await(ctx context.Context, source string, awaited error, changed func(error), retry func(error, time.Duration)) (*Descriptor, error) {
	last := Awaitable(source, awaited)
	return Await(ctx, DefaultBackoff,
		func(c context.Context) (*Descriptor, error) {
			loaded, err := l.Load(c, source)
			if err != nil {
				return nil, err
			}
			return loaded.Descriptor, nil
		},
		func(err error, wait time.Duration) {
			if kind := Awaitable(source, err); kind != last {
				last = kind
				changed(err)
			}
			retry(err, wait)
		})
}
