package emulator

import (
	"context"
	"crypto/rand"
	"net/http"
	"slices"
	"sync"
)

// CallHeader carries, on each request the emulator sends, an id that a
// gateway in the same process uses to tell the emulator what it decided
// about the request (see Verdicts). The gateway removes it before anything
// reaches the app.
const CallHeader = "X-Servicegate-Emulator-Call"

// Outcomes of the gateway's verdict on a call.
const (
	OutcomeAccepted = "accepted"
	OutcomeRefused  = "refused"
	OutcomeUnknown  = "unknown"
)

// Verdict is what the gateway decided about one call: accepted, with the
// names of the headers it added or changed for the app, or refused, with
// the reason it logs at DEBUG.
type Verdict struct {
	// Outcome is OutcomeAccepted, OutcomeRefused or OutcomeUnknown.
	Outcome string `json:"outcome"`
	// Reason is why the call was refused.
	Reason string `json:"reason"`
	// Added are the names of the headers the gateway added for the app,
	// when it passed the call on.
	Added []string `json:"added,omitempty"`
	// From says where the verdict comes from: "gateway" (the gateway
	// said so itself) or "answer" (read from the answer's
	// error.message).
	From string `json:"from,omitempty"`
}

// Verdicts correlates the emulator's calls with the decisions of a
// gateway that runs in the same process: the emulator registers an id
// for each call it sends (in CallHeader), the gateway looks the id up and
// records what it decided, and the emulator reads it once the answer has
// come. Only ids the emulator registered are recorded, so a client that
// sends the header itself records nothing, and what the gateway decides
// does not depend on it. The zero value is ready to use; a Verdicts is
// safe for concurrent use.
type Verdicts struct {
	mu      sync.Mutex
	pending map[string]*GatewayCall
}

// GatewayCall is one registered call as the gateway sees it.
type GatewayCall struct {
	v       *Verdicts
	seen    bool
	refused bool
	reason  string
	added   []string
	// app records what the app received and answered (see ToApp).
	app *appRecorder
}

// expect registers a call and returns its id.
func (v *Verdicts) expect() (string, *GatewayCall) {
	id := rand.Text()
	c := &GatewayCall{v: v}
	v.mu.Lock()
	if v.pending == nil {
		v.pending = make(map[string]*GatewayCall)
	}
	v.pending[id] = c
	v.mu.Unlock()
	return id, c
}

// done ends a call's registration and returns what the gateway decided,
// and what the app received and answered when the gateway handed the
// call on (else nil): ok is false when the gateway did not see the call.
func (v *Verdicts) done(id string, c *GatewayCall) (Verdict, *appSide, bool) {
	v.mu.Lock()
	delete(v.pending, id)
	seen, refused, reason, added, app := c.seen, c.refused, c.reason, c.added, c.app
	v.mu.Unlock()
	if !seen {
		return Verdict{}, nil, false
	}
	var side *appSide
	if app != nil {
		side = app.snapshot()
	}
	if refused {
		return Verdict{Outcome: OutcomeRefused, Reason: reason, From: "gateway"}, side, true
	}
	return Verdict{Outcome: OutcomeAccepted, Added: added, From: "gateway"}, side, true
}

// Take removes CallHeader from r and, when it names a call the emulator
// registered, marks the call seen by the gateway and returns it (else
// nil). The gateway calls it first thing.
func (v *Verdicts) Take(r *http.Request) *GatewayCall {
	ids := r.Header[CallHeader]
	if ids == nil {
		return nil
	}
	delete(r.Header, CallHeader)
	if len(ids) != 1 {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	c := v.pending[ids[0]]
	if c != nil {
		c.seen = true
	}
	return c
}

// Refused records that the gateway refused the call, and why. The first
// reason recorded is kept: the most precise one is written first.
func (c *GatewayCall) Refused(reason string) {
	if c == nil {
		return
	}
	c.v.mu.Lock()
	defer c.v.mu.Unlock()
	if !c.refused {
		c.refused, c.reason = true, reason
	}
}

// Passed records that the gateway passed the call on to the app with the
// header before, as it came in, changed into after: the names of the
// headers added or changed are kept, never their values (nor the body's
// length).
func (c *GatewayCall) Passed(before, after http.Header) {
	if c == nil {
		return
	}
	var added []string
	for name, values := range after {
		// The body's framing follows the body, which the gateway may write.
		if name == "Content-Length" || name == "Transfer-Encoding" {
			continue
		}
		if !slices.Equal(before[name], values) {
			added = append(added, name)
		}
	}
	slices.Sort(added)
	c.v.mu.Lock()
	c.added = added
	c.v.mu.Unlock()
}

type gatewayCallKey struct{}

// WithGatewayCall returns ctx holding c, for the gateway's handlers down
// the chain (see GatewayCallFrom).
func WithGatewayCall(ctx context.Context, c *GatewayCall) context.Context {
	return context.WithValue(ctx, gatewayCallKey{}, c)
}

// GatewayCallFrom is the call ctx holds, or nil.
func GatewayCallFrom(ctx context.Context) *GatewayCall {
	c, _ := ctx.Value(gatewayCallKey{}).(*GatewayCall)
	return c
}
