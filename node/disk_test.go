package node

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/internal/clusterauth"
	"github.com/crawlnode/crawlnode/internal/clustertest"
	"github.com/crawlnode/crawlnode/replica"
	"github.com/crawlnode/crawlnode/simweb"
)

// TestDiskFullClusterBackPressure: three nodes crawl; n3's disk fills mid-crawl (its
// free-space source drops to 0). n3 must not crash: it refuses forwarded links, partition
// imports and replica rounds with 503 and seeds with 507, its extract stage waits, and its
// peers keep the links for it in their outboxes. Once space is back the crawl ends with full
// coverage and no duplicate fetch, as simweb saw it.
func TestDiskFullClusterBackPressure(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster crawl")
	}
	cfg := plainWeb()
	cfg.Hosts, cfg.Seed, cfg.MeanPages, cfg.MaxWords = 18, 29, 30, 1500
	w, rule := startSimweb(t, cfg)
	var free atomic.Int64
	free.Store(1 << 40)
	tc := newTestCluster(t, 3, rule, 5*time.Second, func(nc *Config) {
		nc.ExitWhenDone = true
		nc.MinFreeDisk = 64 << 20
		nc.freeDisk = func() (int64, error) { return 1 << 40, nil }
		switch nc.Name {
		case "n1":
			nc.Seeds = w.Seeds()
		case "n3":
			nc.freeDisk = func() (int64, error) { return free.Load(), nil }
		}
	})
	n1, n2, n3 := tc.nodes[0], tc.nodes[1], tc.nodes[2]
	clustertest.Eventually(t, 60*time.Second, "the cluster to crawl 60 pages", func() bool { return len(w.Log()) >= 60 })

	free.Store(0)
	clustertest.Eventually(t, 10*time.Second, "n3 to see its disk full", n3.diskShort)

	// Every writer that takes work from outside refuses it, before reading a byte: a
	// member's request (signed as n1; no cluster key here, so its name over loopback).
	member, err := clusterauth.NewSigner(n1.Name(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{forward.LinksPath, replica.Path, "/internal/v1/partitions/0"} {
		req, _ := http.NewRequest("POST", "http://"+n3.peerAddr()+path, strings.NewReader("x"))
		req.Header.Set("Content-Type", "application/octet-stream")
		member.Sign(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("POST %s on a full disk: %d (Retry-After %q), want 503 with Retry-After", path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	seeds, _ := json.Marshal(map[string][]string{"urls": w.Seeds()})
	n3API, _ := n3.httpAddr.Load().(string)
	resp, err := http.Post("http://"+n3API+"/v1/crawl/seeds", "application/json", bytes.NewReader(seeds))
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Code, Message string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInsufficientStorage || body.Code != "disk_full" {
		t.Errorf("seeds on a full disk: %d %+v, want 507 disk_full", resp.StatusCode, body)
	}

	// The same seeds through n1: those for n3's hosts wait in the peers' outboxes, whose
	// sends to n3 fail and back off.
	n1API, _ := n1.httpAddr.Load().(string)
	if resp, err := http.Post("http://"+n1API+"/v1/crawl/seeds", "application/json", bytes.NewReader(seeds)); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("seeds through n1: %d", resp.StatusCode)
	}
	held := func() (queued int, failures int64) {
		for _, n := range []*testNode{n1, n2} {
			st := n.cluster.Outbox().Stats()
			queued += st.QueuedByPeer["n3"]
			failures += st.Failures
		}
		return
	}
	clustertest.Eventually(t, 30*time.Second, "the peers to hold links for n3 after a refused send", func() bool {
		q, f := held()
		return q > 0 && f > 0
	})

	// The extract stage waits: nothing more is processed while the disk stays full (a page
	// taken before the pause may finish first).
	time.Sleep(time.Second)
	before := n3.stage.Stats().Processed
	time.Sleep(2 * time.Second)
	if after := n3.stage.Stats().Processed; after != before {
		t.Errorf("n3's extract stage processed %d pages on a full disk", after-before)
	}
	if q, _ := held(); q == 0 {
		t.Errorf("the peers dropped their links for n3 while its disk was full")
	}
	select {
	case err := <-n3.errc:
		n3.done = true
		t.Fatalf("n3 stopped on a full disk: %v", err)
	default:
	}
	q, f := held()
	t.Logf("disk full on n3 for ~5 s: peers hold %d links for it after %d refused sends", q, f)

	free.Store(1 << 40)
	tc.wait(4 * time.Minute)
	rep := w.Report(simweb.ReportOptions{UserAgent: DefaultUserAgent, DefaultDelay: testCrawlDelay, PerHost: 1})
	t.Logf("requests %d, coverage %.4f (%d/%d), duplicates %d", rep.Requests, rep.Coverage, rep.Reached, rep.MustReach, rep.DuplicateFetches)
	if rep.Coverage < 1 {
		t.Errorf("coverage %.4f, missing %v", rep.Coverage, rep.Missing[:min(10, len(rep.Missing))])
	}
	if rep.DuplicateFetches != 0 || rep.RobotsViolations != 0 || rep.PolitenessViolations != 0 {
		t.Errorf("duplicates %d, robots violations %d, politeness %d", rep.DuplicateFetches, rep.RobotsViolations, rep.PolitenessViolations)
	}
}
