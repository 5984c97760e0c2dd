package caddymodule

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegate/servicegate/token"
)

// authOutcome is what service_auth made of one request, a token.Outcome;
// it is the outcome label of servicegate_auth_requests_total.
type authOutcome int

const (
	authRemembered      = authOutcome(token.Remembered)      // a token verified before, served from the cache
	authVerified        = authOutcome(token.Verified)        // a token verified now
	authNoToken         = authOutcome(token.NoToken)         // 401 without a token
	authInvalidToken    = authOutcome(token.InvalidToken)    // 401 with a token that did not verify
	authBadRequest      = authOutcome(token.BadRequest)      // 400: two Authorization headers, a repeated query parameter
	authKeysUnavailable = authOutcome(token.KeysUnavailable) // 503: no key set could be fetched
	numAuthOutcomes     = authKeysUnavailable + 1
)

var authOutcomeNames = [numAuthOutcomes]string{
	authRemembered:      "remembered",
	authVerified:        "verified",
	authNoToken:         "no_token",
	authInvalidToken:    "invalid_token",
	authBadRequest:      "bad_request",
	authKeysUnavailable: "keys_unavailable",
}

func (o authOutcome) String() string { return authOutcomeNames[o] }

// authRequests counts service_auth's answers by outcome. It is created once
// per process and registered on every config load.
var authRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "servicegate",
	Subsystem: "auth",
	Name:      "requests_total",
	Help:      "Requests seen by service_auth, by outcome.",
}, []string{"outcome"})

// authCounters holds the counter of each outcome of service_auth.
type authCounters = outcomeCounters[authOutcome]

func newAuthCounters(reg prometheus.Registerer) authCounters {
	return newOutcomeCounters[authOutcome](reg, authRequests, authOutcomeNames[:])
}
