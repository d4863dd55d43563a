package fetch

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// testDNS is an authoritative server for *.dns.test on loopback UDP and TCP:
// a.dns.test A 127.0.0.1 TTL 60; six.dns.test AAAA ::1 only; alias.dns.test
// CNAME a.dns.test (TTL 30); slow.dns.test answers after slowFor; fail.dns.test
// is SERVFAIL; zero.dns.test has TTL 0; big.dns.test has 100 A records (UDP
// truncates); anything else NXDOMAIN with an SOA whose MINIMUM is 7 s.
type testDNS struct {
	addr    string
	slowFor time.Duration
	queries atomic.Int64
	mu      sync.Mutex
	byName  map[string]int
}

func startTestDNS(t *testing.T) *testDNS {
	t.Helper()
	td := &testDNS{byName: map[string]int{}, slowFor: 300 * time.Millisecond}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		pc.Close()
		t.Skipf("tcp on the DNS test port: %v", err)
	}
	td.addr = pc.LocalAddr().String()
	h := dns.HandlerFunc(td.serve)
	udp := &dns.Server{PacketConn: pc, Handler: h}
	tcp := &dns.Server{Listener: ln, Handler: h}
	var wg sync.WaitGroup
	for _, s := range []*dns.Server{udp, tcp} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = s.ActivateAndServe() }()
	}
	t.Cleanup(func() {
		udp.Shutdown()
		tcp.Shutdown()
		wg.Wait()
	})
	return td
}

func (td *testDNS) count(name string) int {
	td.mu.Lock()
	defer td.mu.Unlock()
	return td.byName[name]
}

