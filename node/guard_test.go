package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/internal/clustertest"
)

// rebindResolver answers rebind.test with one address until switched, then another.
type rebindResolver struct {
	switched *atomic.Bool
	before   netip.Addr
	after    netip.Addr
}

func (r rebindResolver) LookupHost(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
	if host != "rebind.test" {
		return nil, 0, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if r.switched.Load() {
		return []netip.Addr{r.after}, time.Millisecond, nil
	}
	return []netip.Addr{r.before}, time.Millisecond, nil
}

// TestRebindingIsRefused: DNS rebinding. A host resolves to an allowed address (the
// --allow-ips range holds 127.0.0.1 only) while its robots.txt, tdmrep.json and home page
// are fetched, then to a refused one (127.0.0.2, a server on the same port). The home
// page's links reach the page fetch (robots.txt is known) and are refused at the dial:
// the refused server sees nothing, and each link is a dead letter of class
// forbidden_address, counted in the errors and the metric, never retried.
func TestRebindingIsRefused(t *testing.T) {
	var switched atomic.Bool
	var mu sync.Mutex
	seen := map[string][]string{}
	handler := func(who string) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[who] = append(seen[who], r.URL.Path)
			mu.Unlock()
			if r.URL.Path != "/" {
				http.NotFound(rw, r)
				return
			}
			rw.Header().Set("Content-Type", "text/html")
			fmt.Fprint(rw, `<html><body><a href="/a">a</a> <a href="/b">b</a></body></html>`)
			if who == "allowed" {
				switched.Store(true) // the name rebinds once the home page is served
			}
		})
	}
	okLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(okLn.Addr().String())
	badLn, err := net.Listen("tcp", "127.0.0.2:"+port)
	if err != nil {
		okLn.Close()
		t.Skipf("cannot listen on 127.0.0.2:%s: %v", port, err)
	}
	okSrv, badSrv := &http.Server{Handler: handler("allowed")}, &http.Server{Handler: handler("refused")}
	go okSrv.Serve(okLn)
	go badSrv.Serve(badLn)
	defer okSrv.Close()
	defer badSrv.Close()

	nc := testNodeConfig(filepath.Join(t.TempDir(), "n"), "", noWeb(t))
	nc.Seeds = []string{"http://rebind.test:" + port + "/"}
	nc.Cluster = ClusterConfig{Profile: "test"}
	nc.AllowIPs = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	nc.DNSCacheTTL = time.Millisecond
	nc.resolver = rebindResolver{switched: &switched, before: netip.MustParseAddr("127.0.0.1"), after: netip.MustParseAddr("127.0.0.2")}
	nc.ExitWhenDone = false // the frontier is read while the node runs
	n, err := New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- n.Run(ctx) }()
	dead := map[string]string{}
	clustertest.Eventually(t, 30*time.Second, "two dead letters", func() bool {
		clear(dead)
		err := n.front.DeadLetters(func(d frontier.DeadLetter) bool {
			dead[d.URL] = d.LastErr
			return true
		})
		return err == nil && len(dead) >= 2
	})
	time.Sleep(200 * time.Millisecond) // a retry, if there were one, would come in 50 ms
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(seen["refused"]) != 0 {
		t.Errorf("the refused address's server saw %v", seen["refused"])
	}
	if !switched.Load() {
		t.Fatalf("the home page was never served (allowed server saw %v)", seen["allowed"])
	}
	for _, p := range []string{"/a", "/b"} {
		u := "http://rebind.test:" + port + p
		if !strings.HasPrefix(dead[u], "forbidden_address: ") || !strings.Contains(dead[u], "127.0.0.2") {
			t.Errorf("dead letter of %s: %q, want forbidden_address naming 127.0.0.2 (all: %v)", u, dead[u], dead)
		}
	}
	if got := n.stats.errorsByClass()["forbidden_address"]; got != 2 {
		t.Errorf("forbidden_address errors %d, want 2 (one per link, no retry)", got)
	}
	if got := n.stats.forbidden.Load(); got != 2 {
		t.Errorf("forbidden counter %d, want 2", got)
	}
	recent := 0
	for _, e := range n.RecentErrors(100, "") {
		if e.Class == "forbidden_address" {
			recent++
		}
	}
	if recent != 2 {
		t.Errorf("recent errors of class forbidden_address: %d, want 2", recent)
	}
	t.Logf("allowed server saw %v; refused server saw %v; dead letters %v", seen["allowed"], seen["refused"], dead)
}
