package e2e

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/internal/clustertest"
	"github.com/crawlnode/crawlnode/simweb"
)

// pageFetches counts, in the server's log, the requests for pages (robots.txt and its
// redirect hops and /.well-known/tdmrep.json left out) that got a final answer: 2xx, 3xx
// or 4xx other than 429, the answers the crawler records as fetched. 5xx, 429 and dropped
// connections are retried and not counted by --max-pages.
func pageFetches(log []simweb.RequestRecord) int {
	n := 0
	for _, r := range log {
		if r.RobotsFile || r.Path == "/.well-known/tdmrep.json" {
			continue
		}
		if r.Status >= 200 && r.Status < 500 && r.Status != 429 {
			n++
		}
	}
	return n
}

// TestMaxPages runs one node with --max-pages N on a web many times larger than N and
// judges the limit by what the server saw: at least N page fetches, at most N plus the
// fetches that may have been in flight when the N-th was recorded, and exit status 0.
//
// The slack: the node runs --concurrency fetch slots, and each lease a slot takes makes at
// most one request (robots.txt and tdmrep.json are fetched in a lease's slot and the
// lease's URL is requeued). A slot checks the count of recorded fetches before it asks
// anything, and stops once the count is N. So when the N-th fetch is recorded, the slot
// that recorded it has no request out and each of the other concurrency-1 slots has at
// most one: page fetches <= N + concurrency - 1. The web has no slow, trickling or huge
// pages, so no page request ends in a timeout that the server counted as answered and
// the crawler did not.
func TestMaxPages(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	const maxPages, concurrency = 1000, 16
	w, addr := web(t, func(c *simweb.Config) {
		c.Hosts, c.Seed = 50, 7
		c.SlowHosts, c.TrickleHosts, c.HugeHosts = 0, 0, 0
	})
	data := filepath.Join(t.TempDir(), "data")
	c := startCrawler(t, crawlArgs(data, addr, w, t,
		"--max-pages", strconv.Itoa(maxPages), "--concurrency", strconv.Itoa(concurrency))...)
	if code := c.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("crawlnode --max-pages %d exited %d:\n%s", maxPages, code, tail(c.stderr.String(), 3000))
	}
	rep := w.Report(reportOptions(0))
	got := pageFetches(w.Log())
	t.Logf("--max-pages %d --concurrency %d: the server answered %d page fetches (%d requests in all; the web has %d must-reach pages)",
		maxPages, concurrency, got, rep.Requests, rep.MustReach)
	if rep.MustReach < 4*maxPages {
		t.Fatalf("the web has only %d must-reach pages: the crawl could end before the limit", rep.MustReach)
	}
	if hi := maxPages + concurrency - 1; got < maxPages || got > hi {
		t.Errorf("the server answered %d page fetches; --max-pages %d with %d slots allows %d to %d", got, maxPages, concurrency, maxPages, hi)
	}
	if rep.RobotsViolations != 0 || rep.BeforeRobots != 0 || rep.PolitenessViolations != 0 {
		t.Errorf("robots violations %d, before robots %d, politeness violations %d", rep.RobotsViolations, rep.BeforeRobots, rep.PolitenessViolations)
	}
}

