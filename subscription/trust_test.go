package subscription

import (
	"testing"
	"time"
)

func TestPolicyTrustUntil(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	p := Policy{NegativeTTL: 30 * time.Second, MaxAge: time.Hour}
	for _, tc := range []struct {
		name  string
		a     Answer
		p     Policy
		until time.Time // zero: not kept
	}{
		{"active until expires", Answer{Status: Active, Expires: now.Add(time.Minute)}, p, now.Add(time.Minute)},
		{"active capped by max_age", Answer{Status: Active, Expires: now.Add(48 * time.Hour)}, p, now.Add(time.Hour)},
		{"active without max_age", Answer{Status: Active, Expires: now.Add(48 * time.Hour)}, Policy{}, now.Add(48 * time.Hour)},
		{"lapsed active", Answer{Status: Active, Expires: now}, p, time.Time{}},
		{"unpaid", Answer{Status: Unpaid}, p, now.Add(30 * time.Second)},
		{"not found", Answer{Status: NotFound}, p, now.Add(30 * time.Second)},
		{"negative without negative_ttl", Answer{Status: Unpaid}, Policy{}, time.Time{}},
		{"unauthorized", Answer{Status: Unauthorized}, p, time.Time{}},
		{"shared answer keeps its end", Answer{Status: Unpaid, TrustedUntil: now.Add(5 * time.Second)}, p, now.Add(5 * time.Second)},
		{"shared active keeps its end", Answer{Status: Active, Expires: now.Add(48 * time.Hour), TrustedUntil: now.Add(time.Minute)}, p, now.Add(time.Minute)},
		{"a later end does not extend", Answer{Status: Unpaid, TrustedUntil: now.Add(time.Hour)}, p, now.Add(30 * time.Second)},
		{"an end already passed", Answer{Status: Unpaid, TrustedUntil: now}, p, time.Time{}},
	} {
		until, ok := tc.p.TrustUntil(tc.a, now)
		if ok != !tc.until.IsZero() || ok && !until.Equal(tc.until) {
			t.Errorf("%s: %v %v, want %v", tc.name, until, ok, tc.until)
		}
	}
}
