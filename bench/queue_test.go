package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The queue chains have a drain site on each side: the chain side's with
// the chain's queue delivering to the drain app, a queue of its own; the
// plain side's with reverse_proxy to the drain app alone.
func TestQueueChainsDrainSites(t *testing.T) {
	env := &benchEnv{out: "/tmp/bench-out", ports: newPorts(18000)}
	queues := 0
	for _, c := range allChains {
		plain, chain, _ := c.caddyfiles(env)
		if c.drainHandlers == "" {
			if strings.Contains(plain+chain, ":18003") {
				t.Errorf("%s: not a queue chain, but a site reaches the drain app", c.name)
			}
			continue
		}
		queues++
		if !strings.Contains(plain, "http://:18081 {\n\troute {\n\t\treverse_proxy 127.0.0.1:18003\n\t}\n}") {
			t.Errorf("%s: the plain side has no drain site of reverse_proxy alone:\n%s", c.name, plain)
		}
		_, site, ok := strings.Cut(chain, "http://:18095 {\n")
		if !ok || !strings.Contains(site, "to http://127.0.0.1:18003\n") || !strings.Contains(site, "reverse_proxy 127.0.0.1:18003") {
			t.Errorf("%s: the chain side's drain site does not queue to the drain app:\n%s", c.name, chain)
		}
		if strings.Contains(site, "dir ") != (c.scratch != "") || (c.scratch != "" && !strings.Contains(site, "dir /tmp/bench-out/"+c.scratch+"/")) {
			t.Errorf("%s: the drain queue's dir is not in the scratch directory %q, which the run removes:\n%s", c.name, c.scratch, site)
		}
	}
	if queues != 3 {
		t.Errorf("%d queue chains, want 3", queues)
	}
}

// The drain app holds every request while held, tells when the target
// deliveries are answered, and finds an organization's deliveries answered
// out of the order sent; repeats are counted once.
func TestDrainApp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	app, err := startDrainApp(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer app.stop()
	base := "http://" + addr
	body := deliveryBody(size1K)
	client := oneConnection()

	reached := app.reset(3, 0)
	arrived := app.hold()
	done := make(chan error, 1)
	go func() { done <- sendAll(client, base, []request{drainRequest(body, "a", 0)}) }()
	<-arrived
	select {
	case <-reached:
		t.Fatal("told of deliveries answered while held")
	case err := <-done:
		t.Fatalf("answered while held: %v", err)
	default:
	}
	app.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := sendAll(client, base, []request{drainRequest(body, "a", 0), drainRequest(body, "a", 1), drainRequest(body, "b", 7)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("not told of the 3 deliveries answered")
	}
	if bad := app.outOfOrder(); bad != "" || app.repeats != 1 {
		t.Errorf("out of order %q, repeats %d; want none, 1", bad, app.repeats)
	}
	if err := sendAll(client, base, []request{drainRequest(body, "b", 3)}); err != nil {
		t.Fatal(err)
	}
	if bad := app.outOfOrder(); !strings.Contains(bad, "b: 3 answered after 7") {
		t.Errorf("out of order %q, want b's 3 after 7", bad)
	}
	resp, err := http.Get(base + "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET: %v %v", resp, err)
	}
}

