package subscription

import "time"

// TrustUntil returns until when an answer received at now is trusted under
// p: an Active answer until its expires date, capped by MaxAge; Unpaid and
// NotFound answers for NegativeTTL. ok is false for answers that are not
// kept at all: Unauthorized ones (they say something about one token, not
// about the organization), Active ones whose expires date has passed, and
// negative ones when NegativeTTL is zero. a.TrustedUntil, when set, caps
// the result.
func (p Policy) TrustUntil(a Answer, now time.Time) (until time.Time, ok bool) {
	until, ok = p.trustUntil(a, now)
	if ok && !a.TrustedUntil.IsZero() && a.TrustedUntil.Before(until) {
		until = a.TrustedUntil
		ok = now.Before(until)
	}
	return until, ok
}

// trustUntil is TrustUntil without the cap of a.TrustedUntil.
func (p Policy) trustUntil(a Answer, now time.Time) (until time.Time, ok bool) {
	switch a.Status {
	case Active:
		if !a.ActiveAt(now) {
			return time.Time{}, false
		}
		until = a.Expires
		if p.MaxAge > 0 && now.Add(p.MaxAge).Before(until) {
			until = now.Add(p.MaxAge)
		}
		return until, true
	case Unpaid, NotFound:
		if p.NegativeTTL <= 0 {
			return time.Time{}, false
		}
		return now.Add(p.NegativeTTL), true
	}
	return time.Time{}, false
}
