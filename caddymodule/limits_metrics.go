package caddymodule

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegate/servicegate/modulecall"
)

// limitsOutcomeNames are the outcome labels of
// servicegate_limits_requests_total, one per outcome of a module call
// (modulecall.Outcome); each request counts one.
var limitsOutcomeNames = func() (names [modulecall.NumOutcomes]string) {
	for o := range names {
		names[o] = modulecall.Outcome(o).String()
	}
	return names
}()

// limitsRequests is created once per process and registered on the
// registry of every config load.
var limitsRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "servicegate",
	Subsystem: "limits",
	Name:      "requests_total",
	Help:      "Requests through service_limits, by outcome.",
}, []string{"outcome"})

// limitsCounters holds the counter of each outcome of service_limits; a
// nil *limitsCounters (an unprovisioned handler) counts nothing.
type limitsCounters = outcomeCounters[modulecall.Outcome]

func registerLimitsMetrics(reg prometheus.Registerer) *limitsCounters {
	c := newOutcomeCounters[modulecall.Outcome](reg, limitsRequests, limitsOutcomeNames[:])
	return &c
}
