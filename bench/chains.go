package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// How a chain is loaded.
type loadKind int

const (
	loadWrk        loadKind = iota // wrk, requests/s and latency
	loadSequential                 // one delivery at a time, added latency against SHA-256
	loadConcurrent                 // 20 concurrent large jobs, peak RSS
)

// What a chain is held to.
type goalKind int

const (
	goalCPU  goalKind = iota // plain's Caddy CPU per request at least target × chain's (paired rounds)
	goalSHA                  // added time per request at most max × SHA-256 of the body
	goalNone                 // reported only
	// goalJSONValid: the added time per request reported against
	// encoding/json.Valid over the bytes the contract checks (the answer,
	// and the strings file of an inlined job), in the bench's process: the
	// check alone is held to 0.5 of it in contract's Ratio benchmarks;
	// through Caddy the added time also holds the answer's buffering.
	goalJSONValid
	// goalAcks: the chain's requests/s at least target × plain's and its
	// p50 at most relP50Target × plain's (paired rounds): two
	// configurations of one handler compared on their answers.
	goalAcks
)

// chain is one A/B comparison: plain reverse_proxy (or plainHandlers +
// reverse_proxy) against handlers + reverse_proxy, both inside route, both
// sent the same request.
type chain struct {
	name, title string
	// handlers are the Caddyfile lines before reverse_proxy in the route;
	// {emulator}, {upstream}, {redis} and {out} stand for the emulator's
	// port, the upstream's port, the Redis port and the directory bench/out.
	handlers string
	// plainHandlers, when set, are the plain side's lines before
	// reverse_proxy (placeholders as in handlers): a chain that compares
	// two configurations of the same handlers rather than handlers against
	// none.
	plainHandlers string
	// globals, when set, are lines added to the chain side's global
	// options (placeholders as in handlers).
	globals string
	// plainGlobals, when set, are lines added to the plain side's global
	// options ({plainredis} stands for its Redis' port).
	plainGlobals string
	// plainRedis: the plain side has a redis-server of its own, on
	// ports.plainRedis, as durable as the chain side's.
	plainRedis bool
	// quiet: each wrk round starts once both sides' queues are empty
	// (waitQueuesEmpty), so that no round pays for the deliveries of the
	// rounds before it, its own side's or the other's.
	quiet bool
	// redis: the bench runs a redis-server of its own on ports.redis for
	// the chain, and reads its INFO commandstats after the last round;
	// without redis-server installed the chain is skipped.
	redis bool
	// durableRedis: that redis-server syncs its append-only file before
	// every answer (a queue's Redis).
	durableRedis bool
	// redisReplica: that redis-server has a replica (as durable), caught
	// up before the chain's Caddy starts.
	redisReplica bool
	// files are written into bench/out before the chain's Caddy starts
	// (name → content), e.g. an app descriptor.
	files map[string]string
	// scratch, when set, is a directory in bench/out that the chain's Caddy
	// fills (a queue); it is removed before the chain and after it.
	scratch string
	// extraSite, when set, is the site of the service's stand-in (the
	// emulator), run by a Caddy of its own beside both sides, so that
	// neither side's CPU time holds any of its work.
	extraSite func(p ports) string
	// request builds what both sides are sent.
	request func(env *benchEnv) (request, string, error)
	load    loadKind
	goal    goalKind
	target  float64
	// echo: the upstream echoes the body, and the probe checks it.
	echo bool
	// minAnswer, when set, is the least number of bytes the answer must
	// have (the probe checks it): the upstream's 5 MB parse-file answer.
	minAnswer int
	// metrics, when set, are series of the chain side's Caddy (the start
	// of their line in the admin API's /metrics: a name, or a name and
	// its first labels) read after the last round and given in the notes.
	metrics []string
	// drainHandlers, when set, make the chain a queue chain: they are the
	// handlers of a second site of the chain side, whose queue delivers to
	// the drain app ({drain} stands for its port), for the drains (see
	// measureDrain); the plain side gets a second site with reverse_proxy
	// to that app alone.
	drainHandlers string
	// warm is how many requests go to the chain before it is measured.
	warm int
	std  bool // uses Caddy's standard modules only (a harness check)
	// noop: the plain side is the chain's no-op counterpart, Caddy's own
	// handlers doing Caddy's part of the chain's work (as many handlers in
	// the route or one more, the same headers to the app), so that the
	// ratio is what servicegate's own work costs; run with -only noop, not
	// in "all".
	noop bool
	// contract: one of the contract's payloads beside contract-5m, run
	// with -only contract, not in "all".
	contract bool
	// stringsPath, for goalJSONValid, is the upstream's path of the
	// strings file the chain side fetches, which the reference reads too.
	stringsPath string
}

const (
	size1K   = 1 << 10
	size100K = 100 << 10
	size5M   = 5_000_000 // "5 MB": under the 5 MiB default limit

	// minAnswer5M is the least size of the upstream's 5 MB parse-file
	// answer (it is just under size5M).
	minAnswer5M = 4_900_000
)

func fixed(rq request) func(*benchEnv) (request, string, error) {
	return func(*benchEnv) (request, string, error) { return rq, "", nil }
}

func withToken(withOrg bool) func(*benchEnv) (request, string, error) {
	return func(env *benchEnv) (request, string, error) {
		tok, how, err := mintToken(env.caddyBin, withOrg)
		if err != nil {
			return request{}, "", err
		}
		return apiRequest(tok), "token " + how, nil
	}
}

func emulatorSite(p ports) string {
	return fmt.Sprintf(`http://:%d {
	service_emulator {
		client_id demo-client
		client_secret %s
		redirect_uri http://localhost/cb
		organization %s {
			id %d
			active_until "2099-01-01 00:00:00"
		}
	}
}
`, p.emulator, benchSecret, benchDomain, benchOrgID)
}

