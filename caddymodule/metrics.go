package caddymodule

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// registerCollector registers c on reg, the registry of the config being
// loaded (ctx.GetMetricsRegistry()). Collectors are created once per process
// and registered on every config load; a collector already registered there
// is the one to use.
func registerCollector[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
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
