package caddymodule

import "github.com/prometheus/client_golang/prometheus"

// limitsOutcome is what became of one request through service_limits; it
// is the outcome label of servicegate_limits_requests_total. Each request
// counts one.
type limitsOutcome int

const (
	outcomeOK                 limitsOutcome = iota // the app's answer was sent
	outcomeRequestTooLarge                         // 413
	outcomeRequestTimeout                          // 408: the body did not arrive in time
	outcomeResponseTooLarge                        // 502
	outcomeResponseIncomplete                      // 502: the app's answer was cut off
	outcomeTimeout                                 // 504
	outcomeContract                                // 502 from the exchange check
	outcomeBadJob                                  // 400: the job breaks the module contract
	outcomeInlineFailed                            // a payload sent by URL could not be inlined
	outcomeSpilled                                 // the app's answer was sent with its payloads by URL
	outcomeSpillDownload                           // a payload was downloaded by its URL
	outcomeSpillRefused                            // 403: a payload URL invalid, used or expired
	outcomeSpillUnavailable                        // 503: the payloads in Redis could not be reached
	outcomeClientGone                              // the client left before the answer
	outcomeError                                   // an error passed on to Caddy (e.g. the app is unreachable)
	numLimitsOutcomes
)

var limitsOutcomeNames = [numLimitsOutcomes]string{
	outcomeOK:                 "ok",
	outcomeRequestTooLarge:    "request_too_large",
	outcomeRequestTimeout:     "request_timeout",
	outcomeResponseTooLarge:   "response_too_large",
	outcomeResponseIncomplete: "response_incomplete",
	outcomeTimeout:            "timeout",
	outcomeContract:           "contract_violation",
	outcomeBadJob:             "bad_job",
	outcomeInlineFailed:       "inline_failed",
	outcomeSpilled:            "spilled",
	outcomeSpillDownload:      "spill_download",
	outcomeSpillRefused:       "spill_refused",
	outcomeSpillUnavailable:   "spill_unavailable",
	outcomeClientGone:         "client_gone",
	outcomeError:              "error",
}

func (o limitsOutcome) String() string { return limitsOutcomeNames[o] }

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
type limitsCounters = outcomeCounters[limitsOutcome]

func registerLimitsMetrics(reg prometheus.Registerer) *limitsCounters {
	c := newOutcomeCounters[limitsOutcome](reg, limitsRequests, limitsOutcomeNames[:])
	return &c
}
