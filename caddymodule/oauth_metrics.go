package caddymodule

import (
	"github.com/prometheus/client_golang/prometheus"
)

// oauthEvent is a step of the sign-in flow or the end of a session; it is
// the event label of servicegate_oauth_events_total.
type oauthEvent int

const (
	oauthLoginStarted    oauthEvent = iota // a browser was sent to sign in
	oauthLoginCompleted                    // the code was exchanged, a session began
	oauthLoginDeclined                     // the user declined (access_denied)
	oauthLoginFailed                       // the service answered another error, or the exchange failed
	oauthLoginBadState                     // the callback's state was unknown, used, or another browser's
	oauthUnauthenticated                   // an API client without a session got 401
	oauthSessionRefused                    // the refresh was refused: the session ended
	oauthLogout                            // the user signed out
	numOAuthEvents
)

var oauthEventNames = [numOAuthEvents]string{
	oauthLoginStarted:    "login_started",
	oauthLoginCompleted:  "login_completed",
	oauthLoginDeclined:   "login_declined",
	oauthLoginFailed:     "login_failed",
	oauthLoginBadState:   "login_bad_state",
	oauthUnauthenticated: "unauthenticated_api",
	oauthSessionRefused:  "session_refresh_refused",
	oauthLogout:          "logout",
}

// oauthEventsTotal counts the events of all service_oauth handlers of the
// process. It is created once and registered on the metrics registry of
// every config load.
var oauthEventsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "servicegate",
	Subsystem: "oauth",
	Name:      "events_total",
	Help:      "Sign-in flow steps and session ends seen by service_oauth, by event.",
}, []string{"event"})

// oauthEvents holds the counter of each event.
type oauthEvents = outcomeCounters[oauthEvent]

func newOAuthEvents(reg prometheus.Registerer) oauthEvents {
	return newOutcomeCounters[oauthEvent](reg, oauthEventsTotal, oauthEventNames[:])
}
