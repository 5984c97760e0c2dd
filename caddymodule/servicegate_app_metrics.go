package caddymodule

import (
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

// registerRedisMetrics registers the collectors on reg.
func registerRedisMetrics(reg prometheus.Registerer) {
	registerCollector(reg, redisErrors)
	registerCollector(reg, redisPrimary)
}
