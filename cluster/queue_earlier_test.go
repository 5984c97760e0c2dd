package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/queue"
)

// storeEarlier stores a delivery of org with body under the earlier key
// layout of the queue called name, as servicegate 0.1.0 did (its add
// script, on keys without the hash tag), and returns its ID.
func storeEarlier(t *testing.T, c *Client, name, org, body string) string {
	t.Helper()
	base := c.earlierQueueBase(name)
	now := time.Now()
	meta, _ := json.Marshal(queue.Meta{Organization: org, To: "http://127.0.0.1:1", Method: "POST", URI: "/webhooks",
		Size: len(body), Received: now, NextAttempt: now})
	payload, err := queue.EncodePayload(http.Header{"X-Test": {"kept"}}, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := addReply(queueAddScript.Run(context.Background(), c.rdb,
		[]string{base + "seq", base + "pending", base + "age", base + "ready", base + "s:" + org, base + "d:x", base + "epoch", base + "t:" + randomHex(12)},
		"0a1b2c", meta, payload, now.UnixMilli(), 0, org))
	if err != nil {
		t.Fatalf("storing under the earlier layout: %v", err)
	}
	return id
}

// TestQueueMovesTheEarlierLayout: deliveries and dead letters that an
// earlier version kept under its keys are moved into the current layout
// when the queue opens, by two instances opening at once: each delivery
// reaches the app once, with its ID, in order per organization, before
// those received after the start; the counts moved add up, the
// earlier keys are gone, and opening again moves nothing.
func TestQueueMovesTheEarlierLayout(t *testing.T) {
	srv := startRedis(t)
	c := newClient(t, srv, Options{})
	const orgs, each, dead = 3, 40, 2 // more than a batch per organization
	ids := map[string]string{}        // body → the ID it was stored with
	for i := range each {
		for o := range orgs {
			body := fmt.Sprintf("org%d-%d", o, i)
			ids[body] = storeEarlier(t, c, "app", fmt.Sprintf("org%d", o), body)
		}
	}
	base := c.earlierQueueBase("app")
	for i := range dead {
		id := fmt.Sprintf("0a1b2c-%d", 1000+i)
		meta, _ := json.Marshal(queue.Meta{Organization: "org0", Method: "POST", URI: "/webhooks", Dead: "the app answered 422", Received: time.Now()})
		payload, _ := queue.EncodePayload(http.Header{"X-Test": {"kept"}}, []byte("dead"))
		for _, kv := range [][3]string{{base + "dead", id, string(meta)}, {base + "deadp", id, string(payload)}} {
			if _, err := srv.Do("HSET", kv[0], kv[1], kv[2]); err != nil {
				t.Fatal(err)
			}
		}
	}

	app := newAppStub(t, nil)
	var moved, movedDead, reports atomic.Int64
	qo := QueueOptions{Name: "app", Poll: 50 * time.Millisecond, Moved: func(n, d int) {
		moved.Add(int64(n))
		movedDead.Add(int64(d))
		reports.Add(1)
	}}
	var wg sync.WaitGroup
	queues := make([]*Queue, 2)
	for i := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, err := newClient(t, srv, Options{}).OpenQueue(app.as(fmt.Sprint(i)), fastRetries, qo)
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() { _ = q.Close() })
			queues[i] = q
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if moved.Load() != orgs*each || movedDead.Load() != dead {
		t.Errorf("moved %d deliveries and %d dead letters, want %d and %d", moved.Load(), movedDead.Load(), orgs*each, dead)
	}
	const after = 5 // org0's deliveries received after the start
	for i := range after {
		enqueue(t, queues[i%2], "org0", fmt.Sprintf("org0-%d", each+i))
	}
	waitFor(t, "every delivery", 30*time.Second, func() bool { return app.delivered() == orgs*each+after })

	app.mu.Lock()
	for o := range orgs {
		org := fmt.Sprintf("org%d", o)
		for i, body := range app.by[org] {
			if want := fmt.Sprintf("%s-%d", org, i); body != want {
				t.Errorf("%s: delivery %d is %q, want %q (order lost)", org, i, body, want)
			}
		}
	}
	for body, id := range ids {
		if n := app.ids[id]; n != 1 {
			t.Errorf("delivery %s (%s) sent %d times under its ID, want 1", body, id, n)
		}
	}
	app.mu.Unlock()
	deadNow, err := queues[0].Dead()
	if err != nil || len(deadNow) != dead || deadNow[0].Dead != "the app answered 422" {
		t.Errorf("dead letters after the move: %+v %v", deadNow, err)
	}
	if err := queues[1].Replay(deadNow[0].ID); err != nil {
		t.Errorf("replaying a moved dead letter: %v", err)
	}
	waitFor(t, "the replayed dead letter", 10*time.Second, func() bool { return app.delivered() == orgs*each+after+1 })

	keys, _ := srv.Do("KEYS", base+"*")
	var left []string
	for _, k := range strings.Fields(keys) {
		if !strings.Contains(k, ":t:") { // the add calls' tokens, which expire
			left = append(left, k)
		}
	}
	if len(left) != 0 {
		t.Errorf("earlier keys left: %q", left)
	}

	// Opened again (a restart): nothing to move, nothing told.
	was := reports.Load()
	openQueue(t, newClient(t, srv, Options{}), app.as("again"), fastRetries, qo)
	if reports.Load() != was {
		t.Errorf("a second open reported a move")
	}
}

// TestQueueMovesTheEarlierLayoutOnceRedisAnswers: a queue that opens while
// Redis does not answer moves the earlier deliveries once it does, and
// delivers them.
func TestQueueMovesTheEarlierLayoutOnceRedisAnswers(t *testing.T) {
	srv := startRedis(t)
	c := newClient(t, srv, Options{Timeout: 200 * time.Millisecond})
	id := storeEarlier(t, c, "app", "org0", "org0-0")
	app := newAppStub(t, nil)
	var moved atomic.Int64
	srv.Pause()
	openQueue(t, c, app.as("a"), fastRetries, QueueOptions{Name: "app", Poll: 50 * time.Millisecond,
		Moved: func(n, _ int) { moved.Add(int64(n)) }})
	if moved.Load() != 0 {
		t.Fatal("moved while Redis did not answer")
	}
	srv.Resume()
	waitFor(t, "the earlier delivery", 20*time.Second, func() bool { return app.delivered() == 1 })
	app.mu.Lock()
	defer app.mu.Unlock()
	if app.ids[id] != 1 || moved.Load() != 1 {
		t.Errorf("delivery %s sent %d times, %d moved; want 1 and 1", id, app.ids[id], moved.Load())
	}
}
