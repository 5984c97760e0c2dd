package safehttp

import (
	"net/netip"
	"testing"
)

// The check is called directly: nothing is dialled.
func TestPublicAddr(t *testing.T) {
	tests := []struct {
		addr string
		want bool
		why  string
	}{
		{"93.184.216.34", true, "public IPv4"},
		{"8.8.8.8", true, "public IPv4"},
		{"2606:2800:220:1::1", true, "public IPv6"},
		{"2a00:1450:4001:80b::200e", true, "public IPv6"},
		{"::ffff:93.184.216.34", true, "IPv4-mapped public address, checked as IPv4"},

		{"0.0.0.0", false, "this network"},
		{"0.1.2.3", false, "this network"},
		{"10.1.2.3", false, "private"},
		{"100.64.0.1", false, "carrier-grade NAT"},
		{"100.127.255.255", false, "carrier-grade NAT, last"},
		{"127.0.0.1", false, "loopback"},
		{"127.255.255.254", false, "loopback"},
		{"169.254.169.254", false, "link local, cloud metadata"},
		{"172.16.0.1", false, "private"},
		{"172.31.255.255", false, "private, last"},
		{"192.0.0.1", false, "IETF protocol assignments"},
		{"192.0.0.170", false, "NAT64 discovery"},
		{"192.0.2.1", false, "TEST-NET-1"},
		{"192.31.196.1", false, "AS112-v4"},
		{"192.52.193.1", false, "AMT"},
		{"192.88.99.1", false, "6to4 relay anycast"},
		{"192.168.1.1", false, "private"},
		{"192.175.48.1", false, "AS112 direct delegation"},
		{"198.18.0.1", false, "benchmarking"},
		{"198.19.255.255", false, "benchmarking, last"},
		{"198.51.100.7", false, "TEST-NET-2"},
		{"203.0.113.9", false, "TEST-NET-3"},
		{"224.0.0.1", false, "multicast"},
		{"239.255.255.250", false, "multicast"},
		{"240.0.0.1", false, "reserved"},
		{"255.255.255.255", false, "limited broadcast"},
		{"::ffff:127.0.0.1", false, "IPv4-mapped loopback"},
		{"::ffff:10.0.0.1", false, "IPv4-mapped private"},
		{"::ffff:240.0.0.1", false, "IPv4-mapped reserved"},

		{"::", false, "unspecified"},
		{"::1", false, "loopback"},
		{"::7f00:1", false, "IPv4-compatible"},
		{"::5db8:d822", false, "IPv4-compatible of a public address"},
		{"64:ff9b::7f00:1", false, "NAT64 of loopback"},
		{"64:ff9b::5db8:d822", false, "NAT64 of a public address: refused outright"},
		{"64:ff9b:1::a00:1", false, "local-use NAT64"},
		{"100::1", false, "discard-only"},
		{"100:0:0:1::1", false, "dummy prefix"},
		{"2001::1", false, "Teredo"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", false, "Teredo"},
		{"2001:1::1", false, "IETF protocol assignments"},
		{"2001:2::1", false, "benchmarking"},
		{"2001:10::1", false, "ORCHID"},
		{"2001:20::1", false, "ORCHIDv2"},
		{"2001:db8::1", false, "documentation"},
		{"2002:7f00:1::1", false, "6to4 of loopback"},
		{"2002:5db8:d822::1", false, "6to4 of a public address: refused outright"},
		{"2620:4f:8000::1", false, "AS112 direct delegation"},
		{"3fff::1", false, "documentation"},
		{"4000::1", false, "outside global unicast"},
		{"5f00::1", false, "segment routing"},
		{"fc00::1", false, "unique local"},
		{"fd00::1", false, "unique local"},
		{"fe80::1", false, "link local"},
		{"fe80::1%eth0", false, "link local with a zone"},
		{"fec0::1", false, "site local"},
		{"ff02::1", false, "multicast"},
	}
	for _, tt := range tests {
		if got := PublicAddr(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("PublicAddr(%s) = %v, want %v (%s)", tt.addr, got, tt.want, tt.why)
		}
	}
	if PublicAddr(netip.Addr{}) {
		t.Error("the zero Addr is public")
	}
}

// Every range of the lists is refused at its first and last address, and a
// neighbour just outside is judged on its own.
func TestPublicAddrRangeEdges(t *testing.T) {
	for _, list := range [][]netip.Prefix{specialIPv4, specialIPv6} {
		for _, p := range list {
			first := p.Masked().Addr()
			b := first.AsSlice()
			for i := p.Bits(); i < len(b)*8; i++ {
				b[i/8] |= 0x80 >> (i % 8)
			}
			last, _ := netip.AddrFromSlice(b)
			if !p.Contains(last) || p.Contains(last.Next()) {
				t.Fatalf("last address of %s computed as %s", p, last)
			}
			for _, a := range []netip.Addr{first, last} {
				if PublicAddr(a) {
					t.Errorf("%s of %s is public", a, p)
				}
				if a.Is4() && PublicAddr(netip.AddrFrom16(a.As16())) {
					t.Errorf("%s of %s, IPv4-mapped, is public", a, p)
				}
			}
		}
	}
}

func FuzzPublicAddr(f *testing.F) {
	f.Add([]byte{127, 0, 0, 1})
	f.Add([]byte{93, 184, 216, 34})
	f.Add(netip.MustParseAddr("2002:5db8:d822::1").AsSlice())
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			return
		}
		got := PublicAddr(a)
		// a mapped address is judged as what it maps
		if got != PublicAddr(a.Unmap()) {
			t.Fatalf("%s and %s judged apart", a, a.Unmap())
		}
		if got && (a.IsLoopback() || a.IsPrivate() || a.IsMulticast() || a.IsLinkLocalUnicast() || a.IsUnspecified()) {
			t.Fatalf("%s is public", a)
		}
	})
}
