package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/internal/s3test"
	"github.com/crawlnode/crawlnode/simweb"
)

// storeCorpus downloads every corpus shard under prefix into a temporary directory and
// reads its records by canonical URL.
func storeCorpus(t *testing.T, srv *s3test.Server, bucket, prefix string) (map[string][]*corpus.Record, int) {
	t.Helper()
	dir := t.TempDir()
	for key := range srv.Objects(t, bucket, prefix) {
		if strings.Contains(key, "/corpus/") && strings.HasSuffix(key, ".jsonl.zst") {
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(key)), srv.Get(t, bucket, key), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	byURL, total := map[string][]*corpus.Record{}, 0
	if err := corpus.ReadShards(dir, func(r corpus.Record) error {
		byURL[canon(r.URL)] = append(byURL[canon(r.URL)], &r)
		total++
		return nil
	}); err != nil {
		t.Fatalf("read the store's corpus: %v", err)
	}
	return byURL, total
}

// TestClusterStoreNodeLost: three members crawl with extraction on and an output store
// (a real SeaweedFS); files rotate only every 10 minutes, so nothing a member fetched is
// in the store until the end. One member is killed with SIGKILL mid-crawl, its data
// directory deleted, and never restarted. Judged by the store and simweb: a WARC response
// for at least 99.9% of the must-reach pages (the survivors fetched again what the lost
// member had fetched, since none of it reached the store), the store's corpus with exactly
// one record for every must-reach HTML page (a refetch is the original, not a duplicate of
// its lost capture), and no politeness or robots violation; the repeated fetches are the
// lost member's own.
func TestClusterStoreNodeLost(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster crawl with an output store")
	}
	srv := s3test.Start(t, "crawl")
	setStoreEnv(t)
	const delay = 50 * time.Millisecond
	const grace = 3 * time.Second
	w, addr := web(t, func(c *simweb.Config) {
		c.Hosts, c.Seed = 24, 11
		c.MirrorHosts, c.NearDupHosts, c.CrawlDelayHosts = 2, 4, 0
	})
	args := slices.DeleteFunc(clusterArgs(addr, delay, grace), func(a string) bool { return a == "--no-extract" })
	args = append(args, "--output-store", "s3://crawl/lost", "--s3-endpoint", srv.Endpoint(), "--rotate-every", "10m")
	cr := newClusterRun(t, args)
	start := time.Now()
	n1 := cr.addThree(seedsFile(t, w))
	waitLogged(t, w, 700, 2*time.Minute)
	v, err := n1.view(t)
	if err != nil {
		t.Fatal(err)
	}
	victim := cr.followerHolding(t, v)
	victim.c.cmd.Process.Signal(syscall.SIGKILL)
	victim.waitExit(t, 10*time.Second)
	killedAt := time.Now()
	if err := os.RemoveAll(victim.data); err != nil {
		t.Fatal(err)
	}
	ua := "; " + victim.name + ")"
	byVictim := 0
	for _, r := range w.Log() {
		if strings.HasSuffix(r.UserAgent, ua) {
			byVictim++
		}
	}
	held := v.owners()[victim.name]
	var rs replStats
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if rs = cr.replicas(); rs.Promoted >= int64(held) {
			break
		}
	}
	t.Logf("killed %s after %s holding %d partitions, %d requests of it seen; copies promoted %d, pages to refetch %d",
		victim.name, killedAt.Sub(start).Round(time.Millisecond), held, byVictim, rs.Promoted, rs.Refetched)
	if byVictim == 0 || rs.Refetched == 0 {
		t.Errorf("nothing to refetch (%d requests by %s, %d refetches): the test proves nothing", byVictim, victim.name, rs.Refetched)
	}
	cr.waitAll(3 * time.Minute)
	t.Logf("crawl done in %s", time.Since(start).Round(time.Millisecond))

	// simweb: no violation; repeated fetches are at most what the lost member fetched
	// (its pages fetched again, and pages its copy still had queued) and what was in flight.
	rep := w.Report(reportOptions(delay))
	checkClean(t, rep, byVictim+32)

	// The store: a WARC response or revisit for every must-reach page.
	uris, objects := storeWARCs(t, srv, "crawl", "lost/nodes/")
	must := w.MustReach(reportOptions(0))
	var missing []string
	for _, u := range must {
		if uris[canon(u)] == 0 {
			missing = append(missing, u)
		}
	}
	t.Logf("store: %d WARC files and indexes, captures of %d URLs; must-reach %d, without a capture %d", len(objects), len(uris), len(must), len(missing))
	if float64(len(missing)) > 0.001*float64(len(must)) {
		t.Errorf("%d of %d must-reach pages have no WARC record in the store, e.g. %v", len(missing), len(must), first(missing, 10))
	}
	for name := range objects {
		if strings.Contains(name, "-"+victim.name+".warc.gz") {
			t.Logf("the lost member shipped %s before its death", name)
		}
	}
	// The store's corpus: exactly one record for every must-reach HTML page.
	byURL, total := storeCorpus(t, srv, "crawl", "lost/nodes/")
	checkRecords(t, w, byURL, total)
	selfDup := 0
	for u, recs := range byURL {
		for _, r := range recs {
			if r.DuplicateOf != "" && canon(r.DuplicateOf) == u {
				selfDup++
			}
		}
	}
	if selfDup > 0 {
		t.Errorf("%d records are marked duplicates of their own URL (a lost capture)", selfDup)
	}
}
