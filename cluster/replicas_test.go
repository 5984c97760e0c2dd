package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/cluster/redistest"
	"github.com/servicegate/servicegate/queue"
)

// With replicas 1, a delivery is acknowledged only once a replica has it;
// with the replica hung, Enqueue fails within replicas_timeout, and so does
// the same delivery sent again (never "duplicate" while the first copy is on
// the primary alone). With replicas 0 the same primary acknowledges.
func TestQueueWithReplicasAcknowledgesWhatAReplicaHas(t *testing.T) {
	primary := redistest.Start(t)
	replica := primary.StartReplica(t)
	const wait = 300 * time.Millisecond
	app := newAppStub(t, func(ctx context.Context, m queue.Meta, body string) queue.Result {
		return queue.Result{Status: http.StatusOK}
	})
	opts := queue.Options{FirstDelay: 20 * time.Millisecond, MaxDelay: 80 * time.Millisecond, Dedup: time.Minute}
	q := openQueue(t, newClient(t, primary, Options{Replicas: 1, ReplicasTimeout: wait}), app.as("a"), opts, QueueOptions{})
	unsafe := openQueue(t, newClient(t, primary, Options{}), app.as("b"), opts, QueueOptions{Name: "unsafe"})

	d := enqueue(t, q, "acme", "with the replica up")
	if d.ID == "" {
		t.Fatal("no id given")
	}

	replica.Pause()
	defer replica.Resume()
	// The second is the first sent again, to another instance (its
	// connections have written nothing yet).
	other := openQueue(t, newClient(t, primary, Options{Replicas: 1, ReplicasTimeout: wait}), app.as("c"), opts, QueueOptions{})
	for _, q := range []*Queue{q, other} {
		start := time.Now()
		err := q.Enqueue(replicasDelivery("with the replica hung"))
		took := time.Since(start)
		if !errors.Is(err, ErrReplicas) {
			t.Fatalf("Enqueue with the replica hung = %v, want ErrReplicas", err)
		}
		if took < wait || took > wait+time.Second {
			t.Errorf("Enqueue failed after %s, want about replicas_timeout (%s)", took, wait)
		}
	}
	if err := unsafe.Enqueue(replicasDelivery("x")); err != nil {
		t.Errorf("with replicas 0, Enqueue = %v; want it acknowledged (on the primary alone)", err)
	}

	replica.Resume()
	enqueue(t, q, "acme", "with the replica back")
}

func replicasDelivery(body string) *queue.Delivery {
	return &queue.Delivery{
		Meta:   queue.Meta{Organization: "acme", To: "http://127.0.0.1:1", Method: "POST", URI: "/"},
		Header: http.Header{"X-Test": {"kept"}},
		Body:   []byte(body),
	}
}

// On a Redis Cluster, the wait for replicas runs on the primary that holds
// the queue's keys.
func TestQueueWithReplicasOnRedisCluster(t *testing.T) {
	srv := redistest.StartCluster(t)
	replicas := srv.StartClusterReplicas(t)
	app := newAppStub(t, func(ctx context.Context, m queue.Meta, body string) queue.Result {
		return queue.Result{Status: http.StatusOK}
	})
	q := openQueue(t, newClient(t, srv, Options{Replicas: 1, ReplicasTimeout: 300 * time.Millisecond}), app.as("a"), fastRetries, QueueOptions{})
	enqueue(t, q, "acme", "with the replicas up")
	for _, r := range replicas {
		r.Pause()
		defer r.Resume()
	}
	if err := q.Enqueue(replicasDelivery("with the replicas hung")); !errors.Is(err, ErrReplicas) {
		t.Fatalf("Enqueue with the replicas hung = %v, want ErrReplicas", err)
	}
	for _, r := range replicas {
		r.Resume()
	}
	enqueue(t, q, "acme", "with the replicas back")
}

