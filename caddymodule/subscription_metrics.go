package caddymodule

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegate/servicegate/subscription"
)

// Collectors of service_subscription, created once per process and
// registered on the metrics registry of every config that loads the
// handler.
var (
	subscriptionCacheHits = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "servicegate",
		Subsystem: "subscription",
		Name:      "cache_hits_total",
		Help:      "Requests answered from the subscription cache.",
	})
	subscriptionCacheMisses = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "servicegate",
		Subsystem: "subscription",
		Name:      "cache_misses_total",
		Help:      "Requests that found no trusted answer in the subscription cache.",
	})
	subscriptionQueries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "servicegate",
		Subsystem: "subscription",
		Name:      "queries_total",
		Help:      "Subscription queries sent to the service, by answer (active, unpaid, not_found, unauthorized, error).",
	}, []string{"answer"})
	subscriptionQueryDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "servicegate",
		Subsystem: "subscription",
		Name:      "query_duration_seconds",
		Help:      "How long subscription queries to the service took, errors included.",
		Buckets:   []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	})
)

// subscriptionQuery is the answer to one subscription query; it is the
// answer label of servicegate_subscription_queries_total.
type subscriptionQuery int

const (
	queryActive       subscriptionQuery = iota // a paid subscription
	queryUnpaid                                // a subscription not paid
	queryNotFound                              // no subscription
	queryUnauthorized                          // the service refused the token
	queryError                                 // no answer: the query failed
	numSubscriptionQueries
)

var subscriptionQueryNames = [numSubscriptionQueries]string{
	queryActive:       "active",
	queryUnpaid:       "unpaid",
	queryNotFound:     "not_found",
	queryUnauthorized: "unauthorized",
	queryError:        "error",
}

// subscriptionQueryOf is the query outcome of an answer of status s.
func subscriptionQueryOf(s subscription.Status) subscriptionQuery {
	switch s {
	case subscription.Active:
		return queryActive
	case subscription.Unpaid:
		return queryUnpaid
	case subscription.NotFound:
		return queryNotFound
	case subscription.Unauthorized:
		return queryUnauthorized
	}
	return queryError
}

// subscriptionQueriesBy holds the queries_total counter of each answer,
// so that counting needs no label look-up. subscriptionQueries is
// registered by registerSubscriptionMetrics.
var subscriptionQueriesBy = newOutcomeCounters[subscriptionQuery](nil, subscriptionQueries, subscriptionQueryNames[:])

// registerSubscriptionMetrics registers the collectors on reg.
func registerSubscriptionMetrics(reg prometheus.Registerer) {
	registerCollector(reg, subscriptionCacheHits)
	registerCollector(reg, subscriptionCacheMisses)
	registerCollector(reg, subscriptionQueries)
	registerCollector(reg, subscriptionQueryDuration)
}
