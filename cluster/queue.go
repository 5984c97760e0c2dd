package cluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/servicegate/servicegate/internal/wake"
	"github.com/servicegate/servicegate/queue"
)

// queueKeys is the key space of the shared webhook queues:
// <prefix>{queue:<name>}:… (see queue_scripts.go). The scripts name the
// organizations' keys themselves, so the whole queue is one hash tag: in a
// Redis Cluster, one queue lives on one node.
const queueKeys = "queue:"

// DefaultQueuePoll is the default of QueueOptions.Poll.
const DefaultQueuePoll = 500 * time.Millisecond

// QueueLease is the lease for attempts that take at most attemptTimeout:
// twice that, plus a second.
func QueueLease(attemptTimeout time.Duration) time.Duration {
	return 2*attemptTimeout + time.Second
}

// QueueOptions configure a shared queue beyond its delivery policy.
type QueueOptions struct {
	// Name names the queue in Redis: instances opening the same name share
	// its deliveries.
	Name string
	// Lease is how long an instance may hold an organization's head while
	// it sends it; an instance that dies holding it is taken over once it
	// ends. Make it longer than an attempt's timeout. Default
	// QueueLease(queue.DefaultTimeout). The lease held is Lease plus twice the Client's
	// timeout: the claim's answer (up to a whole delivery) and the settling
	// call each take up to that, outside the attempt's own time.
	Lease time.Duration
	// Poll is the longest an idle instance waits before it looks for
	// deliveries queued by the others. Default DefaultQueuePoll.
	Poll time.Duration
	// Moved, when set, is told how many deliveries and dead letters that
	// an earlier version kept under its key layout (see queue_earlier.go)
	// the queue moved into the current one as it opened, when it moved
	// any.
	Moved func(deliveries, dead int)
}

// Queue is a durable webhook queue in Redis, shared by every instance that
// opens the same name: it implements queue.Deliveries as queue.Queue does
// on one machine, with the same delivery policy (queue.Options.Settle).
//
// Each organization's deliveries are a Redis stream read through one
// consumer group, so any instance delivers any of them. One organization's
// deliveries still reach the app one at a time, in the order received:
// an instance takes an organization's head only under the organization's
// lease (a key with expiry). An instance that dies mid-delivery leaves its
// entry pending in the group and its lease to run out; the next instance
// to take the lease takes the entry over (XAUTOCLAIM) and sends it again,
// with the same delivery ID. A delivery is durable once Redis has it:
// how much a Redis crash can lose is Redis' persistence setting (appendonly
// with appendfsync always loses nothing acknowledged).
type Queue struct {
	c        *Client
	base     string
	sender   queue.Sender
	opts     queue.Options
	qo       QueueOptions
	consumer string

	ctx     context.Context
	stop    context.CancelFunc
	wake    wake.Signal
	done    sync.WaitGroup
	slots   chan struct{}
	sending atomic.Int32 // attempts under way (a slot is also held while looking for work)
	closing sync.Once
	// upgraded: what the earlier key layout held has been moved (set at
	// open, else by the delivery loop).
	upgraded bool
	mu       sync.Mutex
	stats    queue.Stats // the last stats read, kept while Redis fails
}

var _ queue.Deliveries = (*Queue)(nil)

// claimed is one delivery an instance holds the lease of.
type claimed struct {
	org, entry string
	meta       queue.Meta
	payload    []byte
}

// OpenQueue starts delivering the shared queue called qo.Name: this
// instance joins the others that opened it. It does not wait for Redis:
// while Redis is away, Enqueue fails and nothing is delivered.
func (c *Client) OpenQueue(sender queue.Sender, opts queue.Options, qo QueueOptions) (*Queue, error) {
	if qo.Name == "" {
		return nil, errors.New("shared webhook queue: a name is required")
	}
	if qo.Lease <= 0 {
		qo.Lease = QueueLease(queue.DefaultTimeout)
	}
	qo.Lease += 2 * c.timeout
	if qo.Poll <= 0 {
		qo.Poll = DefaultQueuePoll
	}
	opts = opts.WithDefaults()
	q := &Queue{
		c: c, base: c.queueBase(qo.Name), sender: sender, opts: opts, qo: qo,
		consumer: randomHex(8),
		wake:     wake.New(),
		slots:    make(chan struct{}, opts.Concurrency),
	}
	q.ctx, q.stop = context.WithCancel(context.Background())
	// Before any delivery is taken or added here, so that one
	// organization's earlier deliveries go before its new ones.
	q.upgrade()
	q.done.Add(1)
	go q.run()
	return q, nil
}

