package queue

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// senderFunc is a Sender from a function.
type senderFunc func(ctx context.Context, m Meta, h http.Header, body []byte) Result

func (f senderFunc) Send(ctx context.Context, m Meta, h http.Header, body []byte) Result {
	return f(ctx, m, h, body)
}

func TestAttempt(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	opts := Options{Now: func() time.Time { return now }}
	stored := Meta{ID: "d1", Organization: "acme", Attempts: 2, Received: now}

	t.Run("numbered from one as sent", func(t *testing.T) {
		var seen Meta
		s := senderFunc(func(_ context.Context, m Meta, _ http.Header, body []byte) Result {
			seen = m
			return Result{Status: 204}
		})
		m, outcome, closing := opts.Attempt(context.Background(), s, stored, nil, []byte("{}"), nil)
		if closing || outcome != OutcomeDelivered {
			t.Fatalf("outcome %v closing %v", outcome, closing)
		}
		if seen.Attempts != 3 || m.Attempts != 3 || m.LastStatus != 204 {
			t.Fatalf("sent as attempt %d, settled as %+v", seen.Attempts, m)
		}
	})
	t.Run("unreadable payload is a dead letter unsent", func(t *testing.T) {
		s := senderFunc(func(context.Context, Meta, http.Header, []byte) Result {
			t.Fatal("an unreadable delivery was sent")
			return Result{}
		})
		m, outcome, closing := opts.Attempt(context.Background(), s, stored, nil, nil, errors.New("bad payload"))
		if closing || outcome != OutcomeDead || m.Attempts != 3 {
			t.Fatalf("outcome %v closing %v meta %+v", outcome, closing, m)
		}
		if !strings.Contains(m.Dead, "could not be read: bad payload") {
			t.Fatalf("dead reason %q", m.Dead)
		}
	})
	t.Run("closing leaves the delivery as stored", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		s := senderFunc(func(context.Context, Meta, http.Header, []byte) Result {
			cancel()
			return Result{Err: context.Canceled}
		})
		m, _, closing := opts.Attempt(ctx, s, stored, nil, []byte("{}"), nil)
		if !closing || m != stored {
			t.Fatalf("closing %v meta %+v", closing, m)
		}
		m, _, closing = opts.Attempt(ctx, s, stored, nil, nil, errors.New("store closed"))
		if !closing || m != stored {
			t.Fatalf("read error while closing: closing %v meta %+v", closing, m)
		}
	})
}
