package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The queue chains' drains: backlog deliveries of one organization held
// behind an attempt in flight, then released to an app that answers at
// once, against plain reverse_proxy passing as many to the same app one at
// a time from one connection; and, once per chain, parallelTotal
// deliveries to an app taking parallelDelay each, from one organization
// against parallelOrgs.
const (
	drainBacklog  = 2000
	parallelTotal = 2000
	parallelOrgs  = 20
	parallelDelay = 2 * time.Millisecond
)

// seqHeader numbers the drains' deliveries, for the app to check their
// order: the queue passes the delivery's headers on, as reverse_proxy does.
const seqHeader = "X-Bench-Seq"

// queueDelivered and queueDepth are the chain side's series the queue
// chains read: deliveries made to the app (all queues of the process) and
// deliveries waiting or in flight (summed over its queues).
const (
	queueDelivered = `servicegate_webhook_queue_attempts_total{outcome="delivered"}`
	queueDepth     = "servicegate_webhook_queue_depth"
)

// The chain side's series of the rounds of writes that wait for a replica
// (replicas 1): rounds, their time, their writes.
const (
	replicasRounds    = "servicegate_redis_replicas_wait_seconds_count"
	replicasRoundsSum = "servicegate_redis_replicas_wait_seconds_sum"
	replicasWrites    = "servicegate_redis_replicas_writes_total"
)

// drainApp is the app of the drains, in the bench's process on
// ports.drainApp: it reads each delivery, answers 200 after delay, and
// notes each organization's deliveries in the order it answered them
// (the first answer of each); while held, it answers nothing.
type drainApp struct {
	srv *http.Server

	mu      sync.Mutex
	gate    chan struct{} // closed on release; nil when not held
	delay   time.Duration
	arrived chan struct{} // closed when the first request is in, while held
	seen    map[string]bool
	order   map[string][]int // organization → numbers, in the order answered
	repeats int
	target  int
	reached chan time.Time // told when target distinct deliveries are answered
}

// startDrainApp listens on addr.
func startDrainApp(addr string) (*drainApp, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	a := &drainApp{}
	a.reset(0, 0)
	a.srv = &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *drainApp) stop() { _ = a.srv.Close() }

// reset forgets what was answered; the next target distinct deliveries
// answered are told on the returned channel; with hold, the app answers
// nothing until release.
func (a *drainApp) reset(target int, delay time.Duration) <-chan time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen, a.order, a.repeats = map[string]bool{}, map[string][]int{}, 0
	a.target, a.delay = target, delay
	a.reached = make(chan time.Time, 1)
	return a.reached
}

// hold makes the app answer nothing until release; the returned channel
// is closed once the first request has come in.
func (a *drainApp) hold() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gate, a.arrived = make(chan struct{}), make(chan struct{})
	return a.arrived
}

// release lets the requests held go on.
func (a *drainApp) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gate != nil {
		close(a.gate)
		a.gate, a.arrived = nil, nil
	}
}

func (a *drainApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	a.mu.Lock()
	gate, arrived, delay := a.gate, a.arrived, a.delay
	if arrived != nil {
		select {
		case <-arrived:
		default:
			close(arrived)
		}
	}
	a.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	org := r.Header.Get("X-Service-Domain")
	n, _ := strconv.Atoi(r.Header.Get(seqHeader))
	now := time.Now()
	a.mu.Lock()
	key := org + "\x00" + strconv.Itoa(n)
	if a.seen[key] {
		a.repeats++
	} else {
		a.seen[key] = true
		a.order[org] = append(a.order[org], n)
		if len(a.seen) == a.target {
			a.reached <- now
		}
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
}

// outOfOrder says which organization's deliveries were first answered
// out of the order sent (numbers counting up from its first), or "".
func (a *drainApp) outOfOrder() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	for org, got := range a.order {
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				return fmt.Sprintf("%s: %d answered after %d", org, got[i], got[i-1])
			}
		}
	}
	return ""
}

// drainRequest is delivery n of a drain: the bench's signed 1 KB delivery
// of org, numbered.
func drainRequest(body []byte, org string, n int) request {
	rq := webhookRequest(body)
	rq.headers = append(rq.headers, [2]string{seqHeader, strconv.Itoa(n)})
	for i, h := range rq.headers {
		if h[0] == "X-Service-Domain" {
			rq.headers[i][1] = org
		}
	}
	return rq
}

// sendAll sends the requests one at a time over one connection to base,
// each to be answered 2xx.
func sendAll(client *http.Client, base string, rqs []request) error {
	for _, rq := range rqs {
		req, err := rq.build(base)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			err = drain(resp)
		}
		if err != nil {
			return fmt.Errorf("delivery %s: %w", rq.header(seqHeader), err)
		}
	}
	return nil
}

