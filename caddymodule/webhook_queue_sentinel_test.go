package caddymodule

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servicegate/servicegate/cluster/redistest"
)

// TestWebhookQueueThroughSentinelFailover: two Caddy processes share a
// queue in a Redis primary with two replicas watched by three sentinels.
// 1,000 deliveries are sent (one sender per organization, each delivery
// sent again after a non-2xx answer, as the service does), and the primary
// is killed with SIGKILL a third of the way. With replicas 1, every
// delivery acknowledged with 2xx reaches the app at least once, in order
// per organization once repeats are removed, nothing is answered 402, and
// deliveries are acknowledged again within 10 s of the promotion. With
// replicas 0, the test states how many acknowledged deliveries the dead
// primary took with it (often none: the loss is a race with replication).
func TestWebhookQueueThroughSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis Sentinel and Caddy processes: skipped in -short mode")
	}
	for _, replicas := range []int{1, 0} {
		t.Run("replicas "+strconv.Itoa(replicas), func(t *testing.T) { sentinelFailover(t, replicas) })
	}
}

func sentinelFailover(t *testing.T, replicas int) {
	sn := redistest.StartSentinel(t, 2)
	app := newQueueApp(t)
	app.up(t)
	global := fmt.Sprintf("servicegate {\n\t\tredis_sentinel %s %s\n\t\ttimeout 1s\n\t\treplicas %d\n\t}",
		sn.Master, strings.Join(sn.Addrs(), " "), replicas)
	var bases []string
	var procs []*caddyProcess
	for range 2 {
		port := freePort()
		base := "http://127.0.0.1:" + strconv.Itoa(port)
		p := startCaddyProcess(t, queueProcessCaddyfile(port, app, global, "timeout 1s\nconcurrency 4"))
		waitListening(t, base+"/ready", p)
		bases, procs = append(bases, base), append(procs, p)
	}

	const total, orgs = 1000, 4
	var (
		mu         sync.Mutex
		acked      = map[string][]string{} // organization → bodies acknowledged, in order
		statuses   = map[int]int{}
		sent       int
		killedAt   time.Time
		promotedAt time.Time // when a sentinel first gave another primary
		firstAck   time.Time // the first acknowledgement of a delivery sent after the promotion
	)
	primary := sn.Primary()
	killed := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-killed:
		case <-time.After(2 * time.Minute):
			return
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if addr := sn.PrimaryAddr(); addr != "" && addr != primary.Addr {
				mu.Lock()
				promotedAt = time.Now()
				mu.Unlock()
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for o := range orgs {
		wg.Go(func() {
			org := fmt.Sprintf("org%d.example", o)
			for i := o; i < total; i += orgs {
				body := queuedDelivery(i)
				deadline := time.Now().Add(30 * time.Second)
				for {
					mu.Lock()
					afterPromotion := !promotedAt.IsZero()
					mu.Unlock()
					status, _ := sendQueuedTo(bases[i%2]+"/webhooks", org, body)
					mu.Lock()
					statuses[status]++
					if status/100 == 2 {
						acked[org] = append(acked[org], body)
						sent++
						if sent == total/3 {
							primary.Stop() // SIGKILL, mid-way
							killedAt = time.Now()
							close(killed)
						} else if afterPromotion && firstAck.IsZero() {
							firstAck = time.Now()
						}
					}
					mu.Unlock()
					if status/100 == 2 {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("%s: delivery %d not acknowledged within 30s (last answer %d)", org, i, status)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	<-watched
	if t.Failed() {
		t.Fatalf("answers: %v\n%s", statuses, procs[0].logText())
	}
	if statuses[http.StatusPaymentRequired] > 0 {
		t.Errorf("%d answers were 402", statuses[http.StatusPaymentRequired])
	}
	if promotedAt.IsZero() {
		t.Fatalf("the sentinels did not promote a replica within 30 s of the kill; answers %v", statuses)
	}
	if firstAck.IsZero() {
		t.Fatalf("the deliveries were all acknowledged before the promotion (%s after the kill): the test proves nothing", promotedAt.Sub(killedAt))
	}
	if gap := firstAck.Sub(promotedAt); gap > 10*time.Second {
		t.Errorf("deliveries were acknowledged again %s after the promotion, want within 10 s", gap)
	}

	// Every acknowledged delivery reaches the app (bodies are unique: the
	// delivery's number), in order per organization once repeats go.
	lost := 0
	deadline := time.Now().Add(20 * time.Second)
	for {
		lost = 0
		for org, bodies := range acked {
			got := app.delivered(org)
			for _, b := range bodies {
				if !slices.Contains(got, b) {
					lost++
				}
			}
		}
		if lost == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for org, bodies := range acked {
		var got []string
		for _, b := range app.delivered(org) {
			if !slices.Contains(got, b) {
				got = append(got, b)
			}
		}
		var want []string
		for _, b := range bodies {
			if slices.Contains(got, b) {
				want = append(want, b)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: deliveries out of order or changed", org)
		}
	}
	t.Logf("replicas %d: answers %v; promotion %s after the kill, first acknowledgement %s after it; %d of %d acknowledged deliveries lost; %d sent to the app twice or more",
		replicas, statuses, promotedAt.Sub(killedAt).Round(time.Millisecond), firstAck.Sub(promotedAt).Round(time.Millisecond), lost, total, app.total()-(total-lost))
	// Each change of primary is logged once: on a loaded machine the
	// sentinels may promote twice (a new primary too slow to answer
	// within a second), so the lines are checked as a chain of changes
	// ending at the primary now.
	changed := regexp.MustCompile(`"msg":"Redis primary changed[^"]*","primary":"([^"]+)","was":"([^"]+)"`)
	for i, p := range procs {
		lines := changed.FindAllStringSubmatch(p.logText(), -1)
		from := primary.Addr
		for _, l := range lines {
			if l[2] != from || l[1] == from {
				t.Errorf("instance %d: logged a change %s → %s after %s: not once per change", i, l[2], l[1], from)
			}
			from = l[1]
		}
		if now := sn.AgreedPrimaryAddr(); len(lines) == 0 || from != now {
			t.Errorf("instance %d: logged the changes of primary %q, want a chain ending at %s", i, lines, now)
		}
	}
	if replicas > 0 && lost > 0 {
		t.Errorf("replicas %d: %d acknowledged deliveries never reached the app", replicas, lost)
	}
}

// TestWebhookQueueReplicasE2E: with replicas 1, a delivery is answered 202
// while the replica is up, and 503 with Retry-After within replicas_timeout
// (plus a margin for a loaded machine) while it hangs; the service sends it
// again, and once the replica is back it is acknowledged.
func TestWebhookQueueReplicasE2E(t *testing.T) {
	primary := redistest.Start(t)
	replica := primary.StartReplica(t)
	app := newQueueApp(t)
	app.up(t)
	startCaddyWithGlobal(t, "\tservicegate {\n\t\tredis "+primary.URL()+"\n\t\ttimeout 2s\n\t\treplicas 1\n\t\treplicas_timeout 300ms\n\t}", queueSite(app, "", ""))

	if status, answer := sendQueued(t, "/webhooks/", "acme.example", queuedDelivery(1)); status != http.StatusAccepted {
		t.Fatalf("with the replica up: %d %s, want 202", status, answer)
	}
	replica.Pause()
	defer replica.Resume()
	start := time.Now()
	status, answer := sendQueued(t, "/webhooks/", "acme.example", queuedDelivery(2))
	took := time.Since(start)
	if status != http.StatusServiceUnavailable || !strings.Contains(answer, `"error":{"message":`) {
		t.Fatalf("with the replica hung: %d %s, want 503 with a JSON message", status, answer)
	}
	if took < 300*time.Millisecond || took > 1500*time.Millisecond {
		t.Errorf("answered after %s, want about replicas_timeout (300ms)", took)
	}
	replica.Resume()
	if status, answer := sendQueued(t, "/webhooks/", "acme.example", queuedDelivery(2)); status/100 != 2 {
		t.Fatalf("sent again with the replica back: %d %s, want 2xx", status, answer)
	}
	// The delivery answered 503 was written on the primary before its
	// replicas failed to confirm it, so it may reach the app as well as
	// the one sent again (at least once; without dedup under another
	// delivery id): both bodies must arrive, the second maybe twice.
	waitUntil(t, "both deliveries at the app", func() bool {
		app.mu.Lock()
		defer app.mu.Unlock()
		seen := map[string]bool{}
		for _, b := range app.got["acme.example"] {
			seen[b] = true
		}
		return seen[queuedDelivery(1)] && seen[queuedDelivery(2)] && len(seen) == 2
	})
}
