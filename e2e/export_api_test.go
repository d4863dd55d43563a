package e2e

import (
	"archive/zip"
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/simweb"
)

// runExport runs `crawlnode export ARGS` and returns its exit code and output.
func runExport(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(crawlnodeBin, append([]string{"export"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return 0, string(out)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("export: %v", err)
	return -1, ""
}

// servedAny counts the server's answers (any status, connection drops left out) per
// canonical URL: robots.txt and error pages are archived too.
func servedAny(log []simweb.RequestRecord) map[string]int {
	m := map[string]int{}
	for _, r := range log {
		if r.Status != 0 {
			m[r.CanonicalURL]++
		}
	}
	return m
}

// answered counts the server's final answers (see pageFetches) per canonical URL.
func answered(log []simweb.RequestRecord) map[string]int {
	m := map[string]int{}
	for _, r := range log {
		if r.RobotsFile || r.Path == "/.well-known/tdmrep.json" || r.Status < 200 || r.Status >= 500 || r.Status == 429 {
			continue
		}
		m[r.CanonicalURL]++
	}
	return m
}

// exportedJSONL reads a jsonl export: records by canonical URL.
func exportedJSONL(t *testing.T, path string) map[string][]corpus.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	by := map[string][]corpus.Record{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r corpus.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("jsonl export: %v", err)
		}
		by[canon(r.URL)] = append(by[canon(r.URL)], r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return by
}

// exportedURLs reads a urls export: lines by canonical URL.
func exportedURLs(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "url\t") {
		t.Fatalf("urls export without its header: %.200q", b)
	}
	m := map[string]int{}
	for _, l := range lines[1:] {
		u, _, _ := strings.Cut(l, "\t")
		m[canon(u)]++
	}
	return m
}

// exportedWARC scans a warc export (it must read clean: no torn or damaged record) and
// counts the response and revisit records (an identical payload) per canonical URL.
func exportedWARC(t *testing.T, path string) map[string]int {
	t.Helper()
	m := map[string]int{}
	if err := archive.Scan(path, func(_ int64, r *archive.Record) error {
		if r.Type == "response" || r.Type == "revisit" {
			m[canon(r.TargetURI)]++
		}
		return nil
	}); err != nil {
		t.Fatalf("warc export does not read clean: %v", err)
	}
	return m
}

// clusterIdle waits until the cluster's summed status shows nothing queued, in flight,
// retrying, in outboxes or in the extract backlog, twice in a row a second apart.
func clusterIdle(t *testing.T, api string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	quiet := 0
	for quiet < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the cluster was not idle within %s", d)
		}
		var st struct {
			Queued   int64 `json:"pages_queued"`
			InFlight int64 `json:"in_flight"`
			Retry    int64 `json:"retry_pending"`
			Backlog  int64 `json:"extract_backlog"`
			Outbox   int64 `json:"outbox_links"`
			Crawled  int64 `json:"pages_crawled"`
		}
		if err := fetchJSON(api+"/v1/crawl/status", &st); err == nil && st.Crawled > 0 &&
			st.Queued+st.InFlight+st.Retry+st.Backlog+st.Outbox == 0 {
			quiet++
		} else {
			quiet = 0
		}
		time.Sleep(time.Second)
	}
}

