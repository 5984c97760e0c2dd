package queue

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/servicegate/servicegate/internal/wake"
)

// Defaults of Options.
const (
	DefaultConcurrency = 8
	DefaultMaxAge      = 72 * time.Hour
	DefaultFirstDelay  = time.Second
	DefaultMaxDelay    = 10 * time.Minute
	DefaultTimeout     = 30 * time.Second
)

// Options are a queue's delivery policy.
type Options struct {
	// Concurrency caps the deliveries in flight toward the app.
	Concurrency int
	// MaxAge gives a delivery up (dead letter) once it is this old and
	// still not delivered. MaxAttempts, when positive, gives it up after
	// that many attempts.
	MaxAge      time.Duration
	MaxAttempts int
	// FirstDelay is the wait before the second attempt; each retry waits
	// twice as long as the one before, up to MaxDelay, with jitter. A
	// Retry-After answer waits at least what it asks.
	FirstDelay time.Duration
	MaxDelay   time.Duration
	// Dedup, when positive, drops a delivery identical (same organization
	// and body) to one received within it.
	Dedup time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// OnOutcome is told how each attempt ended, for metrics.
	OnOutcome func(Outcome)
	// OnDead is told of each delivery given up, for a log line.
	OnDead func(Meta)
	// OnError is told of store errors the queue survives.
	OnError func(error)
}

// WithDefaults returns o with the defaults of the options left unset.
func (o Options) WithDefaults() Options {
	o.fill()
	return o
}

