package fetch

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// AddrClass says why the address guard refuses an address, or AddrPublic when it does not.
type AddrClass uint8

// Address classes of ClassifyAddr. Every class but AddrPublic is refused unless
// Config.AllowIPs holds the address.
const (
	AddrPublic        AddrClass = iota // globally reachable unicast
	AddrUnspecified                    // 0.0.0.0, ::
	AddrLoopback                       // 127/8, ::1
	AddrPrivate                        // RFC 1918, RFC 4193 (fc00::/7)
	AddrLinkLocal                      // 169.254/16 (cloud metadata), fe80::/10
	AddrShared                         // 100.64/10 (carrier-grade NAT)
	AddrMulticast                      // 224/4, ff00::/8
	AddrBroadcast                      // 255.255.255.255
	AddrDocumentation                  // TEST-NET-1/2/3, 2001:db8::/32, 3fff::/20
	AddrBenchmarking                   // 198.18/15, 2001:2::/48
	AddrReserved                       // 0/8, 240/4, 192.0.0.0/24, IPv6 outside 2000::/3, ...
)

var addrClassNames = [...]string{"public", "unspecified", "loopback", "private", "link-local",
	"shared", "multicast", "broadcast", "documentation", "benchmarking", "reserved"}

func (c AddrClass) String() string {
	if int(c) < len(addrClassNames) {
		return addrClassNames[c]
	}
	return fmt.Sprintf("class(%d)", c)
}

// addrBlock is one row of the guard's table, with its source.
type addrBlock struct {
	prefix netip.Prefix
	class  AddrClass
	source string
}

// v4Blocks are the IPv4 blocks refused, first match wins (so a /32 comes before the block
// holding it). Source: the IANA IPv4 Special-Purpose Address Registry (RFC 6890), every row
// not "globally reachable", plus multicast and the reserved class E.
var v4Blocks = []addrBlock{
	{netip.MustParsePrefix("0.0.0.0/32"), AddrUnspecified, "RFC 1122 3.2.1.3 (this host)"},
	{netip.MustParsePrefix("0.0.0.0/8"), AddrReserved, "RFC 791, RFC 1122 3.2.1.3 (this network)"},
	{netip.MustParsePrefix("10.0.0.0/8"), AddrPrivate, "RFC 1918"},
	{netip.MustParsePrefix("100.64.0.0/10"), AddrShared, "RFC 6598"},
	{netip.MustParsePrefix("127.0.0.0/8"), AddrLoopback, "RFC 1122 3.2.1.3"},
	{netip.MustParsePrefix("169.254.0.0/16"), AddrLinkLocal, "RFC 3927"},
	{netip.MustParsePrefix("172.16.0.0/12"), AddrPrivate, "RFC 1918"},
	{netip.MustParsePrefix("192.0.0.0/24"), AddrReserved, "RFC 6890 2.2.2 (IETF protocol assignments)"},
	{netip.MustParsePrefix("192.0.2.0/24"), AddrDocumentation, "RFC 5737 (TEST-NET-1)"},
	{netip.MustParsePrefix("192.88.99.0/24"), AddrReserved, "RFC 7526 (deprecated 6to4 relay anycast)"},
	{netip.MustParsePrefix("192.168.0.0/16"), AddrPrivate, "RFC 1918"},
	{netip.MustParsePrefix("198.18.0.0/15"), AddrBenchmarking, "RFC 2544"},
	{netip.MustParsePrefix("198.51.100.0/24"), AddrDocumentation, "RFC 5737 (TEST-NET-2)"},
	{netip.MustParsePrefix("203.0.113.0/24"), AddrDocumentation, "RFC 5737 (TEST-NET-3)"},
	{netip.MustParsePrefix("224.0.0.0/4"), AddrMulticast, "RFC 5771"},
	{netip.MustParsePrefix("255.255.255.255/32"), AddrBroadcast, "RFC 919, RFC 8190"},
	{netip.MustParsePrefix("240.0.0.0/4"), AddrReserved, "RFC 1112 4 (class E)"},
}

// v6Blocks are the IPv6 blocks refused after the embedding forms (IPv4-mapped,
// IPv4-compatible, NAT64) are handled; first match wins. Source: the IANA IPv6
// Special-Purpose Address Registry (RFC 6890) and IPv6 Address Space registry. Everything
// outside 2000::/3, the only range IANA allocates as global unicast, is refused as reserved
// by the last row (this covers 100::/64, 64:ff9b:1::/48, 5f00::/16 and the IETF-reserved
// rest).
var v6Blocks = []addrBlock{
	{netip.MustParsePrefix("fc00::/7"), AddrPrivate, "RFC 4193"},
	{netip.MustParsePrefix("fe80::/10"), AddrLinkLocal, "RFC 4291 2.5.6"},
	{netip.MustParsePrefix("fec0::/10"), AddrReserved, "RFC 3879 (deprecated site-local)"},
	{netip.MustParsePrefix("ff00::/8"), AddrMulticast, "RFC 4291 2.7"},
	{netip.MustParsePrefix("2001:db8::/32"), AddrDocumentation, "RFC 3849"},
	{netip.MustParsePrefix("3fff::/20"), AddrDocumentation, "RFC 9637"},
	{netip.MustParsePrefix("2001:2::/48"), AddrBenchmarking, "RFC 5180"},
	{netip.MustParsePrefix("2001:10::/28"), AddrReserved, "RFC 4843 (deprecated ORCHID)"},
}

