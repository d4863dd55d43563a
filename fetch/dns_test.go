package fetch

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

func TestDNSCacheTTL(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	res := &fakeResolver{hosts: map[string][]netip.Addr{"a.test": {netip.MustParseAddr("127.0.0.9")}}}
	d := newDNSCache(res, 5*time.Minute, 30*time.Second, 100, clk.Now)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		addrs, err := d.lookup(ctx, "a.test")
		if err != nil || len(addrs) != 1 || addrs[0].String() != "127.0.0.9" {
			t.Fatalf("lookup = %v, %v", addrs, err)
		}
	}
	if n := res.calls.Load(); n != 1 {
		t.Fatalf("resolver calls = %d, want 1 (cached)", n)
	}
	clk.Advance(5*time.Minute - time.Second)
	d.lookup(ctx, "a.test")
	if n := res.calls.Load(); n != 1 {
		t.Fatalf("resolver calls before expiry = %d, want 1", n)
	}
	clk.Advance(2 * time.Second)
	d.lookup(ctx, "a.test")
	if n := res.calls.Load(); n != 2 {
		t.Fatalf("resolver calls after expiry = %d, want 2", n)
	}
	// A resolver TTL below the cap is honoured.
	res.ttl = 10 * time.Second
	clk.Advance(time.Hour)
	d.lookup(ctx, "a.test")
	clk.Advance(11 * time.Second)
	d.lookup(ctx, "a.test")
	if n := res.calls.Load(); n != 4 {
		t.Fatalf("resolver calls with short TTL = %d, want 4", n)
	}
}

func TestDNSCacheNegative(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	res := &fakeResolver{}
	d := newDNSCache(res, 5*time.Minute, 30*time.Second, 100, clk.Now)
	ctx := context.Background()
	_, err := d.lookup(ctx, "missing.test")
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		t.Fatalf("err = %v, want not-found DNSError", err)
	}
	d.lookup(ctx, "missing.test")
	if n := res.calls.Load(); n != 1 {
		t.Fatalf("calls = %d, want 1 (negative cache)", n)
	}
	clk.Advance(31 * time.Second)
	d.lookup(ctx, "missing.test")
	if n := res.calls.Load(); n != 2 {
		t.Fatalf("calls after negative TTL = %d, want 2", n)
	}
}

func TestDNSCacheCollapse(t *testing.T) {
	res := &fakeResolver{
		hosts: map[string][]netip.Addr{"a.test": {netip.MustParseAddr("127.0.0.1")}},
		gate:  make(chan struct{}),
	}
	d := newDNSCache(res, time.Minute, time.Second, 100, time.Now)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := d.lookup(context.Background(), "a.test")
			if err == nil && len(a) != 1 {
				err = errors.New("no address")
			}
			errs <- err
		}()
	}
	// Wait until the first lookup is inside the resolver, let others pile up.
	deadline := time.Now().Add(2 * time.Second)
	for res.calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	close(res.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if c := res.calls.Load(); c != 1 {
		t.Fatalf("resolver calls = %d, want 1", c)
	}
}

func TestDNSCacheBounded(t *testing.T) {
	hosts := map[string][]netip.Addr{}
	for i := 0; i < 100; i++ {
		hosts[string(rune('a'+i%26))+string(rune('a'+i/26))+".test"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	}
	res := &fakeResolver{hosts: hosts}
	d := newDNSCache(res, time.Minute, time.Second, 16, time.Now)
	for h := range hosts {
		if _, err := d.lookup(context.Background(), h); err != nil {
			t.Fatal(err)
		}
		if s := d.size(); s > 16 {
			t.Fatalf("cache size %d > 16", s)
		}
	}
}

func TestDNSCacheCanceledWaiter(t *testing.T) {
	res := &fakeResolver{gate: make(chan struct{})}
	d := newDNSCache(res, time.Minute, time.Second, 100, time.Now)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := d.lookup(ctx, "slow.test")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	close(res.gate)
	// The canceled lookup must not have been cached as negative.
	if s := d.size(); s != 0 {
		t.Fatalf("cache size %d after canceled lookup, want 0", s)
	}
}

// A waiter must not inherit the cancellation of the caller that happened to
// lead the shared lookup.
func TestDNSCacheLeaderCanceled(t *testing.T) {
	res := &fakeResolver{
		hosts: map[string][]netip.Addr{"a.test": {netip.MustParseAddr("127.0.0.1")}},
		gate:  make(chan struct{}),
	}
	d := newDNSCache(res, time.Minute, time.Second, 100, time.Now)
	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	leaderDone := make(chan error, 1)
	go func() { _, err := d.lookup(leaderCtx, "a.test"); leaderDone <- err }()
	for res.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	waiterDone := make(chan error, 1)
	go func() {
		a, err := d.lookup(context.Background(), "a.test")
		if err == nil && len(a) != 1 {
			err = errors.New("no address")
		}
		waiterDone <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the waiter join the shared call
	cancelLeader()
	if err := <-leaderDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader err %v", err)
	}
	close(res.gate) // the waiter's own lookup may now complete
	if err := <-waiterDone; err != nil {
		t.Fatalf("waiter err %v", err)
	}
}
