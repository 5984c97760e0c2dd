package caddymodule

import (
	"github.com/prometheus/client_golang/prometheus"
)

// webhookOutcome is what became of one delivery; it is the outcome label
// of servicegate_webhook_deliveries_total.
type webhookOutcome int

const (
	outcomeAccepted         webhookOutcome = iota // passed to the app
	outcomeTooLarge                               // 413: over max_size
	outcomeMissingSignature                       // 401: no X-Service-Signature
	outcomeBadSignature                           // 401: malformed, repeated, or matching no secret
	outcomeForbidden                              // 403: organization headers, module key or event not allowed
	outcomeBadBody                                // 400: not {"events":[…]} while events are checked
	outcomeUnreadable                             // 400: the body could not be read in full
	outcomeSlowBody                               // 408: the body did not arrive within read_timeout
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	outcomeAccepted:         "accepted",
	outcomeTooLarge:         "too_large",
	outcomeMissingSignature: "missing_signature",
	outcomeBadSignature:     "bad_signature",
	outcomeForbidden:        "forbidden",
	outcomeBadBody:          "bad_body",
	outcomeUnreadable:       "unreadable",
	outcomeSlowBody:         "slow_body",
}

func (o webhookOutcome) String() string { return outcomeNames[o] }

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
type webhookOutcomes = outcomeCounters[webhookOutcome]

func newWebhookOutcomes(reg prometheus.Registerer) webhookOutcomes {
	return newOutcomeCounters[webhookOutcome](reg, webhookDeliveries, outcomeNames[:])
}
