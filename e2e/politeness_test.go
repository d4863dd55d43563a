package e2e

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/simweb"
)

// plainWeb switches off every behaviour of a simweb profile (every *Hosts count), so a test
// can switch on just the one it is about.
func plainWeb(c *simweb.Config) {
	v := reflect.ValueOf(c).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Name != "Hosts" && strings.HasSuffix(f.Name, "Hosts") && f.Type.Kind() == reflect.Int {
			v.Field(i).SetInt(0)
		}
	}
	c.LinkVariety, c.TrackingParams = false, false
}

// TestPolitenessBound crawls a few hosts that all announce a Crawl-delay: every host must
// finish within 10% of its ideal time (its requests times the delay), with no violation.
// Times are the server's: from a host's first request to its last.
func TestPolitenessBound(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	const delay = 250 * time.Millisecond
	w, addr := web(t, func(c *simweb.Config) {
		plainWeb(c)
		c.Hosts = 6
		c.Seed = 4
		c.CrossHostLinks = 0
		c.CrawlDelayHosts = 6
		c.CrawlDelay = delay
		c.CrawlDelayMaxPages = 60
	})
	data := filepath.Join(t.TempDir(), "data")
	c := startCrawler(t, crawlArgs(data, addr, w, t, "--log-level", "debug")...)
	if code := c.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("crawlnode exited %d:\n%s", code, tail(c.stderr.String(), 2000))
	}
	checkClean(t, w.Report(reportOptions(0)), 0)
	for _, line := range strings.Split(c.stderr.String(), "\n") {
		if strings.Contains(line, "fetch failed") {
			t.Log(line)
		}
	}
	first, last, count := map[string]time.Time{}, map[string]time.Time{}, map[string]int{}
	for _, r := range w.Log() {
		if _, ok := first[r.Host]; !ok || r.Arrival.Before(first[r.Host]) {
			first[r.Host] = r.Arrival
		}
		if r.Arrival.After(last[r.Host]) {
			last[r.Host] = r.Arrival
		}
		count[r.Host]++
	}
	if len(count) != 6 {
		t.Fatalf("requests went to %d hosts, want 6", len(count))
	}
	// Gaps much longer than the delay are where the time went; show a few.
	prev := map[string]simweb.RequestRecord{}
	shown := 0
	for _, r := range w.Log() {
		if p, ok := prev[r.Host]; ok && r.Arrival.Sub(p.Arrival) > delay*3/2 && shown < 8 {
			shown++
			t.Logf("gap %s on %s: %s (%d) -> %s", r.Arrival.Sub(p.Arrival).Round(time.Millisecond), r.Host, p.Path, p.Status, r.Path)
		}
		prev[r.Host] = r
	}
	for host, n := range count {
		ideal := time.Duration(n-1) * delay
		took := last[host].Sub(first[host])
		t.Logf("%s: %d requests in %s, ideal %s (%.1f%% over)", host, n, took.Round(time.Millisecond), ideal, 100*(took.Seconds()/ideal.Seconds()-1))
		if n < 20 {
			t.Errorf("%s: only %d requests; the check needs a real queue", host, n)
		}
		if took > ideal+ideal/10 {
			t.Errorf("%s took %s, more than 10%% over the ideal %s", host, took, ideal)
		}
		if took < ideal-delay/2 {
			t.Errorf("%s took %s, faster than its Crawl-delay allows (%s)", host, took, ideal)
		}
	}
}

