package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/simweb"
)

// TestDiskFull runs a crawl on a small tmpfs, fills the file system mid-crawl, and checks
// that the node stops fetching with a clear message (and does not crash, corrupt Badger or
// park URLs), then resumes by itself once space is freed and finishes with full coverage.
func TestDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=400m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v %s", err, out)
	}
	defer exec.Command("umount", "-l", mnt).Run()

	w, addr := web(t, func(c *simweb.Config) { plainWeb(c); c.Hosts = 20; c.Seed = 6 })
	data := filepath.Join(mnt, "data")
	c := startCrawler(t, crawlArgs(data, addr, w, t, "--min-free-disk", "150000000", "--concurrency", "8")...)

	// Let the crawl get going, then leave it ~100 MB: under its 150 MB minimum.
	waitRequests(t, w, 200, 60*time.Second)
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	filler := filepath.Join(mnt, "filler")
	if err := writeZeros(filler, free-100<<20); err != nil {
		t.Fatalf("fill the disk: %v", err)
	}
	time.Sleep(2 * time.Second) // the node checks once a second; in-flight fetches finish
	before := len(w.Log())
	time.Sleep(3 * time.Second)
	during := len(w.Log()) - before
	if during != 0 {
		t.Errorf("%d requests while the disk was full", during)
	}
	select {
	case err := <-c.done:
		t.Fatalf("crawler exited while the disk was full: %v\n%s", err, tail(c.stderr.String(), 2000))
	default:
	}
	if !strings.Contains(c.stderr.String(), "disk full") {
		t.Errorf("no clear message about the full disk in the log:\n%s", tail(c.stderr.String(), 1500))
	}
	os.Remove(filler)
	if code := c.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("crawlnode exited %d:\n%s", code, tail(c.stderr.String(), 2000))
	}
	rep := w.Report(reportOptions(0))
	checkClean(t, rep, 0)
	t.Logf("disk full for 5 s mid-crawl: %d requests during the pause, then %d requests in all, coverage %.4f", during, rep.Requests, rep.Coverage)
}

func waitRequests(t *testing.T, w *simweb.Web, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for len(w.Log()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests after %s", len(w.Log()), d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func writeZeros(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := f.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// TestDiskFullCluster: three members crawl; n3's data directory is on a small tmpfs that
// fills mid-crawl (a filler file leaves it under its --min-free-disk). No member crashes:
// n3 refuses its peers' links (503) and seeds (507) and waits, n1 and n2 keep the links for
// n3 in their outboxes, and once the filler is removed the crawl ends with every must-reach
// page fetched, as simweb saw it.
func TestDiskFullCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster crawl")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=400m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v %s", err, out)
	}
	defer exec.Command("umount", "-l", mnt).Run()

	w, addr := web(t, func(c *simweb.Config) { plainWeb(c); c.Hosts = 30; c.Seed = 8 })
	cr := newClusterRun(t, clusterArgs(addr, 0, 30*time.Second))
	seeds := seedsFile(t, w)
	n1 := cr.add("n1", "--bootstrap-expect", "3", "--seeds", seeds)
	cr.add("n2", "--bootstrap-expect", "3", "--join", n1.bind)
	n3 := cr.add("n3", "--bootstrap-expect", "3", "--join", n1.bind,
		"--data", filepath.Join(mnt, "n3"), "--min-free-disk", "150000000")
	n3.data = filepath.Join(mnt, "n3")

	waitLogged(t, w, 300, 2*time.Minute)
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	if err := writeZeros(filler, int64(st.Bavail)*int64(st.Bsize)-100<<20); err != nil {
		t.Fatalf("fill the disk: %v", err)
	}
	time.Sleep(2 * time.Second) // n3 checks once a second; its fetches in flight finish
	fullFrom := time.Now()

	// Seeds again through n1 (those of n3's hosts go to n1's outbox) and straight to n3.
	b, _ := os.ReadFile(seeds)
	urls := strings.Fields(string(b))
	if out, err := exec.Command(crawlnodeBin, append([]string{"seed", "--api", n1.api(t)}, urls...)...).CombinedOutput(); err != nil {
		t.Fatalf("crawlnode seed through n1: %v\n%s", err, out)
	}
	body, _ := json.Marshal(map[string][]string{"urls": urls})
	resp, err := http.Post(n3.api(t)+"/v1/crawl/seeds", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInsufficientStorage || !strings.Contains(string(msg), "disk_full") {
		t.Errorf("seeds to n3 on a full disk: %d %s, want 507 disk_full", resp.StatusCode, msg)
	}

	// The peers hold links for n3 while its disk stays full.
	held := int64(0)
	deadline := time.Now().Add(20 * time.Second)
	for held == 0 && time.Now().Before(deadline) {
		var cs struct {
			Nodes []struct {
				Node        string `json:"node"`
				OutboxLinks int64  `json:"outbox_links"`
			} `json:"nodes"`
		}
		if err := fetchJSON(n1.api(t)+"/v1/crawl/status", &cs); err == nil {
			for _, n := range cs.Nodes {
				if n.Node != "n3" {
					held += n.OutboxLinks
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if held == 0 {
		t.Errorf("n1 and n2 hold no links for n3 while its disk is full")
	}
	for _, n := range cr.nodes {
		if !n.running() {
			t.Fatalf("%s exited while n3's disk was full:\n%s", n.name, tail(n.c.stderr.String(), 2000))
		}
	}
	if !strings.Contains(n3.c.stderr.String(), "disk full") {
		t.Errorf("no clear message about the full disk in n3's log:\n%s", tail(n3.c.stderr.String(), 1500))
	}
	// Keep it full for 5 s in all, as the single-node test does.
	time.Sleep(time.Until(fullFrom.Add(5 * time.Second)))
	for _, n := range cr.nodes {
		if !n.running() {
			t.Fatalf("%s exited while n3's disk was full:\n%s", n.name, tail(n.c.stderr.String(), 2000))
		}
	}
	fullTo := time.Now()
	byN3 := 0
	for _, r := range w.Log() {
		if strings.Contains(r.UserAgent, "; n3)") && r.Arrival.After(fullFrom) && r.Arrival.Before(fullTo) {
			byN3++
		}
	}
	if byN3 != 0 {
		t.Errorf("n3 sent %d requests while its disk was full", byN3)
	}
	os.Remove(filler)
	cr.waitAll(5 * time.Minute)
	rep := w.Report(reportOptions(0))
	checkClean(t, rep, logDuplicates(t, w, rep))
	t.Logf("n3's disk full for %s mid-crawl: n3 sent %d requests meanwhile, peers held %d links for it; then %d requests in all, coverage %.4f",
		fullTo.Sub(fullFrom).Round(100*time.Millisecond), byN3, held, rep.Requests, rep.Coverage)
}