// appDescriptor is the app descriptor of the app-api chain: one webhook
// module and one custom file format module, identified as the app the
// emulator knows.
const appDescriptor = `{
  "identifier": "demo-app",
  "name": "Bench app",
  "authentication": {"type": "service_app"},
  "scopes": ["project"],
  "modules": {
    "custom-file-format": [
      {"key": "bench-format", "type": "bench", "url": "/file-format"}
    ],
    "webhook": [
      {"key": "bench-hook", "url": "/webhooks", "events": ["project.translated"]}
    ]
  }
}
`

// authHandlers are the handlers of the auth chains.
const authHandlers = "service_auth {\n\ths256_secret " + benchSecret + "\n}"

// appAPIHandlers are the handlers of the app-api chains.
const appAPIHandlers = "service_app {\n\tdescriptor {out}/app-api.descriptor.json\n\tclient_id " + benchClientID +
	"\n\tclient_secret " + benchSecret + "\n\tapp_secret " + benchSecret +
	"\n\tservice http://127.0.0.1:{emulator}\n\tsubscription\n}"

// stdClaimHeaders are Caddy's own handlers adding the two headers
// service_app adds for the app-api request (the token's user and domain).
const stdClaimHeaders = "request_header X-Service-Domain " + benchDomain + "\nrequest_header X-Service-User-Id 7"

// authSubscriptionHandlers are the handlers of the auth-subscription
// chains.
const authSubscriptionHandlers = "service_auth {\n\ths256_secret " + benchSecret + "\n}\n" +
	"service_subscription {\n\tapp_identifier demo-app\n\tbase_url http://127.0.0.1:{emulator}\n}"

// queueRedisHandlers are the handlers of the chains with the queue in
// Redis: delivering to the upstream.
const queueRedisHandlers = "service_webhook {\n\tsecret " + benchSecret + "\n\tqueue {\n\t\tto http://127.0.0.1:{upstream}\n\t}\n}"

// redisDrainHandlers are the drain site's handlers of the chains with the
// queue in Redis: a queue of its own (its name is its to).
const redisDrainHandlers = "service_webhook {\n\tsecret " + benchSecret + "\n\tqueue {\n\t\tto http://127.0.0.1:{drain}\n\t}\n}"