func (rq request) header(name string) string {
	for _, h := range rq.headers {
		if h[0] == name {
			return h[1]
		}
	}
	return ""
}

// oneConnection is a client that sends one request at a time over one
// connection.
func oneConnection() *http.Client {
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, DisableCompression: true}}
}

// queueResult is what a queue chain measured beyond wrk's numbers.
type queueResult struct {
	// delivered is the deliveries made to the app during each chain side
	// round, and deliveredFor the length of those rounds.
	delivered    float64
	deliveredFor time.Duration
	depth        float64 // after the last round
	depthErr     string
	// The drain of each round: deliveries per second through the queue
	// and through plain reverse_proxy.
	queueRate, plainRate []float64
	repeats              int
	order                string // "" when every round was in order
	// Redis' commands per delivery, summed over the rounds: storing the
	// backlog, then draining it (nil without Redis).
	store, drain *commandCount
	// The parallel drain: one organization's parallelTotal deliveries,
	// then parallelOrgs organizations', to an app taking parallelDelay.
	oneOrg, manyOrgs time.Duration
}

// commandCount is Redis' commands during a phase, and the deliveries of
// the phase.
type commandCount struct {
	all, scripts, waits int64
	deliveries          int
}

func (c *commandCount) add(before, after map[string]int64, deliveries int) {
	for name, n := range after {
		d := n - before[name]
		switch {
		case name == "info": // the bench's own
			continue
		case name == "evalsha" || name == "eval":
			c.scripts += d
		case name == "wait":
			c.waits += d
		}
		c.all += d
	}
	c.deliveries += deliveries
}

func (c *commandCount) String() string {
	if c == nil || c.deliveries == 0 {
		return "–"
	}
	per := func(n int64) float64 { return float64(n) / float64(c.deliveries) }
	s := fmt.Sprintf("%.1f (%.2f script calls", per(c.all), per(c.scripts))
	if c.waits > 0 {
		s += fmt.Sprintf(", %.2f WAIT", per(c.waits))
	}
	return s + ")"
}

// measureDrain runs the chain's drains, rounds times (the queue first in
// even rounds, plain reverse_proxy first in odd ones), then the parallel
// drain once.
func (c *chain) measureDrain(env *benchEnv, res *chainResult) error {
	p := env.ports
	app, err := startDrainApp(loopback(p.drainApp))
	if err != nil {
		return fmt.Errorf("the drain app: %w", err)
	}
	defer app.stop()
	q := &queueResult{}
	res.queue = q
	if c.redis {
		q.store, q.drain = &commandCount{}, &commandCount{}
	}
	body := deliveryBody(size1K)
	backlog := make([]request, drainBacklog+1) // the one held, then the backlog
	for i := range backlog {
		backlog[i] = drainRequest(body, benchDomain, i)
	}
	queueBase, plainBase := "http://"+loopback(p.chainDrain), "http://"+loopback(p.plainDrain)
	for i := 0; i < env.opts.rounds; i++ {
		for _, isChain := range order(i) {
			if isChain {
				rate, err := c.drainQueue(env, app, queueBase, backlog, q)
				if err != nil {
					return fmt.Errorf("queue drain, round %d: %w", i+1, err)
				}
				q.queueRate = append(q.queueRate, rate)
				continue
			}
			reached := app.reset(drainBacklog, 0)
			client := oneConnection()
			start := time.Now()
			err := sendAll(client, plainBase, backlog[1:])
			client.CloseIdleConnections()
			if err != nil {
				return fmt.Errorf("plain drain, round %d: %w", i+1, err)
			}
			q.plainRate = append(q.plainRate, float64(drainBacklog)/(<-reached).Sub(start).Seconds())
		}
		logf("  drain round %d: queue %.0f, plain %.0f deliveries/s", i+1, q.queueRate[i], q.plainRate[i])
	}
	var err1, err2 error
	q.oneOrg, err1 = c.drainParallel(app, queueBase, body, 1)
	q.manyOrgs, err2 = c.drainParallel(app, queueBase, body, parallelOrgs)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("parallel drain: %w", err)
	}
	logf("  %d deliveries at %s each: one organization %s, %d organizations %s", parallelTotal, parallelDelay,
		q.oneOrg.Round(time.Millisecond), parallelOrgs, q.manyOrgs.Round(time.Millisecond))
	return nil
}