// TestClusterMaxPages runs three members, each given --max-pages N: the limit is the
// cluster's (the job configuration's), drawn in grants through Raft, so the members record
// N fetches in sum and every one exits 0. Judged by the server: it answered at least N page
// fetches and at most N plus the requests that may have been in flight and not recorded
// (at most one per fetch slot of each member: 3 x concurrency).
func TestClusterMaxPages(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster crawl")
	}
	const maxPages, concurrency = 5000, 32 // clusterArgs' --concurrency
	w, addr := web(t, func(c *simweb.Config) {
		c.Hosts, c.Seed = 120, 8
		c.SlowHosts, c.TrickleHosts, c.HugeHosts = 0, 0, 0
	})
	cr := newClusterRun(t, append(clusterArgs(addr, 0, 30*time.Second), "--max-pages", strconv.Itoa(maxPages)))
	cr.addThree(seedsFile(t, w))
	cr.waitAll(3 * time.Minute)
	byNode := map[string]int{}
	for _, r := range w.Log() {
		for _, n := range cr.nodes {
			if strings.HasSuffix(r.UserAgent, "; "+n.name+")") {
				byNode[n.name] += pageFetches([]simweb.RequestRecord{r})
			}
		}
	}
	rep := w.Report(reportOptions(0))
	if rep.MustReach < 2*maxPages {
		t.Fatalf("the web has only %d must-reach pages: the crawl could end before the limit", rep.MustReach)
	}
	got := pageFetches(w.Log())
	hi := maxPages + 3*concurrency
	t.Logf("--max-pages %d on three members: the server answered %d page fetches (by member %v; %d requests in all)", maxPages, got, byNode, rep.Requests)
	if got < maxPages || got > hi {
		t.Errorf("the server answered %d page fetches; the cluster's --max-pages %d allows %d to %d", got, maxPages, maxPages, hi)
	}
	shared := 0
	for _, k := range byNode {
		if k > 0 {
			shared++
		}
	}
	if shared < 2 {
		t.Errorf("the fetches were not shared: %v", byNode)
	}
	if rep.RobotsViolations != 0 || rep.BeforeRobots != 0 || rep.PolitenessViolations != 0 {
		t.Errorf("robots violations %d, before robots %d, politeness violations %d: %v", rep.RobotsViolations, rep.BeforeRobots, rep.PolitenessViolations, first(rep.PolitenessSamples, 5))
	}
}

// TestClusterMaxPagesStatus: without --exit-when-done the members stop fetching at the
// cluster's limit and keep running; the status of any member says the limit is reached,
// with the cluster's count, and the server sees no more page fetches.
func TestClusterMaxPagesStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster crawl")
	}
	const maxPages, concurrency = 600, 32
	w, addr := web(t, func(c *simweb.Config) {
		c.Hosts, c.Seed = 40, 9
		c.SlowHosts, c.TrickleHosts, c.HugeHosts = 0, 0, 0
	})
	base := slices.DeleteFunc(clusterArgs(addr, 0, 30*time.Second), func(a string) bool { return a == "--exit-when-done" })
	cr := newClusterRun(t, append(base, "--max-pages", strconv.Itoa(maxPages)))
	n1 := cr.addThree(seedsFile(t, w))
	var st struct {
		State        string `json:"state"`
		MaxPages     int64  `json:"max_pages"`
		ClusterPages int64  `json:"cluster_pages"`
		LimitReached bool   `json:"limit_reached"`
		Nodes        []struct {
			Node  string `json:"node"`
			State string `json:"state"`
		} `json:"nodes"`
	}
	clustertest.Eventually(t, 2*time.Minute, "the cluster's status saying limit_reached", func() bool {
		return fetchJSON(n1.api(t)+"/v1/crawl/status", &st) == nil && st.LimitReached && len(st.Nodes) == 3
	})
	if st.MaxPages != maxPages || st.ClusterPages != maxPages {
		t.Errorf("status: max_pages %d, cluster_pages %d, want %d both", st.MaxPages, st.ClusterPages, maxPages)
	}
	got := pageFetches(w.Log())
	time.Sleep(2 * time.Second) // stopped: nothing more arrives
	after := pageFetches(w.Log())
	t.Logf("limit %d: status %+v; the server answered %d page fetches, %d two seconds later", maxPages, st, got, after)
	if got < maxPages || after > maxPages+3*concurrency || after != got {
		t.Errorf("the server answered %d page fetches, then %d; want %d to %d and no more", got, after, maxPages, maxPages+3*concurrency)
	}
	for _, n := range cr.nodes {
		if !n.running() {
			t.Errorf("%s exited without --exit-when-done", n.name)
		}
	}
	// Every member has heard it by now (each within about a second).
	if err := fetchJSON(n1.api(t)+"/v1/crawl/status", &st); err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.State != "limit_reached" {
			t.Errorf("%s: state %q two seconds after the limit, want limit_reached", n.Node, n.State)
		}
	}
}
