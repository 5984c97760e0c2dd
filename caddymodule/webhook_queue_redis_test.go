package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/servicegate/servicegate/cluster/redistest"
	"github.com/servicegate/servicegate/queue"
)

// sharedQueueCaddyfile is the config of one of several Caddy processes
// whose /webhooks queue deliveries to app in the Redis that redisOption
// names (a line of the servicegate option: redis <url>, redis_cluster …).
func sharedQueueCaddyfile(port int, redisOption string, app *queueApp) string {
	return queueProcessCaddyfile(port, app, "servicegate {\n\t\t"+redisOption+"\n\t\ttimeout 2s\n\t}",
		"timeout 1s\nconcurrency 4")
}

// TestWebhookQueueSharedThroughRedis: two Caddy processes share one queue
// in Redis. Deliveries acknowledged by either reach the app in the order
// received per organization; one process is killed with SIGKILL while it
// delivers, and the other sends what it held once its lease runs out.
func TestWebhookQueueSharedThroughRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Caddy processes: skipped in -short mode")
	}
	t.Run("redis", func(t *testing.T) { sharedQueue(t, redistest.Start(t)) })
	t.Run("redis_cluster", func(t *testing.T) { sharedQueue(t, redistest.StartCluster(t)) })
}

func sharedQueue(t *testing.T, srv *redistest.Server) {
	const total, orgs = 300, 3
	app, slow := slowQueueApp(t, 15*time.Millisecond)

	var bases []string
	var procs []*caddyProcess
	for range 2 {
		port := freePort()
		base := "http://127.0.0.1:" + strconv.Itoa(port)
		p := startCaddyProcess(t, sharedQueueCaddyfile(port, srv.ServicegateOption(), app))
		waitListening(t, base+"/ready", p)
		bases, procs = append(bases, base), append(procs, p)
	}

	// One sender, so that the order received is the order sent; delivery
	// i goes to instance i%2.
	want := map[string][]string{}
	for i := range total {
		org := fmt.Sprintf("org%d.example", i%orgs)
		body := queuedDelivery(i)
		want[org] = append(want[org], body)
		if status, err := sendQueuedTo(bases[i%2]+"/webhooks", org, body); status != http.StatusAccepted {
			t.Fatalf("delivery %d to instance %d: %d %v\n%s", i, i%2, status, err, procs[i%2].logText())
		}
	}
	waitUntil(t, "some deliveries", func() bool { return app.total() >= 20 })
	before := app.total()
	procs[0].kill() // mid-delivery: it holds up to 3 organizations' heads
	if before >= total {
		t.Fatalf("all %d were delivered before the kill; the test proves nothing", before)
	}
	slow.Store(false)
	waitUntil(t, "every acknowledged delivery, by the instance left", func() bool { return app.distinct() == total })

	for org, bodies := range want {
		// At least once: a delivery the killed process sent but had not
		// recorded comes again; its first arrival keeps its place.
		var got []string
		for _, b := range app.delivered(org) {
			if !slices.Contains(got, b) {
				got = append(got, b)
			}
		}
		if !slices.Equal(got, bodies) {
			t.Errorf("%s: %d deliveries out of order or changed", org, len(got))
		}
	}
	waitUntil(t, "the queue to empty in Redis", func() bool {
		keys, _ := srv.Do("KEYS", "*")
		return !strings.Contains(keys, ":pending") && !strings.Contains(keys, ":s:")
	})
	t.Logf("%d of %d delivered before the kill; all after it (%d sent twice)", before, total, app.total()-total)
}

func TestWebhookQueueStoreRedisNeedsTheServicegateApp(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
	defer cancel()
	m := &ServiceWebhook{Secrets: []string{"s"}, Queue: &WebhookQueue{To: "http://127.0.0.1:3000", Store: "redis"}}
	err := m.Provision(ctx)
	if err == nil {
		_ = m.Cleanup()
		t.Fatal("store redis provisioned without the servicegate app's redis option")
	}
	if !strings.Contains(err.Error(), "servicegate { redis <url> }") {
		t.Errorf("error %q does not say what is missing", err)
	}
}

