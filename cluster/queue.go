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
	entry   string
	meta    queue.Meta
	payload []byte
}

// line is one organization's deliveries that an instance holds the lease
// of: those it read and has not sent yet, in order.
type line struct {
	org  string
	held []*claimed
	// last is the stream entry last read: reading ahead goes on after it.
	last string
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
	cmd, err := q.c.durable(q.ctx, OpQueueAdd, q.base, queueAddScript,
		[]string{q.key("seq"), q.key("pending"), q.key("age"), q.key("ready"), q.key("s:" + d.Organization), dedup, q.key("epoch"), token},
		randomHex(6), meta, payload, now.UnixMilli(), q.opts.Dedup.Milliseconds(), d.Organization)
	if errors.Is(err, redis.Nil) {
		return queue.ErrDuplicate
	}
	if err != nil {
		return fmt.Errorf("webhook queue: storing a delivery: %w", err)
	}
	id, due, err := addReply(cmd)
	if err != nil {
		return fmt.Errorf("webhook queue: storing a delivery: %w", err)
	}
	d.Seq, d.ID = seqOf(id), id
	if due {
		// Else the instance holding the lease reads it after the
		// deliveries before it, or a retry is due later: a claim now
		// would find nothing.
		q.poke()
	}
	return nil
}

// addReply reads queueAddScript's {ID, due}.
func addReply(cmd *redis.Cmd) (id string, due bool, err error) {
	reply, err := cmd.Slice()
	if err != nil {
		return "", false, err
	}
	if len(reply) != 2 {
		return "", false, fmt.Errorf("unexpected reply %v", reply)
	}
	id, ok := reply[0].(string)
	n, ok2 := reply[1].(int64)
	if !ok || !ok2 || id == "" {
		return "", false, fmt.Errorf("unexpected reply %v", reply)
	}
	return id, n == 1, nil
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
		l, next, err := q.claim()
		if err != nil || l == nil {
			<-q.slots
			if err == nil && next >= 0 {
				wait = min(wait, next)
			}
			return wait
		}
		q.done.Add(1)
		q.sending.Add(1)
		go q.attempt(l)
	}
}

// How far an instance holding an organization's lease reads ahead of the
// delivery it sends: at most readAhead deliveries, and no more once their
// payloads reach aheadBytes (a larger delivery is read alone).
const (
	readAhead  = 16
	aheadBytes = 1 << 20
)