// TestClusterExportAPI: three members crawl with extraction on;
// `export --api` through one of them writes jsonl, warc and urls while the crawl runs
// (each URL at most once, nothing the server did not serve, the WARC reads clean) and
// after it (every must-reach page the server answered exactly once in jsonl and urls, and
// in the WARC at least once and at most as often as the server answered it). With one member stopped the
// export fails naming it and leaves nothing at --out; --allow-partial writes the rest.
func TestClusterExportAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster crawl")
	}
	w, addr := web(t, func(c *simweb.Config) {
		c.Hosts, c.Seed = 24, 21
		c.SlowHosts, c.TrickleHosts, c.HugeHosts = 0, 0, 0
	})
	base := slices.DeleteFunc(clusterArgs(addr, 30*time.Millisecond, 30*time.Second), func(a string) bool {
		return a == "--no-extract" || a == "--exit-when-done"
	})
	// No --api-token here (the export routes' token checks are api's TestExportRoutes and
	// TestAuth; a cluster with tokens crawls in TestClusterAPITokens).
	cr := newClusterRun(t, base)
	n1 := cr.addThree(seedsFile(t, w))
	api := n1.api(t)
	out := t.TempDir()
	export := func(format, name string, extra ...string) (int, string, string) {
		p := filepath.Join(out, name)
		code, msg := runExport(t, append([]string{"--api", api, "--format", format, "--out", p}, extra...)...)
		return code, msg, p
	}

	// While the crawl runs.
	waitLogged(t, w, 600, 2*time.Minute)
	for _, f := range []string{"jsonl", "warc", "urls"} {
		code, msg, p := export(f, "live."+f)
		if code != 0 {
			t.Fatalf("live export %s exited %d:\n%s", f, code, msg)
		}
		served := servedAny(w.Log())
		var urls map[string]int
		switch f {
		case "jsonl":
			by := exportedJSONL(t, p)
			urls = map[string]int{}
			for u, recs := range by {
				urls[u] = len(recs)
			}
		case "warc":
			for u, n := range exportedWARC(t, p) {
				if n > served[u] {
					t.Errorf("live warc: %s has %d responses and revisits, the server answered it %d times", u, n, served[u])
				}
			}
			continue
		case "urls":
			urls = exportedURLs(t, p)
		}
		for u, n := range urls {
			if n != 1 || served[u] == 0 {
				t.Errorf("live %s: %s appears %d times, served %d times", f, u, n, served[u])
			}
		}
		t.Logf("live export %s: %d URLs while the server had answered %d", f, len(urls), len(served))
	}

	// After the crawl: every must-reach page the server answered, exactly once.
	clusterIdle(t, api, 5*time.Minute)
	served, all := answered(w.Log()), servedAny(w.Log())
	must := w.MustReach(reportOptions(0))
	_, msg, pj := export("jsonl", "all.jsonl", "--include-duplicates", "--include-rejected")
	if _, err := os.Stat(pj); err != nil {
		t.Fatalf("jsonl export: %v\n%s", err, msg)
	}
	_, msg, pu := export("urls", "all.urls")
	if _, err := os.Stat(pu); err != nil {
		t.Fatalf("urls export: %v\n%s", err, msg)
	}
	_, msg, pw := export("warc", "all.warc.gz")
	if _, err := os.Stat(pw); err != nil {
		t.Fatalf("warc export: %v\n%s", err, msg)
	}
	recs, urls, warc := exportedJSONL(t, pj), exportedURLs(t, pu), exportedWARC(t, pw)
	var missJ, missU, missW, twice []string
	pages, html := 0, 0
	for _, u := range must {
		if served[u] == 0 {
			continue
		}
		pages++
		if urls[u] != 1 {
			missU = append(missU, u)
		}
		if warc[u] == 0 || warc[u] > all[u] { // a 503 or 429 before the page is archived too
			missW = append(missW, fmt.Sprintf("%s (%d records, %d answers)", u, warc[u], all[u]))
		}
		if _, ok := expectsRecord(w, u); ok {
			html++
			if len(recs[u]) != 1 {
				missJ = append(missJ, u)
			}
		}
	}
	for u, n := range urls {
		if n > 1 {
			twice = append(twice, u)
		}
	}
	for u, rs := range recs {
		if len(rs) > 1 {
			twice = append(twice, u)
		}
	}
	t.Logf("after the crawl: %d must-reach pages answered (%d HTML); exported %d corpus URLs, %d listed URLs, %d WARC URLs",
		pages, html, len(recs), len(urls), len(warc))
	if pages < len(must)*9/10 {
		t.Errorf("the server answered only %d of %d must-reach pages", pages, len(must))
	}
	if len(missJ)+len(missU)+len(missW)+len(twice) > 0 {
		t.Errorf("not exactly once: jsonl %d %v, urls %d %v, warc %d %v, twice %v",
			len(missJ), first(missJ, 5), len(missU), first(missU, 5), len(missW), first(missW, 5), first(twice, 5))
	}

	// The index and the package: one sorted index line per WARC capture, every member's
	// WARC files in one WACZ.
	_, msg, pc := export("cdxj", "all.cdxj")
	b, err := os.ReadFile(pc)
	if err != nil {
		t.Fatalf("cdxj export: %v\n%s", err, msg)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	captures := 0
	for _, n := range warc {
		captures += n
	}
	if !slices.IsSorted(lines) || len(lines) != captures {
		t.Errorf("cdxj export: %d lines (sorted %v), the WARC export has %d captures", len(lines), slices.IsSorted(lines), captures)
	}
	_, msg, pz := export("wacz", "all.wacz")
	zr, err := zip.OpenReader(pz)
	if err != nil {
		t.Fatalf("wacz export: %v\n%s", err, msg)
	}
	members := map[string]bool{}
	for _, f := range zr.File {
		if strings.HasPrefix(f.Name, "archive/") {
			for _, n := range cr.nodes {
				if strings.HasSuffix(f.Name, "-"+n.name+".warc.gz") {
					members[n.name] = true
				}
			}
		}
	}
	zr.Close()
	if len(members) != 3 {
		t.Errorf("wacz export holds WARC files of %v, want all three members", members)
	}

	// One member stopped: the export names it and writes nothing.
	n3 := cr.nodes[2]
	n3.c.cmd.Process.Kill()
	<-n3.c.done
	n3.exited = true
	before, _ := os.ReadDir(out)
	code, msg, p := export("urls", "partial.urls")
	if code == 0 || !strings.Contains(msg, "n3") {
		t.Errorf("export with n3 stopped: exit %d, want a failure naming n3:\n%s", code, msg)
	}
	after, _ := os.ReadDir(out)
	if _, err := os.Stat(p); err == nil || len(after) != len(before) {
		t.Errorf("the failed export left files behind: %d entries before, %d after", len(before), len(after))
	}
	code, msg, p = export("urls", "partial.urls", "--allow-partial")
	if code != 0 || !strings.Contains(msg, "n3") {
		t.Errorf("--allow-partial with n3 stopped: exit %d, want 0 naming n3:\n%s", code, msg)
	}
	if got := exportedURLs(t, p); len(got) == 0 || len(got) >= len(urls) {
		t.Errorf("--allow-partial wrote %d URLs of the cluster's %d", len(got), len(urls))
	}
	t.Logf("n3 stopped: failed as it should:\n%s", tail(msg, 500))
}

