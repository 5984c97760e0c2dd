package caddymodule

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

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

// report counts an event of a subscription check and logs what needs
// telling. It never logs the token.
func (h *ServiceSubscription) report(ev subscription.Event, d subscription.Detail) {
	switch ev {
	case subscription.CacheHit:
		subscriptionCacheHits.Inc()
	case subscription.CacheMiss:
		subscriptionCacheMisses.Inc()
	case subscription.Answered, subscription.QueryFailed:
		subscriptionQueryDuration.Observe(d.Took.Seconds())
		query := []zap.Field{zap.String("organization", d.Organization),
			zap.Bool("keyed_by_token", d.Organization == ""), zap.String("app_identifier", h.app)}
		if ev == subscription.QueryFailed {
			subscriptionQueriesBy.inc(queryError)
			h.logger.Error("subscription query failed", append(query, zap.Error(d.Err))...)
			return
		}
		subscriptionQueriesBy.inc(subscriptionQueryOf(d.Answer.Status))
		h.logger.Debug("subscription answer", append(query, zap.Stringer("answer", d.Answer.Status),
			zap.Time("expires", d.Answer.Expires), zap.String("message", d.Answer.Message))...)
	case subscription.BaseRefused:
		h.logger.Warn("subscription query not sent: the service address is not usable for this request",
			zap.String("organization", d.Organization), zap.Error(d.Err))
	case subscription.Refused:
		if ce := h.logger.Check(zap.DebugLevel, "subscription refused"); ce != nil {
			// The app identifier the query named: a wrong one reads as
			// "no subscription" for every organization.
			ce.Write(zap.String("app_identifier", h.app), zap.String("answer", d.Answer.Status.String()), zap.String("path", d.Path))
		}
	case subscription.StaleTrusted:
		h.logger.Info("service unavailable: trusting the lapsed active subscription",
			zap.String("organization", d.Organization))
	}
}
