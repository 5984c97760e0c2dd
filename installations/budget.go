package installations

import (
	"net/netip"
	"sync"
	"time"
)

// Defaults of a Budget: how many unproved lifecycle calls (calls that made
// the gateway ask the service, and that the service did not vouch for) a
// source address may make, and all sources together, per window.
const (
	DefaultBudgetPerSource = 10
	DefaultBudgetOverall   = 100
	DefaultBudgetWindow    = time.Minute
)

// maxBudgetSources bounds how many source addresses a Budget remembers; a
// source beyond it is held to the overall budget alone once the sources
// whose budget is whole again are forgotten.
const maxBudgetSources = 10000

// A Budget limits the requests that unproved lifecycle calls make the
// gateway send to the service, so that forged calls cannot make it ask
// without bound with the app's client credentials (which the service's
// abuse controls could lock out, and every organization's token renewal
// with them). A call takes one unit before it asks the service and gives
// it back when the service vouched for it: the service's own calls spend
// nothing. Each source has PerSource units and all sources together
// Overall, each filling up again evenly over Window. Sources in the
// exempt prefixes (the service's published addresses) spend none and are
// never refused, so that forged calls from elsewhere cannot spend the
// overall budget the service's own calls need. A Budget is safe for
// concurrent use.
type Budget struct {
	perSource, overall float64
	window             time.Duration
	now                func() time.Time
	exempt             []netip.Prefix

	mu      sync.Mutex
	sources map[string]*bucket
	all     bucket
}

// bucket is what is left of a budget: level units at a moment.
type bucket struct {
	level float64
	at    time.Time
}

// NewBudget returns a Budget of perSource units per source and overall
// units in all, filling up over window; zero values take the defaults.
// now is the clock (nil: time.Now).
func NewBudget(perSource, overall int, window time.Duration, now func() time.Time) *Budget {
	if perSource <= 0 {
		perSource = DefaultBudgetPerSource
	}
	if overall <= 0 {
		overall = DefaultBudgetOverall
	}
	if window <= 0 {
		window = DefaultBudgetWindow
	}
	if now == nil {
		now = time.Now
	}
	b := &Budget{perSource: float64(perSource), overall: float64(overall), window: window, now: now,
		sources: make(map[string]*bucket)}
	b.all = bucket{level: b.overall, at: now()}
	return b
}

// fill brings k up to date at now, for a budget of size units.
func (b *Budget) fill(k *bucket, size float64, now time.Time) {
	if d := now.Sub(k.at); d > 0 {
		k.level = min(size, k.level+size*float64(d)/float64(b.window))
	}
	k.at = now
}

// wait is how long until k holds one unit, for a budget of size units.
func (b *Budget) wait(k *bucket, size float64) time.Duration {
	return time.Duration((1 - k.level) / size * float64(b.window))
}

// Exempt makes the sources in prefixes spend no budget, and returns b.
// Call it before the Budget is used.
func (b *Budget) Exempt(prefixes ...netip.Prefix) *Budget {
	for _, p := range prefixes {
		b.exempt = append(b.exempt, p.Masked())
	}
	return b
}

// sourceAddr is the address of source, with or without its port, IPv4
// in IPv6 unmapped: a source's connections share its budget whatever
// their ports.
func sourceAddr(source string) (netip.Addr, bool) {
	addr, err := netip.ParseAddr(source)
	if err != nil {
		ap, err := netip.ParseAddrPort(source)
		if err != nil {
			return netip.Addr{}, false
		}
		addr = ap.Addr()
	}
	return addr.Unmap().WithZone(""), true
}

// exempted tells whether source (an address, with or without its port)
// is in an exempt prefix.
func (b *Budget) exempted(source string) bool {
	if len(b.exempt) == 0 {
		return false
	}
	addr, ok := sourceAddr(source)
	if !ok {
		return false
	}
	for _, p := range b.exempt {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// Spent names the budget a refused call found spent.
type Spent int

// The budgets a call may find spent.
const (
	// SpentNone: the call took its unit, or is exempt.
	SpentNone Spent = iota
	// SpentSource: the budget of the call's source address.
	SpentSource
	// SpentOverall: the budget of all sources together.
	SpentOverall
)

// Take takes one unit for a call from source. When source's budget or
// the overall one is spent it takes nothing, says which is spent, and
// how long until a unit is back. A source in an exempt prefix takes
// nothing and is never refused.
func (b *Budget) Take(source string) (ok bool, retry time.Duration, spent Spent) {
	if b.exempted(source) {
		return true, 0, SpentNone
	}
	if a, ok := sourceAddr(source); ok {
		source = a.String()
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fill(&b.all, b.overall, now)
	k := b.sources[source]
	if k == nil {
		if len(b.sources) >= maxBudgetSources {
			b.forgetWhole(now)
		}
		k = &bucket{level: b.perSource, at: now}
		if len(b.sources) < maxBudgetSources {
			b.sources[source] = k
		}
	}
	b.fill(k, b.perSource, now)
	switch {
	case k.level < 1:
		return false, max(b.wait(k, b.perSource), time.Second), SpentSource
	case b.all.level < 1:
		return false, max(b.wait(&b.all, b.overall), time.Second), SpentOverall
	}
	k.level--
	b.all.level--
	return true, 0, SpentNone
}

// Refund gives back the unit a call from source took: the service
// vouched for it.
func (b *Budget) Refund(source string) {
	if b.exempted(source) {
		return // it took none
	}
	if a, ok := sourceAddr(source); ok {
		source = a.String()
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fill(&b.all, b.overall, now)
	b.all.level = min(b.overall, b.all.level+1)
	if k := b.sources[source]; k != nil {
		b.fill(k, b.perSource, now)
		k.level = min(b.perSource, k.level+1)
	}
}

// forgetWhole forgets the sources whose budget is whole again.
func (b *Budget) forgetWhole(now time.Time) {
	for s, k := range b.sources {
		if b.fill(k, b.perSource, now); k.level >= b.perSource {
			delete(b.sources, s)
		}
	}
}
