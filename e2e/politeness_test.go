package e2e

import (
	"path/filepath"
	"reflect"
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
