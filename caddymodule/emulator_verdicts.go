package caddymodule

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/emulator"
)

// emulatorVerdicts tells the emulators of this process what the gateway
// decided about each call they sent (see emulator.Verdicts): the console
// shows the reason of a refusal without the log at DEBUG.
var emulatorVerdicts = &emulator.Verdicts{}

// emulatorCall removes the emulator's correlation header from r, so that
// it never reaches the app, and when it names a call an emulator of this
// process is making, returns r holding the call, whose refusal refuse
// then records. It changes nothing of what the gateway decides.
func emulatorCall(r *http.Request) (*http.Request, *emulator.GatewayCall) {
	if _, ok := r.Header[emulator.CallHeader]; !ok {
		return r, nil
	}
	call := emulatorVerdicts.Take(r)
	if call == nil {
		return r, nil
	}
	return r.WithContext(emulator.WithGatewayCall(r.Context(), call)), call
}

// passedOn is next, recording for the emulator's call which headers the
// gateway added or changed (names only) when it passes the request on to
// the app, and what the app received and answered (see
// emulator.GatewayCall.ToApp), even when the gateway then refuses that
// answer; before is the request's header as it came in.
func passedOn(call *emulator.GatewayCall, before http.Header, next caddyhttp.Handler) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) (err error) {
		call.Passed(before, r.Header)
		w, r, end := call.ToApp(w, r)
		defer func() {
			// A reverse proxy aborts an answer cut off half-way with a
			// panic, which goes on once recorded.
			if v := recover(); v != nil {
				end(fmt.Errorf("the answer was cut off: %v", v))
				panic(v)
			}
			end(err)
		}()
		return next.ServeHTTP(w, r)
	})
}

// forgetEmulatedSubscription makes the subscription caches of this process
// forget an organization the emulator's console changed, under each of
// its keys (domain and id), and reports whether there is any such cache:
// with none, the gateway runs elsewhere and keeps its answers.
func forgetEmulatedSubscription(keys ...string) bool {
	cached := false
	subscriptionCaches.Range(func(_, _ any) bool {
		cached = true
		return false
	})
	for _, key := range keys {
		forgetLocalSubscriptions(key)
	}
	return cached
}