var allChains = []*chain{
	{
		name: "auth", title: "service_auth (HS256) + reverse_proxy, GET with a valid token",
		handlers: authHandlers,
		request:  withToken(false), load: loadWrk, goal: goalCPU, target: 0.97, warm: 10,
	},
	{
		name: "auth-subscription", title: "service_auth + service_subscription (cache hit) + reverse_proxy",
		handlers:  authSubscriptionHandlers,
		extraSite: emulatorSite,
		request:   withToken(true), load: loadWrk, goal: goalCPU, target: 0.97, warm: 50,
	},
	{
		// Both sides run the same handlers and serve cache hits; only the
		// chain side has the servicegate app on a Redis of the bench's own.
		name: "auth-subscription-redis", title: "auth-subscription (cache hit) with `servicegate { redis … }` (chain) against without it (plain)",
		plainHandlers: authSubscriptionHandlers,
		handlers:      authSubscriptionHandlers,
		globals:       "servicegate {\n\tredis redis://127.0.0.1:{redis}\n}",
		redis:         true,
		extraSite:     emulatorSite,
		request:       withToken(true), load: loadWrk, goal: goalCPU, target: 0.97, warm: 50,
	},
	{
		name: "app-api", title: "service_app (token + subscription, cache hit) + reverse_proxy, GET with a valid token",
		handlers:  appAPIHandlers,
		files:     map[string]string{"app-api.descriptor.json": appDescriptor},
		extraSite: emulatorSite,
		request:   withToken(true), load: loadWrk, goal: goalCPU, target: 0.95, warm: 50,
	},
	{
		name: "webhook-1k", title: "service_webhook + reverse_proxy, 1 KB signed deliveries",
		handlers: "service_webhook {\n\tsecret " + benchSecret + "\n}",
		request:  fixed(webhookRequest(deliveryBody(size1K))), load: loadWrk, goal: goalCPU, target: 0.95, warm: 10,
	},
	{
		name: "webhook-5m", title: "service_webhook + reverse_proxy, 5 MB signed deliveries one at a time",
		handlers: "service_webhook {\n\tsecret " + benchSecret + "\n}",
		request:  fixed(webhookRequest(deliveryBody(size5M))), load: loadSequential, goal: goalSHA, target: 1.0, warm: 2,
	},
	{
		name: "webhook-queue-1k", title: "service_webhook with queue (answers 202 once stored), 1 KB signed deliveries, against reverse_proxy",
		handlers: "service_webhook {\n\tsecret " + benchSecret +
			"\n\tqueue {\n\t\tto http://127.0.0.1:{upstream}\n\t\tdir {out}/webhook-queue-1k.queue\n\t}\n}",
		drainHandlers: "service_webhook {\n\tsecret " + benchSecret +
			"\n\tqueue {\n\t\tto http://127.0.0.1:{drain}\n\t\tdir {out}/webhook-queue-1k.queue/drain\n\t}\n}",
		scratch: "webhook-queue-1k.queue",
		metrics: []string{queueDelivered, queueDepth},
		request: fixed(webhookRequest(deliveryBody(size1K))), load: loadWrk, goal: goalNone, warm: 10,
	},
	{
		name: "webhook-queue-redis-1k", title: "service_webhook with queue in Redis (`servicegate { redis … }`, Redis syncing its append-only file before every answer), 1 KB signed deliveries, against reverse_proxy",
		handlers:      queueRedisHandlers,
		drainHandlers: redisDrainHandlers,
		globals:       "servicegate {\n\tredis redis://127.0.0.1:{redis}\n}",
		redis:         true, durableRedis: true,
		metrics: []string{queueDelivered, queueDepth},
		request: fixed(webhookRequest(deliveryBody(size1K))), load: loadWrk, goal: goalNone, warm: 10,
	},
	{
		name: "webhook-queue-redis-replicas1-1k", title: "service_webhook with queue in Redis and `replicas 1` (each delivery acknowledged once a replica has it; both Redis servers syncing their append-only files), 1 KB signed deliveries, against reverse_proxy",
		handlers:      queueRedisHandlers,
		drainHandlers: redisDrainHandlers,
		globals:       "servicegate {\n\tredis redis://127.0.0.1:{redis}\n\treplicas 1\n}",
		redis:         true, durableRedis: true, redisReplica: true,
		metrics: []string{queueDelivered, queueDepth, replicasRounds, replicasRoundsSum, replicasWrites},
		request: fixed(webhookRequest(deliveryBody(size1K))), load: loadWrk, goal: goalNone, warm: 10,
	},
	{
		// The goal of replicas 1: both configurations in one chain, each
		// with a Redis of its own, in paired rounds.
		name: "webhook-queue-redis-replicas-1k", title: "service_webhook with queue in Redis, `replicas 1` (chain: a Redis and its replica) against `replicas 0` (plain: a Redis of its own), every server syncing its append-only file before answering, 1 KB signed deliveries",
		handlers:      queueRedisHandlers,
		plainHandlers: queueRedisHandlers,
		globals:       "servicegate {\n\tredis redis://127.0.0.1:{redis}\n\treplicas 1\n}",
		plainGlobals:  "servicegate {\n\tredis redis://127.0.0.1:{plainredis}\n}",
		redis:         true, durableRedis: true, redisReplica: true, plainRedis: true, quiet: true,
		metrics: []string{queueDelivered, queueDepth, replicasRounds, replicasRoundsSum, replicasWrites},
		request: fixed(webhookRequest(deliveryBody(size1K))), load: loadWrk, goal: goalAcks, target: 0.8, warm: 10,
	},
	{
		name: "limits-100k", title: "service_limits (defaults) + reverse_proxy, 100 KB jobs echoed",
		handlers: "service_limits",
		request:  fixed(jobRequest(jobBody(size100K))), load: loadWrk, goal: goalCPU, target: 0.95, echo: true, warm: 10,
	},
	{
		name: "limits-rss", title: "service_limits (defaults) + reverse_proxy, 20 concurrent 5 MB jobs echoed",
		handlers: "service_limits",
		request:  fixed(jobRequest(jobBody(size5M))), load: loadConcurrent, goal: goalNone, echo: true, warm: 2,
	},
	{
		name: "limits-rss-contract", title: "service_limits (contract custom-file-format) + reverse_proxy, 20 concurrent 5 MB parse-file jobs, 5 MB answers",
		handlers: "service_limits {\n\tcontract custom-file-format\n}",
		request:  fixed(answerJobRequest(contractJobBody(size5M))), load: loadConcurrent, goal: goalNone, minAnswer: minAnswer5M, warm: 2,
	},
	{
		name: "contract-5m", title: "service_limits (contract custom-file-format) + reverse_proxy, one 5 MB parse-file answer at a time",
		handlers: "service_limits {\n\tcontract custom-file-format\n}",
		request:  fixed(answerJobRequest(contractJobBody(size1K))), load: loadSequential, goal: goalJSONValid, minAnswer: minAnswer5M, warm: 2,
	},
	// The contract's other payloads, run with -only contract (which takes
	// contract-5m too), not in "all".
	{
		name: "contract-build-5m", title: "service_limits (contract custom-file-format) + reverse_proxy, one 5 MB build-file answer (one base64 content) at a time",
		handlers: "service_limits {\n\tcontract custom-file-format\n}",
		request:  fixed(buildJobRequest()), load: loadSequential, goal: goalJSONValid, minAnswer: minAnswer5M, warm: 2, contract: true,
	},
	{
		name: "contract-preexport-5m", title: "service_limits (contract file-pre-export) + reverse_proxy, one 5 MB pre-export answer (plural strings, translations) at a time, the job's strings by URL (not fetched)",
		handlers: "service_limits {\n\tcontract file-pre-export\n}",
		request:  fixed(preExportJobRequest("https://files.example/strings.ndjson")), load: loadSequential, goal: goalJSONValid, minAnswer: minAnswer5M, warm: 2, contract: true,
	},
	{
		name: "contract-ndjson-5m", title: "service_limits (contract file-pre-export, inline) + reverse_proxy, a pre-export job whose 5 MB of strings come by URL (NDJSON, fetched from the upstream and inlined), answered with the same 5 MB of strings",
		handlers: "service_limits {\n\tcontract file-pre-export\n\tinline\n\tinline_hosts 127.0.0.1\n\tinline_allow_private\n}",
		request: func(env *benchEnv) (request, string, error) {
			return preExportJobRequest("http://127.0.0.1:" + fmt.Sprint(env.ports.upstream) + strings5MPath), "", nil
		},
		load: loadSequential, goal: goalJSONValid, minAnswer: minAnswer5M, warm: 2, contract: true, stringsPath: strings5MPath,
	},
	// servicegate's chains against their no-op counterparts: the plain
	// side runs Caddy's own handlers, as many in the route as the chain
	// side's (for app-api one more), adding the headers the chain side
	// adds for the app, so that the ratio leaves out what Caddy spends per
	// handler and per header, whoever asks for it.
	{
		name: "auth-noop", title: "service_auth (HS256) against one vars handler, GET with a valid token",
		handlers: authHandlers, plainHandlers: "vars bench 1",
		request: withToken(false), load: loadWrk, goal: goalCPU, target: 0.97, warm: 10, noop: true,
	},
	{
		name: "auth-subscription-noop", title: "service_auth + service_subscription (cache hit) against two vars handlers",
		handlers: authSubscriptionHandlers, plainHandlers: "vars bench 1\nvars bench2 1",
		extraSite: emulatorSite,
		request:   withToken(true), load: loadWrk, goal: goalCPU, target: 0.97, warm: 50, noop: true,
	},
	{
		// Caddy's cheapest way to the app's two headers: request_header
		// for each (std-claim-headers), two handlers where service_app
		// is one, a handler more than its part (about 1%, std-get). One
		// vars and reverse_proxy's header_up for the two cost more: as
		// much as service_app in one run.
		name: "app-api-noop", title: "service_app (token + subscription, cache hit) against request_header for each of the two claim headers, GET with a valid token",
		handlers: appAPIHandlers, plainHandlers: stdClaimHeaders,
		files:     map[string]string{"app-api.descriptor.json": appDescriptor},
		extraSite: emulatorSite,
		request:   withToken(true), load: loadWrk, goal: goalCPU, target: 0.95, warm: 50, noop: true,
	},
	// Harness checks with Caddy's standard modules only: request_body
	// stands where service_limits and service_webhook will.
	{
		name: "std-get", title: "vars + reverse_proxy, GET with a bearer token (harness check)",
		handlers: "vars bench 1", request: withToken(false), load: loadWrk, goal: goalCPU, target: 0.97, warm: 10, std: true,
	},
	{
		// Caddy's own handler adding the two headers service_app adds for
		// the app-api request (the token's user and domain), with their
		// values: what those headers cost in Caddy, set by whoever.
		name: "std-claim-headers", title: "request_header (the two claim headers app-api adds) + reverse_proxy, GET with a bearer token (harness check)",
		handlers: stdClaimHeaders,
		request:  withToken(true), load: loadWrk, goal: goalCPU, target: 0.95, warm: 10, std: true,
	},
	{
		name: "std-100k", title: "request_body + reverse_proxy, 100 KB jobs echoed (harness check)",
		handlers: "request_body {\n\tmax_size 5MiB\n}",
		request:  fixed(jobRequest(jobBody(size100K))), load: loadWrk, goal: goalCPU, target: 0.95, echo: true, warm: 10, std: true,
	},
	{
		name: "std-5m", title: "request_body + reverse_proxy, 5 MB deliveries one at a time (harness check)",
		handlers: "request_body {\n\tmax_size 5MiB\n}",
		request:  fixed(webhookRequest(deliveryBody(size5M))), load: loadSequential, goal: goalSHA, target: 1.5, warm: 2, std: true,
	},
	{
		name: "std-rss", title: "request_body + reverse_proxy, 20 concurrent 5 MB jobs echoed (harness check)",
		handlers: "request_body {\n\tmax_size 5MiB\n}",
		request:  fixed(jobRequest(jobBody(size5M))), load: loadConcurrent, goal: goalNone, echo: true, warm: 2, std: true,
	},
}

