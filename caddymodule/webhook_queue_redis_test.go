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
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/servicegate/servicegate/cluster/redistest"
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