func (td *testDNS) serve(w dns.ResponseWriter, q *dns.Msg) {
	td.queries.Add(1)
	name := strings.ToLower(q.Question[0].Name)
	td.mu.Lock()
	td.byName[name]++
	td.mu.Unlock()
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	qt := q.Question[0].Qtype
	a := func(n string, ttl uint32, ip string) dns.RR {
		rr, _ := dns.NewRR(n + " " + itoa(int(ttl)) + " IN A " + ip)
		return rr
	}
	switch name {
	case "a.dns.test.", "zero.dns.test.", "slow.dns.test.":
		ttl := uint32(60)
		if name == "zero.dns.test." {
			ttl = 0
		}
		if name == "slow.dns.test." {
			time.Sleep(td.slowFor)
		}
		if qt == dns.TypeA {
			m.Answer = append(m.Answer, a(name, ttl, "127.0.0.1"))
		}
	case "six.dns.test.":
		if qt == dns.TypeAAAA {
			rr, _ := dns.NewRR(name + " 40 IN AAAA ::1")
			m.Answer = append(m.Answer, rr)
		}
	case "alias.dns.test.":
		rr, _ := dns.NewRR(name + " 30 IN CNAME a.dns.test.")
		m.Answer = append(m.Answer, rr)
		if qt == dns.TypeA {
			m.Answer = append(m.Answer, a("a.dns.test.", 60, "127.0.0.1"))
		}
	case "big.dns.test.":
		for i := 1; i <= 100; i++ {
			m.Answer = append(m.Answer, a(name, 90, "127.0.1."+itoa(i)))
		}
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
			m.Truncate(512)
		}
	case "fail.dns.test.":
		m.Rcode = dns.RcodeServerFailure
	default:
		m.Rcode = dns.RcodeNameError
		soa, _ := dns.NewRR("dns.test. 3600 IN SOA ns.dns.test. root.dns.test. 1 3600 600 86400 7")
		m.Ns = append(m.Ns, soa)
	}
	_ = w.WriteMsg(m)
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestDNSClientAnswers(t *testing.T) {
	td := startTestDNS(t)
	c, err := NewDNSClient(DNSClientConfig{Servers: []string{td.addr}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cases := []struct {
		name     string
		addr     string
		ttl      time.Duration
		notFound bool
		temp     bool
		nAddrs   int
	}{
		{name: "a.dns.test", addr: "127.0.0.1", ttl: 60 * time.Second},
		{name: "A.DNS.TEST", addr: "127.0.0.1", ttl: 60 * time.Second},
		{name: "alias.dns.test", addr: "127.0.0.1", ttl: 30 * time.Second},
		{name: "six.dns.test", addr: "::1", ttl: 40 * time.Second},
		{name: "zero.dns.test", addr: "127.0.0.1", ttl: time.Nanosecond},
		{name: "big.dns.test", addr: "127.0.1.1", ttl: 90 * time.Second, nAddrs: 100},
		{name: "nope.dns.test", notFound: true, ttl: 7 * time.Second},
		{name: "fail.dns.test", temp: true},
	}
	for _, tc := range cases {
		addrs, ttl, err := c.LookupHost(ctx, tc.name)
		if tc.notFound || tc.temp {
			var de *net.DNSError
			if !errors.As(err, &de) || de.IsNotFound != tc.notFound || de.IsTemporary != tc.temp {
				t.Errorf("%s: err %#v, want notFound=%v temporary=%v", tc.name, err, tc.notFound, tc.temp)
			}
			if ttl != tc.ttl {
				t.Errorf("%s: negative ttl %v, want %v", tc.name, ttl, tc.ttl)
			}
			continue
		}
		if err != nil || len(addrs) == 0 || addrs[0] != netip.MustParseAddr(tc.addr) || ttl != tc.ttl {
			t.Errorf("%s: %v ttl %v err %v; want %s ttl %v", tc.name, addrs, ttl, err, tc.addr, tc.ttl)
		}
		if tc.nAddrs > 0 && len(addrs) != tc.nAddrs {
			t.Errorf("%s: %d addresses, want %d (TCP after truncation)", tc.name, len(addrs), tc.nAddrs)
		}
	}
	// NXDOMAIN and SERVFAIL are classified for the crawl loop.
	_, _, err = c.LookupHost(ctx, "nope.dns.test")
	if IsTransient(classErr(ClassDNS, "http://nope.dns.test/", err)) {
		t.Error("NXDOMAIN is transient; want permanent")
	}
	_, _, err = c.LookupHost(ctx, "fail.dns.test")
	if !IsTransient(classErr(ClassDNS, "http://fail.dns.test/", err)) {
		t.Error("SERVFAIL is permanent; want transient")
	}
}

func TestDNSClientSlowAnswer(t *testing.T) {
	td := startTestDNS(t)
	// A slow answer within the timeout is taken.
	c, _ := NewDNSClient(DNSClientConfig{Servers: []string{td.addr}, Timeout: time.Second})
	if a, _, err := c.LookupHost(context.Background(), "slow.dns.test"); err != nil || len(a) != 1 {
		t.Fatalf("slow answer within timeout: %v %v", a, err)
	}
	// One beyond it is a temporary timeout after Attempts queries.
	c, _ = NewDNSClient(DNSClientConfig{Servers: []string{td.addr}, Timeout: 100 * time.Millisecond, Attempts: 2})
	before := td.count("slow.dns.test.")
	_, _, err := c.LookupHost(context.Background(), "slow.dns.test")
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsTimeout || !de.IsTemporary {
		t.Fatalf("err %#v, want a temporary timeout", err)
	}
	if n := td.count("slow.dns.test.") - before; n != 2 {
		t.Errorf("%d queries for a timing-out name, want 2 (Attempts)", n)
	}
	time.Sleep(td.slowFor) // let the server's handlers finish before cleanup
}

// Through the cache: TTLs from the answers are honoured, NXDOMAIN is cached for the SOA's
// MINIMUM, SERVFAIL for NegativeTTL, and one query serves many lookups.
func TestDNSClientThroughCache(t *testing.T) {
	td := startTestDNS(t)
	c, _ := NewDNSClient(DNSClientConfig{Servers: []string{td.addr}, Timeout: time.Second})
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	d := newDNSCache(c, 5*time.Minute, 30*time.Second, 100, clk.Now)
	d.tempTTL = 5 * time.Second
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		d.lookup(ctx, "a.dns.test")
		d.lookup(ctx, "nope.dns.test")
		d.lookup(ctx, "fail.dns.test")
	}
	if a, n, f := td.count("a.dns.test."), td.count("nope.dns.test."), td.count("fail.dns.test."); a != 1 || n != 1 || f != 1 {
		t.Fatalf("queries a=%d nope=%d fail=%d, want 1 each", a, n, f)
	}
	clk.Advance(4 * time.Second) // within SERVFAIL's 5 s
	d.lookup(ctx, "fail.dns.test")
	clk.Advance(4 * time.Second) // past NXDOMAIN's 7 s and SERVFAIL's 5 s
	d.lookup(ctx, "a.dns.test")
	d.lookup(ctx, "nope.dns.test")
	d.lookup(ctx, "fail.dns.test")
	if a, n, f := td.count("a.dns.test."), td.count("nope.dns.test."), td.count("fail.dns.test."); a != 1 || n != 2 || f != 2 {
		t.Fatalf("after 8s: queries a=%d nope=%d fail=%d, want 1, 2, 2", a, n, f)
	}
	clk.Advance(53 * time.Second) // past a's 60 s
	d.lookup(ctx, "a.dns.test")
	if a := td.count("a.dns.test."); a != 2 {
		t.Fatalf("after 61s: queries a=%d, want 2", a)
	}
	st := d.stats()
	if st.Lookups != 305 || st.Queries != 6 || st.Failures != 4 {
		t.Fatalf("stats %+v, want 305 lookups, 6 queries, 4 failures", st)
	}
	if hr := st.HitRate(); hr < 0.98 {
		t.Fatalf("hit rate %.3f", hr)
	}
}

// A Client built with DNSServers resolves through them (no --resolve rule).
func TestClientDNSServers(t *testing.T) {
	td := startTestDNS(t)
	srv := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		for {
			if _, ok := readReq(br); !ok {
				return
			}
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		}
	})
	_, port, _ := net.SplitHostPort(srv)
	c := testClient(t, func(cfg *Config) { cfg.Resolver = nil; cfg.DNSServers = []string{td.addr} })
	for i := 0; i < 3; i++ {
		r, err := c.Do(context.Background(), Request{URL: "http://a.dns.test:" + port + "/"})
		if err != nil {
			t.Fatalf("through DNS: %v", err)
		}
		if r.RemoteIP != "127.0.0.1" {
			t.Fatalf("remote %s, want 127.0.0.1", r.RemoteIP)
		}
	}
	_, err := c.Do(context.Background(), Request{URL: "http://nope.dns.test:" + port + "/"})
	if Classify(err) != ClassDNS || IsTransient(err) {
		t.Fatalf("NXDOMAIN: %v (class %s)", err, Classify(err))
	}
	st := c.DNSStats()
	if st.Queries != 2 || td.count("a.dns.test.") != 1 {
		t.Fatalf("stats %+v, server saw a.dns.test %d times; want 2 queries, 1 for a", st, td.count("a.dns.test."))
	}
}

