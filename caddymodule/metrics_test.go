package caddymodule

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/servicegate/servicegate/modulecall"
	"github.com/servicegate/servicegate/oauth"
)

// outcomeMetric is one handler's outcome counter, as the handler builds it.
type outcomeMetric struct {
	handler string
	vec     *prometheus.CounterVec
	names   []string
	// count builds the handler's counters on reg and counts outcome i.
	count func(reg prometheus.Registerer, i int)
	// uncounted are the outcomes deliberately left without a label.
	uncounted map[int]bool
}

func outcomeMetricOf[O ~int](handler string, vec *prometheus.CounterVec, names []string, build func(prometheus.Registerer) outcomeCounters[O], uncounted ...O) outcomeMetric {
	m := outcomeMetric{handler: handler, vec: vec, names: names, uncounted: map[int]bool{}}
	m.count = func(reg prometheus.Registerer, i int) {
		c := build(reg)
		c.inc(O(i))
	}
	for _, o := range uncounted {
		m.uncounted[int(o)] = true
	}
	return m
}

// TestOutcomeCountersOfEveryHandler: every outcome of every handler has a
// label of its own, and counting an outcome adds one to that label only.
func TestOutcomeCountersOfEveryHandler(t *testing.T) {
	metrics := []outcomeMetric{
		outcomeMetricOf("service_auth", authRequests, authOutcomeNames[:], newAuthCounters),
		outcomeMetricOf("service_limits", limitsRequests, limitsOutcomeNames[:],
			func(reg prometheus.Registerer) limitsCounters { return *registerLimitsMetrics(reg) }),
		outcomeMetricOf("service_oauth", oauthEventsTotal, oauthEventNames[:], newOAuthEvents, oauth.SessionUnavailable, oauth.LoginUnavailable),
		outcomeMetricOf("service_webhook", webhookDeliveries, webhookOutcomeNames[:], newWebhookOutcomes),
		outcomeMetricOf("service_subscription", subscriptionQueries, subscriptionQueryNames[:],
			func(reg prometheus.Registerer) outcomeCounters[subscriptionQuery] {
				registerSubscriptionMetrics(reg)
				return subscriptionQueriesBy
			}),
	}
	for _, m := range metrics {
		t.Run(m.handler, func(t *testing.T) {
			seen := map[string]bool{}
			for i, name := range m.names {
				if (name == "") != m.uncounted[i] {
					t.Fatalf("outcome %d has the label %q; left uncounted: %v", i, name, m.uncounted[i])
				}
				if name == "" {
					continue
				}
				if seen[name] {
					t.Fatalf("label %q names two outcomes", name)
				}
				seen[name] = true
			}
			counts := func() []float64 {
				c := make([]float64, len(m.names))
				for i, name := range m.names {
					if name != "" {
						c[i] = testutil.ToFloat64(m.vec.WithLabelValues(name))
					}
				}
				return c
			}
			for i := range m.names {
				reg := prometheus.NewRegistry()
				before := counts()
				m.count(reg, i)
				after := counts()
				for j := range m.names {
					want := before[j]
					if j == i && !m.uncounted[i] {
						want++
					}
					if after[j] != want {
						t.Errorf("counting %q: %q went from %v to %v", m.names[i], m.names[j], before[j], after[j])
					}
				}
				n, err := testutil.GatherAndCount(reg)
				// servicegate_build_info comes with every servicegate collector.
				if bi, _ := testutil.GatherAndCount(reg, "servicegate_build_info"); bi != 1 {
					t.Errorf("counting %q: the config's registry holds %d servicegate_build_info series, want 1", m.names[i], bi)
				} else {
					n--
				}
				if err != nil || (n != len(m.names)-len(m.uncounted) && m.handler != "service_subscription") {
					t.Errorf("counting %q: the config's registry holds %d series (%v), want the %d outcomes", m.names[i], n, err, len(m.names))
				}
			}
			// An outcome outside the enum counts nothing and does not panic.
			before := counts()
			m.count(prometheus.NewRegistry(), len(m.names))
			for j, v := range counts() {
				if v != before[j] {
					t.Errorf("an outcome outside the enum counted %q", m.names[j])
				}
			}
		})
	}
	var unprovisioned *limitsCounters
	unprovisioned.inc(modulecall.OK) // must not panic
}
