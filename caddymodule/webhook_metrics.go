package caddymodule

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegate/servicegate/webhook"
)

// webhookOutcomeNames are the outcome labels of
// servicegate_webhook_deliveries_total, one per outcome of a delivery
// (webhook.Outcome); each delivery counts one.
var webhookOutcomeNames = func() (names [webhook.NumOutcomes]string) {
	for o := range names {
		names[o] = webhook.Outcome(o).String()
	}
	return names
}()

// webhookDeliveries counts deliveries by outcome, for all service_webhook
// handlers of the process. It is created once and registered on the
// metrics registry of every config load.
var webhookDeliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "servicegate",
	Subsystem: "webhook",
	Name:      "deliveries_total",
	Help:      "Webhook deliveries seen by service_webhook, by outcome.",
}, []string{"outcome"})

// webhookOutcomes holds the counter of each outcome.
type webhookOutcomes = outcomeCounters[webhook.Outcome]

func newWebhookOutcomes(reg prometheus.Registerer) webhookOutcomes {
	return newOutcomeCounters[webhook.Outcome](reg, webhookDeliveries, webhookOutcomeNames[:])
}
