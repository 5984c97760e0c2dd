package caddymodule

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegate/servicegate/cluster"
)

// redisErrors counts failed Redis calls of the servicegate app, by op.
var redisErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "servicegate",
	Name:      "redis_errors_total",
	Help:      "Redis calls that failed or took longer than the servicegate timeout, by op (get, set, lock, unlock, forget, publish, subscribe, spill_store, spill_take, queue_add, queue_claim, queue_settle, queue_admin, ping).",
}, []string{"op"})

// redisErrorsBy holds the counter of each op, so that counting needs no
// label look-up.
var redisErrorsBy = func() (by [len(cluster.Ops)]prometheus.Counter) {
	for i, op := range cluster.Ops {
		by[i] = redisErrors.WithLabelValues(op.String())
	}
	return by
}()

// redisPrimary is 1 for the Redis primary the instance reaches through
// Sentinel now; the series of a former primary is removed.
var redisPrimary = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: "servicegate",
	Name:      "redis_primary",
	Help:      "1 for the Redis primary (host:port) this instance reaches through Sentinel now.",
}, []string{"address"})

// redisReplicasWait is how long each round of writes that must not be
// lost took with replicas set, from sending them to the answer of their
// WAIT (the primary's write and sync, then a replica's); its count is the
// rounds, so that the writes counter over it is the writes per round.
var redisReplicasWait = prometheus.NewHistogram(prometheus.HistogramOpts{
	Namespace: "servicegate",
	Name:      "redis_replicas_wait_seconds",
	Help:      "How long each round of writes that must not be lost took with replicas set: sent together, then one WAIT for the replicas.",
	Buckets:   []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
})

// redisReplicasWrites counts the writes those rounds carried.
var redisReplicasWrites = prometheus.NewCounter(prometheus.CounterOpts{
	Namespace: "servicegate",
	Name:      "redis_replicas_writes_total",
	Help:      "Writes that must not be lost sent with replicas set, each in a round of servicegate_redis_replicas_wait_seconds.",
})

// observeReplicasWait records one round of durable writes.
func observeReplicasWait(writes int, took time.Duration) {
	redisReplicasWait.Observe(took.Seconds())
	redisReplicasWrites.Add(float64(writes))
}

// registerRedisMetrics registers the collectors on reg.
func registerRedisMetrics(reg prometheus.Registerer) {
	registerCollector(reg, redisErrors)
	registerCollector(reg, redisPrimary)
	registerCollector(reg, redisReplicasWait)
	registerCollector(reg, redisReplicasWrites)
}
