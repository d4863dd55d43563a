package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/internal/powercut"
	"github.com/crawlnode/crawlnode/simweb"
)

// mountPowercut mounts a power-cut file system (internal/powercut) for the test, or skips
// the test with one line when FUSE is unavailable.
func mountPowercut(t *testing.T) (*powercut.FS, string, string) {
	t.Helper()
	backing, mnt := filepath.Join(t.TempDir(), "backing"), filepath.Join(t.TempDir(), "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := powercut.Mount(backing, mnt)
	if errors.Is(err, powercut.ErrUnavailable) {
		t.Skipf("FUSE unavailable, no power-cut test: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return fs, backing, mnt
}

// warcURIs counts the response and revisit records per canonical target URI in the WARC
// files under dir, verifying every record.
func warcURIs(t *testing.T, dir string) map[string]int {
	t.Helper()
	uris := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	for _, p := range files {
		err := readWARCFile(p, true, func(r *warcRec) error {
			if r.Type() == "response" || r.Type() == "revisit" {
				uris[canon(r.Get("WARC-Target-URI"))]++
			}
			return nil
		})
		if err != nil {
			t.Errorf("WARC file %s: %v", filepath.Base(p), err)
		}
	}
	return uris
}

// TestPowerCut crawls a simulated web with its data directory on a power-cut file system
// (FUSE; every write not covered by an fsync is thrown away at the cut, see
// internal/powercut for the rule), cuts the power twice mid-crawl (SIGKILL, then the
// unsynced writes are dropped) and restarts the node on what was durable each time.
// Judged by the server and the WARC files: the data directory opens after every cut, the
// crawl completes with full coverage and no politeness or robots violation, and every
// must-reach page has its WARC record. A page whose "done" survived a cut while its WARC
// record did not would never be fetched again, and would be missing here.
func TestPowerCut(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	fs, backing, mnt := mountPowercut(t)
	defer func() { fs.Unmount() }()
	w, addr := web(t, func(c *simweb.Config) { plainWeb(c); c.Hosts = 24; c.Seed = 11 })
	must := w.MustReach(reportOptions(0))
	data := filepath.Join(mnt, "data")
	args := crawlArgs(data, addr, w, t, "--delay", "20ms", "--concurrency", "16", "--no-extract", "--sync-interval", "500ms", "--no-fsync=false")
	inFlight := 0
	for cut := 1; cut <= 2; cut++ {
		c := startCrawler(t, args...)
		want := len(w.Log()) + len(must)/4
		deadline := time.Now().Add(60 * time.Second)
		for len(w.Log()) < want {
			select {
			case err := <-c.done:
				t.Fatalf("run %d ended before the cut: %v\n%s", cut, err, tail(c.stderr.String(), 3000))
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d: only %d requests of %d after 60 s:\n%s", cut, len(w.Log()), want, tail(c.stderr.String(), 3000))
			}
		}
		at := time.Now()
		c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.done
		n := inFlightAt(w.Log(), at, 16+64)
		inFlight += n
		if err := fs.Cut(); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		syncs, writes, lostWrites, lostNames := fs.Stats()
		t.Logf("cut %d: %d requests so far, %d in flight; the file system saw %d fsyncs and %d unsynced writes, the cut dropped %d writes and %d name operations",
			cut, len(w.Log()), n, syncs, writes, lostWrites, lostNames)
		var err error
		if fs, err = fs.Remount(); err != nil {
			t.Fatal(err)
		}
	}
	c := startCrawler(t, args...)
	if code := c.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("the run after the cuts exited %d:\n%s", code, tail(c.stderr.String(), 3000))
	}
	if out := c.stderr.String(); strings.Contains(out, "panic:") {
		t.Errorf("panic after a power cut:\n%s", tail(out, 3000))
	}
	// Fetches lost with the cut are done again: at most what was in flight or waiting for
	// its sync at each cut (two sync intervals of fetches), bounded per cut like a kill -9.
	rep := w.Report(reportOptions(20 * time.Millisecond))
	checkClean(t, rep, inFlight+2*(16+64))

	fs.Unmount()
	uris := warcURIs(t, filepath.Join(backing, "data", "warc"))
	var missing []string
	for _, u := range must {
		if uris[canon(u)] == 0 {
			missing = append(missing, u)
		}
	}
	t.Logf("WARC: responses for %d URLs; must-reach %d, missing %d; duplicates %d", len(uris), len(must), len(missing), rep.DuplicateFetches)
	if len(missing) > 0 {
		t.Errorf("%d must-reach pages have no WARC record after the power cuts (recorded as fetched, record lost), e.g. %v", len(missing), first(missing, 10))
	}
}

// TestPowerCutCluster: three processes, n3's data directory on a power-cut file system.
// Mid-crawl n3 loses power (SIGKILL, unsynced writes dropped) and comes back within the
// grace period. Its peers deleted the links n3 acknowledged from their outboxes, so a
// link n3 acknowledged before it was durable would be lost for good (the peers' recent-
// forward cache keeps them from sending it again soon). Judged by the server and the WARC
// files: full coverage, no violation, every must-reach page archived by some member.
func TestPowerCutCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster crawl")
	}
	fs, backing, mnt := mountPowercut(t)
	defer func() { fs.Unmount() }()
	const delay = 20 * time.Millisecond
	w, addr := web(t, func(c *simweb.Config) { plainWeb(c); c.Hosts = 45; c.Seed = 12 })
	must := w.MustReach(reportOptions(0))
	seeds := seedsFile(t, w)
	cr := newClusterRun(t, clusterArgs(addr, delay, 30*time.Second))
	n1 := cr.add("n1", "--bootstrap-expect", "3", "--seeds", seeds)
	cr.add("n2", "--bootstrap-expect", "3", "--join", n1.bind)
	n3 := cr.add("n3", "--bootstrap-expect", "3", "--join", n1.bind, "--data", filepath.Join(mnt, "n3"), "--no-fsync=false")
	waitLogged(t, w, len(must)/3, 2*time.Minute)
	if !n3.running() {
		t.Fatalf("n3 ended before the cut:\n%s", tail(n3.c.stderr.String(), 2000))
	}
	at := time.Now()
	n3.c.cmd.Process.Signal(syscall.SIGKILL)
	<-n3.c.done
	n3.exited = true
	inFlight := inFlightAt(w.Log(), at, 32+64)
	if err := fs.Cut(); err != nil {
		t.Fatal(err)
	}
	_, _, lostWrites, lostNames := fs.Stats()
	var err error
	if fs, err = fs.Remount(); err != nil {
		t.Fatal(err)
	}
	t.Logf("power cut on n3 after %d requests (%d in flight): %d writes and %d name operations dropped", len(w.Log()), inFlight, lostWrites, lostNames)
	time.Sleep(time.Second)
	n3.start(t)
	cr.waitAll(5 * time.Minute)
	rep := w.Report(reportOptions(delay))
	checkClean(t, rep, inFlight+32+64)

	fs.Unmount()
	uris := map[string]int{}
	for _, dir := range []string{filepath.Join(cr.dir, "n1", "warc"), filepath.Join(cr.dir, "n2", "warc"), filepath.Join(backing, "n3", "warc")} {
		for u, k := range warcURIs(t, dir) {
			uris[u] += k
		}
	}
	var missing []string
	for _, u := range must {
		if uris[canon(u)] == 0 {
			missing = append(missing, u)
		}
	}
	t.Logf("WARC of the three members: responses for %d URLs; must-reach %d, missing %d; duplicates %d", len(uris), len(must), len(missing), rep.DuplicateFetches)
	if len(missing) > 0 {
		t.Errorf("%d must-reach pages have no WARC record after n3's power cut, e.g. %v", len(missing), first(missing, 10))
	}
}