// TestExportAPISingleNode: a node alone answers `export --api` as `export --data` does for
// its directory: the same corpus records and the same URL list.
func TestExportAPISingleNode(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	w, addr := web(t, func(c *simweb.Config) {
		c.Hosts, c.Seed = 4, 5
		c.SlowHosts, c.TrickleHosts, c.HugeHosts = 0, 0, 0
	})
	data := filepath.Join(t.TempDir(), "data")
	args := slices.DeleteFunc(crawlArgs(data, addr, w, t), func(a string) bool { return a == "--exit-when-done" })
	c := startCrawler(t, args...)
	defer func() {
		c.cmd.Process.Kill()
		<-c.done
	}()
	n := &cnode{name: "alone", data: data, c: c}
	api := n.api(t)
	clusterIdle(t, api, 3*time.Minute)
	out := t.TempDir()
	for _, f := range []string{"jsonl", "urls"} {
		viaAPI, viaData := filepath.Join(out, "api."+f), filepath.Join(out, "data."+f)
		if code, msg := runExport(t, "--api", api, "--format", f, "--out", viaAPI, "--include-duplicates", "--include-rejected"); code != 0 {
			t.Fatalf("export --api %s: exit %d\n%s", f, code, msg)
		}
		if code, msg := runExport(t, "--data", data, "--format", f, "--out", viaData, "--include-duplicates", "--include-rejected"); code != 0 {
			t.Fatalf("export --data %s: exit %d\n%s", f, code, msg)
		}
		var a, d map[string]int
		if f == "jsonl" {
			a, d = map[string]int{}, map[string]int{}
			for u, rs := range exportedJSONL(t, viaAPI) {
				a[u] = len(rs)
			}
			for u, rs := range exportedJSONL(t, viaData) {
				d[u] = len(rs)
			}
		} else {
			a, d = exportedURLs(t, viaAPI), exportedURLs(t, viaData)
		}
		if len(a) == 0 || len(a) != len(d) {
			t.Errorf("%s: --api has %d URLs, --data %d", f, len(a), len(d))
		}
		for u := range d {
			if a[u] != 1 {
				t.Errorf("%s: %s is %d times in the --api export", f, u, a[u])
				break
			}
		}
		t.Logf("%s: %d URLs both ways", f, len(a))
	}
}