// claim takes the head of a due organization, and the deliveries after
// it that it reads ahead, or says how long until one is due (-1: none
// queued).
func (q *Queue) claim() (*line, time.Duration, error) {
	var reply []any
	err := q.c.Call(q.ctx, OpQueueClaim, func(ctx context.Context) error {
		var err error
		reply, err = queueClaimScript.Run(ctx, q.c.rdb, []string{q.key("ready"), q.key("pending")},
			q.opts.Now().UnixMilli(), q.qo.Lease.Milliseconds(), q.consumer, q.base, 2*q.opts.Concurrency+8,
			readAhead, aheadBytes).Slice()
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
	l := &line{}
	if !q.readEntries(l, reply) {
		return nil, 0, fmt.Errorf("webhook queue: unexpected claim reply of %d values", len(reply))
	}
	return l, 0, nil
}

// readEntries adds to l the deliveries as the scripts return them: {org,
// entry, id, meta, payload, entry, …}, and says whether the reply had
// that form.
func (q *Queue) readEntries(l *line, reply []any) bool {
	if len(reply) < 5 || (len(reply)-1)%4 != 0 {
		return false
	}
	str := func(v any) string { s, _ := v.(string); return s }
	l.org = str(reply[0])
	for i := 1; i < len(reply); i += 4 {
		cl := &claimed{entry: str(reply[i]), payload: []byte(str(reply[i+3]))}
		id := str(reply[i+1])
		if err := json.Unmarshal([]byte(str(reply[i+2])), &cl.meta); err != nil {
			// Metadata lost or corrupt: deliver what the stream holds.
			cl.meta = queue.Meta{Organization: l.org, Received: q.opts.Now()}
		}
		cl.meta.ID, cl.meta.Seq = id, seqOf(id)
		l.held = append(l.held, cl)
		l.last = cl.entry
	}
	return true
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

// settleRetry is the first wait before a failed settle call goes again;
// each wait doubles, up to a second.
const settleRetry = 50 * time.Millisecond

// maxStreak is how many deliveries of one organization an instance sends
// in a row, keeping its lease, before it lets the organization go back to
// the others (and to the other organizations waiting for a slot).
const maxStreak = 64

// attempt delivers l's deliveries, and frees its slot.
func (q *Queue) attempt(l *line) {
	defer q.done.Done()
	defer func() { q.sending.Add(-1); <-q.slots; q.poke() }()
	q.deliver(l)
}

// ended is how an attempt ended, to be recorded in Redis: a settle
// script item.
type ended struct {
	mode string // done, bury, retry or release
	cl   *claimed
	meta queue.Meta // as it stands after the attempt
	due  time.Time  // retry, release: when the organization may be taken next
}

// settleCall is a settle call on its way to Redis.
type settleCall struct {
	done chan struct{}
	// Once done: err, else whether the lease is still the caller's, and
	// the deliveries read ahead.
	err  error
	kept bool
	more line
}

// deliver sends l's deliveries one at a time, in order, and the ones it
// reads ahead after them, until maxStreak, a retry, the queue closing or
// the organization running out. The order is the stream's, not the
// settling's: the delivery after one that the app acknowledged goes to
// the app while the call that records the first is on its way, and the
// attempts that end while a call is on its way are recorded together by
// the next. A delivery the app acknowledged but Redis has not recorded
// stays pending: if the instance dies, it goes again (at least once),
// never lost. A call that fails (after its retries, see settle) stops the
// streak, leaving what is not recorded to be sent again once the lease
// runs out.
func (q *Queue) deliver(l *line) {
	var (
		toRecord []ended
		call     *settleCall // the call on its way, nil when none
		last     *ended      // a retry or release, which ends the streak
		sent     int
		leased   = true
		failed   bool
	)
	// absorb waits for the call on its way and takes what it read; it
	// says whether the streak may go on.
	absorb := func() bool {
		<-call.done
		c := call
		call = nil
		if c.err != nil {
			failed = true
			return false
		}
		leased = c.kept
		if len(c.more.held) > 0 {
			l.held = append(l.held, c.more.held...)
			l.last = c.more.last
		}
		return c.kept
	}
	for sent < maxStreak {
		if call != nil && (len(l.held) == 0 || closed(call.done)) {
			if !absorb() {
				break
			}
			continue
		}
		if len(l.held) == 0 {
			if len(toRecord) == 0 {
				break
			}
			// Nothing in hand: record what ended, and read on.
			call = q.settle(l, toRecord, nil, q.ahead(l, sent))
			toRecord = nil
			continue
		}
		cl := l.held[0]
		l.held = l.held[1:]
		sent++
		e := q.send(cl)
		if e.mode == "retry" || e.mode == "release" {
			last = &e
			break
		}
		toRecord = append(toRecord, e)
		if call == nil {
			call = q.settle(l, toRecord, nil, q.ahead(l, sent))
			toRecord = nil
		}
	}
	if call != nil {
		absorb()
	}
	if failed || (!leased && len(toRecord) == 0 && last == nil) {
		return
	}
	// The last call: what ended, and the lease given back (the
	// deliveries read ahead and not sent stay pending, for the next
	// claim).
	<-q.settle(l, toRecord, last, -1).done
}

// closed says whether ch is closed.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ahead is how many deliveries to read ahead, sent deliveries into the
// streak: up to readAhead in hand, and no more than the streak sends.
func (q *Queue) ahead(l *line, sent int) int {
	if q.ctx.Err() != nil {
		return 0
	}
	return max(min(readAhead, maxStreak-sent)-len(l.held), 0)
}

// send sends one delivery and says how it ended.
func (q *Queue) send(cl *claimed) ended {
	h, body, err := queue.DecodePayload(cl.payload)
	m, outcome, closing := q.opts.Attempt(q.ctx, q.sender, cl.meta, h, body, err)
	if closing {
		// The lease goes back, so that another instance sends the
		// delivery again now rather than when it ends.
		return ended{mode: "release", cl: cl, meta: m, due: q.opts.Now()}
	}
	q.opts.OnOutcome(outcome)
	switch outcome {
	case queue.OutcomeDelivered:
		return ended{mode: "done", cl: cl, meta: m}
	case queue.OutcomeRetry:
		return ended{mode: "retry", cl: cl, meta: m, due: m.NextAttempt}
	default:
		return ended{mode: "bury", cl: cl, meta: m}
	}
}

// settle starts the settle call that records items, then last (a retry or
// a release) when not nil, for l's organization. With ahead >= 0 and no
// last, the lease is kept and up to ahead deliveries after l.last are read
// (none when ahead is 0); with ahead < 0 it goes back. Dead letters are
// told to OnDead once the call ends, as the disk queue does, so that what
// OnDead reports can be read back from Dead. A failed call goes again,
// for up to a quarter of the lease; one that still fails leaves the
// deliveries pending in Redis: they are sent again once the lease runs
// out.
func (q *Queue) settle(l *line, items []ended, last *ended, ahead int) *settleCall {
	if last != nil {
		items = append(items, *last)
	}
	next, due := "1", q.opts.Now()
	if ahead < 0 || last != nil {
		next, ahead = "0", 0
	}
	if last != nil {
		due = last.due
	}
	args := []any{q.consumer, q.opts.Now().UnixMilli(), l.org, due.UnixMilli(), next, q.qo.Lease.Milliseconds(), q.base,
		cmp.Or(l.last, "0-0"), ahead, aheadBytes}
	// A dead letter is a write that must not be lost; the other modes
	// only move a delivery that Redis' replicas already have, and a lost
	// "done" sends it again (at least once).
	durable := false
	var dead []queue.Meta
	for _, e := range items {
		meta := ""
		if e.mode == "bury" || e.mode == "retry" {
			b, _ := json.Marshal(e.meta)
			meta = string(b)
		}
		if e.mode == "bury" {
			durable = true
			dead = append(dead, e.meta)
		}
		args = append(args, e.mode, e.cl.entry, e.cl.meta.ID, meta)
	}
	keys := []string{q.key("ready"), q.key("pending"), q.key("age"), q.key("s:" + l.org), q.key("l:" + l.org), q.key("dead"), q.key("deadp")}
	call := &settleCall{done: make(chan struct{})}
	go func() {
		defer close(call.done)
		ctx := context.WithoutCancel(q.ctx)
		run := func() (cmd *redis.Cmd, err error) {
			if durable {
				return q.c.durable(ctx, OpQueueSettle, q.base, queueSettleScript, keys, args...)
			}
			err = q.c.Call(ctx, OpQueueSettle, func(ctx context.Context) error {
				cmd = queueSettleScript.Run(ctx, q.c.rdb, keys, args...)
				return cmd.Err()
			})
			return cmd, err
		}
		start := time.Now()
		cmd, err := run()
		// A call that failed may have been made or not: the script is
		// idempotent (a delivery removed is not removed again, what it
		// read is read again, a lease no longer the caller's is left
		// alone), so it goes again for a while, rather than leave the
		// organization waiting for the lease's end. Not while closing.
		for wait := settleRetry; err != nil && q.ctx.Err() == nil && time.Since(start) < q.qo.Lease/4; wait = min(2*wait, time.Second) {
			time.Sleep(wait)
			cmd, err = run()
		}
		var reply []any
		if err == nil {
			reply, err = cmd.Slice()
		}
		for _, m := range dead {
			q.opts.OnDead(m)
		}
		if err != nil {
			call.err = err
			ids := make([]string, len(items))
			for i, e := range items {
				ids[i] = e.cl.meta.ID + " (" + e.mode + ")"
			}
			q.reportError(fmt.Errorf("webhook queue: recording the attempts of %s: %w", strings.Join(ids, ", "), err))
			return
		}
		if len(reply) > 0 {
			kept, _ := reply[0].(int64)
			call.kept = kept == 1
		}
		if len(reply) > 1 && !q.readEntries(&call.more, reply[1:]) {
			call.err = fmt.Errorf("webhook queue: unexpected settle reply of %d values", len(reply))
			q.reportError(call.err)
		}
	}()
	return call
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
	cmd, err := q.c.durable(q.ctx, OpQueueAdmin, q.base, queueReviveScript,
		[]string{q.key("dead"), q.key("deadp"), q.key("pending"), q.key("age"), q.key("ready"), q.key("s:" + m.Organization)},
		id, meta, now.UnixMilli(), m.Organization)
	if err != nil {
		return err
	}
	if n, err := cmd.Int64(); err != nil {
		return err
	} else if n == 0 {
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