// drainQueue holds the app, queues the backlog behind the first delivery
// (in flight, held), releases the app, and returns the deliveries per
// second from the release until the app has answered the last. It checks
// that the app answered them in order, and counts Redis' commands.
func (c *chain) drainQueue(env *benchEnv, app *drainApp, base string, backlog []request, q *queueResult) (float64, error) {
	reached := app.reset(len(backlog), 0)
	arrived := app.hold()
	defer app.release()
	redisAddr := loopback(env.ports.redis)
	var stats [3]map[string]int64
	var err error
	if c.redis {
		if stats[0], err = redisCommandStats(redisAddr, 5*time.Second); err != nil {
			return 0, err
		}
	}
	client := oneConnection()
	defer client.CloseIdleConnections()
	if err := sendAll(client, base, backlog[:1]); err != nil {
		return 0, err
	}
	select {
	case <-arrived:
	case <-time.After(time.Minute):
		return 0, errors.New("the first delivery did not reach the app within a minute")
	}
	if err := sendAll(client, base, backlog[1:]); err != nil {
		return 0, err
	}
	if c.redis {
		if stats[1], err = redisCommandStats(redisAddr, 5*time.Second); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	app.release()
	var end time.Time
	select {
	case end = <-reached:
	case <-time.After(5 * time.Minute):
		return 0, fmt.Errorf("the app did not get the %d deliveries within 5 minutes", len(backlog))
	}
	if bad := app.outOfOrder(); bad != "" && q.order == "" {
		q.order = bad
	}
	app.mu.Lock()
	q.repeats += app.repeats
	app.mu.Unlock()
	if c.redis {
		// The last settle call may still be on its way: Redis' counts
		// settle once the queue is idle (a claim call every half second).
		if stats[2], err = settledCommandStats(redisAddr); err != nil {
			return 0, err
		}
		q.store.add(stats[0], stats[1], len(backlog))
		q.drain.add(stats[1], stats[2], len(backlog))
	}
	return float64(len(backlog)-1) / end.Sub(start).Seconds(), nil
}

// settledCommandStats reads Redis' INFO commandstats until two reads 100
// ms apart agree on the script calls (at most 10 s).
func settledCommandStats(addr string) (map[string]int64, error) {
	last, err := redisCommandStats(addr, 5*time.Second)
	for deadline := time.Now().Add(10 * time.Second); err == nil && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		var now map[string]int64
		if now, err = redisCommandStats(addr, 5*time.Second); err != nil {
			break
		}
		if now["evalsha"]+now["eval"] == last["evalsha"]+last["eval"] {
			return now, nil
		}
		last = now
	}
	return last, err
}

// drainParallel holds the app, queues parallelTotal deliveries from orgs
// organizations, releases the app, which takes parallelDelay per
// delivery, and returns the time until it has answered them all.
func (c *chain) drainParallel(app *drainApp, base string, body []byte, orgs int) (time.Duration, error) {
	reached := app.reset(parallelTotal, parallelDelay)
	arrived := app.hold()
	defer app.release()
	rqs := make([]request, parallelTotal)
	for i := range rqs {
		rqs[i] = drainRequest(body, fmt.Sprintf("org%d.example", i%orgs), i)
	}
	client := oneConnection()
	defer client.CloseIdleConnections()
	if err := sendAll(client, base, rqs); err != nil {
		return 0, err
	}
	select {
	case <-arrived:
	case <-time.After(time.Minute):
		return 0, errors.New("no delivery reached the app within a minute")
	}
	start := time.Now()
	app.release()
	select {
	case end := <-reached:
		return end.Sub(start), nil
	case <-time.After(5 * time.Minute):
		return 0, fmt.Errorf("the app did not get the %d deliveries within 5 minutes", parallelTotal)
	}
}

// quietWait bounds waitQueuesEmpty.
const quietWait = 3 * time.Minute

