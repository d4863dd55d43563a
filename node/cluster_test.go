package node

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/fetch"
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
	base := t.TempDir()
	mk := func(name string, seeds []string, join []string, expect int) *Node {
		nc := testNodeConfig(filepath.Join(base, name), name, rule)
		nc.Seeds = seeds
		nc.Cluster = ClusterConfig{BindAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", Join: join,
			BootstrapExpect: expect, Profile: "test", Grace: 5 * time.Second}
		n, err := New(nc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return n
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	run := func(n *Node) {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- n.Run(context.Background()) }()
	}
	waitAddr := func(n *Node) string {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if a := n.GossipAddr(); a != "" {
				return a
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%s never started its cluster layer", n.Name())
		return ""
	}
	n1 := mk("n1", w.Seeds(), nil, 2)
	run(n1)
	a1 := waitAddr(n1)
	n2 := mk("n2", nil, []string{a1}, 2)
	run(n2)
	for deadline := time.Now().Add(30 * time.Second); len(w.Log()) < 300; {
		if time.Now().After(deadline) {
			t.Fatalf("the two-node cluster did not start crawling: %d requests", len(w.Log()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	n3 := mk("n3", nil, []string{a1}, 0)
	run(n3)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(8 * time.Minute):
		t.Fatal("the cluster did not finish within 8 minutes")
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("run: %v", err)
		}
	}
	if n3.cl.Stats().Imports == 0 {
		t.Errorf("the joining node received no partition")
	}
	rep := w.Report(simweb.ReportOptions{UserAgent: DefaultUserAgent, DefaultDelay: delay, PerHost: 1})
	t.Logf("requests %d, coverage %.4f (%d/%d), duplicates %d, handoffs n1 %d n2 %d, imports n3 %d",
		rep.Requests, rep.Coverage, rep.Reached, rep.MustReach, rep.DuplicateFetches,
		n1.cl.Stats().Handoffs, n2.cl.Stats().Handoffs, n3.cl.Stats().Imports)
	for _, n := range []*Node{n1, n2, n3} {
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
	nc := testNodeConfig(t.TempDir(), "solo", rule)
	n, err := New(nc)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- n.Run(context.Background()) }()
	var api string
	for deadline := time.Now().Add(10 * time.Second); api == ""; {
		if time.Now().After(deadline) {
			t.Fatal("no API address after 10 s")
		}
		api, _ = n.httpAddr.Load().(string)
		time.Sleep(10 * time.Millisecond)
	}
	// A lone node checks for completion every 200 ms and needs two idle rounds: 3 s is
	// many rounds, once its partitions are leased.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		select {
		case err := <-errc:
			t.Fatalf("the node exited before it was given a seed (err %v)", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if v := n.Cluster(); len(v.Leases) == 0 {
		t.Fatalf("no partition leased after 3 s: the wait above proved nothing")
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
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the node did not finish its seeded crawl within 2 minutes")
	}
	rep := w.Report(simweb.ReportOptions{UserAgent: DefaultUserAgent, DefaultDelay: testCrawlDelay, PerHost: 1})
	if rep.Coverage < 1 {
		t.Errorf("coverage %.4f (%d/%d)", rep.Coverage, rep.Reached, rep.MustReach)
	}
}