// TestPolitenessBoundManyHosts is the politeness-bound benchmark of the performance issue:
// many hosts, every one announcing a Crawl-delay, so the crawl's ideal time is the slowest
// host's (requests - 1) x delay. It reports the whole crawl against that ideal and each
// host's overshoot. Minutes of wall time and sensitive to machine load, so it runs only when
// asked:
//
//	CRAWLNODE_BENCH_POLITENESS=1 go test -count=1 -run TestPolitenessBoundManyHosts -v ./e2e/
func TestPolitenessBoundManyHosts(t *testing.T) {
	if os.Getenv("CRAWLNODE_BENCH_POLITENESS") == "" {
		t.Skip("benchmark: set CRAWLNODE_BENCH_POLITENESS=1")
	}
	const delay = 250 * time.Millisecond
	const hosts = 100
	w, addr := web(t, func(c *simweb.Config) {
		plainWeb(c)
		c.Hosts = hosts
		c.Seed = 5
		c.CrawlDelayHosts = hosts
		c.CrawlDelay = delay
		c.CrawlDelayMaxPages = 40
	})
	data := filepath.Join(t.TempDir(), "data")
	// The binary's default priority for extraction (TestMain turns it off for the suite);
	// CRAWLNODE_BENCH_POLITENESS_ARGS adds flags, e.g. "--no-extract".
	args := crawlArgs(data, addr, w, t, "--extract-nice", "20")
	args = append(args, strings.Fields(os.Getenv("CRAWLNODE_BENCH_POLITENESS_ARGS"))...)
	c := startCrawler(t, args...)
	if code := c.wait(t, 10*time.Minute); code != 0 {
		t.Fatalf("crawlnode exited %d:\n%s", code, tail(c.stderr.String(), 2000))
	}
	checkClean(t, w.Report(reportOptions(0)), 0)
	first, last, count := map[string]time.Time{}, map[string]time.Time{}, map[string]int{}
	var start, end time.Time
	for _, r := range w.Log() {
		if _, ok := first[r.Host]; !ok || r.Arrival.Before(first[r.Host]) {
			first[r.Host] = r.Arrival
		}
		if r.Arrival.After(last[r.Host]) {
			last[r.Host] = r.Arrival
		}
		if start.IsZero() || r.Arrival.Before(start) {
			start = r.Arrival
		}
		if r.Arrival.After(end) {
			end = r.Arrival
		}
		count[r.Host]++
	}
	var ideal time.Duration
	var over []float64
	for host, n := range count {
		hostIdeal := time.Duration(n-1) * delay
		ideal = max(ideal, hostIdeal)
		if n > 1 {
			over = append(over, 100*(last[host].Sub(first[host]).Seconds()/hostIdeal.Seconds()-1))
		}
	}
	sort.Float64s(over)
	took := end.Sub(start)
	t.Logf("%d hosts, %d requests: crawl took %s (server's first to last request), ideal %s (slowest host): %.1f%% over",
		len(count), len(w.Log()), took.Round(time.Millisecond), ideal, 100*(took.Seconds()/ideal.Seconds()-1))
	if len(over) > 0 {
		t.Logf("per host over ideal: median %.1f%%, p90 %.1f%%, max %.1f%% (%d hosts)", over[len(over)/2], over[len(over)*9/10], over[len(over)-1], len(over))
	}
	logGapParts(t, w.Log(), delay)
}

// logGapParts splits each host's gaps between request arrivals into what the server took to
// answer the earlier request (arrival to its last byte written) and what is left past the
// delay after that (the crawler's wake-up, lease and request): the two ways a
// politeness-bound crawl falls behind its ideal.
func logGapParts(t *testing.T, log []simweb.RequestRecord, delay time.Duration) {
	byHost := map[string][]simweb.RequestRecord{}
	for _, r := range log {
		byHost[r.Host] = append(byHost[r.Host], r)
	}
	var serve, rest []float64
	for _, rs := range byHost {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Arrival.Before(rs[j].Arrival) })
		for i := 1; i < len(rs); i++ {
			p := rs[i-1]
			if p.Finish.IsZero() {
				continue
			}
			serve = append(serve, p.Finish.Sub(p.Arrival).Seconds()*1000)
			rest = append(rest, (rs[i].Arrival.Sub(p.Finish)-delay).Seconds()*1000)
		}
	}
	if len(serve) == 0 {
		return
	}
	sort.Float64s(serve)
	sort.Float64s(rest)
	q := func(v []float64, f float64) float64 { return v[min(len(v)-1, int(f*float64(len(v))))] }
	t.Logf("gaps (%d): server's answer took median %.2f ms, p90 %.2f ms; after it, the delay and then median %.2f ms, p90 %.2f ms, min %.2f ms more before the next request arrived",
		len(serve), q(serve, 0.5), q(serve, 0.9), q(rest, 0.5), q(rest, 0.9), rest[0])
}