func chainNames() []string {
	names := []string{"all", "std", "noop"}
	for _, c := range allChains {
		names = append(names, c.name)
	}
	return names
}

// selectChains turns -only into chains: "all" is every servicegate chain
// against plain reverse_proxy, "std" every harness check, "noop" every
// servicegate chain against its no-op counterpart; no -only means "all".
func selectChains(only []string) ([]*chain, error) {
	if len(only) == 0 {
		only = []string{"all"}
	}
	var out []*chain
	seen := map[string]bool{}
	add := func(c *chain) {
		if !seen[c.name] {
			seen[c.name] = true
			out = append(out, c)
		}
	}
	for _, n := range only {
		found := false
		for _, c := range allChains {
			if c.name == n || (n == "all" && !c.std && !c.noop && !c.contract) || (n == "std" && c.std) || (n == "noop" && c.noop) ||
				(n == "contract" && (c.contract || c.goal == goalJSONValid)) {
				add(c)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown chain %q in -only; known: %s", n, strings.Join(chainNames(), ", "))
		}
	}
	return out, nil
}

// sideResult is one side's measurements over all rounds.
type sideResult struct {
	runs    []wrkStats      // loadWrk
	cpuUS   []float64       // loadWrk: Caddy's CPU µs per request, per round
	latency []time.Duration // loadSequential
	jobs    int             // loadConcurrent
	peakRSS int64
}

func (s sideResult) medianRPS() float64 {
	v := make([]float64, len(s.runs))
	for i, r := range s.runs {
		v[i] = r.rps()
	}
	return median(v)
}

func (s sideResult) medianP(p99 bool) float64 {
	v := make([]float64, len(s.runs))
	for i, r := range s.runs {
		v[i] = r.P50
		if p99 {
			v[i] = r.P99
		}
	}
	return median(v)
}

func (s sideResult) medianCPU() float64 { return median(s.cpuUS) }

func (s sideResult) medianLatency() time.Duration {
	v := make([]float64, len(s.latency))
	for i, d := range s.latency {
		v[i] = float64(d)
	}
	return time.Duration(median(v))
}

// chainResult is a chain's outcome; err is set when it could not be measured.
type chainResult struct {
	c            *chain
	plain, chain sideResult
	sha256       time.Duration // loadSequential with goalSHA: SHA-256 over the body
	jsonValid    time.Duration // loadSequential with goalJSONValid: json.Valid over what the contract checks
	// direct is, for loadSequential with goalSHA, the same request sent
	// straight to the upstream with no Caddy between: the time of one trip
	// of the body to the app, its answer included.
	direct sideResult
	// queue holds what a queue chain measured besides wrk's numbers.
	queue      *queueResult
	bodySize   int
	answerSize int // bytes of the answer to the probe of the plain side
	notes      []string
	err        error
	// skip, when set, says why the chain was not run (a tool missing from
	// the machine); it is not a failure.
	skip string
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// run starts both Caddys of the chain, checks that each answers the
// request, measures them alternately and records their peak RSS.
func (c *chain) run(env *benchEnv) (res *chainResult) {
	res = &chainResult{c: c}
	if c.redis && env.noRedis != "" {
		res.skip = env.noRedis
		return res
	}
	rq, note, err := c.request(env)
	if err != nil {
		res.err = fmt.Errorf("preparing the request: %w", err)
		return res
	}
	res.bodySize = len(rq.body)
	for _, n := range []string{c.sidesNote(), note} {
		if n != "" {
			res.notes = append(res.notes, n)
		}
	}
	p := env.ports

	if err := c.writeFiles(env.out); err != nil {
		res.err = err
		return res
	}
	if c.scratch != "" {
		dir := filepath.Join(env.out, c.scratch)
		if err := os.RemoveAll(dir); err != nil {
			res.err = err
			return res
		}
		defer os.RemoveAll(dir) // after the Caddys have stopped (deferred later)
	}

	var redis *proc
	if c.redis {
		if redis, err = startRedis(env, c.name, env.ports.redis, c.durableRedis); err != nil {
			res.err = err
			return res
		}
		defer redis.stop() // after the Caddys have stopped (deferred later)
	}
	if c.plainRedis {
		plainRedis, err := startRedis(env, c.name+"-plain", env.ports.plainRedis, c.durableRedis)
		if err != nil {
			res.err = err
			return res
		}
		defer plainRedis.stop()
	}
	if c.redisReplica {
		replica, err := startRedisReplica(env, c.name, c.durableRedis)
		if err != nil {
			res.err = err
			return res
		}
		defer replica.stop()
		if c.durableRedis && env.opts.replicaFsync != "always" {
			res.notes = append(res.notes, "the Redis replica ran with `appendfsync "+env.opts.replicaFsync+"` (-replica-appendfsync), not syncing before every answer as the title says")
		}
	}

	plainCfg, chainCfg, serviceCfg := c.caddyfiles(env)
	if serviceCfg != "" {
		service, err := startCaddy(env, c.name+"-service", serviceCfg, p.emulator, p.serviceAdmin, false)
		if err != nil {
			res.err = fmt.Errorf("the service's stand-in: %w", err)
			return res
		}
		defer service.stop()
	}

	plain, err := startCaddy(env, c.name+"-plain", plainCfg, p.plainHTTP, p.plainAdmin, true)
	if err != nil {
		res.err = fmt.Errorf("plain side: %w", err)
		return res
	}
	defer plain.stop()
	side, err := startCaddy(env, c.name+"-chain", chainCfg, p.chainHTTP, p.chainAdmin, true)
	if err != nil {
		res.err = fmt.Errorf("chain side: %w", err)
		return res
	}
	defer side.stop()

	client := &http.Client{
		Timeout:   2 * time.Minute,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
	}
	defer client.CloseIdleConnections()
	var want []byte
	if c.echo {
		want = rq.body
	}
	if res.answerSize, err = probe(client, rq, plain.base, want, c.minAnswer); err != nil {
		res.err = fmt.Errorf("plain side does not answer the benchmark request: %w", err)
		return res
	}
	for i := 0; i < c.warm; i++ {
		if _, err := probe(client, rq, side.base, want, c.minAnswer); err != nil {
			res.err = fmt.Errorf("chain side does not answer the benchmark request (Caddyfile %s): %w",
				filepath.Join(env.out, c.name+"-chain.Caddyfile"), err)
			return res
		}
	}

	if c.drainHandlers != "" {
		// Before the wrk rounds, whose backlog would compete with it.
		if err := c.measureDrain(env, res); err != nil {
			res.err = err
			return res
		}
	}
	switch c.load {
	case loadWrk:
		err = c.measureWrk(env, rq, plain, side, res)
	case loadSequential:
		err = c.measureSequential(env, client, rq, plain, side, res)
	case loadConcurrent:
		err = c.measureConcurrent(env, rq, plain, side, res)
	}
	if err != nil {
		res.err = err
		return res
	}
	if len(c.metrics) > 0 {
		res.notes = append(res.notes, readMetrics(client, "http://"+loopback(p.chainAdmin), c.metrics))
	}
	if res.queue != nil {
		if _, res.queue.depth, err = queueCounters(context.Background(), client, "http://"+loopback(p.chainAdmin)); err != nil {
			res.queue.depthErr = err.Error()
		}
	}
	if redis != nil {
		res.notes = append(res.notes, redisNote(loopback(p.redis), res.chain))
	}
	for _, s := range []struct {
		p *caddySide
		r *sideResult
	}{{plain, &res.plain}, {side, &res.chain}} {
		if s.r.peakRSS, err = s.p.peakRSS(); err != nil {
			res.err = fmt.Errorf("reading peak RSS of %s: %w", s.p.name, err)
			return res
		}
	}
	return res
}

// writeFiles writes the chain's files into dir.
func (c *chain) writeFiles(dir string) error {
	for name, content := range c.files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// sidesNote says what the sides of a chain whose plain side is not plain
// reverse_proxy are, or is empty.
func (c *chain) sidesNote() string {
	if c.noop {
		return "the plain side is this chain's no-op counterpart: `" + strings.Join(strings.Split(strings.TrimSpace(c.plainHandlers), "\n"), "`, `") + "` before reverse_proxy"
	}
	if c.plainHandlers == "" {
		return ""
	}
	if c.plainHandlers != c.handlers || c.globals == "" {
		return "the plain side runs its own handlers before reverse_proxy, not reverse_proxy alone"
	}
	if c.plainGlobals != "" {
		return "both sides run the same handlers; the chain side has the global options `" +
			strings.Join(strings.Fields(c.globals), " ") + "`, the plain side's `" +
			strings.Join(strings.Fields(c.plainGlobals), " ") + "`"
	}
	return "both sides run the same handlers; only the chain side has the global options `" +
		strings.Join(strings.Fields(c.globals), " ") + "`"
}

// caddyfiles are the Caddyfiles of the chain's plain side and chain side,
// and of the service's stand-in when the chain has one.
func (c *chain) caddyfiles(env *benchEnv) (plain, chain, service string) {
	p := env.ports
	plain = globalOptions(p.plainAdmin, p.plainHTTP, p.plainHTTPS, c.expand(env, c.plainGlobals)) + "\n" +
		siteWithRoute(p.plainHTTP, c.expand(env, c.plainHandlers), p.upstream)
	chain = globalOptions(p.chainAdmin, p.chainHTTP, p.chainHTTPS, c.expand(env, c.globals)) + "\n" +
		siteWithRoute(p.chainHTTP, c.expand(env, c.handlers), p.upstream)
	if c.drainHandlers != "" {
		plain += "\n" + siteWithRoute(p.plainDrain, "", p.drainApp)
		chain += "\n" + siteWithRoute(p.chainDrain, c.expand(env, c.drainHandlers), p.drainApp)
	}
	if c.extraSite != nil {
		service = globalOptions(p.serviceAdmin, p.emulator, p.serviceHTTPS, "") + "\n" + c.extraSite(p)
	}
	return plain, chain, service
}

// expand is lines of the chain's Caddyfile with {emulator}, {upstream},
// {redis}, {drain} and {out} replaced.
func (c *chain) expand(env *benchEnv, lines string) string {
	return strings.NewReplacer(
		"{emulator}", fmt.Sprint(env.ports.emulator),
		"{upstream}", fmt.Sprint(env.ports.upstream),
		"{redis}", fmt.Sprint(env.ports.redis),
		"{plainredis}", fmt.Sprint(env.ports.plainRedis),
		"{drain}", fmt.Sprint(env.ports.drainApp),
		"{out}", env.out,
	).Replace(lines)
}

// order is the sides of round i: plain first in even rounds, chain first
// in odd ones, so that drift over the run falls on both alike.
func order(i int) [2]bool {
	if i%2 == 0 {
		return [2]bool{false, true}
	}
	return [2]bool{true, false}
}

func sideName(isChain bool) string {
	if isChain {
		return "chain"
	}
	return "plain"
}

func (c *chain) measureWrk(env *benchEnv, rq request, plain, side *caddySide, res *chainResult) error {
	script, err := writeWrkScript(env.out, c.name, rq)
	if err != nil {
		return err
	}
	bases := map[bool]string{false: plain.base, true: side.base}
	procs := map[bool]*caddySide{false: plain, true: side}
	// A short unmeasured run per side fills connection pools and caches.
	for _, isChain := range []bool{false, true} {
		logPath := filepath.Join(env.out, fmt.Sprintf("%s-%s-warmup.wrk.txt", c.name, sideName(isChain)))
		if _, err := runWrk(env.opts, script, bases[isChain]+rq.path, logPath, time.Second); err != nil {
			return fmt.Errorf("%s warm-up: %w", sideName(isChain), err)
		}
	}
	if env.opts.sideBySide && c.drainHandlers == "" {
		return c.measureSideBySide(env, script, rq, procs, res)
	}
	for i := 0; i < env.opts.rounds; i++ {
		for _, isChain := range order(i) {
			if c.quiet {
				if err := waitQueuesEmpty(procs); err != nil {
					return fmt.Errorf("before the %s side's round %d: %w", sideName(isChain), i+1, err)
				}
			}
			logPath := filepath.Join(env.out, fmt.Sprintf("%s-%s-r%d.wrk.txt", c.name, sideName(isChain), i+1))
			cpu0, cpuErr := procs[isChain].cpuTime()
			mark0 := markCPU()
			delivered0, deliveredErr := c.delivered(env, isChain)
			var profiled chan error
			if env.opts.profile && i == env.opts.rounds-1 {
				profiled = profileDuring(procs[isChain], filepath.Join(env.out, fmt.Sprintf("%s-%s.pprof", c.name, sideName(isChain))), env.opts.duration)
			}
			s, err := runWrk(env.opts, script, bases[isChain]+rq.path, logPath, env.opts.duration)
			if profiled != nil {
				if perr := <-profiled; perr != nil {
					res.notes = append(res.notes, fmt.Sprintf("%s: no CPU profile: %v", sideName(isChain), perr))
				} else {
					logf("  CPU profile of the %s side's last round: %s", sideName(isChain), filepath.Join(env.out, fmt.Sprintf("%s-%s.pprof", c.name, sideName(isChain))))
				}
			}
			if err == nil {
				err = s.check()
			}
			if err != nil {
				return fmt.Errorf("%s side, round %d: %w", sideName(isChain), i+1, err)
			}
			cpu1, cpuErr2 := procs[isChain].cpuTime()
			if delivered1, err := c.delivered(env, isChain); err == nil && deliveredErr == nil && res.queue != nil && isChain {
				res.queue.delivered += delivered1 - delivered0
				res.queue.deliveredFor += time.Duration(s.DurationUS) * time.Microsecond
			}
			if cpuErr != nil || cpuErr2 != nil {
				return fmt.Errorf("reading the CPU time of %s: %v", procs[isChain].name, errors.Join(cpuErr, cpuErr2))
			}
			res.recordRound(isChain, i, s, cpu1-cpu0, stealShare(mark0, markCPU(), runtime.NumCPU()), "")
		}
	}
	return nil
}

// recordRound adds round i of one side to res: wrk's figures s and the
// CPU time its Caddy used meanwhile; it notes the round's socket errors
// and logs the round with steal, the hypervisor's share of the machine
// then, and how it was measured ("" when alternating).
func (res *chainResult) recordRound(isChain bool, i int, s wrkStats, cpu time.Duration, steal float64, how string) {
	if s.socketErrors() > 0 {
		res.notes = append(res.notes, fmt.Sprintf("%s round %d: %d socket errors in %d requests", sideName(isChain), i+1, s.socketErrors(), s.Requests))
	}
	r := &res.plain
	if isChain {
		r = &res.chain
	}
	r.runs = append(r.runs, s)
	cpuPerReq := float64(cpu/time.Microsecond) / float64(s.Requests)
	r.cpuUS = append(r.cpuUS, cpuPerReq)
	logf("  round %d %-5s %9.0f req/s  p50 %s  p99 %s  caddy CPU %.0f µs/req  steal %.0f%%%s", i+1, sideName(isChain), s.rps(), fmtUS(s.P50), fmtUS(s.P99), cpuPerReq,
		100*max(steal, 0), how)
}

// delivered reads how many deliveries a queue chain's chain side has made
// (0 for the other chains and sides).
func (c *chain) delivered(env *benchEnv, isChain bool) (float64, error) {
	if c.drainHandlers == "" || !isChain {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, _, err := queueCounters(ctx, http.DefaultClient, "http://"+loopback(env.ports.chainAdmin))
	return d, err
}

func (c *chain) measureSequential(env *benchEnv, client *http.Client, rq request, plain, side *caddySide, res *chainResult) error {
	if c.goal == goalSHA {
		res.sha256 = sha256Time(rq.body, 21)
	}
	// The contract's chains time json.Valid in each round, so that the
	// reference shares the rounds' load.
	var payload [][]byte
	var validTimes []float64
	if c.goal == goalJSONValid {
		var err error
		if payload, err = c.checkedPayload(client, env, rq); err != nil {
			return fmt.Errorf("json.Valid reference: %w", err)
		}
	}
	// Bounded in time as well as in count: a side stops its round early
	// after -duration.
	send := func(name, base string, into *sideResult, round int) error {
		start := time.Now()
		for n := 0; n < env.opts.seqRequests && (n < 3 || time.Since(start) < env.opts.duration); n++ {
			req, err := rq.build(base)
			if err != nil {
				return err
			}
			t0 := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				return fmt.Errorf("%s side, round %d: %w", name, round, err)
			}
			err = drain(resp)
			d := time.Since(t0)
			if err != nil {
				return fmt.Errorf("%s side, round %d: %w", name, round, err)
			}
			into.latency = append(into.latency, d)
		}
		return nil
	}
	bases := map[bool]string{false: plain.base, true: side.base}
	results := map[bool]*sideResult{false: &res.plain, true: &res.chain}
	for i := 0; i < env.opts.rounds; i++ {
		for _, isChain := range order(i) {
			if err := send(sideName(isChain), bases[isChain], results[isChain], i+1); err != nil {
				return err
			}
		}
		if c.goal == goalSHA {
			if err := send("direct", "http://"+loopback(env.ports.upstream), &res.direct, i+1); err != nil {
				return err
			}
		}
		if c.goal == goalJSONValid {
			for range env.opts.seqRequests {
				validTimes = append(validTimes, float64(jsonValidTime(payload)))
			}
		}
		logf("  round %d  plain %s  chain %s (medians so far)", i+1, res.plain.medianLatency().Round(10*time.Microsecond), res.chain.medianLatency().Round(10*time.Microsecond))
	}
	if c.goal == goalSHA {
		logf("  SHA-256 over %d bytes: %s; the request straight to the upstream: %s", len(rq.body),
			res.sha256.Round(10*time.Microsecond), res.direct.medianLatency().Round(10*time.Microsecond))
	}
	if c.goal == goalJSONValid {
		res.jsonValid = time.Duration(median(validTimes))
		logf("  json.Valid over what the contract checks: %s", res.jsonValid.Round(10*time.Microsecond))
	}
	if added := res.chain.medianLatency() - res.plain.medianLatency(); res.answerSize >= 1_000_000 && added > 0 {
		res.notes = append(res.notes, fmt.Sprintf("median added time %s over a %s answer: %.0f MB/s of answer",
			ms(added), sizeLabel(res.answerSize), float64(res.answerSize)/added.Seconds()/1e6))
	}
	return nil
}

func (c *chain) measureConcurrent(env *benchEnv, rq request, plain, side *caddySide, res *chainResult) error {
	const workers = 20
	bases := map[bool]string{false: plain.base, true: side.base}
	results := map[bool]*sideResult{false: &res.plain, true: &res.chain}
	for i := 0; i < env.opts.rounds; i++ {
		for _, isChain := range order(i) {
			jobs, err := concurrentJobs(rq, bases[isChain], workers, env.opts.duration, 50)
			if err != nil {
				return fmt.Errorf("%s side, round %d: %w", sideName(isChain), i+1, err)
			}
			results[isChain].jobs += jobs
		}
		logf("  round %d  jobs done: plain %d, chain %d", i+1, res.plain.jobs, res.chain.jobs)
	}
	return nil
}

// checkedPayload is what the chain's contract checks, fetched from the
// upstream: the answer it gives to rq and, for an inlined job, each line
// of the strings file.
func (c *chain) checkedPayload(client *http.Client, env *benchEnv, rq request) ([][]byte, error) {
	base := "http://" + loopback(env.ports.upstream)
	req, err := rq.build(base)
	if err != nil {
		return nil, err
	}
	answer, err := fetchBody(client, req)
	if err != nil {
		return nil, err
	}
	payload := [][]byte{answer}
	if c.stringsPath != "" {
		req, err := http.NewRequest(http.MethodGet, base+c.stringsPath, nil)
		if err != nil {
			return nil, err
		}
		file, err := fetchBody(client, req)
		if err != nil {
			return nil, err
		}
		for _, l := range bytes.Split(file, []byte("\n")) {
			if len(l) > 0 {
				payload = append(payload, l)
			}
		}
	}
	if jsonValidTime(payload) < 0 {
		return nil, errors.New("the upstream's payload is not JSON")
	}
	return payload, nil
}

// jsonValidTime is the time encoding/json.Valid takes over each of
// payload, in this process; -1 when one is not JSON.
func jsonValidTime(payload [][]byte) time.Duration {
	t0 := time.Now()
	for _, p := range payload {
		if !json.Valid(p) {
			return -1
		}
	}
	return time.Since(t0)
}

// fetchBody sends req and returns the body of its 200 answer.
func fetchBody(client *http.Client, req *http.Request) ([]byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: status %d", req.Method, req.URL.Path, resp.StatusCode)
	}
	return b, err
}

// sha256Time is the median time SHA-256 takes over b, in this process.
func sha256Time(b []byte, n int) time.Duration {
	v := make([]float64, n)
	for i := range v {
		t0 := time.Now()
		sha256.Sum256(b)
		v[i] = float64(time.Since(t0))
	}
	return time.Duration(median(v))
}

func fmtUS(us float64) string {
	return (time.Duration(us*1000) * time.Nanosecond).Round(time.Microsecond).String()
}

// readMetrics reads series from the admin API's /metrics at admin and
// says what they were, or why they could not be read.
func readMetrics(client *http.Client, admin string, series []string) string {
	resp, err := client.Get(admin + "/metrics")
	if err != nil {
		return "chain side's metrics not read: " + err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("chain side's metrics not read: %d, %v", resp.StatusCode, err)
	}
	var parts []string
	values := map[string]float64{}
	for _, name := range series {
		if v, ok := metricValue(string(b), name); ok {
			parts = append(parts, fmt.Sprintf("`%s` %g", name, v))
			values[name] = v
		} else {
			parts = append(parts, fmt.Sprintf("`%s` absent", name))
		}
	}
	note := "after the last round, the chain side's " + strings.Join(parts, ", ")
	if rounds := values[replicasRounds]; rounds > 0 {
		note += fmt.Sprintf("; a round of writes waiting for a replica took %.2f ms and carried %.2f writes on average",
			values[replicasRoundsSum]/rounds*1000, values[replicasWrites]/rounds)
	}
	return note
}

// metricValue sums the values of the samples in a Prometheus text
// exposition whose line starts with series (a metric name, or a name and
// its first labels) followed by a space, '{' or ','.
func metricValue(text, series string) (float64, bool) {
	sum, found := 0.0, false
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, series)
		if !ok || strings.HasPrefix(line, "#") || rest == "" || !strings.ContainsRune(" {,", rune(rest[0])) {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum, found = sum+v, true
	}
	return sum, found
}

// profileDuring takes a CPU profile of side from its admin API's
// /debug/pprof/profile while a measurement of d runs (the second at each
// end left out), into path; the channel tells when it is written.
func profileDuring(side *caddySide, path string, d time.Duration) chan error {
	done := make(chan error, 1)
	seconds := int(d/time.Second) - 2
	if seconds < 1 {
		seconds = 1
	}
	go func() {
		time.Sleep(time.Second)
		client := &http.Client{Timeout: d + 30*time.Second}
		resp, err := client.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", side.admin, seconds))
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("the admin API answered %d", resp.StatusCode)
			return
		}
		f, err := os.Create(path)
		if err == nil {
			_, err = io.Copy(f, resp.Body)
			err = errors.Join(err, f.Close())
		}
		done <- err
	}()
	return done
}

