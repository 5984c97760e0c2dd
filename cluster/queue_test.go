package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/cluster/redistest"
	"github.com/servicegate/servicegate/queue"
)

// appStub is the app behind a queue: it records every attempt and answers
// with answer (200 when nil). It fails the test when one organization has
// two attempts in flight at once.
type appStub struct {
	t      *testing.T
	answer func(ctx context.Context, m queue.Meta, body string) queue.Result

	mu       sync.Mutex
	got      []string            // bodies, in the order attempts began
	by       map[string][]string // delivered bodies by organization
	ids      map[string]int      // attempts by delivery id
	inFlight map[string]int
	sentBy   map[string]int // attempts by queue name
}

func newAppStub(t *testing.T, answer func(ctx context.Context, m queue.Meta, body string) queue.Result) *appStub {
	return &appStub{t: t, answer: answer, by: map[string][]string{}, ids: map[string]int{}, inFlight: map[string]int{}, sentBy: map[string]int{}}
}

// newStuckApp is an app that takes every delivery and answers none until
// the queue gives up waiting; took counts the deliveries it took.
func newStuckApp(t *testing.T) (app *appStub, took *atomic.Int32) {
	took = new(atomic.Int32)
	return newAppStub(t, func(ctx context.Context, m queue.Meta, body string) queue.Result {
		took.Add(1)
		<-ctx.Done()
		return queue.Result{Err: ctx.Err()}
	}), took
}

// as is the app seen from the instance called name.
func (a *appStub) as(name string) queue.Sender { return stubSender{a, name} }

type stubSender struct {
	a    *appStub
	name string
}

func (s stubSender) Send(ctx context.Context, m queue.Meta, h http.Header, body []byte) queue.Result {
	a := s.a
	a.mu.Lock()
	a.inFlight[m.Organization]++
	if n := a.inFlight[m.Organization]; n > 1 {
		a.t.Errorf("%d deliveries of organization %q in flight at once", n, m.Organization)
	}
	a.got = append(a.got, string(body))
	a.ids[m.ID]++
	a.sentBy[s.name]++
	a.mu.Unlock()
	if h.Get("X-Test") != "kept" {
		a.t.Errorf("header X-Test = %q, want kept", h.Get("X-Test"))
	}
	res := queue.Result{Status: http.StatusOK}
	if a.answer != nil {
		res = a.answer(ctx, m, string(body))
	}
	a.mu.Lock()
	a.inFlight[m.Organization]--
	if res.Delivered() {
		a.by[m.Organization] = append(a.by[m.Organization], string(body))
	}
	a.mu.Unlock()
	return res
}

