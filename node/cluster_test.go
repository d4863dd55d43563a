package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/fetch"
	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/internal/clustertest"
	"github.com/crawlnode/crawlnode/ring"
	"github.com/crawlnode/crawlnode/simweb"
)

// testLogger discards, or writes to stderr at info level with CLUSTER_TEST_LOG=1.
func testLogger(name string) *slog.Logger {
	if os.Getenv("CLUSTER_TEST_LOG") == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("test_node", name)
}

// startSimweb serves a simweb built from cfg on loopback until the test ends and returns it
// with the rule that resolves its *.sim.test names there.
func startSimweb(t *testing.T, cfg simweb.Config) (*simweb.Web, fetch.ResolveRule) {
	t.Helper()
	w, err := simweb.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := w.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	rule, err := fetch.ParseResolve("*.sim.test=" + addr)
	if err != nil {
		t.Fatal(err)
	}
	return w, rule
}

// noWeb is a resolve rule for nodes that crawl nothing: *.sim.test on a closed port.
func noWeb(t *testing.T) fetch.ResolveRule {
	t.Helper()
	rule, err := fetch.ParseResolve("*.sim.test=127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	return rule
}

// testCrawlDelay is the politeness delay of the in-process crawls.
const testCrawlDelay = 5 * time.Millisecond

// testNodeConfig is the config of an in-process test node crawling through rule: short
// delays and retries, one extract worker, no free-disk floor, an HTTP API on loopback.
func testNodeConfig(dir, name string, rule fetch.ResolveRule) Config {
	return Config{
		DataDir: dir, Name: name, ExitWhenDone: true,
		Delay: testCrawlDelay, DelaySet: true, Concurrency: 8, ExtractWorkers: 1, MaxDepth: 100,
		RobotsRetryBase: 50 * time.Millisecond, RetryBase: 50 * time.Millisecond, FetchTimeout: 5 * time.Second,
		Resolve: []fetch.ResolveRule{rule}, HTTPAddr: "127.0.0.1:0", MinFreeDisk: -1,
		Logger: testLogger(name),
		// In-process clusters test routing, handoff and replicas, not the disk: without
		// fsync their several Badger DBs do not queue behind a shared, loaded disk (with
		// fsync, under a load average of 28, TestClusterInProcess missed its 30 s bound; the
		// load alone may explain it). What a power cut may lose is tested through the
		// binary (e2e TestPowerCut*), the group commit in TestGroupSync*.
		NoSync: true,
	}
}

// TestClusterInProcess runs real nodes in one process (so the race detector sees the
// cluster code): two form a cluster, a third joins mid-crawl and takes partitions over by
// handoff, and the crawl must end on every node with full coverage, no duplicate fetch
// and no robots or politeness violation, as simweb saw it.
func TestClusterInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster crawl")
	}
	cfg := simweb.DefaultConfig()
	cfg.Hosts, cfg.Seed, cfg.MeanPages, cfg.MaxWords = 24, 11, 40, 2000
	cfg.CrawlDelayHosts = 0
	w, rule := startSimweb(t, cfg)
	const delay = testCrawlDelay
	tc := newTestCluster(t, 2, rule, 5*time.Second, func(nc *Config) {
		nc.ExitWhenDone = true
		if nc.Name == "n1" {
			nc.Seeds = w.Seeds()
		}
	})
	n1, n2 := tc.nodes[0], tc.nodes[1]
	clustertest.Eventually(t, 30*time.Second, "the two-node cluster to crawl 300 pages", func() bool { return len(w.Log()) >= 300 })
	n3 := tc.add(0)
	// The leader registers n3 at once rather than at its next slow tick; the nodes' own
	// loops hand it its partitions.
	clustertest.Eventually(t, 30*time.Second, "n3 registered", func() bool {
		tc.lead()
		return n3.cluster.Registered("n3")
	})
	tc.wait(8 * time.Minute)
	if n3.cluster.Stats().Imports == 0 {
		t.Errorf("the joining node received no partition")
	}
	rep := w.Report(simweb.ReportOptions{UserAgent: DefaultUserAgent, DefaultDelay: delay, PerHost: 1})
	t.Logf("requests %d, coverage %.4f (%d/%d), duplicates %d, handoffs n1 %d n2 %d, imports n3 %d",
		rep.Requests, rep.Coverage, rep.Reached, rep.MustReach, rep.DuplicateFetches,
		n1.cluster.Stats().Handoffs, n2.cluster.Stats().Handoffs, n3.cluster.Stats().Imports)
	for _, n := range []*testNode{n1, n2, n3} {
		r := n.repl.Counters()
		t.Logf("%s replicas: rounds %d, sections from the change log %d, log overflows %d, resets %d", n.Name(), r.Rounds, r.Keyed, r.LogOverflows, r.Resets)
	}
	if rep.Coverage < 1 {
		t.Errorf("coverage %.4f, missing %v", rep.Coverage, rep.Missing[:min(10, len(rep.Missing))])
	}
	if rep.DuplicateFetches != 0 || rep.RobotsViolations != 0 || rep.BeforeRobots != 0 || rep.PolitenessViolations != 0 {
		t.Errorf("duplicates %d %v, robots violations %d, before robots %d, politeness %d %v", rep.DuplicateFetches, rep.Duplicates,
			rep.RobotsViolations, rep.BeforeRobots, rep.PolitenessViolations, rep.PolitenessSamples)
	}
}

