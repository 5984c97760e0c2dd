package installations

import (
	"net/netip"
	"testing"
	"time"
)

// TestBudgetSaysWhichIsSpentAndSparesExemptSources: a refusal names the
// budget spent, the source's or the overall one; sources in an exempt
// prefix, with or without a port, IPv4 in IPv6 or not, spend nothing and
// are never refused, even with the overall budget spent.
func TestBudgetSaysWhichIsSpentAndSparesExemptSources(t *testing.T) {
	c := newClock()
	b := NewBudget(2, 5, time.Minute, c.now).Exempt(netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::1/128"))
	for range 2 {
		if ok, _, _ := b.Take("198.51.100.1"); !ok {
			t.Fatal("a source within its budget was refused")
		}
	}
	if ok, retry, spent := b.Take("198.51.100.1:4000"); ok || spent != SpentSource || retry < time.Second {
		t.Fatalf("a spent source: %v %v %v", ok, retry, spent)
	}
	for _, s := range []string{"198.51.100.2", "198.51.100.2", "198.51.100.3"} {
		if ok, _, _ := b.Take(s); !ok {
			t.Fatalf("%s refused within the overall budget", s)
		}
	}
	if ok, _, spent := b.Take("198.51.100.4"); ok || spent != SpentOverall {
		t.Fatalf("a fresh source with the overall budget spent: %v %v", ok, spent)
	}
	for _, s := range []string{"192.0.2.7", "192.0.2.7:443", "[::ffff:192.0.2.9]:80", "2001:db8::1", "[2001:db8::1]:9"} {
		for range 20 {
			if ok, _, spent := b.Take(s); !ok || spent != SpentNone {
				t.Fatalf("exempt source %s refused: %v", s, spent)
			}
			b.Refund(s)
		}
	}
	if ok, _, _ := b.Take("2001:db8::2"); ok {
		t.Fatal("a source outside the exempt prefixes spends no budget")
	}
	for _, s := range []string{"", "not an address", "192.0.2.7:notaport"} {
		if b.exempted(s) {
			t.Errorf("%q exempted", s)
		}
	}
}

// FuzzBudgetSource: any source a request may name is taken and refunded
// without a panic; a source is exempt only when it is an address (with or
// without a port) in an exempt prefix, and an exempt one is never refused.
func FuzzBudgetSource(f *testing.F) {
	for _, s := range []string{"192.0.2.7", "192.0.2.7:443", "[::ffff:192.0.2.9]:80", "2001:db8::1", "[2001:db8::1]:9",
		"fe80::1%eth0", "[fe80::1%eth0]:80", "", ":", "[]:1", "192.0.2.256", "192.0.2.7:99999", "not an address", "198.51.100.1"} {
		f.Add(s)
	}
	prefixes := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/32")}
	f.Fuzz(func(t *testing.T, source string) {
		b := NewBudget(1, 1, time.Minute, nil).Exempt(prefixes...)
		exempt := b.exempted(source)
		if a, ok := sourceAddr(source); exempt && (!ok || !(prefixes[0].Contains(a) || prefixes[1].Contains(a))) {
			t.Fatalf("%q exempted, as %v %v", source, a, ok)
		}
		for range 3 {
			ok, _, spent := b.Take(source)
			if exempt && (!ok || spent != SpentNone) {
				t.Fatalf("exempt %q refused", source)
			}
			b.Refund(source)
		}
	})
}
