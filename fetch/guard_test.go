package fetch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// TestClassifyAddr holds the guard's table against addresses at each block's bounds, in
// every form: IPv4, IPv6, IPv4-mapped, IPv4-compatible, NAT64, 6to4 and Teredo. It only
// classifies: no traffic goes anywhere.
func TestClassifyAddr(t *testing.T) {
	cases := []struct {
		addr string
		want AddrClass
	}{
		// IPv4, each block's first and last address and the neighbours outside.
		{"0.0.0.0", AddrUnspecified},
		{"0.0.0.1", AddrReserved},
		{"0.255.255.255", AddrReserved},
		{"1.0.0.0", AddrPublic},
		{"9.255.255.255", AddrPublic},
		{"10.0.0.0", AddrPrivate},
		{"10.255.255.255", AddrPrivate},
		{"11.0.0.0", AddrPublic},
		{"100.63.255.255", AddrPublic},
		{"100.64.0.0", AddrShared},
		{"100.127.255.255", AddrShared},
		{"100.128.0.0", AddrPublic},
		{"126.255.255.255", AddrPublic},
		{"127.0.0.0", AddrLoopback},
		{"127.0.0.1", AddrLoopback},
		{"127.255.255.255", AddrLoopback},
		{"128.0.0.0", AddrPublic},
		{"169.253.255.255", AddrPublic},
		{"169.254.0.0", AddrLinkLocal},
		{"169.254.169.254", AddrLinkLocal},
		{"169.254.255.255", AddrLinkLocal},
		{"169.255.0.0", AddrPublic},
		{"172.15.255.255", AddrPublic},
		{"172.16.0.0", AddrPrivate},
		{"172.31.255.255", AddrPrivate},
		{"172.32.0.0", AddrPublic},
		{"191.255.255.255", AddrPublic},
		{"192.0.0.0", AddrReserved},
		{"192.0.0.255", AddrReserved},
		{"192.0.1.0", AddrPublic},
		{"192.0.2.0", AddrDocumentation},
		{"192.0.2.255", AddrDocumentation},
		{"192.0.3.0", AddrPublic},
		{"192.88.98.255", AddrPublic},
		{"192.88.99.0", AddrReserved},
		{"192.88.99.255", AddrReserved},
		{"192.88.100.0", AddrPublic},
		{"192.167.255.255", AddrPublic},
		{"192.168.0.0", AddrPrivate},
		{"192.168.255.255", AddrPrivate},
		{"192.169.0.0", AddrPublic},
		{"198.17.255.255", AddrPublic},
		{"198.18.0.0", AddrBenchmarking},
		{"198.19.255.255", AddrBenchmarking},
		{"198.20.0.0", AddrPublic},
		{"198.51.99.255", AddrPublic},
		{"198.51.100.0", AddrDocumentation},
		{"198.51.100.255", AddrDocumentation},
		{"198.51.101.0", AddrPublic},
		{"203.0.112.255", AddrPublic},
		{"203.0.113.0", AddrDocumentation},
		{"203.0.113.255", AddrDocumentation},
		{"203.0.114.0", AddrPublic},
		{"223.255.255.255", AddrPublic},
		{"224.0.0.0", AddrMulticast},
		{"239.255.255.255", AddrMulticast},
		{"240.0.0.0", AddrReserved},
		{"255.255.255.254", AddrReserved},
		{"255.255.255.255", AddrBroadcast},
		{"8.8.8.8", AddrPublic},
		{"93.184.216.34", AddrPublic},

		// IPv6.
		{"::", AddrUnspecified},
		{"::1", AddrLoopback},
		{"::2", AddrReserved},
		{"fc00::", AddrPrivate},
		{"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", AddrPrivate},
		{"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", AddrReserved},
		{"fe00::", AddrReserved},
		{"fe80::", AddrLinkLocal},
		{"fe80::1%eth0", AddrLinkLocal},
		{"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", AddrLinkLocal},
		{"fec0::", AddrReserved},
		{"ff00::", AddrMulticast},
		{"ff02::1", AddrMulticast},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", AddrMulticast},
		{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", AddrPublic},
		{"2001:db8::", AddrDocumentation},
		{"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", AddrDocumentation},
		{"2001:db9::", AddrPublic},
		{"3fff::", AddrDocumentation},
		{"3fff:0fff:ffff:ffff:ffff:ffff:ffff:ffff", AddrDocumentation},
		{"3fff:1000::", AddrPublic},
		{"2001:2::", AddrBenchmarking},
		{"2001:2:0:ffff:ffff:ffff:ffff:ffff", AddrBenchmarking},
		{"2001:10::", AddrReserved},
		{"2001:1f:ffff:ffff:ffff:ffff:ffff:ffff", AddrReserved},
		{"2000::", AddrPublic},
		{"3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", AddrPublic},
		{"1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", AddrReserved},
		{"4000::", AddrReserved},
		{"100::", AddrReserved},        // discard-only (RFC 6666), outside 2000::/3
		{"64:ff9b:1::1", AddrReserved}, // local-use NAT64 (RFC 8215)
		{"5f00::1", AddrReserved},      // SRv6 SIDs (RFC 9602)
		{"2606:4700:4700::1111", AddrPublic},

		// IPv4-mapped: the IPv4 address's class.
		{"::ffff:127.0.0.1", AddrLoopback},
		{"::ffff:10.1.2.3", AddrPrivate},
		{"::ffff:169.254.169.254", AddrLinkLocal},
		{"::ffff:0.0.0.0", AddrUnspecified},
		{"::ffff:8.8.8.8", AddrPublic},
		// IPv4-compatible (deprecated): a refused IPv4's class, else reserved.
		{"::127.0.0.1", AddrLoopback},
		{"::10.0.0.1", AddrPrivate},
		{"::8.8.8.8", AddrReserved},
		// NAT64 well-known prefix: the embedded IPv4's class.
		{"64:ff9b::127.0.0.1", AddrLoopback},
		{"64:ff9b::a9fe:a9fe", AddrLinkLocal},
		{"64:ff9b::8.8.8.8", AddrPublic},
		// 6to4: IPv4 in bits 16..47.
		{"2002:7f00:1::", AddrLoopback},
		{"2002:c0a8:101::1", AddrPrivate},
		{"2002:0808:0808::1", AddrPublic},
		// Teredo: server IPv4 in bits 32..63, client IPv4 inverted in the last 32 bits.
		{"2001:0:0a00:0001::", AddrPrivate},              // server 10.0.0.1
		{"2001:0:0808:0808:0:0:80ff:fffe", AddrLoopback}, // client ^0x80fffffe = 127.0.0.1
		{"2001:0:0808:0808:0:0:f7f7:f7f7", AddrPublic},   // client 8.8.8.8
		{"2001:0:0808:0808:0:0:3f57:fefe", AddrPrivate},  // client 192.168.1.1
	}
	for _, c := range cases {
		a := netip.MustParseAddr(c.addr)
		if got, _ := ClassifyAddr(a); got != c.want {
			t.Errorf("ClassifyAddr(%s) = %v, want %v", c.addr, got, c.want)
		}
	}
}

// TestClassifyAddrEveryRow checks every table row's first and last address, so a row
// cannot be shadowed by an earlier one unnoticed.
func TestClassifyAddrEveryRow(t *testing.T) {
	for _, rows := range [][]addrBlock{v4Blocks, v6Blocks} {
		for _, b := range rows {
			first := b.prefix.Addr()
			last := lastAddr(b.prefix)
			for _, a := range []netip.Addr{first, last} {
				want := b.class
				if a == netip.MustParseAddr("0.0.0.0") || a == netip.MustParseAddr("255.255.255.255") {
					continue // their own /32 rows
				}
				if got, _ := ClassifyAddr(a); got != want {
					t.Errorf("%s (row %s, %s) = %v, want %v", a, b.prefix, b.source, got, want)
				}
			}
			if b.source == "" {
				t.Errorf("row %s has no source", b.prefix)
			}
		}
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func TestGuardAllow(t *testing.T) {
	g := addrGuard{allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}
	for _, c := range []struct {
		addr string
		ok   bool
	}{
		{"10.1.2.3", true},
		{"::ffff:10.1.2.3", true},
		{"64:ff9b::10.1.2.3", true}, // the embedded address is allowed
		{"fd12::1", true},
		{"fc00::1", false},
		{"11.0.0.1", true}, // public
		{"127.0.0.1", false},
		{"::ffff:127.0.0.1", false},
		{"169.254.169.254", false},
		{"192.168.0.1", false},
	} {
		err := g.check(netip.MustParseAddr(c.addr))
		if (err == nil) != c.ok {
			t.Errorf("check(%s) = %v, want ok=%v", c.addr, err, c.ok)
		}
		var ae *AddrError
		if err != nil && !errors.As(err, &ae) {
			t.Errorf("check(%s): %T, want *AddrError", c.addr, err)
		}
	}
	var none addrGuard
	if err := none.check(netip.MustParseAddr("127.0.0.1")); err == nil {
		t.Error("the zero guard allows loopback")
	}
}

func TestParseAllowIP(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.0/8": "10.0.0.0/8", "10.1.2.3/8": "10.0.0.0/8", "192.168.1.10": "192.168.1.10/32",
		"fd00::/8": "fd00::/8", "::1": "::1/128", " 127.0.0.0/8 ": "127.0.0.0/8",
	} {
		p, err := ParseAllowIP(in)
		if err != nil || p.String() != want {
			t.Errorf("ParseAllowIP(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, bad := range []string{"", "10.0.0.0/33", "example.com", "fe80::1%eth0", "10.0.0"} {
		if _, err := ParseAllowIP(bad); !errors.Is(err, ErrBadAllowIP) {
			t.Errorf("ParseAllowIP(%q) = %v, want ErrBadAllowIP", bad, err)
		}
	}
}

// guardServer counts the requests a loopback server receives.
func guardServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Write([]byte("internal"))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestGuardRefusesDial: an IP literal, a name the resolver maps to loopback and a name
// with one refused and no allowed address all fail with ErrForbiddenAddress, not
// transient, and the loopback server sees nothing; a --resolve rule to it is allowed.
func TestGuardRefusesDial(t *testing.T) {
	srv, hits := guardServer(t)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	res := &fakeResolver{hosts: map[string][]netip.Addr{
		"internal.test": {netip.MustParseAddr("127.0.0.1")},
		"mapped.test":   {netip.MustParseAddr("::ffff:127.0.0.1")},
		"meta.test":     {netip.MustParseAddr("169.254.169.254")},
	}}
	c := testClient(t, func(cfg *Config) {
		cfg.Resolver = res
		cfg.AllowIPs = nil
		cfg.Resolve = []ResolveRule{{Pattern: "named.test", Addr: srv.Listener.Addr().String()}}
	})
	for _, u := range []string{
		srv.URL + "/literal",
		"http://[::ffff:127.0.0.1]:" + port + "/mapped-literal",
		"http://internal.test:" + port + "/name",
		"http://mapped.test:" + port + "/mapped-name",
		"http://meta.test:" + port + "/latest/meta-data/",
	} {
		_, err := c.Do(context.Background(), Request{URL: u})
		if Classify(err) != ClassForbiddenAddress || IsTransient(err) {
			t.Errorf("%s: err %v (class %q), want forbidden_address, not transient", u, err, Classify(err))
		}
		var ae *AddrError
		if !errors.As(err, &ae) || ae.Class == AddrPublic {
			t.Errorf("%s: no AddrError in %v", u, err)
		}
	}
	if got := hits.Load(); got != 0 {
		t.Fatalf("the refused server saw %d requests", got)
	}
	resp, err := c.Do(context.Background(), Request{URL: "http://named.test/ok"})
	if err != nil || resp.Status != 200 {
		t.Fatalf("--resolve host: %v", err)
	}
	if hits.Load() != 1 {
		t.Fatalf("the --resolve host saw %d requests, want 1", hits.Load())
	}
}

// TestGuardRebinding: a name first resolves to an allowed address (the --allow-ips range
// holds 127.0.0.1 only) and its next answer to a refused one (127.0.0.2): the request
// after the rebind is refused although a kept-alive connection to the name exists, and
// the refused address's server sees nothing.
func TestGuardRebinding(t *testing.T) {
	ok, okHits := guardServer(t)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 on this machine: %v", err)
	}
	var badHits atomic.Int64
	bad := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { badHits.Add(1) }))
	bad.Listener.Close()
	bad.Listener = ln
	bad.Start()
	defer bad.Close()
	_, okPort, _ := net.SplitHostPort(ok.Listener.Addr().String())
	// Same port on both addresses is not guaranteed; the test serves the refused address on
	// its own port, and the name's URL carries the allowed server's port: a dial to
	// 127.0.0.2 on that port would fail to connect (connect), never be forbidden_address.
	res := &fakeResolver{hosts: map[string][]netip.Addr{"rebind.test": {netip.MustParseAddr("127.0.0.1")}}}
	c := testClient(t, func(cfg *Config) {
		cfg.Resolver = res
		cfg.AllowIPs = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		cfg.DNSCacheTTL = 1 // every request asks the resolver again
	})
	u := "http://rebind.test:" + okPort + "/"
	if _, err := c.Do(context.Background(), Request{URL: u}); err != nil {
		t.Fatalf("allowed address: %v", err)
	}
	res.mu.Lock()
	res.hosts["rebind.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.2")}
	res.mu.Unlock()
	_, err = c.Do(context.Background(), Request{URL: u})
	if Classify(err) != ClassForbiddenAddress {
		t.Fatalf("after the rebind: %v (class %q), want forbidden_address", err, Classify(err))
	}
	if !strings.Contains(err.Error(), "127.0.0.2") {
		t.Errorf("error %q does not name the refused address", err)
	}
	if okHits.Load() != 1 || badHits.Load() != 0 {
		t.Fatalf("allowed server saw %d (want 1), refused server %d (want 0)", okHits.Load(), badHits.Load())
	}
}