// upgrade moves what the earlier key layout holds of the queue into the
// current one, until it has once: at open, or, while Redis does not
// answer then, as the delivery loop looks for work.
func (q *Queue) upgrade() {
	if q.upgraded {
		return
	}
	n, d, err := q.moveEarlier(q.ctx)
	if (n > 0 || d > 0) && q.qo.Moved != nil {
		q.qo.Moved(n, d)
	}
	if err != nil {
		q.reportError(err)
		return
	}
	q.upgraded = true
}

// queueBase is the start of every key of the queue called name.
func (c *Client) queueBase(name string) string { return c.TaggedKey(queueKeys+name, ":") }

func (q *Queue) key(name string) string { return q.base + name }

// Where names the queue for metric labels and health checks: "redis", the
// Redis in words (Client.Label) and the queue's keys, e.g. redis sentinel
// mymaster servicegate:{queue:http://127.0.0.1:3000}.
func (q *Queue) Where() string {
	return "redis " + q.c.Label() + " " + strings.TrimSuffix(q.base, ":")
}

// Enqueue implements queue.Deliveries: d is in Redis when it returns.
func (q *Queue) Enqueue(d *queue.Delivery) error {
	now := q.opts.Now()
	d.Received, d.NextAttempt, d.Attempts = now, now, 0
	d.Size = len(d.Body)
	payload, err := queue.EncodePayload(d.Header, d.Body)
	if err != nil {
		return err
	}
	d.ID, d.Seq = "", 0 // given by Redis; the stored metadata holds neither
	meta, err := json.Marshal(d.Meta)
	if err != nil {
		return err
	}
	dedup := q.key("d:" + hex.EncodeToString(queue.DedupKey(d.Organization, d.Body)))
	// The token makes the call idempotent: a script run again (the client
	// resends a call whose answer was lost) returns the ID it gave.
	token := q.key("t:" + randomHex(12))
	var id string
	err = q.c.durable(q.ctx, OpQueueAdd, q.base, func(ctx context.Context, r redis.Scripter) error {
		var err error
		id, err = queueAddScript.Run(ctx, r,
			[]string{q.key("seq"), q.key("pending"), q.key("age"), q.key("ready"), q.key("s:" + d.Organization), dedup, q.key("epoch"), token},
			randomHex(6), meta, payload, now.UnixMilli(), q.opts.Dedup.Milliseconds(), d.Organization).Text()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return queue.ErrDuplicate
	}
	if err != nil {
		return fmt.Errorf("webhook queue: storing a delivery: %w", err)
	}
	d.Seq, d.ID = seqOf(id), id
	q.poke()
	return nil
}

func (q *Queue) poke() { q.wake.Poke() }

// run takes due deliveries while a slot is free, until Close.
func (q *Queue) run() {
	defer q.done.Done()
	q.wake.Loop(q.ctx, q.startDue)
}

// startDue starts due deliveries while a slot is free, and says how long
// to wait before looking again (a finishing attempt wakes the loop too).
func (q *Queue) startDue() time.Duration {
	q.upgrade()
	wait := q.qo.Poll
	for {
		select {
		case q.slots <- struct{}{}:
		default:
			return wait // every slot busy
		}
		cl, next, err := q.claim()
		if err != nil || cl == nil {
			<-q.slots
			if err == nil && next >= 0 {
				wait = min(wait, next)
			}
			return wait
		}
		q.done.Add(1)
		q.sending.Add(1)
		go q.attempt(cl)
	}
}

// claim takes the head of a due organization, or says how long until one
// is due (-1: none queued).
func (q *Queue) claim() (*claimed, time.Duration, error) {
	var reply []any
	err := q.c.Call(q.ctx, OpQueueClaim, func(ctx context.Context) error {
		var err error
		reply, err = queueClaimScript.Run(ctx, q.c.rdb, []string{q.key("ready"), q.key("pending")},
			q.opts.Now().UnixMilli(), q.qo.Lease.Milliseconds(), q.consumer, q.base, 2*q.opts.Concurrency+8).Slice()
		return err
	})
	if err != nil {
		q.reportError(fmt.Errorf("webhook queue: taking a delivery: %w", err))
		return nil, 0, err
	}
	if len(reply) == 1 {
		ms, _ := reply[0].(int64)
		if ms < 0 {
			return nil, -1, nil
		}
		return nil, time.Duration(ms) * time.Millisecond, nil
	}
	cl := q.parseClaim(reply)
	if cl == nil {
		return nil, 0, fmt.Errorf("webhook queue: unexpected claim reply of %d values", len(reply))
	}
	return cl, 0, nil
}

// parseClaim reads a delivery as the scripts return it: {org, entry, id,
// meta, payload}; nil for any other reply.
func (q *Queue) parseClaim(reply []any) *claimed {
	if len(reply) != 5 {
		return nil
	}
	str := func(v any) string { s, _ := v.(string); return s }
	cl := &claimed{org: str(reply[0]), entry: str(reply[1]), payload: []byte(str(reply[4]))}
	id := str(reply[2])
	if err := json.Unmarshal([]byte(str(reply[3])), &cl.meta); err != nil {
		// Metadata lost or corrupt: deliver what the stream holds.
		cl.meta = queue.Meta{Organization: cl.org, Received: q.opts.Now()}
	}
	cl.meta.ID, cl.meta.Seq = id, seqOf(id)
	return cl
}

// reportError tells OnError of an error the queue survives, unless it is a
// failed Redis call, which the Client has counted and logged already (at
// most one line per LogInterval, however often an idle queue polls a Redis
// that is away), or the queue is closing.
func (q *Queue) reportError(err error) {
	var ce *CallError
	if q.ctx.Err() != nil || errors.As(err, &ce) {
		return
	}
	q.opts.OnError(err)
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// seqOf reads the sequence number at the end of a delivery ID.
func seqOf(id string) uint64 {
	n, _ := strconv.ParseUint(id[strings.LastIndexByte(id, '-')+1:], 10, 64)
	return n
}

// maxStreak is how many deliveries of one organization an instance sends
// in a row, keeping its lease, before it lets the organization go back to
// the others (and to the other organizations waiting for a slot).
const maxStreak = 64

// attempt sends cl, then the organization's next deliveries as settling
// each hands them over, and frees its slot.
func (q *Queue) attempt(cl *claimed) {
	defer q.done.Done()
	defer func() { q.sending.Add(-1); <-q.slots; q.poke() }()
	for streak := 1; cl != nil; streak++ {
		cl = q.send(cl, streak < maxStreak)
	}
}

// send sends one delivery and files the result; with next, it returns the
// organization's next delivery when there is one.
func (q *Queue) send(cl *claimed, next bool) *claimed {
	m := cl.meta
	h, body, err := queue.DecodePayload(cl.payload)
	m, outcome, closing := q.opts.Attempt(q.ctx, q.sender, m, h, body, err)
	if closing {
		// The lease goes back, so that another instance sends the
		// delivery again now rather than when it ends.
		q.settle(cl, "release", m, q.opts.Now(), false)
		return nil
	}
	q.opts.OnOutcome(outcome)
	switch outcome {
	case queue.OutcomeDelivered:
		return q.settle(cl, "done", m, time.Time{}, next)
	case queue.OutcomeRetry:
		return q.settle(cl, "retry", m, m.NextAttempt, false)
	default:
		// Told once the dead letter is recorded, as the disk queue does,
		// so that what OnDead reports can be read back from Dead.
		nxt := q.settle(cl, "bury", m, time.Time{}, next)
		q.opts.OnDead(m)
		return nxt
	}
}

// settle runs the settle script for cl in mode, with m as the delivery's
// metadata and due as when its organization may be taken next (retry,
// release); with next, it returns the organization's next delivery, if
// any, under the lease kept. A failure leaves the delivery pending in
// Redis: it is sent again once the lease runs out.
func (q *Queue) settle(cl *claimed, mode string, m queue.Meta, due time.Time, next bool) *claimed {
	meta, _ := json.Marshal(m)
	takeNext := "0"
	if next && q.ctx.Err() == nil {
		takeNext = "1"
	}
	var reply any
	// A dead letter is a write that must not be lost; the other modes
	// only move a delivery that Redis' replicas already have, and a lost
	// "done" sends it again (at least once).
	settle := func(ctx context.Context, r redis.Scripter) error {
		var err error
		reply, err = queueSettleScript.Run(ctx, r,
			[]string{q.key("ready"), q.key("pending"), q.key("age"), q.key("s:" + cl.org), q.key("l:" + cl.org), q.key("dead"), q.key("deadp")},
			cl.entry, m.ID, q.consumer, q.opts.Now().UnixMilli(), cl.org, mode, meta, due.UnixMilli(),
			takeNext, q.qo.Lease.Milliseconds(), q.base).Result()
		return err
	}
	ctx := context.WithoutCancel(q.ctx)
	var err error
	if mode == "bury" {
		err = q.c.durable(ctx, OpQueueSettle, q.base, settle)
	} else {
		err = q.c.Call(ctx, OpQueueSettle, func(ctx context.Context) error { return settle(ctx, q.c.rdb) })
	}
	if err != nil {
		q.reportError(fmt.Errorf("webhook queue: recording the attempt of %s (%s): %w", m.ID, mode, err))
		return nil
	}
	if r, ok := reply.([]any); ok {
		return q.parseClaim(r)
	}
	return nil
}

// Stats implements queue.Deliveries: the queue's depth across every
// instance, the oldest delivery's received time, this instance's attempts
// under way. While Redis fails it reports what it read last.
func (q *Queue) Stats() queue.Stats {
	var s queue.Stats
	err := q.c.Call(q.ctx, OpQueueAdmin, func(ctx context.Context) error {
		// One round trip, read at one instant: the count and the oldest
		// agree with each other.
		var n *redis.IntCmd
		var first *redis.ZSliceCmd
		_, err := q.c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			n = p.ZCard(ctx, q.key("age"))
			first = p.ZRangeWithScores(ctx, q.key("age"), 0, 0)
			return nil
		})
		if err != nil {
			return err
		}
		s.Depth = int(n.Val())
		if f := first.Val(); len(f) == 1 {
			s.Oldest = time.UnixMilli(int64(f[0].Score))
		}
		return nil
	})
	s.InFlight = int(q.sending.Load())
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil {
		s.Depth, s.Oldest = q.stats.Depth, q.stats.Oldest
	}
	q.stats = s
	return s
}

