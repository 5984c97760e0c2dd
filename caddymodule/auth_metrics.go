package caddymodule

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of service_auth, the values of the outcome label.
const (
	authRemembered      = "remembered"       // a token verified before, served from the cache
	authVerified        = "verified"         // a token verified now
	authNoToken         = "no_token"         // 401 without a token
	authInvalidToken    = "invalid_token"    // 401 with a token that did not verify
	authBadRequest      = "bad_request"      // 400: two Authorization headers, a repeated query parameter
	authKeysUnavailable = "keys_unavailable" // 503: no key set could be fetched
)

// authRequests counts service_auth's answers by outcome. It is created once
// per process and registered on every config load.
var authRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "servicegate",
	Subsystem: "auth",
	Name:      "requests_total",
	Help:      "Requests seen by service_auth, by outcome.",
}, []string{"outcome"})

// authCounters are the outcome counters resolved once, so that counting a
// request on the hot path is one atomic add.
type authCounters struct {
	remembered, verified, noToken, invalidToken, badRequest, keysUnavailable prometheus.Counter
}

func newAuthCounters(vec *prometheus.CounterVec) authCounters {
	return authCounters{
		remembered:      vec.WithLabelValues(authRemembered),
		verified:        vec.WithLabelValues(authVerified),
		noToken:         vec.WithLabelValues(authNoToken),
		invalidToken:    vec.WithLabelValues(authInvalidToken),
		badRequest:      vec.WithLabelValues(authBadRequest),
		keysUnavailable: vec.WithLabelValues(authKeysUnavailable),
	}
}
