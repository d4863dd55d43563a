package e2e

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/internal/clustertest"
)

// TestAddressGuard: the simulated web (reached through --resolve, which the operator
// named) links, from an extra planted host, to a loopback service the node is not allowed
// to reach: by an IP-literal URL, by an IPv4-mapped IPv6 literal, by a host name that a
// real DNS server (dnsmasq, through --dns) resolves to it, and by a redirect from the
// planted page. The service must see no request at all; the crawl of the allowed web is
// complete (simweb's oracle, no violation); the refused URLs are dead letters of class
// forbidden_address, in the recent errors and in the metrics.
func TestAddressGuard(t *testing.T) {
	w, addr := smallWeb(t, 6, 2)

	// The service the node must not reach: its own loopback address, counted.
	ip := fmt.Sprintf("127.%d.%d.%d", 200+rand.IntN(50), rand.IntN(256), 1+rand.IntN(250))
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	var mu sync.Mutex
	var internalSeen []string
	internal := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		internalSeen = append(internalSeen, r.Host+r.URL.String())
		mu.Unlock()
		io.WriteString(rw, "<html><body>internal secret</body></html>")
	}))
	internal.Listener.Close()
	internal.Listener = ln
	internal.Start()
	defer internal.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	const name = "internal.rebind.test"
	d := startSimDNS(t, map[string]string{name: ip}, dnsOptions{TTL: time.Second, NegTTL: time.Second})

	// The planted host, allowed through --resolve: a page linking to the service three
	// ways, and a redirect to it.
	var plantMu sync.Mutex
	plantSeen := map[string]int{}
	plant := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		plantMu.Lock()
		plantSeen[r.URL.Path]++
		plantMu.Unlock()
		switch r.URL.Path {
		case "/":
			rw.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(rw, `<html><head><title>planted</title></head><body>
<a href="http://%[1]s:%[2]s/literal">literal</a>
<a href="http://[::ffff:%[1]s]:%[2]s/mapped">mapped</a>
<a href="http://%[3]s:%[2]s/name">name</a>
<a href="/redirect">redirect</a>
</body></html>`, ip, port, name)
		case "/redirect":
			http.Redirect(rw, r, "http://"+ip+":"+port+"/redirected", http.StatusFound)
		default:
			http.NotFound(rw, r)
		}
	}))
	defer plant.Close()

	dir := t.TempDir()
	seeds := filepath.Join(dir, "seeds.txt")
	os.WriteFile(seeds, []byte(strings.Join(append(w.Seeds(), "http://plant.sim.test/"), "\n")+"\n"), 0o644)
	data := filepath.Join(dir, "data")
	// No --allow-ips: the guard is on by default. No --exit-when-done: the API is read
	// while the node runs, then it is stopped.
	c := startCrawler(t, "--data", data, "--seeds", seeds, "--resolve", "*.sim.test="+addr,
		"--resolve", "plant.sim.test="+plant.Listener.Addr().String(), "--dns", d.Addr,
		"--delay", "0", "--concurrency", "32", "--robots-retry", "200ms", "--retry-base", "200ms",
		"--timeout", "10s", "--max-depth", "100", "--log-format", "json", "--log-level", "warn",
		"--http", "127.0.0.1:0")
	defer func() {
		c.cmd.Process.Signal(syscall.SIGTERM)
		if code := c.wait(t, time.Minute); code != 0 {
			t.Errorf("crawlnode exited %d after SIGTERM:\n%s", code, tail(c.stderr.String(), 3000))
		}
	}()
	api := apiOf(t, c, data)

	refused := []string{"/literal", "/mapped", "/name", "/redirected"}
	var letters struct {
		DeadLetters []struct {
			URL       string `json:"url"`
			LastError string `json:"last_error"`
		} `json:"dead_letters"`
	}
	deadOf := func(path string) string {
		for _, dl := range letters.DeadLetters {
			if strings.HasSuffix(dl.URL, ":"+port+path) {
				return dl.LastError
			}
		}
		return ""
	}
	clustertest.Eventually(t, 2*time.Minute, "the allowed web crawled and the refused URLs dead letters", func() bool {
		mu.Lock()
		breached := len(internalSeen) > 0
		mu.Unlock()
		if breached {
			return true // fails below, naming what the service saw
		}
		if w.Report(reportOptions(0)).Coverage < 1 {
			return false
		}
		send(t, "GET", api+"/v1/deadletters?limit=1000", "", &letters)
		for _, p := range refused {
			if deadOf(p) == "" {
				return false
			}
		}
		return true
	})
	for _, p := range refused {
		if e := deadOf(p); !strings.HasPrefix(e, "forbidden_address: ") {
			t.Errorf("dead letter %s: %q, want class forbidden_address", p, e)
		}
	}

	var recent struct {
		Errors []struct {
			URL   string `json:"url"`
			Class string `json:"class"`
		} `json:"errors"`
	}
	send(t, "GET", api+"/v1/errors/recent?limit=200", "", &recent)
	forbidden := 0
	for _, e := range recent.Errors {
		if e.Class == "forbidden_address" {
			forbidden++
		}
	}
	if forbidden < len(refused) {
		t.Errorf("recent errors hold %d of class forbidden_address, want >= %d: %+v", forbidden, len(refused), recent.Errors)
	}
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var n int
	for _, line := range strings.Split(string(metrics), "\n") {
		if v, ok := strings.CutPrefix(line, "crawlnode_fetch_forbidden_address_total "); ok {
			fmt.Sscan(v, &n)
		}
	}
	if n < len(refused) {
		t.Errorf("crawlnode_fetch_forbidden_address_total = %d, want >= %d", n, len(refused))
	}

	rep := w.Report(reportOptions(0))
	checkClean(t, rep, 0)
	mu.Lock()
	defer mu.Unlock()
	if len(internalSeen) != 0 {
		t.Errorf("the refused loopback service saw %d requests: %v", len(internalSeen), internalSeen)
	}
	plantMu.Lock()
	defer plantMu.Unlock()
	if plantSeen["/"] != 1 || plantSeen["/redirect"] != 1 {
		t.Errorf("the planted host saw %v, want / and /redirect once each", plantSeen)
	}
	if q := d.count(name); q == 0 {
		t.Errorf("the crawler never asked DNS for %s: the name case was not exercised", name)
	}
	t.Logf("refused service saw 0 requests; planted host %v; DNS queries for %s: %d; forbidden_address errors %d, metric %d",
		plantSeen, name, d.count(name), forbidden, n)
}