// An installation is stored before it is confirmed to the service: with
// replicas 1 it counts as stored only once the replica has it, and while
// the replica hangs the write fails with ErrReplicas (the lifecycle call
// answers 503, and the service calls again).
func TestInstallationPutWaitsForReplicas(t *testing.T) {
	primary := redistest.Start(t)
	replica := primary.StartReplica(t)
	const wait = 300 * time.Millisecond
	store := newClient(t, primary, Options{Replicas: 1, ReplicasTimeout: wait}).Installations("demo-client")
	if err := store.Put("1", []byte("sealed with the replica up")); err != nil {
		t.Fatalf("Put with the replica up = %v", err)
	}
	replica.Pause()
	defer replica.Resume()
	start := time.Now()
	err := store.Put("2", []byte("sealed with the replica hung"))
	if took := time.Since(start); !errors.Is(err, ErrReplicas) || took < wait || took > wait+time.Second {
		t.Fatalf("Put with the replica hung = %v after %s, want ErrReplicas after about %s", err, took, wait)
	}
	unsafe := newClient(t, primary, Options{}).Installations("demo-client")
	if err := unsafe.Put("3", []byte("sealed, replicas 0")); err != nil {
		t.Errorf("with replicas 0, Put = %v; want it stored on the primary alone", err)
	}
	replica.Resume()
	if got, err := store.Get("1"); err != nil || string(got) != "sealed with the replica up" {
		t.Errorf("Get = %q, %v", got, err)
	}
}

// The acknowledgements of concurrent deliveries share their WAITs: while
// the replica hangs, the writes of the rounds under way are on the
// primary and their WAITs blocked there, the writes that came meanwhile
// wait for the next round, and none is acknowledged. Once the replica is
// back, every delivery is acknowledged, the replica has each, and the
// primary ran at most laneRounds+1 WAITs for them all, not one each.
func TestQueueWithReplicasGroupsTheWaitOfConcurrentDeliveries(t *testing.T) {
	primary := redistest.Start(t)
	replica := primary.StartReplica(t)
	// Nothing is delivered, so the deliveries stay in Redis.
	app, _ := newStuckApp(t)
	// Long enough for the replica's hang not to fail the writes.
	var rounds, writes atomic.Int64
	c := newClient(t, primary, Options{Replicas: 1, ReplicasTimeout: time.Minute, OnReplicasWait: func(n int, took time.Duration) {
		if took <= 0 {
			t.Errorf("a round of %d writes reported as taking %v", n, took)
		}
		rounds.Add(1)
		writes.Add(int64(n))
	}})
	q := openQueue(t, c, app.as("a"), queue.Options{}, QueueOptions{})
	enqueue(t, q, "warm", "the scripts loaded, a connection open")
	primary.ResetStats()
	rounds.Store(0)
	writes.Store(0)

	replica.Pause()
	defer replica.Resume()
	const n = 50
	var resumed atomic.Bool
	errs := make(chan error, n)
	ids := make(chan string, n)
	for i := range n {
		go func() {
			d := replicasDelivery(fmt.Sprint("concurrent ", i))
			d.Organization = fmt.Sprint("org", i)
			err := q.Enqueue(d)
			if err == nil && !resumed.Load() {
				err = fmt.Errorf("%s acknowledged while the replica hung", d.ID)
			}
			ids <- d.ID
			errs <- err
		}()
	}
	waitFor(t, "the rounds' writes on the primary, their WAITs blocked, the other writes queued", 10*time.Second, func() bool {
		pending, _ := primary.Do("HLEN", q.key("pending"))
		onPrimary, _ := strconv.Atoi(pending)
		clients, _ := primary.Do("INFO", "clients")
		queued, rounds := lanesState(c)
		return onPrimary > 1 && onPrimary-1+queued == n && strings.Contains(clients, fmt.Sprintf("blocked_clients:%d\r", rounds))
	})
	resumed.Store(true)
	replica.Resume()
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("Enqueue: %v", err)
		}
	}
	close(ids)
	for id := range ids {
		if got, _ := replica.Do("HEXISTS", q.key("pending"), id); got != "1" {
			t.Errorf("delivery %s acknowledged, not on the replica", id)
		}
	}
	waits := primary.CommandCalls()["wait"]
	if waits < 1 || waits > laneRounds+1 {
		t.Errorf("%d WAITs for %d concurrent deliveries, want 1 to %d (the rounds under way, then the rest)", waits, n, laneRounds+1)
	}
	if int(rounds.Load()) != waits || writes.Load() != n {
		t.Errorf("OnReplicasWait told of %d rounds carrying %d writes; the primary counted %d WAITs for %d deliveries", rounds.Load(), writes.Load(), waits, n)
	}
}

// lanesState counts the writes waiting for a round of c's lanes, and the
// rounds under way.
func lanesState(c *Client) (queued, rounds int) {
	c.lanesMu.Lock()
	defer c.lanesMu.Unlock()
	for _, l := range c.lanes {
		l.mu.Lock()
		queued += len(l.queued)
		rounds += l.underWay
		l.mu.Unlock()
	}
	return queued, rounds
}
