package caddymodule

import "github.com/prometheus/client_golang/prometheus"

// The outcomes service_limits counts, one per request.
const (
	outcomeOK                 = "ok"                  // the app's answer was sent
	outcomeRequestTooLarge    = "request_too_large"   // 413
	outcomeRequestTimeout     = "request_timeout"     // 408: the body did not arrive in time
	outcomeResponseTooLarge   = "response_too_large"  // 502
	outcomeResponseIncomplete = "response_incomplete" // 502: the app's answer was cut off
	outcomeTimeout            = "timeout"             // 504
	outcomeContract           = "contract_violation"  // 502 from the exchange check
	outcomeBadJob             = "bad_job"             // 400: the job breaks the module contract
	outcomeInlineFailed       = "inline_failed"       // a payload sent by URL could not be inlined
	outcomeSpilled            = "spilled"             // the app's answer was sent with its payloads by URL
	outcomeSpillDownload      = "spill_download"      // a payload was downloaded by its URL
	outcomeSpillRefused       = "spill_refused"       // 403: a payload URL invalid, used or expired
	outcomeClientGone         = "client_gone"         // the client left before the answer
	outcomeError              = "error"               // an error passed on to Caddy (e.g. the app is unreachable)
)

// limitsRequests is created once per process and registered on the
// registry of every config load.
var limitsRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "servicegate",
	Subsystem: "limits",
	Name:      "requests_total",
	Help:      "Requests through service_limits, by outcome.",
}, []string{"outcome"})

// limitsCounters holds the counter of each outcome, looked up once so that
// counting costs no label look-up on the hot path.
type limitsCounters struct {
	byOutcome map[string]prometheus.Counter
}

func registerLimitsMetrics(reg prometheus.Registerer) *limitsCounters {
	vec := registerCollector(reg, limitsRequests)
	c := &limitsCounters{byOutcome: make(map[string]prometheus.Counter)}
	for _, o := range []string{
		outcomeOK, outcomeRequestTooLarge, outcomeRequestTimeout, outcomeResponseTooLarge,
		outcomeResponseIncomplete, outcomeTimeout, outcomeContract, outcomeClientGone, outcomeError,
		outcomeBadJob, outcomeInlineFailed, outcomeSpilled, outcomeSpillDownload, outcomeSpillRefused,
	} {
		c.byOutcome[o] = vec.WithLabelValues(o)
	}
	return c
}

// inc counts one request with outcome. A nil c (an unprovisioned handler)
// counts nothing.
func (c *limitsCounters) inc(outcome string) {
	if c != nil {
		c.byOutcome[outcome].Inc()
	}
}