func TestWebhookQueueStoreChoice(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	cases := []struct {
		qc          WebhookQueue
		shared      bool
		store, left string
	}{
		{WebhookQueue{}, false, "disk", ""},
		{WebhookQueue{}, true, "redis", ""},
		{WebhookQueue{Dir: "/q"}, true, "disk", ""},
		{WebhookQueue{Store: "disk"}, true, "disk", ""},
		{WebhookQueue{Store: "redis"}, true, "redis", ""},
	}
	for _, c := range cases {
		if store, left := queueStore(&c.qc, c.shared); store != c.store || left != c.left {
			t.Errorf("%+v shared %v: %s %q, want %s %q", c.qc, c.shared, store, left, c.store, c.left)
		}
	}
	// A disk queue left from before the redis option is named, so that
	// provisioning warns of the deliveries it may still hold.
	f := defaultDiskQueue()
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if store, left := queueStore(&WebhookQueue{}, true); store != "redis" || left != f {
		t.Errorf("with %s left: %s %q", f, store, left)
	}
	if _, left := queueStore(&WebhookQueue{Store: "redis"}, true); left != "" {
		t.Errorf("an explicit store redis still warns of %q", left)
	}
}

// TestWebhookQueueMetricLabelNamesRedisForm: the queue's metrics (and its
// admin listing) name a queue in Redis by the Redis form in words, never
// a URL, a password or the nodes: host:port for one server, "sentinel
// <master>" for Sentinel, "cluster" for a Cluster, then the queue's keys.
func TestWebhookQueueMetricLabelNamesRedisForm(t *testing.T) {
	const password = "s3cret-redis-password"
	cases := []struct {
		name  string
		start func(t *testing.T) (option, form string, nodes []string)
	}{
		{"url with a password", func(t *testing.T) (string, string, []string) {
			srv := redistest.Start(t)
			if _, err := srv.Do("CONFIG", "SET", "requirepass", password); err != nil {
				t.Fatal(err)
			}
			return "redis " + strings.Replace(srv.URL(), "redis://", "redis://:"+password+"@", 1), srv.Addr, nil
		}},
		{"sentinel", func(t *testing.T) (string, string, []string) {
			sn := redistest.StartSentinel(t, 0)
			return "redis_sentinel " + sn.Master + " " + strings.Join(sn.Addrs(), " "), "sentinel " + sn.Master, sn.Addrs()
		}},
		{"cluster", func(t *testing.T) (string, string, []string) {
			srv := redistest.StartCluster(t)
			return srv.ServicegateOption(), "cluster", srv.Addrs()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			option, form, nodes := tc.start(t)
			app := newQueueApp(t)
			startCaddyWithGlobal(t, "\tservicegate {\n\t\t"+option+"\n\t\ttimeout 2s\n\t}", queueSite(app, "", ""))
			want := "redis " + form + " servicegate:{queue:http://" + app.addr + "}"
			metrics := scrapeMetrics(t)
			for _, series := range []string{"servicegate_webhook_queue_depth", "servicegate_webhook_queue_oldest_age_seconds"} {
				if line := series + `{dir="` + want + `"} 0`; !strings.Contains(metrics, line) {
					t.Errorf("the metrics lack %s", line)
				}
			}
			var labels []string
			for line := range strings.Lines(metrics) {
				if strings.HasPrefix(line, "servicegate_webhook_queue_") {
					labels = append(labels, line)
				}
			}
			for _, leak := range append([]string{"redis://", password}, nodes...) {
				if strings.Contains(strings.Join(labels, ""), leak) {
					t.Errorf("a queue's series holds %q: %s", leak, labels)
				}
			}
			resp, err := http.Get(fmt.Sprintf("http://localhost:%d/service/webhook/queue", e2eAdminPort))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var listing struct{ Queues []queueListing }
			if err := json.NewDecoder(resp.Body).Decode(&listing); err != nil || len(listing.Queues) != 1 || listing.Queues[0].Dir != want {
				t.Errorf("the admin listing: %+v %v, want the queue named %q", listing, err, want)
			}
		})
	}
}

// storeEarlierDelivery stores a delivery in srv under the Redis keys of
// servicegate 0.1.0's queue (<prefix>queue:<to>:…, no hash tag), as its add
// script left them, and returns its ID.
func storeEarlierDelivery(t *testing.T, srv *redistest.Server, to, org string, seq int, body string) string {
	t.Helper()
	base := "servicegate:queue:" + to + ":"
	id := fmt.Sprintf("0a1b2c-%d", seq)
	now := time.Now()
	meta, _ := json.Marshal(queue.Meta{Organization: org, To: to, Method: "POST", URI: "/webhooks", Size: len(body), Received: now, NextAttempt: now})
	payload, err := queue.EncodePayload(http.Header{"X-Service-Domain": {org}, "Content-Type": {"application/json"}}, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	for _, cmd := range [][]string{
		{"SET", base + "epoch", "0a1b2c"},
		{"SET", base + "seq", strconv.Itoa(seq)},
		{"XGROUP", "CREATE", base + "s:" + org, "deliver", "0", "MKSTREAM"},
		{"XADD", base + "s:" + org, "*", "id", id, "p", string(payload)},
		{"HSET", base + "pending", id, string(meta)},
		{"ZADD", base + "age", ms, id},
		{"ZADD", base + "ready", "NX", ms, org},
	} {
		if _, err := srv.Do(cmd...); err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
			t.Fatalf("%s: %v", cmd[0], err)
		}
	}
	return id
}

