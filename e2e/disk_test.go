package e2e

import (
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