// TestExitWhenDoneWaitsForSeeds: a node started with --exit-when-done and no seeds (a
// member waiting for seeds through the API) must not call an empty crawl done; once seeds
// arrive, it crawls them all and exits. (Under load, a cluster formed before its seeds
// arrived used to decide it was done and exit a few seconds later, with its seeds unfetched.)
func TestExitWhenDoneWaitsForSeeds(t *testing.T) {
	cfg := simweb.DefaultConfig()
	cfg.Hosts, cfg.Seed, cfg.MeanPages, cfg.MaxWords = 4, 3, 10, 500
	cfg.CrawlDelayHosts = 0
	w, rule := startSimweb(t, cfg)
	tc := newTestCluster(t, 1, rule, 0, func(nc *Config) { nc.ExitWhenDone = true })
	n := tc.nodes[0]
	api, _ := n.httpAddr.Load().(string)
	// The partitions are leased at once; then a lone node checks for completion every
	// 200 ms and needs two idle rounds: 3 s is many rounds.
	tc.lead()
	clustertest.Eventually(t, 5*time.Second, "every partition leased", func() bool {
		return leaseCounts(n)["n1"] == ring.PartitionCount
	})
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		select {
		case err := <-n.errc:
			n.done = true
			t.Fatalf("the node exited before it was given a seed (err %v)", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	body, _ := json.Marshal(map[string]any{"urls": w.Seeds()})
	resp, err := http.Post("http://"+api+"/v1/crawl/seeds", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/crawl/seeds: %s", resp.Status)
	}
	tc.wait(2 * time.Minute)
	rep := w.Report(simweb.ReportOptions{UserAgent: DefaultUserAgent, DefaultDelay: testCrawlDelay, PerHost: 1})
	if rep.Coverage < 1 {
		t.Errorf("coverage %.4f (%d/%d)", rep.Coverage, rep.Reached, rep.MustReach)
	}
}

// TestClusterJoinRebalances: a member that joins a formed cluster gets its share of the
// partitions by handoff, the leader's rounds and the handoffs run by the test at once.
func TestClusterJoinRebalances(t *testing.T) {
	rule := noWeb(t)
	tc := newTestCluster(t, 2, rule, 5*time.Second, nil)
	clustertest.Eventually(t, 20*time.Second, "a settled two-node cluster", func() bool {
		tc.round()
		return tc.settled()
	})
	n3 := tc.add(0)
	clustertest.Eventually(t, 30*time.Second, "n3 registered and the ring settled", func() bool {
		tc.round()
		return n3.cluster.Registered("n3") && tc.settled()
	})
	counts := leaseCounts(n3)
	if counts["n3"] == 0 || counts["n1"] == 0 || counts["n2"] == 0 || counts["n1"]+counts["n2"]+counts["n3"] != ring.PartitionCount {
		t.Fatalf("leases %v after the join", counts)
	}
	var handoffs int64
	for _, n := range tc.nodes[:2] {
		handoffs += n.cluster.Stats().Handoffs
	}
	// Every partition n3 holds came from n1 or n2 by a handoff (an import on n3), never by
	// a forced move.
	if imp := n3.cluster.Stats().Imports; handoffs < int64(counts["n3"]) || imp < int64(counts["n3"]) {
		t.Errorf("n3 holds %d partitions after %d handoffs and %d imports", counts["n3"], handoffs, imp)
	}
	if f := tc.leader().cluster.Stats().Forced; f != 0 {
		t.Errorf("%d leases forced in a join", f)
	}
}

// TestClusterDeathPastGrace: a member that stops is kept (with its leases) while the
// grace runs, then removed and its partitions forced onto the others. The nodes' clock
// is moved past the grace instead of waiting for it.
func TestClusterDeathPastGrace(t *testing.T) {
	rule := noWeb(t)
	const grace = time.Hour
	tc := newTestCluster(t, 3, rule, grace, nil)
	clustertest.Eventually(t, 20*time.Second, "a settled three-node cluster", func() bool {
		tc.round()
		return tc.settled()
	})
	ld := tc.leader()
	var victim *testNode
	for _, n := range tc.nodes {
		if n != ld {
			victim = n
			break
		}
	}
	held := leaseCounts(ld)[victim.Name()]
	if err := tc.stop(victim); err != nil {
		t.Fatalf("stop %s: %v", victim.Name(), err)
	}
	clustertest.Eventually(t, 10*time.Second, "the leader to mark "+victim.Name()+" dead", func() bool {
		tc.lead()
		_, dead := ld.cluster.DeadSince(victim.Name())
		return dead
	})
	tc.lead()
	if c := leaseCounts(ld); c[victim.Name()] != held || !ld.cluster.Registered(victim.Name()) {
		t.Fatalf("within the grace: %s holds %d partitions (had %d), registered %v",
			victim.Name(), c[victim.Name()], held, ld.cluster.Registered(victim.Name()))
	}
	tc.advance(grace)
	tc.lead()
	c := leaseCounts(ld)
	if ld.cluster.Registered(victim.Name()) || c[victim.Name()] != 0 || c[""] != 0 {
		t.Fatalf("past the grace: %s registered %v, leases %v", victim.Name(), ld.cluster.Registered(victim.Name()), c)
	}
	if f := ld.cluster.Stats().Forced; f != int64(held) {
		t.Errorf("%d leases forced, want the %d %s held", f, held, victim.Name())
	}
	clustertest.Eventually(t, 20*time.Second, "the survivors settled", func() bool {
		tc.round()
		return tc.settled()
	})
}

// TestClusterSweepSendsLeftovers: a URL queued on a node that does not hold its
// partition's lease (an interrupted handoff, a node back after its leases moved) is sent
// to the lease holder by the sweep, and dropped here.
func TestClusterSweepSendsLeftovers(t *testing.T) {
	tc := newTestCluster(t, 2, noWeb(t), 5*time.Second, nil)
	clustertest.Eventually(t, 20*time.Second, "a settled two-node cluster", func() bool {
		tc.round()
		return tc.settled()
	})
	n1, n2 := tc.nodes[0], tc.nodes[1]
	var url string
	var p uint16
	for i := 0; url == ""; i++ {
		u := fmt.Sprintf("http://h%d.sim.test/", i)
		if q, _ := forward.PartitionOfURL(u); func() bool { o, _ := n1.cluster.OwnerOf(q); return o == "n2" }() {
			url, p = u, q
		}
	}
	if _, err := n1.front.Add([]frontier.Candidate{{URL: url}}); err != nil {
		t.Fatal(err)
	}
	has := func(n *testNode) bool {
		parts, err := n.front.Partitions()
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(parts, p)
	}
	if !has(n1) {
		t.Fatalf("partition %d not present on n1 after the add", p)
	}
	swept, imports := n1.cluster.Stats().Swept, n2.cluster.Stats().Imports
	clustertest.Eventually(t, 20*time.Second, fmt.Sprintf("partition %d swept from n1 to n2", p), func() bool {
		tc.sweep()
		return !has(n1) && has(n2)
	})
	if s := n1.cluster.Stats().Swept - swept; s != 1 {
		t.Errorf("n1 swept %d partitions, want 1", s)
	}
	if s := n2.cluster.Stats().Imports - imports; s != 1 {
		t.Errorf("n2 imported %d partitions, want 1", s)
	}
}
