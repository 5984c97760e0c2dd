package safehttp

import "net/netip"

// PublicAddr reports whether a is an address a fetch may go to: a unicast
// address of the public internet, outside every special-purpose range of
// the IANA registries. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is
// checked as the IPv4 address it maps. Addresses that embed an IPv4
// address by a translation or tunnelling scheme (6to4, NAT64, Teredo,
// IPv4-compatible) are refused outright: which host they reach depends on
// a gateway, not on the address.
func PublicAddr(a netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	a = a.Unmap()
	ranges := specialIPv6
	if a.Is4() {
		ranges = specialIPv4
	} else if !globalUnicastIPv6.Contains(a) {
		return false // not allocated for global unicast
	}
	for _, p := range ranges {
		if p.Contains(a) {
			return false
		}
	}
	// Belt and braces: what the standard library knows as not public.
	return a.IsGlobalUnicast() && !a.IsPrivate()
}

// specialIPv4 are the ranges of the IANA IPv4 Special-Purpose Address
// Registry (iana-ipv4-special-registry), and multicast and the limited
// broadcast address besides. The few ranges the registry marks globally
// reachable (192.0.0.9/32, 192.0.0.10/32, 192.31.196.0/24, 192.52.193.0/24,
// 192.175.48.0/24) are anycast service addresses no payload is served
// from: they are refused too.
var specialIPv4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),          // "this network" (RFC 791)
	netip.MustParsePrefix("10.0.0.0/8"),         // private use (RFC 1918)
	netip.MustParsePrefix("100.64.0.0/10"),      // shared address space, carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("127.0.0.0/8"),        // loopback (RFC 1122)
	netip.MustParsePrefix("169.254.0.0/16"),     // link local, cloud metadata (RFC 3927)
	netip.MustParsePrefix("172.16.0.0/12"),      // private use (RFC 1918)
	netip.MustParsePrefix("192.0.0.0/24"),       // IETF protocol assignments (RFC 6890), incl. DS-Lite 192.0.0.0/29, NAT64 discovery 192.0.0.170/31
	netip.MustParsePrefix("192.0.2.0/24"),       // documentation TEST-NET-1 (RFC 5737)
	netip.MustParsePrefix("192.31.196.0/24"),    // AS112-v4 (RFC 7535)
	netip.MustParsePrefix("192.52.193.0/24"),    // AMT (RFC 7450)
	netip.MustParsePrefix("192.88.99.0/24"),     // deprecated 6to4 relay anycast (RFC 7526)
	netip.MustParsePrefix("192.168.0.0/16"),     // private use (RFC 1918)
	netip.MustParsePrefix("192.175.48.0/24"),    // direct delegation AS112 service (RFC 7534)
	netip.MustParsePrefix("198.18.0.0/15"),      // benchmarking (RFC 2544)
	netip.MustParsePrefix("198.51.100.0/24"),    // documentation TEST-NET-2 (RFC 5737)
	netip.MustParsePrefix("203.0.113.0/24"),     // documentation TEST-NET-3 (RFC 5737)
	netip.MustParsePrefix("224.0.0.0/4"),        // multicast (RFC 5771)
	netip.MustParsePrefix("240.0.0.0/4"),        // reserved for future use (RFC 1112)
	netip.MustParsePrefix("255.255.255.255/32"), // limited broadcast (RFC 919), inside 240.0.0.0/4 too
}

// globalUnicastIPv6 is the IPv6 global unicast space (RFC 4291); nothing
// outside it is allocated for the public internet.
var globalUnicastIPv6 = netip.MustParsePrefix("2000::/3")

// specialIPv6 are the ranges of the IANA IPv6 Special-Purpose Address
// Registry (iana-ipv6-special-registry) and the ranges that embed an IPv4
// address.
var specialIPv6 = []netip.Prefix{
	// Outside 2000::/3 (see globalUnicastIPv6) already: ::/128, ::1/128,
	// ::/96, 64:ff9b::/96, 64:ff9b:1::/48, 100::/64, 100:0:0:1::/64,
	// 5f00::/16, fc00::/7, fe80::/10, fec0::/10, ff00::/8. They are listed
	// all the same, so that the list reads as the registry.
	netip.MustParsePrefix("::/128"),            // unspecified (RFC 4291)
	netip.MustParsePrefix("::1/128"),           // loopback (RFC 4291)
	netip.MustParsePrefix("::/96"),             // IPv4-compatible, deprecated (RFC 4291): embeds an IPv4 address
	netip.MustParsePrefix("64:ff9b::/96"),      // IPv4/IPv6 translation, NAT64 (RFC 6052): embeds an IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"),    // local-use IPv4/IPv6 translation (RFC 8215): embeds an IPv4 address
	netip.MustParsePrefix("100::/64"),          // discard-only (RFC 6666)
	netip.MustParsePrefix("100:0:0:1::/64"),    // dummy IPv6 prefix, for examples and tests (IANA registry, 2025)
	netip.MustParsePrefix("2001::/23"),         // IETF protocol assignments (RFC 2928), incl. the ranges below
	netip.MustParsePrefix("2001::/32"),         // TEREDO (RFC 4380): embeds an IPv4 address
	netip.MustParsePrefix("2001:2::/48"),       // benchmarking (RFC 5180)
	netip.MustParsePrefix("2001:10::/28"),      // deprecated ORCHID (RFC 4843)
	netip.MustParsePrefix("2001:20::/28"),      // ORCHIDv2 (RFC 7343)
	netip.MustParsePrefix("2001:db8::/32"),     // documentation (RFC 3849)
	netip.MustParsePrefix("2002::/16"),         // 6to4 (RFC 3056): embeds an IPv4 address
	netip.MustParsePrefix("2620:4f:8000::/48"), // direct delegation AS112 service (RFC 7534)
	netip.MustParsePrefix("3fff::/20"),         // documentation (RFC 9637)
	netip.MustParsePrefix("5f00::/16"),         // segment routing SIDs (RFC 9602)
	netip.MustParsePrefix("fc00::/7"),          // unique local (RFC 4193)
	netip.MustParsePrefix("fe80::/10"),         // link-local unicast (RFC 4291)
	netip.MustParsePrefix("fec0::/10"),         // site-local, deprecated (RFC 3879)
	netip.MustParsePrefix("ff00::/8"),          // multicast (RFC 4291)
}