// Every request consults the cache, so an expired TTL is asked again even while a
// kept-alive connection to the host is open (queries per host = 1 + crawl time / TTL).
func TestClientRequeriesAfterTTL(t *testing.T) {
	srv := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		for {
			if _, ok := readReq(br); !ok {
				return
			}
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		}
	})
	_, port, _ := net.SplitHostPort(srv)
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	res := &fakeResolver{hosts: map[string][]netip.Addr{"a.test": {netip.MustParseAddr("127.0.0.1")}}, ttl: 10 * time.Second}
	c := testClient(t, func(cfg *Config) { cfg.Resolver = res; cfg.Now = clk.Now })
	get := func() {
		t.Helper()
		if _, err := c.Do(context.Background(), Request{URL: "http://a.test:" + port + "/"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		get()
	}
	if n := res.calls.Load(); n != 1 {
		t.Fatalf("%d queries within the TTL, want 1", n)
	}
	clk.Advance(11 * time.Second)
	get()
	if n := res.calls.Load(); n != 2 {
		t.Fatalf("%d queries after the TTL, want 2", n)
	}
	st := c.DNSStats()
	if st.Lookups != 6 || st.Hits != 4 || st.Queries != 2 {
		t.Fatalf("stats %+v, want 6 lookups, 4 hits, 2 queries", st)
	}
}