// list reads a hash of metadata, in received order.
func (q *Queue) list(hash string) ([]queue.Meta, error) {
	var all map[string]string
	err := q.c.Call(q.ctx, OpQueueAdmin, func(ctx context.Context) error {
		var err error
		all, err = q.c.rdb.HGetAll(ctx, q.key(hash)).Result()
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]queue.Meta, 0, len(all))
	for id, v := range all {
		var m queue.Meta
		if json.Unmarshal([]byte(v), &m) != nil {
			continue
		}
		m.ID, m.Seq = id, seqOf(id)
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b queue.Meta) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// Pending implements queue.Deliveries, for every instance's deliveries.
func (q *Queue) Pending() ([]queue.Meta, error) { return q.list("pending") }

// Dead implements queue.Deliveries.
func (q *Queue) Dead() ([]queue.Meta, error) { return q.list("dead") }

// Replay implements queue.Deliveries: the dead letter goes to the end of
// its organization's stream, with no attempts, due now.
func (q *Queue) Replay(id string) error {
	var v string
	err := q.c.Call(q.ctx, OpQueueAdmin, func(ctx context.Context) error {
		var err error
		v, err = q.c.rdb.HGet(ctx, q.key("dead"), id).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return queue.ErrNotFound
	}
	if err != nil {
		return err
	}
	var m queue.Meta
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return fmt.Errorf("webhook queue: dead letter %s: %w", id, err)
	}
	now := q.opts.Now()
	m.Dead, m.Attempts, m.NextAttempt, m.LastStatus, m.LastError = "", 0, now, 0, ""
	meta, _ := json.Marshal(m)
	var n int64
	err = q.c.durable(q.ctx, OpQueueAdmin, q.base, func(ctx context.Context, r redis.Scripter) error {
		var err error
		n, err = queueReviveScript.Run(ctx, r,
			[]string{q.key("dead"), q.key("deadp"), q.key("pending"), q.key("age"), q.key("ready"), q.key("s:" + m.Organization)},
			id, meta, now.UnixMilli(), m.Organization).Int64()
		return err
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return queue.ErrNotFound
	}
	q.poke()
	return nil
}

// ReplayOrganization implements queue.Deliveries.
func (q *Queue) ReplayOrganization(org string) (int, error) { return queue.ReplayOrganization(q, org) }

// Drop implements queue.Deliveries.
func (q *Queue) Drop(id string) error {
	var n int64
	err := q.c.Call(q.ctx, OpQueueAdmin, func(ctx context.Context) error {
		var err error
		n, err = queueDropScript.Run(ctx, q.c.rdb, []string{q.key("dead"), q.key("deadp")}, id).Int64()
		return err
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return queue.ErrNotFound
	}
	return nil
}

// Close implements queue.Deliveries: attempts under way are cancelled and
// their leases given back, so that the other instances send them at once.
// The deliveries stay in Redis.
func (q *Queue) Close() error {
	q.closing.Do(func() {
		q.stop()
		q.done.Wait()
	})
	return nil
}
