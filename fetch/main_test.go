package fetch

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain is goleak.VerifyTestMain with a longer wait: fasthttp's per-host
// idle cleaner sleeps up to MaxIdleConnDuration (at most 1s in these tests)
// before it notices that its host has no connections left and exits. A
// connection that was never closed keeps its cleaner alive and fails here.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		var err error
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if err = goleak.Find(); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fakeResolver answers from a map; unknown names are NXDOMAIN. gate, when
// set, blocks every lookup until closed.
type fakeResolver struct {
	mu    sync.Mutex
	hosts map[string][]netip.Addr
	ttl   time.Duration
	gate  chan struct{}
	calls atomic.Int64
}

func (f *fakeResolver) LookupHost(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
	f.calls.Add(1)
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.hosts[host]; ok {
		return a, f.ttl, nil
	}
	return nil, 0, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testClient builds a Client with short timeouts and a fake resolver that
// knows no names, so that nothing can leave loopback. The test servers live on
// 127.0.0.0/8, which the address guard refuses by default: it is allowed here
// (guard_test.go tests the guard with its own clients).
func testClient(t testing.TB, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{
		Timeout:             5 * time.Second,
		ConnectTimeout:      2 * time.Second,
		FirstByteTimeout:    3 * time.Second,
		MaxIdleConnDuration: 100 * time.Millisecond,
		Resolver:            &fakeResolver{},
		AllowIPs:            []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawServer serves each connection with handle on 127.0.0.1 and waits for
// the handlers on cleanup (handlers must return once the client closes).
func rawServer(t testing.TB, handle func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// readReq reads one request head; false when the client went away.
func readReq(br *bufio.Reader) (string, bool) {
	var sb strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return sb.String(), false
		}
		sb.WriteString(line)
		if line == "\r\n" {
			return sb.String(), true
		}
	}
}