func (a *appStub) delivered() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, b := range a.by {
		n += len(b)
	}
	return n
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	if !poll(d, ok) {
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// poll asks ok every 10 ms until it holds or d has passed, and says
// whether it held.
func poll(d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

var fastRetries = queue.Options{FirstDelay: 20 * time.Millisecond, MaxDelay: 80 * time.Millisecond}

func openQueue(t *testing.T, c *Client, s queue.Sender, o queue.Options, qo QueueOptions) *Queue {
	t.Helper()
	if qo.Name == "" {
		qo.Name = "app"
	}
	q, err := c.OpenQueue(s, o, qo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func enqueue(t *testing.T, q queue.Deliveries, org, body string) *queue.Delivery {
	t.Helper()
	d := &queue.Delivery{
		Meta:   queue.Meta{Organization: org, To: "http://127.0.0.1:1", Method: "POST", URI: "/webhooks?x=1"},
		Header: http.Header{"X-Test": {"kept"}},
		Body:   []byte(body),
	}
	if err := q.Enqueue(d); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return d
}

func TestQueueSharedByInstancesKeepsEachOrganizationInOrder(t *testing.T) {
	srv := startRedis(t)
	app := newAppStub(t, func(ctx context.Context, m queue.Meta, body string) queue.Result {
		time.Sleep(time.Millisecond)
		if m.Attempts == 1 && strings.HasSuffix(body, "-7") {
			return queue.Result{Status: http.StatusServiceUnavailable} // a retry must not let the next one pass
		}
		return queue.Result{Status: http.StatusOK}
	})
	a := openQueue(t, newClient(t, srv, Options{}), app.as("a"), fastRetries, QueueOptions{Poll: 50 * time.Millisecond})
	b := openQueue(t, newClient(t, srv, Options{}), app.as("b"), fastRetries, QueueOptions{Poll: 50 * time.Millisecond})

	const orgs, each = 6, 30
	ids := map[string]bool{}
	for i := range each {
		for o := range orgs {
			q := a
			if (i+o)%2 == 1 {
				q = b
			}
			d := enqueue(t, q, fmt.Sprintf("org%d", o), fmt.Sprintf("org%d-%d", o, i))
			if ids[d.ID] {
				t.Fatalf("id %s given twice", d.ID)
			}
			ids[d.ID] = true
		}
	}
	waitFor(t, "every delivery", 30*time.Second, func() bool { return app.delivered() == orgs*each })

	app.mu.Lock()
	defer app.mu.Unlock()
	for o := range orgs {
		org := fmt.Sprintf("org%d", o)
		got := app.by[org]
		for i, body := range got {
			if want := fmt.Sprintf("%s-%d", org, i); body != want {
				t.Fatalf("%s: delivery %d is %q, want %q (order lost): %q", org, i, body, want, got)
			}
		}
	}
	for id, n := range app.ids {
		want := 1
		if n != want && n != 2 { // the -7 deliveries are sent twice
			t.Errorf("delivery %s sent %d times", id, n)
		}
	}
	if app.sentBy["a"] == 0 || app.sentBy["b"] == 0 {
		t.Errorf("attempts by instance: %v; want both instances to deliver", app.sentBy)
	}
	// The app has seen the last delivery; its settle call may still be on
	// its way to Redis, so the keys are given a moment to go.
	var left []string
	if !poll(5*time.Second, func() bool {
		keys, _ := srv.Do("KEYS", "*")
		left = left[:0]
		for _, k := range strings.Fields(keys) {
			if !strings.Contains(k, ":t:") { // the add calls' tokens, which expire
				left = append(left, k)
			}
		}
		return len(left) == 2
	}) {
		t.Errorf("keys left once everything was delivered: %q, want 2 (seq, epoch)", left)
	}
	if s := a.Stats(); s.Depth != 0 {
		t.Errorf("depth %d after delivery", s.Depth)
	}
}

func TestQueueTakesOverTheDeliveriesOfADeadInstance(t *testing.T) {
	srv := startRedis(t)
	stuck := make(chan struct{})
	defer close(stuck)
	// Instance a takes the head and never comes back, as a process killed
	// mid-delivery.
	var aTook atomic.Int32
	dead := newAppStub(t, func(ctx context.Context, m queue.Meta, body string) queue.Result {
		aTook.Add(1)
		<-stuck
		return queue.Result{Err: errors.New("gone")}
	})
	ca := newClient(t, srv, Options{})
	a, err := ca.OpenQueue(dead.as("a"), fastRetries, QueueOptions{Name: "app", Lease: 400 * time.Millisecond, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Never closed before the test ends (it is "dead"); stopped after it.
	t.Cleanup(func() { _ = a.Close() })
	for i := range 5 {
		enqueue(t, a, "acme", fmt.Sprintf("acme-%d", i))
	}
	enqueue(t, a, "other", "other-0")
	waitFor(t, "instance a to take the heads", 5*time.Second, func() bool { return aTook.Load() == 2 })
	// From now on a reaches Redis no more: it neither settles nor claims.
	_ = ca.Close()

	app := newAppStub(t, nil)
	start := time.Now()
	openQueue(t, newClient(t, srv, Options{}), app.as("b"), fastRetries, QueueOptions{Name: "app", Lease: 400 * time.Millisecond, Poll: 20 * time.Millisecond})
	waitFor(t, "instance b to deliver everything", 10*time.Second, func() bool { return app.delivered() == 6 })
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("b delivered after %s: it did not wait for a's lease", took)
	}
	app.mu.Lock()
	got := strings.Join(app.by["acme"], ",")
	app.mu.Unlock()
	if got != "acme-0,acme-1,acme-2,acme-3,acme-4" {
		t.Errorf("acme got %s", got)
	}
	if aTook.Load() != 2 {
		t.Errorf("instance a took %d heads, want 2", aTook.Load())
	}
}

func TestQueueCloseHandsDeliveriesOverAtOnce(t *testing.T) {
	srv := startRedis(t)
	slow, took := newStuckApp(t)
	a, err := newClient(t, srv, Options{}).OpenQueue(slow.as("a"), fastRetries, QueueOptions{Name: "app", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	enqueue(t, a, "acme", "acme-0")
	waitFor(t, "a to take the delivery", 5*time.Second, func() bool { return took.Load() == 1 })
	app := newAppStub(t, nil)
	openQueue(t, newClient(t, srv, Options{}), app.as("b"), fastRetries, QueueOptions{Name: "app", Lease: time.Minute, Poll: 20 * time.Millisecond})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to deliver what a gave back (well before a's lease of a minute ends)", 5*time.Second, func() bool { return app.delivered() == 1 })
	if n := slow.delivered(); n != 0 {
		t.Errorf("a delivered %d", n)
	}
}

func TestQueueDeadLettersReplayAndDrop(t *testing.T) {
	srv := startRedis(t)
	var fixed atomic.Bool
	app := newAppStub(t, func(ctx context.Context, m queue.Meta, body string) queue.Result {
		if fixed.Load() {
			return queue.Result{Status: http.StatusNoContent}
		}
		return queue.Result{Status: http.StatusUnprocessableEntity}
	})
	var deadSeen atomic.Int32
	o := fastRetries
	o.OnDead = func(queue.Meta) { deadSeen.Add(1) }
	q := openQueue(t, newClient(t, srv, Options{}), app.as("a"), o, QueueOptions{Poll: 20 * time.Millisecond})
	d1 := enqueue(t, q, "acme", "secret-body-1")
	d2 := enqueue(t, q, "acme", "secret-body-2")
	d3 := enqueue(t, q, "zeta", "secret-body-3")
	waitFor(t, "three dead letters", 5*time.Second, func() bool { return deadSeen.Load() == 3 })

	dead, err := q.Dead()
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 3 || dead[0].ID != d1.ID || dead[1].ID != d2.ID || dead[2].ID != d3.ID {
		t.Fatalf("dead letters %+v", dead)
	}
	if dead[0].LastStatus != 422 || dead[0].Dead != "the app answered 422" || dead[0].Attempts != 1 || dead[0].Size != len("secret-body-1") {
		t.Errorf("dead letter %+v", dead[0])
	}
	pending, _ := q.Pending()
	if len(pending) != 0 {
		t.Errorf("pending %+v", pending)
	}

	if err := q.Drop(d3.ID); err != nil {
		t.Fatal(err)
	}
	if err := q.Drop(d3.ID); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("second Drop = %v", err)
	}
	if err := q.Replay("nope-1"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("Replay of an unknown id = %v", err)
	}
	fixed.Store(true)
	n, err := q.ReplayOrganization("acme")
	if err != nil || n != 2 {
		t.Fatalf("ReplayOrganization = %d, %v", n, err)
	}
	waitFor(t, "the replayed letters", 5*time.Second, func() bool { return app.delivered() == 2 })
	app.mu.Lock()
	if got := strings.Join(app.by["acme"], ","); got != "secret-body-1,secret-body-2" {
		t.Errorf("replayed %s", got)
	}
	app.mu.Unlock()
	if dead, _ := q.Dead(); len(dead) != 0 {
		t.Errorf("dead letters left: %+v", dead)
	}
}

func TestQueueDedupWindow(t *testing.T) {
	srv := startRedis(t)
	o := fastRetries
	o.Dedup = time.Minute
	q := openQueue(t, newClient(t, srv, Options{}), newAppStub(t, nil).as("a"), o, QueueOptions{})
	enqueue(t, q, "acme", "same")
	d := &queue.Delivery{Meta: queue.Meta{Organization: "acme"}, Header: http.Header{}, Body: []byte("same")}
	if err := q.Enqueue(d); !errors.Is(err, queue.ErrDuplicate) {
		t.Errorf("identical delivery: %v, want ErrDuplicate", err)
	}
	enqueue(t, q, "other", "same") // another organization is not a duplicate
}

func TestQueueEnqueueFailsWhileRedisIsDown(t *testing.T) {
	srv := startRedis(t)
	q := openQueue(t, newClient(t, srv, Options{Timeout: 300 * time.Millisecond}), newAppStub(t, nil).as("a"), fastRetries, QueueOptions{})
	srv.Stop()
	d := &queue.Delivery{Meta: queue.Meta{Organization: "acme"}, Header: http.Header{}, Body: []byte("x")}
	err := q.Enqueue(d)
	var ce *CallError
	if !errors.As(err, &ce) || ce.Op != OpQueueAdd {
		t.Fatalf("Enqueue with Redis down = %v, want a queue_add CallError", err)
	}
	if strings.Contains(err.Error(), "x") && strings.Contains(err.Error(), "body") {
		t.Errorf("error quotes the body: %v", err)
	}
}

func TestQueueIDsStayUniqueWhenRedisLosesTheQueue(t *testing.T) {
	srv := startRedis(t)
	q := openQueue(t, newClient(t, srv, Options{}), newAppStub(t, func(ctx context.Context, m queue.Meta, body string) queue.Result {
		return queue.Result{Status: http.StatusServiceUnavailable}
	}).as("a"), fastRetries, QueueOptions{})
	first := enqueue(t, q, "acme", "one")
	// A Redis restarted without persistence: every key is gone.
	if _, err := srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	second := enqueue(t, q, "acme", "two")
	if first.ID == second.ID {
		t.Errorf("two deliveries got the ID %s: the app would drop the second as a repeat", first.ID)
	}
	if second.Seq != 1 {
		t.Errorf("the second delivery's sequence is %d, want 1 (a new count)", second.Seq)
	}
}

// An add call resent after its answer was lost (go-redis retries once on a
// broken connection) stores the delivery once and returns the same ID.
func TestQueueAddCalledTwiceStoresOnce(t *testing.T) {
	srv := startRedis(t)
	c := newClient(t, srv, Options{})
	// Only the script runs: a queue's delivery loop would take the entry
	// (its payload is no payload) and bury it before the count below.
	q := &Queue{c: c, base: c.queueBase("app")}
	keys := []string{q.key("seq"), q.key("pending"), q.key("age"), q.key("ready"), q.key("s:acme"), q.key("d:x"), q.key("epoch"), q.key("t:same")}
	var ids []string
	var dues []bool
	add := func(keys []string) {
		t.Helper()
		id, due, err := addReply(queueAddScript.Run(t.Context(), c.rdb, keys, "e", `{"organization":"acme"}`, "payload", time.Now().UnixMilli(), 0, "acme"))
		if err != nil {
			t.Fatal(err)
		}
		ids, dues = append(ids, id), append(dues, due)
	}
	add(keys)
	add(keys)
	if ids[0] != ids[1] {
		t.Errorf("the same call gave %s, then %s", ids[0], ids[1])
	}
	if n, _ := srv.Do("XLEN", q.key("s:acme")); n != "1" {
		t.Errorf("the stream holds %s entries, want 1", n)
	}
	// Only the delivery that finds its organization with none is due:
	// the others wait behind it, so a claim for them would find nothing.
	add(append(keys[:7:7], q.key("t:other")))
	if !dues[0] || dues[1] || dues[2] || ids[2] == ids[0] {
		t.Errorf("ids %v due %v, want the first alone due and a new id for the other call", ids, dues)
	}
}

// An idle queue polling a Redis that is away reports nothing itself: the
// Client counts and logs failed calls, at most a line per LogInterval.
func TestQueueWithRedisAwayLeavesTheLoggingToTheClient(t *testing.T) {
	srv := startRedis(t)
	var reported, logged atomic.Int32
	o := fastRetries
	o.OnError = func(error) { reported.Add(1) }
	c := newClient(t, srv, Options{Timeout: 100 * time.Millisecond, LogInterval: time.Hour,
		Log: func(op Op, err error, _ int) {
			if err != nil {
				logged.Add(1)
			}
		}})
	openQueue(t, c, newAppStub(t, nil).as("a"), o, QueueOptions{Poll: 50 * time.Millisecond})
	srv.Stop()
	time.Sleep(time.Second)
	if n := reported.Load(); n != 0 {
		t.Errorf("the queue reported %d errors of its own while Redis was away", n)
	}
	if n := logged.Load(); n != 1 {
		t.Errorf("the client logged %d failure lines, want 1 (a line per LogInterval)", n)
	}
}

// An organization whose stream never empties is read by one instance after
// another (a rolling restart); the names of the consumers that are gone do
// not pile up in its group.
func TestQueueForgetsTheConsumersOfClosedInstances(t *testing.T) {
	srv := startRedis(t)
	gate := make(chan struct{})
	app := newAppStub(t, func(ctx context.Context, m queue.Meta, body string) queue.Result {
		select {
		case <-gate:
			return queue.Result{Status: http.StatusOK}
		case <-ctx.Done():
			return queue.Result{Err: ctx.Err()}
		}
	})
	c := newClient(t, srv, Options{})
	const instances = 6
	stream := c.queueBase("app") + "s:acme"
	for i := 0; i < instances; i++ {
		q, err := c.OpenQueue(app.as(fmt.Sprint("instance-", i)), fastRetries, QueueOptions{Name: "app", Lease: time.Minute, Poll: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			for n := 0; n < 3*instances+10; n++ {
				enqueue(t, q, "acme", fmt.Sprintf("acme-%d", n))
			}
		}
		for n := 0; n < 3; n++ {
			gate <- struct{}{}
		}
		want := 3 * (i + 1)
		waitFor(t, fmt.Sprint(want, " deliveries"), 5*time.Second, func() bool { return app.delivered() == want })
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	q := openQueue(t, c, app.as("last"), fastRetries, QueueOptions{Name: "app", Lease: time.Minute, Poll: 20 * time.Millisecond})
	gate <- struct{}{}
	waitFor(t, "the last instance's delivery", 5*time.Second, func() bool { return app.delivered() == 3*instances+1 })
	consumers, err := c.rdb.XInfoConsumers(t.Context(), stream, "deliver").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(consumers) != 1 || consumers[0].Name != q.consumer {
		t.Errorf("the group has %d consumers (%v), want only the open instance's %s", len(consumers), consumers, q.consumer)
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	for i, b := range app.by["acme"] {
		if b != fmt.Sprintf("acme-%d", i) {
			t.Fatalf("delivery %d is %q: order broken", i, b)
		}
	}
}

// Stats counts every delivery not yet settled, the one in flight too, and
// gives the oldest one's arrival; with Redis away it keeps the last it read.
func TestQueueStatsCountsTheWaitingAndTheOldest(t *testing.T) {
	srv := startRedis(t)
	app, took := newStuckApp(t)
	q := openQueue(t, newClient(t, srv, Options{Timeout: 300 * time.Millisecond}), app.as("a"), fastRetries, QueueOptions{Poll: 20 * time.Millisecond})
	if s := q.Stats(); s.Depth != 0 || !s.Oldest.IsZero() {
		t.Errorf("empty queue: %+v", s)
	}
	first := enqueue(t, q, "acme", "acme-0")
	enqueue(t, q, "acme", "acme-1")
	enqueue(t, q, "zeta", "zeta-0")
	waitFor(t, "both organizations' heads in flight", 5*time.Second, func() bool { return took.Load() == 2 })
	s := q.Stats()
	if s.Depth != 3 || s.InFlight != 2 || !s.Oldest.Equal(first.Received.Truncate(time.Millisecond)) {
		t.Errorf("stats %+v, want depth 3, 2 in flight, oldest %s", s, first.Received.Truncate(time.Millisecond))
	}
	srv.Stop()
	if again := q.Stats(); again.Depth != 3 || !again.Oldest.Equal(s.Oldest) {
		t.Errorf("with Redis away: %+v, want the last read (%+v)", again, s)
	}
}

// The trace context of the request that queued a delivery is kept with it
// in Redis: every attempt, by any instance, joins that trace.
func TestQueueKeepsTheTraceparentOfEachDelivery(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	srv := startRedis(t)
	var mu sync.Mutex
	var seen []string
	app := newAppStub(t, func(_ context.Context, m queue.Meta, _ string) queue.Result {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, m.Traceparent)
		if len(seen) == 1 {
			return queue.Result{Status: http.StatusServiceUnavailable}
		}
		return queue.Result{Status: http.StatusOK}
	})
	q := openQueue(t, newClient(t, srv, Options{}), app.as("a"), fastRetries, QueueOptions{Name: "app", Poll: 20 * time.Millisecond})
	d := &queue.Delivery{
		Meta:   queue.Meta{Organization: "acme", To: "http://127.0.0.1:1", Method: "POST", URI: "/webhooks", Traceparent: tp},
		Header: http.Header{"X-Test": {"kept"}},
		Body:   []byte("{}"),
	}
	if err := q.Enqueue(d); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the delivery to arrive on its second attempt", 10*time.Second, func() bool { return app.delivered() == 1 })
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != tp || seen[1] != tp {
		t.Errorf("attempts had traceparents %q, want %q on both", seen, tp)
	}
}

// One organization's next delivery goes to the app while the call that
// records the last one is on its way: with Redis hung right after the app
// acknowledged delivery 3, delivery 4 (read ahead) still reaches the app.
// Once Redis is back, every delivery has reached the app once, in order.
func TestQueueSendsTheNextDeliveryWhileTheLastIsRecorded(t *testing.T) {
	srv := redistest.Start(t)
	defer srv.Resume()
	const total = 6
	queueHandedOver(t, srv, total)
	app := appPausingRedisAt(t, srv, "acme-3")
	// Long enough for Redis' hang not to fail the calls.
	openQueue(t, newClient(t, srv, Options{Timeout: time.Minute}), app.as("a"), fastRetries, QueueOptions{})
	waitFor(t, "delivery 4 while Redis hangs", 30*time.Second, func() bool {
		app.mu.Lock()
		defer app.mu.Unlock()
		return len(app.got) >= 4
	})
	srv.Resume()
	waitFor(t, "every delivery", 30*time.Second, func() bool { return app.delivered() == total })
	app.mu.Lock()
	defer app.mu.Unlock()
	for i, body := range app.got {
		if want := fmt.Sprint("acme-", i+1); body != want {
			t.Fatalf("attempt %d was %q, want %q: %q", i+1, body, want, app.got)
		}
	}
	if len(app.got) != total {
		t.Errorf("%d attempts for %d deliveries: %q", len(app.got), total, app.got)
	}
}

// Deliveries read ahead stay within aheadBytes: of large deliveries, a
// call reads a few, and the next reads on from the last it read, in order.
func TestQueueReadsLargeDeliveriesAheadAFewAtATime(t *testing.T) {
	srv := startRedis(t)
	gate := make(chan struct{})
	var first sync.Once
	app := newAppStub(t, func(ctx context.Context, m queue.Meta, body string) queue.Result {
		first.Do(func() { <-gate }) // until every delivery is queued
		return queue.Result{Status: http.StatusOK}
	})
	q := openQueue(t, newClient(t, srv, Options{}), app.as("a"), fastRetries, QueueOptions{})
	const total = 7
	pad := strings.Repeat("x", aheadBytes/3)
	for i := range total {
		enqueue(t, q, "acme", fmt.Sprint(i, pad))
	}
	close(gate)
	waitFor(t, "every delivery", 30*time.Second, func() bool { return app.delivered() == total })
	app.mu.Lock()
	defer app.mu.Unlock()
	for i, body := range app.by["acme"] {
		if want := fmt.Sprint(i, pad); body != want {
			t.Fatalf("delivery %d out of order", i)
		}
	}
	for id, n := range app.ids {
		if n != 1 {
			t.Errorf("delivery %s sent %d times", id, n)
		}
	}
}

// Organizations are delivered in parallel, up to the concurrency: with 20
// organizations' deliveries queued, the app holds each attempt until 8
// are in flight at once (each organization's one at a time), and every
// delivery reaches it in order.
func TestQueueDeliversOrganizationsInParallel(t *testing.T) {
	srv := startRedis(t)
	const orgs, each, concurrency = 20, 5, 8
	var (
		mu      sync.Mutex
		now     int
		reached = make(chan struct{})
		once    sync.Once
	)
	app := newAppStub(t, func(ctx context.Context, m queue.Meta, body string) queue.Result {
		mu.Lock()
		now++
		if now == concurrency {
			once.Do(func() { close(reached) })
		}
		mu.Unlock()
		select {
		case <-reached:
		case <-ctx.Done():
		}
		mu.Lock()
		now--
		mu.Unlock()
		return queue.Result{Status: http.StatusOK}
	})
	q := openQueue(t, newClient(t, srv, Options{}), app.as("a"), queue.Options{Concurrency: concurrency}, QueueOptions{})
	for i := range each {
		for o := range orgs {
			enqueue(t, q, fmt.Sprint("org", o), fmt.Sprintf("org%d-%d", o, i))
		}
	}
	waitFor(t, "every delivery", 30*time.Second, func() bool { return app.delivered() == orgs*each })
	app.mu.Lock()
	defer app.mu.Unlock()
	for o := range orgs {
		org := fmt.Sprint("org", o)
		for i, body := range app.by[org] {
			if want := fmt.Sprintf("%s-%d", org, i); body != want {
				t.Fatalf("%s: delivery %d is %q, want %q", org, i, body, want)
			}
		}
	}
}

// A settle call that fails goes again: with Redis hung past the client's
// timeout right after the app acknowledged delivery 3, every delivery is
// recorded once Redis is back, long before the lease (two minutes) would
// run out and another instance send the unrecorded ones again.
func TestQueueSettleCallGoesAgainAfterAFailure(t *testing.T) {
	srv := redistest.Start(t)
	defer srv.Resume()
	const total = 6
	queueHandedOver(t, srv, total)
	app := appPausingRedisAt(t, srv, "acme-3")
	var settleFailed atomic.Bool
	c := newClient(t, srv, Options{Timeout: 300 * time.Millisecond, OnError: func(op Op, err error) {
		if op == OpQueueSettle {
			settleFailed.Store(true)
		}
	}})
	q := openQueue(t, c, app.as("a"), fastRetries, QueueOptions{Lease: 2 * time.Minute})
	waitFor(t, "a settle call to fail", 30*time.Second, settleFailed.Load)
	srv.Resume()
	waitFor(t, "every delivery recorded, well before the lease's end", 30*time.Second, func() bool {
		return app.delivered() == total && q.Stats().Depth == 0
	})
	app.mu.Lock()
	defer app.mu.Unlock()
	var got []string
	for _, b := range app.got {
		if !slices.Contains(got, b) {
			got = append(got, b)
		}
	}
	for i, body := range got {
		if want := fmt.Sprint("acme-", i+1); body != want {
			t.Fatalf("first attempts %q, want acme-1 to acme-%d in order", got, total)
		}
	}
}

// queueHandedOver queues acme-1 … acme-total of acme through an instance
// whose app takes the first and answers nothing: it gives its lease back
// as it closes, so that the next instance takes them all at once.
func queueHandedOver(t *testing.T, srv *redistest.Server, total int) {
	t.Helper()
	stuck, _ := newStuckApp(t)
	first, err := newClient(t, srv, Options{}).OpenQueue(stuck.as("first"), fastRetries, QueueOptions{Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= total; i++ {
		enqueue(t, first, "acme", fmt.Sprint("acme-", i))
	}
	_ = first.Close()
}

// appPausingRedisAt acknowledges every delivery, and hangs Redis as it
// answers the one whose body is body.
func appPausingRedisAt(t *testing.T, srv *redistest.Server, body string) *appStub {
	return newAppStub(t, func(ctx context.Context, m queue.Meta, got string) queue.Result {
		if got == body {
			srv.Pause()
		}
		return queue.Result{Status: http.StatusOK}
	})
}