// TestWebhookQueueMovesEarlierRedisKeysE2E: after an upgrade, the
// deliveries and dead letters that servicegate 0.1.0 kept under its Redis
// keys are moved into the current ones by the instances starting, two at
// once: each delivery reaches the app once, under its ID, in order; the
// dead letter is listed; the instances log how many they moved, adding up;
// no earlier key is left.
func TestWebhookQueueMovesEarlierRedisKeysE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Caddy processes: skipped in -short mode")
	}
	srv := redistest.Start(t)
	app := newQueueApp(t)
	app.up(t)
	to := "http://" + app.addr
	const total = 40
	var want, ids []string
	for i := range total {
		body := queuedDelivery(i)
		want = append(want, body)
		ids = append(ids, storeEarlierDelivery(t, srv, to, "acme.example", i+1, body))
	}
	deadMeta, _ := json.Marshal(queue.Meta{Organization: "acme.example", To: to, Method: "POST", URI: "/webhooks", Dead: "the app answered 422"})
	deadPayload, _ := queue.EncodePayload(http.Header{"X-Service-Domain": {"acme.example"}}, []byte(queuedDelivery(99)))
	for _, cmd := range [][]string{
		{"HSET", "servicegate:queue:" + to + ":dead", "0a1b2c-99", string(deadMeta)},
		{"HSET", "servicegate:queue:" + to + ":deadp", "0a1b2c-99", string(deadPayload)},
	} {
		if _, err := srv.Do(cmd...); err != nil {
			t.Fatal(err)
		}
	}

	procs := make([]*caddyProcess, 2)
	admins := make([]int, 2)
	var wg sync.WaitGroup
	for i := range procs {
		port := freePort()
		admins[i] = freePort()
		conf := strings.Replace(queueProcessCaddyfile(port, app, "servicegate {\n\t\tredis "+srv.URL()+"\n\t\ttimeout 2s\n\t}", ""),
			"admin off", "admin localhost:"+strconv.Itoa(admins[i]), 1)
		procs[i] = startCaddyProcess(t, conf)
		wg.Add(1)
		go func() {
			defer wg.Done()
			waitListening(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/ready", procs[i])
		}()
	}
	wg.Wait()
	waitUntil(t, "the earlier deliveries to reach the app", func() bool { return app.total() == total })
	if got := app.delivered("acme.example"); !slices.Equal(got, want) {
		t.Errorf("the earlier deliveries reached the app out of order or changed:\n%q\nwant\n%q", got, want)
	}
	app.mu.Lock()
	for _, id := range ids {
		if n := app.ids[id]; n != 1 {
			t.Errorf("delivery %s acknowledged %d times under its ID, want 1", id, n)
		}
	}
	app.mu.Unlock()

	moved, dead := 0, 0
	for _, p := range procs {
		for line := range strings.Lines(p.logText()) {
			var entry struct {
				Msg         string `json:"msg"`
				Deliveries  int    `json:"deliveries"`
				DeadLetters int    `json:"dead_letters"`
			}
			if json.Unmarshal([]byte(line), &entry) == nil && strings.HasPrefix(entry.Msg, "moved the webhook deliveries an earlier version kept") {
				moved, dead = moved+entry.Deliveries, dead+entry.DeadLetters
			}
		}
	}
	if moved != total || dead != 1 {
		t.Errorf("the instances logged %d deliveries and %d dead letters moved, want %d and 1", moved, dead, total)
	}
	resp, err := http.Get(fmt.Sprintf("http://localhost:%d/service/webhook/dead", admins[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var listing struct{ Queues []queueListing }
	if err := json.NewDecoder(resp.Body).Decode(&listing); err != nil || len(listing.Queues) != 1 ||
		len(listing.Queues[0].Deliveries) != 1 || listing.Queues[0].Deliveries[0].ID != "0a1b2c-99" {
		t.Errorf("dead letters after the move: %+v %v", listing, err)
	}
	if keys, _ := srv.Do("KEYS", "servicegate:queue:*"); strings.TrimSpace(keys) != "" {
		t.Errorf("earlier keys left: %q", keys)
	}
}