// TestGuardMixedAnswers: of a name's addresses the refused ones are skipped and an allowed
// one is dialed.
func TestGuardMixedAnswers(t *testing.T) {
	srv, hits := guardServer(t)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	res := &fakeResolver{hosts: map[string][]netip.Addr{"mixed.test": {
		netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("127.0.0.1")}}}
	c := testClient(t, func(cfg *Config) {
		cfg.Resolver = res
		cfg.AllowIPs = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	resp, err := c.Do(context.Background(), Request{URL: "http://mixed.test:" + port + "/"})
	if err != nil || resp.Status != 200 || resp.RemoteIP != "127.0.0.1" {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	if hits.Load() != 1 {
		t.Fatalf("hits %d", hits.Load())
	}
}

// TestGuardRobotsRedirect: robots.txt redirecting to a refused address ends at the 3xx
// (unavailable: allow all), and the refused server sees nothing.
func TestGuardRobotsRedirect(t *testing.T) {
	bad, badHits := guardServer(t)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, bad.URL+"/robots.txt", http.StatusFound)
	}))
	defer origin.Close()
	c := testClient(t, func(cfg *Config) {
		cfg.AllowIPs = nil
		cfg.Resolve = []ResolveRule{{Pattern: "origin.test", Addr: origin.Listener.Addr().String()}}
	})
	rr, err := c.FetchRobots(context.Background(), "http", "origin.test")
	if err != nil {
		t.Fatal(err)
	}
	if rr.Status != http.StatusFound || rr.Redirects != 0 || len(rr.Hops) != 1 {
		t.Fatalf("status %d redirects %d hops %d, want the 302 alone", rr.Status, rr.Redirects, len(rr.Hops))
	}
	if badHits.Load() != 0 {
		t.Fatalf("refused server saw %d requests", badHits.Load())
	}
	// robots.txt of a refused host itself is an error of its own class.
	if _, err := c.FetchRobots(context.Background(), "http", bad.Listener.Addr().String()); Classify(err) != ClassForbiddenAddress {
		t.Fatalf("robots.txt on a refused address: %v", err)
	}
}

func BenchmarkGuardCheck(b *testing.B) {
	g := addrGuard{}
	for _, a := range []string{"93.184.216.34", "127.0.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"} {
		addr := netip.MustParseAddr(a)
		b.Run(a, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = g.check(addr)
			}
		})
	}
}