var (
	globalUnicast6 = netip.MustParsePrefix("2000::/3")     // RFC 4291 2.4, IANA IPv6 address space
	compat6        = netip.MustParsePrefix("::/96")        // RFC 4291 2.5.5.1, deprecated
	nat64WKP       = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052 2.1
	sixToFour      = netip.MustParsePrefix("2002::/16")    // RFC 3056 2: v4 in bits 16..47
	teredo         = netip.MustParsePrefix("2001::/32")    // RFC 4380 4: server v4 in bits 32..63, client v4 inverted in 96..127
)

// v4Row is v4Blocks as integers, for a check of a few nanoseconds.
type v4Row struct {
	base, mask uint32
	class      AddrClass
}

var v4Rows = func() []v4Row {
	rows := make([]v4Row, len(v4Blocks))
	for i, b := range v4Blocks {
		a := b.prefix.Addr().As4()
		rows[i] = v4Row{base: binary.BigEndian.Uint32(a[:]), mask: ^uint32(0) << (32 - b.prefix.Bits()), class: b.class}
	}
	return rows
}()

func classify4(v uint32) AddrClass {
	for _, r := range v4Rows {
		if v&r.mask == r.base {
			return r.class
		}
	}
	return AddrPublic
}

func v4At(b [16]byte, off int) (uint32, netip.Addr) {
	v := binary.BigEndian.Uint32(b[off : off+4])
	return v, netip.AddrFrom4([4]byte(b[off : off+4]))
}

// ClassifyAddr returns the class of a (its zone ignored). IPv4-mapped addresses are
// classified as the IPv4 address they map. IPv4-compatible ones (::a.b.c.d, deprecated)
// take the class of the IPv4 address when that is refused and are reserved otherwise.
// Addresses that embed an IPv4 address a gateway forwards to (NAT64 64:ff9b::/96, 6to4
// 2002::/16, Teredo 2001::/32: server and client) take the class of the embedded address.
// embedded is the IPv4 address that decided the class, when one did.
func ClassifyAddr(a netip.Addr) (class AddrClass, embedded netip.Addr) {
	a = a.WithZone("").Unmap()
	if a.Is4() {
		b := a.As4()
		return classify4(binary.BigEndian.Uint32(b[:])), netip.Addr{}
	}
	if !a.Is6() {
		return AddrReserved, netip.Addr{}
	}
	b := a.As16()
	switch {
	case a == netip.IPv6Unspecified():
		return AddrUnspecified, netip.Addr{}
	case a == netip.IPv6Loopback():
		return AddrLoopback, netip.Addr{}
	case compat6.Contains(a):
		v, e := v4At(b, 12)
		if c := classify4(v); c != AddrPublic {
			return c, e
		}
		return AddrReserved, netip.Addr{}
	case nat64WKP.Contains(a):
		v, e := v4At(b, 12)
		return classify4(v), e
	}
	for i := range v6Blocks {
		if v6Blocks[i].prefix.Contains(a) {
			return v6Blocks[i].class, netip.Addr{}
		}
	}
	switch {
	case !globalUnicast6.Contains(a):
		return AddrReserved, netip.Addr{}
	case sixToFour.Contains(a):
		v, e := v4At(b, 2)
		return classify4(v), e
	case teredo.Contains(a):
		v, e := v4At(b, 4)
		if c := classify4(v); c != AddrPublic {
			return c, e
		}
		v = ^binary.BigEndian.Uint32(b[12:16])
		var cb [4]byte
		binary.BigEndian.PutUint32(cb[:], v)
		return classify4(v), netip.AddrFrom4(cb)
	}
	return AddrPublic, netip.Addr{}
}

// AddrError is the cause of an ErrForbiddenAddress: the address a connection would have
// gone to and its class.
type AddrError struct {
	Addr  netip.Addr
	Class AddrClass
}

func (e *AddrError) Error() string {
	return fmt.Sprintf("address %s is %s, not allowed", e.Addr, e.Class)
}

// addrGuard decides whether the fetcher may connect to an address.
type addrGuard struct {
	allow []netip.Prefix
}

func (g *addrGuard) allowed(a netip.Addr) bool {
	for _, p := range g.allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// check returns nil when a may be dialed, else an *AddrError.
func (g *addrGuard) check(a netip.Addr) error {
	a = a.WithZone("")
	if len(g.allow) > 0 && (g.allowed(a) || g.allowed(a.Unmap())) {
		return nil
	}
	class, embedded := ClassifyAddr(a)
	if class == AddrPublic || (embedded.IsValid() && len(g.allow) > 0 && g.allowed(embedded)) {
		return nil
	}
	return &AddrError{Addr: a, Class: class}
}