func TestCommandCount(t *testing.T) {
	var c commandCount
	if c.String() != "–" {
		t.Errorf("empty: %q", c.String())
	}
	c.add(map[string]int64{"evalsha": 10, "info": 3, "xadd": 5}, map[string]int64{"evalsha": 30, "info": 9, "xadd": 25, "wait": 10}, 20)
	if got, want := c.String(), "2.5 (1.00 script calls, 0.50 WAIT)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

func TestPairedOf(t *testing.T) {
	if got := pairedOf([]float64{2, 3, 1}, []float64{2, 2, 2}); got != "1.000 (0.500–1.500)" {
		t.Errorf("pairedOf = %q", got)
	}
	if got := pairedOf(nil, nil); got != "–" {
		t.Errorf("pairedOf(nil) = %q", got)
	}
}

// The queue section gives each queue chain's figures and goals.
func TestQueueSection(t *testing.T) {
	byName := map[string]*chain{}
	for _, c := range allChains {
		byName[c.name] = c
	}
	run := func(rps, p50 float64) sideResult {
		return sideResult{runs: []wrkStats{{Requests: int64(rps * 10), DurationUS: 10e6, P50: p50}}}
	}
	results := []*chainResult{
		{c: byName["webhook-queue-redis-1k"], chain: run(5000, 3000), queue: &queueResult{
			delivered: 30000, deliveredFor: 10 * time.Second, depth: 20000,
			queueRate: []float64{1800, 2000}, plainRate: []float64{2000, 2000},
			store: &commandCount{all: 20, scripts: 2, deliveries: 2}, drain: &commandCount{all: 10, scripts: 1, deliveries: 2},
			oneOrg: 4 * time.Second, manyOrgs: 500 * time.Millisecond}},
		{c: byName["webhook-queue-redis-replicas1-1k"], chain: run(3000, 6000), queue: &queueResult{
			queueRate: []float64{1000}, plainRate: []float64{2000}, order: "acme.example: 5 answered after 6",
			oneOrg: time.Second, manyOrgs: time.Second}},
	}
	got := queueSection(results)
	for _, want := range []string{
		"| webhook-queue-redis-1k | 5000 | 3000 | 20000 | 1900 | 2000 | 0.950 | 0.950 (0.900–1.000) | yes | 0 | ≥ 0.80 | PASS |",
		"| webhook-queue-redis-replicas1-1k | 3000 | – | 0 | 1000 | 2000 | 0.500 | 0.500 (0.500–0.500) | NO: acme.example: 5 answered after 6 | 0 | ≥ 0.80 | MISS |",
		"| webhook-queue-redis-1k | 10.0 (1.00 script calls) | 5.0 (0.50 script calls) |",
		"| webhook-queue-redis-1k | 4s | 500ms | 8.0× |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the section lacks\n%s\n%s", want, got)
		}
	}
	if queueSection(results[:0]) != "" {
		t.Error("a section without queue chains")
	}
}

// The replicas chain is held to its acknowledgements and p50 against its
// plain side's (replicas 0), pairing the rounds.
func TestAcksGoal(t *testing.T) {
	var c *chain
	for _, x := range allChains {
		if x.goal == goalAcks {
			c = x
		}
	}
	if c == nil || c.name != "webhook-queue-redis-replicas-1k" || c.target != 0.8 {
		t.Fatalf("the chain held to goalAcks: %+v", c)
	}
	round := func(rps, p50 float64) wrkStats {
		return wrkStats{Requests: int64(rps * 10), DurationUS: 10e6, P50: p50}
	}
	for _, tt := range []struct {
		chainRPS, chainP50 []float64
		want               string
	}{
		{[]float64{4000, 4200, 4600}, []float64{6000, 5800, 5000}, "PASS"}, // 0.8–0.92, 1.2–1.5×
		{[]float64{4000, 3000, 3500}, []float64{6000, 5800, 5000}, "MISS"}, // median 0.7
		{[]float64{4000, 4200, 4600}, []float64{8000, 8000, 5000}, "MISS"}, // p50 2×
	} {
		res := &chainResult{c: c}
		for i := range tt.chainRPS {
			res.plain.runs = append(res.plain.runs, round(5000, 4000))
			res.chain.runs = append(res.chain.runs, round(tt.chainRPS[i], tt.chainP50[i]))
			res.plain.cpuUS = append(res.plain.cpuUS, 100)
			res.chain.cpuUS = append(res.chain.cpuUS, 100)
		}
		md := (&report{opts: &options{rounds: 3, duration: 10 * time.Second}, chains: []*chainResult{res}}).markdown()
		line := "- webhook-queue-redis-replicas-1k: requests/s chain over plain, paired median "
		i := strings.Index(md, line)
		if i < 0 || !strings.Contains(md[i:], "(goal ≤ 1.5×): "+tt.want+"\n") {
			t.Errorf("rps %v p50 %v: want %s in\n%s", tt.chainRPS, tt.chainP50, tt.want, md)
		}
	}
}

// waitQueuesEmpty returns once every side's queue depth reads 0.
func TestWaitQueuesEmpty(t *testing.T) {
	var scrapes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		depth := max(0, 3-scrapes.Add(1)) // 2, 1, 0, …
		fmt.Fprintf(w, "servicegate_webhook_queue_depth{dir=\"redis 127.0.0.1:1 servicegate:{queue:x}\"} %d\n", depth)
	}))
	defer srv.Close()
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "servicegate_webhook_queue_depth{dir=\"d\"} 0")
	}))
	defer empty.Close()
	if err := waitQueuesEmpty(map[bool]*caddySide{false: {admin: empty.URL}, true: {admin: srv.URL}}); err != nil {
		t.Fatal(err)
	}
	if n := scrapes.Load(); n < 3 {
		t.Errorf("returned after %d scrapes, with deliveries left", n)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	if err := waitQueuesEmpty(map[bool]*caddySide{true: {admin: down.URL}}); err == nil {
		t.Error("no error when /metrics cannot be read")
	}
}
