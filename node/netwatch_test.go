package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/simweb"
)

// TestNetworkDownIsNotTheHosts: the node's own network goes away for a while mid-crawl
// (every connect fails with ENETUNREACH, as in a container cut off its network), then
// comes back. Nothing may be lost: no dead letter, no parked host, full coverage as
// simweb saw it. Before netWatch, every URL tried in those seconds used up its attempts
// (a 50 ms retry base) and became a dead letter, and hosts whose robots.txt came due
// were parked.
func TestNetworkDownIsNotTheHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	cfg := plainWeb() // the outage is the test
	cfg.Hosts, cfg.Seed, cfg.MeanPages, cfg.MaxWords = 12, 23, 30, 1500
	w, rule := startSimweb(t, cfg)
	nc := testNodeConfig(filepath.Join(t.TempDir(), "n"), "", rule)
	nc.Seeds, nc.Logger, nc.Cluster = w.Seeds(), testLogger("n"), ClusterConfig{Profile: "test"}
	// Only the first seed: the other hosts are found (and their robots.txt asked) later,
	// some of them while the network is down.
	nc.Seeds = nc.Seeds[:1]
	var down atomic.Bool
	var mu sync.Mutex
	refused := map[string]int{}
	nc.dialFault = func(addr string) error {
		if !down.Load() {
			return nil
		}
		mu.Lock()
		refused[addr]++
		mu.Unlock()
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
	}
	n, err := New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	go func() {
		for n.stats.fetched.Load() < 30 {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		// The fault fails kept-alive connections too, on their next read or write, as a
		// vanished interface does: no response arrives while the network is down.
		down.Store(true)
		time.Sleep(2 * time.Second)
		down.Store(false)
	}()
	if err := n.Run(ctx); err != nil {
		t.Fatal(err)
	}
	rep := w.Report(simweb.ReportOptions{UserAgent: DefaultUserAgent, DefaultDelay: testCrawlDelay, PerHost: 1})
	st := n.front.Stats()
	mu.Lock()
	hosts, dials := len(refused), 0
	for _, c := range refused {
		dials += c
	}
	mu.Unlock()
	t.Logf("coverage %.4f (%d/%d), requests %d, duplicates %d; failed %d connects, reads and writes to %d hosts; dead letters %d; errors %v",
		rep.Coverage, rep.Reached, rep.MustReach, rep.Requests, rep.DuplicateFetches, dials, hosts, st.DeadLetters, n.stats.errorsByClass())
	if hosts < 2 || dials < 10 {
		t.Fatalf("the outage failed %d connects, reads and writes to %d hosts: it did not test anything", dials, hosts)
	}
	if n.stats.errorsByClass()["network_unreachable"] == 0 {
		t.Errorf("no failure was put down to the node's network")
	}
	if st.DeadLetters != 0 || rep.Coverage < 1 || rep.RobotsViolations != 0 || rep.PolitenessViolations != 0 {
		t.Errorf("dead letters %d, coverage %.4f (missing %v), robots violations %d, politeness violations %d",
			st.DeadLetters, rep.Coverage, rep.Missing[:min(5, len(rep.Missing))], rep.RobotsViolations, rep.PolitenessViolations)
	}
}

// TestNetWatchOneHostIsTheHosts: one host without a route (an IPv6-only host on a node
// without IPv6) while others answer is that host's failure, counted as any other; a
// second host failing so before any response means the node's network is down, until a
// response arrives.
func TestNetWatchOneHostIsTheHosts(t *testing.T) {
	w := netWatch{log: testLogger("w")}
	unreach := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	now := time.Now()
	steps := []struct {
		host  string
		err   error
		local bool
	}{
		{"a", unreach, false}, // one host: its own trouble
		{"a", unreach, false},
		{"b", refused, false}, // refused is the host's, and does not close the streak
		{"b", unreach, true},  // a second host: the node's network is down
		{"a", unreach, true},
		{"c", errors.New("fetch: " + unreach.Error()), false}, // not wrapped: not recognized
		// a lookup that could not reach the DNS server (Go keeps only the cause's text)
		{"d", fmt.Errorf("fetch: dns: %w", &net.DNSError{Err: "dial udp 10.0.0.2:53: connect: network is unreachable", Name: "d"}), true},
		{"e", fmt.Errorf("fetch: dns: %w", &net.DNSError{Err: "server misbehaving", Name: "e"}), false},
	}
	for i, s := range steps {
		if got := w.failed(s.host, s.err, now); got != s.local {
			t.Fatalf("step %d (%s, %v): local %v, want %v", i, s.host, s.err, got, s.local)
		}
	}
	w.responded(now.Add(-time.Millisecond))
	if !w.failed("b", unreach, now) {
		t.Fatal("a response to a request sent before the streak began cleared it")
	}
	w.responded(now)
	if w.failed("b", unreach, now) {
		t.Fatal("after a response, the first host of a new streak counts against its host")
	}
	w.responded(now)
	for i := 0; i < 3; i++ {
		if w.failed("a", unreach, now) {
			t.Fatalf("try %d: one host alone is never the node's network", i)
		}
	}
}
