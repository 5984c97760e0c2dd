package caddymodule

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegate/servicegate/oauth"
)

// oauthEventNames are the event labels of servicegate_oauth_events_total,
// by event of the sign-in flow; events without a name are logged, not
// counted.
var oauthEventNames = [oauth.NumEvents]string{
	oauth.LoginStarted:    "login_started",
	oauth.LoginCompleted:  "login_completed",
	oauth.LoginDeclined:   "login_declined",
	oauth.LoginFailed:     "login_failed",
	oauth.LoginBadState:   "login_bad_state",
	oauth.Unauthenticated: "unauthenticated_api",
	oauth.SessionEnded:    "session_refresh_refused",
	oauth.Logout:          "logout",
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

// oauthEvents holds the counter of each counted event, looked up once.
type oauthEvents = outcomeCounters[oauth.Event]

func newOAuthEvents(reg prometheus.Registerer) oauthEvents {
	return newOutcomeCounters[oauth.Event](reg, oauthEventsTotal, oauthEventNames[:])
}