// measureSideBySide loads both sides at once in each round, each from a
// wrk of its own with half the threads and connections, so that both
// meet the same machine: a host whose speed moves from one second to the
// next moves both sides' CPU per request alike, and the ratio of the pair
// keeps what the chain adds.
func (c *chain) measureSideBySide(env *benchEnv, script string, rq request, procs map[bool]*caddySide, res *chainResult) error {
	half := *env.opts
	half.threads, half.connections = max(half.threads/2, 1), max(half.connections/2, 1)
	for i := 0; i < env.opts.rounds; i++ {
		var cpu0 [2]time.Duration
		var stats [2]wrkStats
		var errs [2]error
		for k, isChain := range []bool{false, true} {
			if cpu0[k], errs[k] = procs[isChain].cpuTime(); errs[k] != nil {
				return fmt.Errorf("reading the CPU time of %s: %w", procs[isChain].name, errs[k])
			}
		}
		mark0 := markCPU()
		var wg sync.WaitGroup
		for k, isChain := range []bool{false, true} {
			logPath := filepath.Join(env.out, fmt.Sprintf("%s-%s-r%d.wrk.txt", c.name, sideName(isChain), i+1))
			wg.Add(1)
			go func() {
				defer wg.Done()
				stats[k], errs[k] = runWrk(&half, script, procs[isChain].base+rq.path, logPath, env.opts.duration)
				if errs[k] == nil {
					errs[k] = stats[k].check()
				}
			}()
		}
		wg.Wait()
		steal := stealShare(mark0, markCPU(), runtime.NumCPU())
		for k, isChain := range []bool{false, true} {
			if errs[k] != nil {
				return fmt.Errorf("%s side, round %d: %w", sideName(isChain), i+1, errs[k])
			}
			cpu1, err := procs[isChain].cpuTime()
			if err != nil {
				return fmt.Errorf("reading the CPU time of %s: %w", procs[isChain].name, err)
			}
			res.recordRound(isChain, i, stats[k], cpu1-cpu0[k], steal, " (side by side)")
		}
	}
	return nil
}