// fill sets the defaults of the options left unset.
func (o *Options) fill() {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.FirstDelay <= 0 {
		o.FirstDelay = DefaultFirstDelay
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OnOutcome == nil {
		o.OnOutcome = func(Outcome) {}
	}
	if o.OnDead == nil {
		o.OnDead = func(Meta) {}
	}
	if o.OnError == nil {
		o.OnError = func(error) {}
	}
}

// Outcome is how one attempt ended.
type Outcome int

// Outcomes of an attempt.
const (
	OutcomeDelivered Outcome = iota // the app answered 2xx
	OutcomeRetry                    // 408, 425, 429, 5xx, a timeout or no connection: tried again later
	OutcomeDead                     // another answer, or too old or too many attempts: a dead letter
	NumOutcomes
)

var outcomeNames = [NumOutcomes]string{"delivered", "retry", "dead"}

func (o Outcome) String() string { return outcomeNames[o] }

// Result is the app's answer to one attempt.
type Result struct {
	// Status is the answer's status; 0 when none came (Err says why).
	Status int
	// RetryAfter is the answer's Retry-After, 0 when absent.
	RetryAfter time.Duration
	Err        error
}

// Sender sends one attempt of a delivery to the app.
type Sender interface {
	Send(ctx context.Context, m Meta, h http.Header, body []byte) Result
}

// Retryable tells whether an answer (or its absence) is worth trying again.
func (r Result) Retryable() bool {
	switch {
	case r.Err != nil || r.Status == 0:
		return true
	case r.Status == http.StatusRequestTimeout, r.Status == http.StatusTooEarly, r.Status == http.StatusTooManyRequests:
		return true
	default:
		return r.Status >= 500
	}
}

// Delivered tells whether the app acknowledged the delivery.
func (r Result) Delivered() bool { return r.Err == nil && r.Status >= 200 && r.Status <= 299 }

// Queue delivers the deliveries of a Store through a Sender.
type Queue struct {
	store  Store
	sender Sender
	opts   Options

	mu       sync.Mutex
	orgs     map[string]*orgLine
	due      lineHeap // lines whose head is not in flight, by due time
	inFlight int
	depth    int
	oldest   map[uint64]time.Time // received time of each pending delivery
	wake     wake.Signal
	stop     context.CancelFunc
	ctx      context.Context
	done     sync.WaitGroup
	closed   bool
}

// orgLine is one organization's deliveries, in received order; only its
// head is ever in flight, so the app sees them in order.
type orgLine struct {
	org      string
	items    []Meta
	inFlight bool
	index    int // in the heap, -1 when not there
}

// Open starts delivering the pending deliveries of store and any added
// later. Close stops it.
func Open(store Store, sender Sender, opts Options) (*Queue, error) {
	opts.fill()
	pending, err := store.Pending()
	if err != nil {
		return nil, fmt.Errorf("webhook queue: reading the pending deliveries: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	q := &Queue{
		store: store, sender: sender, opts: opts,
		orgs: make(map[string]*orgLine), oldest: make(map[uint64]time.Time),
		wake: wake.New(), ctx: ctx, stop: cancel,
	}
	for _, m := range pending {
		q.push(m)
	}
	q.done.Add(1)
	go q.run()
	return q, nil
}

// Enqueue stores d durably and schedules it; when it returns without
// error, the delivery will reach the app or become a dead letter.
func (q *Queue) Enqueue(d *Delivery) error {
	now := q.opts.Now()
	d.Received, d.NextAttempt, d.Attempts = now, now, 0
	if err := q.store.Add(d, q.opts.Dedup); err != nil {
		if errors.Is(err, ErrDuplicate) {
			return err
		}
		return fmt.Errorf("webhook queue: storing a delivery: %w", err)
	}
	q.mu.Lock()
	q.push(d.Meta)
	q.mu.Unlock()
	q.poke()
	return nil
}

// push adds m at the end of its organization's line. Called with mu held
// (or before run starts).
func (q *Queue) push(m Meta) {
	line := q.orgs[m.Organization]
	if line == nil {
		line = &orgLine{org: m.Organization, index: -1}
		q.orgs[m.Organization] = line
	}
	line.items = append(line.items, m)
	q.depth++
	q.oldest[m.Seq] = m.Received
	if len(line.items) == 1 && !line.inFlight {
		heap.Push(&q.due, line)
	}
}

func (q *Queue) poke() { q.wake.Poke() }

// run starts due deliveries, within the concurrency cap, until Close.
func (q *Queue) run() {
	defer q.done.Done()
	q.wake.Loop(q.ctx, q.startDue)
}

// startDue starts every delivery that is due and fits under the cap, and
// says how long until the next one is due.
func (q *Queue) startDue() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.due.Len() > 0 && q.inFlight < q.opts.Concurrency {
		line := q.due[0]
		wait := line.items[0].NextAttempt.Sub(q.opts.Now())
		if wait > 0 {
			return wait
		}
		heap.Pop(&q.due)
		line.inFlight = true
		q.inFlight++
		q.done.Add(1)
		go q.attempt(line, line.items[0])
	}
	return time.Hour
}

// attempt sends one delivery and files the result.
func (q *Queue) attempt(line *orgLine, m Meta) {
	defer q.done.Done()
	h, body, err := q.store.Payload(m.ID)
	after, outcome, closing := q.opts.Attempt(q.ctx, q.sender, m, h, body, err)
	switch {
	case closing:
		// Closing: the delivery stays as stored and is sent again later.
		q.finish(line, nil)
		return
	case errors.Is(err, ErrNotFound):
		q.finish(line, &m) // gone from the store (dropped): nothing to do
		return
	}
	m = after
	q.opts.OnOutcome(outcome)
	switch outcome {
	case OutcomeDelivered:
		// The organization's next delivery need not wait for the removal
		// to reach the disk: a crash before it does sends this one again
		// (at least once), which the delivery id lets the app see.
		q.done.Add(1)
		go func() {
			defer q.done.Done()
			if err := q.store.Done(m.ID); err != nil {
				q.opts.OnError(fmt.Errorf("webhook queue: removing delivered %s: %w", m.ID, err))
			}
		}()
		q.finish(line, &m)
		return
	case OutcomeRetry:
		if err := q.store.Update(m); err != nil {
			q.opts.OnError(fmt.Errorf("webhook queue: recording attempt %d of %s: %w", m.Attempts, m.ID, err))
		}
		q.retry(line, m)
		return
	}
	if err := q.store.Bury(m); err != nil {
		q.opts.OnError(fmt.Errorf("webhook queue: setting %s aside: %w", m.ID, err))
	}
	q.opts.OnDead(m)
	q.finish(line, &m)
}

// Settle records how attempt m.Attempts+1 of m ended (res) and decides
// what follows, as every queue of this package does: delivered on a 2xx;
// a dead letter on an answer not worth retrying, after MaxAttempts, or
// when the next attempt would fall past MaxAge; else a retry, due after
// the backoff. It returns m with the attempt counted and its last answer,
// Dead or NextAttempt set.
func (o Options) Settle(m Meta, res Result, now time.Time) (Meta, Outcome) {
	o.fill()
	m.Attempts++
	m.LastStatus, m.LastError = res.Status, ""
	if res.Err != nil {
		m.LastError = res.Err.Error()
	}
	switch {
	case res.Delivered():
		return m, OutcomeDelivered
	case !res.Retryable():
		m.Dead = fmt.Sprintf("the app answered %d", res.Status)
	case o.MaxAttempts > 0 && m.Attempts >= o.MaxAttempts:
		m.Dead = fmt.Sprintf("not delivered after %d attempts", m.Attempts)
	default:
		next := now.Add(o.backoff(m.Attempts, res.RetryAfter))
		if next.Sub(m.Received) > o.MaxAge {
			m.Dead = fmt.Sprintf("not delivered within %s", o.MaxAge)
			break
		}
		m.NextAttempt = next
		return m, OutcomeRetry
	}
	return m, OutcomeDead
}

// backoff is the wait before attempt n+1: FirstDelay doubled per attempt,
// capped at MaxDelay, with jitter in its upper half; never shorter than
// retryAfter.
func (o *Options) backoff(n int, retryAfter time.Duration) time.Duration {
	d := o.FirstDelay
	for i := 1; i < n && d < o.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, o.MaxDelay)
	d = d/2 + rand.N(d/2+1)
	return max(d, retryAfter)
}

