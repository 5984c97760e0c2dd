package caddymodule

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegate/servicegate/version"
)

// buildInfo is servicegate_build_info{version}: always 1, it names the
// version of servicegate that runs (see package version), beside Caddy's
// own metrics.
var buildInfo = func() prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "servicegate_build_info",
		Help:        "The version of servicegate that runs; always 1.",
		ConstLabels: prometheus.Labels{"version": version.Get()},
	})
	g.Set(1)
	return g
}()

// registerCollector registers c on reg, the registry of the config being
// loaded (ctx.GetMetricsRegistry()). Collectors are created once per process
// and registered on every config load; a collector already registered there
// is the one to use. servicegate_build_info goes with the first of them, so
// the version shows wherever servicegate's metrics do.
func registerCollector[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	_ = reg.Register(buildInfo) // already registered: the same gauge
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

// outcomeCounters holds the counter of each outcome of a handler: O is the
// handler's typed outcome, a small enum whose values 0..n-1 index the
// counters. The counters are looked up once, so counting a request is an
// index and an atomic add, and a typo in an outcome is a compile error,
// not a panic at request time. The zero value counts nothing, as does an
// outcome outside the enum.
type outcomeCounters[O ~int] struct {
	byOutcome []prometheus.Counter
}

// newOutcomeCounters registers vec on reg (see registerCollector) and
// resolves the counter of each outcome o, labelled names[o]. An outcome
// whose name is "" is deliberately not counted.
func newOutcomeCounters[O ~int](reg prometheus.Registerer, vec *prometheus.CounterVec, names []string) outcomeCounters[O] {
	vec = registerCollector(reg, vec)
	c := outcomeCounters[O]{byOutcome: make([]prometheus.Counter, len(names))}
	for i, name := range names {
		if name != "" {
			c.byOutcome[i] = vec.WithLabelValues(name)
		}
	}
	return c
}

// inc counts one o. A nil c (an unprovisioned handler) counts nothing.
func (c *outcomeCounters[O]) inc(o O) {
	if c != nil && uint(o) < uint(len(c.byOutcome)) && c.byOutcome[o] != nil {
		c.byOutcome[o].Inc()
	}
}