// waitQueuesEmpty waits until the queues of every side's Caddy are empty
// (servicegate_webhook_queue_depth 0 on its /metrics), and says how long
// that took.
func waitQueuesEmpty(sides map[bool]*caddySide) error {
	client := &http.Client{Timeout: 5 * time.Second}
	start := time.Now()
	for {
		left := 0.0
		for _, side := range sides {
			_, depth, err := queueCounters(context.Background(), client, side.admin)
			if err != nil {
				return err
			}
			left += depth
		}
		if left == 0 {
			if waited := time.Since(start); waited > time.Second {
				logf("  the queues emptied in %s", waited.Round(100*time.Millisecond))
			}
			return nil
		}
		if time.Since(start) > quietWait {
			return fmt.Errorf("the queues still hold %.0f deliveries after %s", left, quietWait)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// queueCounters reads a side's deliveries made so far and its queues'
// depth from its admin API's /metrics.
func queueCounters(ctx context.Context, client *http.Client, admin string) (delivered, depth float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("metrics: %d, %v", resp.StatusCode, err)
	}
	delivered, _ = metricValue(string(b), queueDelivered)
	depth, _ = metricValue(string(b), queueDepth)
	return delivered, depth, nil
}

// queueSection is the results of the queue chains: acknowledged beside
// delivered per second, the depth left, the drains, Redis' commands per
// delivery, and the goals of each.
func queueSection(chains []*chainResult) string {
	var qs []*chainResult
	for _, r := range chains {
		if r.err == nil && r.skip == "" && r.queue != nil {
			qs = append(qs, r)
		}
	}
	if len(qs) == 0 {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("### Webhook queues\n\n")
	w("| chain | acknowledged/s | delivered/s meanwhile | depth at the end | held backlog drained/s | plain reverse_proxy/s | drain ratio of medians | paired ratio, median (range) | in order | repeats | goal | result |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range qs {
		q := r.queue
		delivered := "–"
		if q.deliveredFor > 0 {
			delivered = fmt.Sprintf("%.0f", q.delivered/q.deliveredFor.Seconds())
		}
		depth := fmt.Sprintf("%.0f", q.depth)
		if q.depthErr != "" {
			depth = "not read"
		}
		qm, pm := median(q.queueRate), median(q.plainRate)
		ratio := 0.0
		if pm > 0 {
			ratio = qm / pm
		}
		inOrder := "yes"
		if q.order != "" {
			inOrder = "NO: " + q.order
		}
		w("| %s | %.0f | %s | %s | %.0f | %.0f | %.3f | %s | %s | %d | ≥ %.2f | %s |\n",
			r.c.name, r.chain.medianRPS(), delivered, depth, qm, pm, ratio, pairedOf(q.queueRate, q.plainRate),
			inOrder, q.repeats, drainTarget, verdict(ratio >= drainTarget && q.order == ""))
	}
	w("\nAcknowledged/s is the chain side's median under wrk (the service's requests answered 202 once the delivery is stored); delivered/s is what the queue delivered to the upstream meanwhile (the delivered attempts over the chain side's rounds, every delivery from one organization, so one at a time), and the depth what it had left after the last round. The drain: %d deliveries of one organization queued (one at a time over one connection) behind a first one that the app holds in flight, then the app released: deliveries per second from the release until the app has answered the last, against plain `reverse_proxy` passing the same %d to the same app one at a time over one connection; one of each per round. The app (in the bench's process) answers at once and checks that each organization's deliveries come in the order sent (repeats: deliveries answered again, at least once).\n\n", drainBacklog, drainBacklog)
	var redis []*chainResult
	for _, r := range qs {
		if r.queue.store != nil {
			redis = append(redis, r)
		}
	}
	if len(redis) > 0 {
		w("| chain | Redis commands per stored delivery | per drained delivery |\n|---|---|---|\n")
		for _, r := range redis {
			w("| %s | %s | %s |\n", r.c.name, r.queue.store, r.queue.drain)
		}
		w("\nFrom Redis' `INFO commandstats` around the drains' phases, summed over the rounds: storing the backlog (sent one at a time), then draining it; every command counted, those run by the scripts included, and the queues' idle claim calls (one every half second); the bench's own `INFO` left out.\n\n")
	}
	w("| chain | %d deliveries, one organization | %d organizations × %d | faster |\n|---|---|---|---|\n", parallelTotal, parallelOrgs, parallelTotal/parallelOrgs)
	for _, r := range qs {
		q := r.queue
		w("| %s | %s | %s | %.1f× |\n", r.c.name, q.oneOrg.Round(time.Millisecond), q.manyOrgs.Round(time.Millisecond), q.oneOrg.Seconds()/max(q.manyOrgs.Seconds(), 1e-9))
	}
	w("\nParallel delivery: the same held backlog, to an app taking %s per delivery, from one organization (one at a time) and spread over %d (up to `concurrency` at once, 8 by default), once per chain.\n\n", parallelDelay, parallelOrgs)
	return strings.TrimRight(b.String(), "\n") + "\n\n"
}

// The queue chains' goals: a held backlog drains at least drainTarget of
// plain sequential proxying; a chain held to goalAcks has p50 at most
// relP50Target times its plain side's.
const (
	drainTarget  = 0.8
	relP50Target = 1.5
)

// pairedOf pairs round i of a and b and gives the median, lowest and
// highest ratio a/b.
func pairedOf(a, b []float64) string {
	var v []float64
	for i := range a {
		if i < len(b) && b[i] > 0 {
			v = append(v, a[i]/b[i])
		}
	}
	if len(v) == 0 {
		return "–"
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return fmt.Sprintf("%.3f (%.3f–%.3f)", median(v), s[0], s[len(s)-1])
}