// Attempt makes one attempt of the stored delivery m, whose payload
// (h, body) was read from its store with readErr: a payload that could
// not be read makes m a dead letter unsent; else it is sent with s, its
// attempts numbered from 1 as the app sees them, and the answer settled
// (see Settle). It returns m as it stands after the attempt and what
// became of it; closing says that ctx ended first, in which case m is to
// stay as stored, for a later attempt.
func (o Options) Attempt(ctx context.Context, s Sender, m Meta, h http.Header, body []byte, readErr error) (_ Meta, _ Outcome, closing bool) {
	o.fill()
	if readErr != nil {
		if ctx.Err() != nil {
			return m, OutcomeRetry, true
		}
		m.Attempts++
		m.LastStatus, m.LastError = 0, ""
		m.Dead = "its stored body could not be read: " + readErr.Error()
		return m, OutcomeDead, false
	}
	sent := m
	sent.Attempts++
	res := s.Send(ctx, sent, h, body)
	if ctx.Err() != nil {
		return m, OutcomeRetry, true
	}
	m, outcome := o.Settle(m, res, o.Now())
	return m, outcome, false
}

// finish ends the line head's attempt: a done head (m non-nil) leaves
// the line, and the line's next delivery becomes due.
func (q *Queue) finish(line *orgLine, m *Meta) {
	q.mu.Lock()
	line.inFlight = false
	q.inFlight--
	if m != nil && len(line.items) > 0 && line.items[0].Seq == m.Seq {
		line.items = line.items[1:]
		q.depth--
		delete(q.oldest, m.Seq)
	}
	q.requeue(line)
	q.mu.Unlock()
	q.poke()
}

// retry puts the head back, due later.
func (q *Queue) retry(line *orgLine, m Meta) {
	q.mu.Lock()
	line.inFlight = false
	q.inFlight--
	if len(line.items) > 0 && line.items[0].Seq == m.Seq {
		line.items[0] = m
	}
	q.requeue(line)
	q.mu.Unlock()
	q.poke()
}

// requeue files a line whose head is idle. Called with mu held.
func (q *Queue) requeue(line *orgLine) {
	if len(line.items) == 0 {
		delete(q.orgs, line.org)
		return
	}
	if line.index < 0 {
		heap.Push(&q.due, line)
	} else {
		heap.Fix(&q.due, line.index)
	}
}

// Stats is the queue's state, for metrics.
type Stats struct {
	// Depth counts the deliveries waiting or in flight.
	Depth int
	// Oldest is when the oldest of them was received; zero when none.
	Oldest time.Time
	// InFlight counts the attempts under way.
	InFlight int
}

// Stats reports the queue's state.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := Stats{Depth: q.depth, InFlight: q.inFlight}
	for _, t := range q.oldest {
		if s.Oldest.IsZero() || t.Before(s.Oldest) {
			s.Oldest = t
		}
	}
	return s
}

// Pending lists the deliveries waiting or in flight, metadata only.
func (q *Queue) Pending() ([]Meta, error) { return q.store.Pending() }

// Dead lists the dead letters, metadata only.
func (q *Queue) Dead() ([]Meta, error) { return q.store.Dead() }

// Replay sends a dead letter again, as a new first attempt after the
// organization's pending deliveries.
func (q *Queue) Replay(id string) error {
	m, err := q.store.Revive(id, q.opts.Now())
	if err != nil {
		return err
	}
	q.mu.Lock()
	q.push(m)
	q.mu.Unlock()
	q.poke()
	return nil
}

// ReplayOrganization replays every dead letter of an organization and
// says how many.
func (q *Queue) ReplayOrganization(org string) (int, error) { return ReplayOrganization(q, org) }

// ReplayOrganization replays through q every dead letter of org that q
// lists, and says how many: how every Deliveries replays an organization.
func ReplayOrganization(q interface {
	Dead() ([]Meta, error)
	Replay(id string) error
}, org string) (int, error) {
	dead, err := q.Dead()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range dead {
		if m.Organization != org {
			continue
		}
		if err := q.Replay(m.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return n, err
		}
		n++
	}
	return n, nil
}

// Drop removes a dead letter.
func (q *Queue) Drop(id string) error { return q.store.Drop(id) }

// Close stops delivering: attempts under way are cancelled (and kept, to
// be sent again when the queue opens next), then the store is closed.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	q.mu.Unlock()
	q.stop()
	q.done.Wait()
	return q.store.Close()
}

// lineHeap orders idle lines by their head's due time, then received order.
type lineHeap []*orgLine

func (h lineHeap) Len() int { return len(h) }
func (h lineHeap) Less(i, j int) bool {
	a, b := h[i].items[0], h[j].items[0]
	if !a.NextAttempt.Equal(b.NextAttempt) {
		return a.NextAttempt.Before(b.NextAttempt)
	}
	return a.Seq < b.Seq
}
func (h lineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *lineHeap) Push(x any) {
	l := x.(*orgLine)
	l.index = len(*h)
	*h = append(*h, l)
}
func (h *lineHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	l.index = -1
	*h = old[:len(old)-1]
	return l
}
