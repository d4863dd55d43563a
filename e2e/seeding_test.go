package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/simweb"
)

// smallWeb is a few hosts with links, sitemaps (named by robots.txt) and, on redirectHosts
// of them, redirects; no traps, errors or robots failures: every request the crawler makes
// here is one it chose.
func smallWeb(t *testing.T, hosts, redirectHosts int) (*simweb.Web, string) {
	return web(t, func(c *simweb.Config) {
		*c = simweb.Config{Seed: 36, Hosts: hosts, MeanPages: 12, MaxPages: 40, CrossHostLinks: 2, RandomLinks: 4,
			MinWords: 250, MaxWords: 600, SitemapHosts: 2, RedirectHosts: redirectHosts}
	})
}

// loneNodeArgs are the flags of a fast, polite single node on the web at addr.
func loneNodeArgs(data, addr string, extra ...string) []string {
	return append([]string{"--data", data, "--resolve", "*.sim.test=" + addr, "--delay", "0", "--exit-when-done",
		"--robots-retry", "200ms", "--retry-base", "200ms", "--timeout", "10s", "--log-format", "json", "--log-level", "warn"}, extra...)
}

// apiOf waits for the node's bound API address (DIR/http.addr).
func apiOf(t *testing.T, c *crawler, data string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(data, "http.addr")); err == nil && len(b) > 0 {
			return "http://" + strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("no http.addr after 30 s:\n%s", tail(c.stderr.String(), 2000))
	return ""
}

// send makes a JSON request and decodes the answer into out (when given); it returns the
// status.
func send(t *testing.T, method, url, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// checkOnly fails unless the server saw each of want exactly once and, besides, only
// robots.txt files (and their redirect hops) and /.well-known/tdmrep.json (the per-host
// policy files a host's first fetch needs).
func checkOnly(t *testing.T, w *simweb.Web, want []string) {
	t.Helper()
	seen := map[string]int{}
	policy := 0
	for _, r := range w.Log() {
		if r.RobotsFile || r.Path == "/.well-known/tdmrep.json" {
			policy++
			continue
		}
		seen[r.CanonicalURL]++
	}
	t.Logf("the server saw %d URLs (%d wanted) and %d robots.txt/tdmrep.json requests", len(seen), len(want), policy)
	for _, u := range want {
		if seen[u] != 1 {
			t.Errorf("%s fetched %d times, want once", u, seen[u])
		}
	}
	var extra []string
	for u := range seen {
		if !slices.Contains(want, u) {
			extra = append(extra, u)
		}
	}
	slices.Sort(extra)
	if len(extra) > 0 {
		t.Errorf("%d URLs fetched beyond the list, e.g. %v", len(extra), first(extra, 10))
	}
}

// TestListMode: with --max-depth 0 the node fetches exactly the URLs of its seed list,
// following a seed's redirects (as wget -i does) but no link, and no sitemap that
// robots.txt names.
func TestListMode(t *testing.T) {
	w, addr := smallWeb(t, 8, 2)
	hosts := w.Hosts()
	var seeds, want []string
	plain := -1
	for i, h := range hosts {
		if !slices.Contains(h.Features, "redirects") {
			seeds = append(seeds, "http://"+h.Host+"/")
			plain = i
		}
	}
	for _, h := range hosts {
		if !slices.Contains(h.Features, "redirects") {
			continue
		}
		// The redirect hosts' home pages, which link to more redirects, stay out of the list.
		base := "http://" + h.Host
		seeds = append(seeds, base+"/r/302/3/5.html", base+"/out/"+strconv.Itoa(plain)+".html")
		want = append(want, base+"/r/302/2/5.html", base+"/r/302/1/5.html", base+"/moved/5.html",
			"http://"+hosts[plain].Host+"/moved/9.html")
	}
	if len(seeds) < 8 || len(want) == 0 {
		t.Fatalf("the web lacks plain or redirect hosts: seeds %v", seeds)
	}
	want = append(want, seeds...)
	slices.Sort(want)
	want = slices.Compact(want) // both redirect hosts' /out/ lead to the same page
	list := filepath.Join(t.TempDir(), "list.txt")
	os.WriteFile(list, []byte(strings.Join(seeds, "\n")+"\n"), 0o644)
	data := filepath.Join(t.TempDir(), "data")
	c := startCrawler(t, loneNodeArgs(data, addr, "--seeds", list, "--max-depth", "0", "--http", "")...)
	if code := c.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("crawlnode exited %d:\n%s", code, tail(c.stderr.String(), 3000))
	}
	checkOnly(t, w, want)
}

// TestLoneNodeWaitsForSeeds: a node alone with an API and no seed starts and waits; given
// seeds by POST /v1/crawl/seeds it crawls them, and with --exit-when-done exits 0 after.
func TestLoneNodeWaitsForSeeds(t *testing.T) {
	w, addr := smallWeb(t, 4, 0)
	data := filepath.Join(t.TempDir(), "data")
	c := startCrawler(t, loneNodeArgs(data, addr, "--http", "127.0.0.1:0", "--max-depth", "100")...)
	api := apiOf(t, c, data)
	// A lone node checks for completion every 200 ms and needs two idle rounds.
	select {
	case err := <-c.done:
		t.Fatalf("the node exited before it had a seed (%v):\n%s", err, tail(c.stderr.String(), 2000))
	case <-time.After(3 * time.Second):
	}
	if n := len(w.Log()); n != 0 {
		t.Fatalf("the server saw %d requests before any seed", n)
	}
	body, _ := json.Marshal(map[string]any{"urls": w.Seeds()})
	if code := send(t, http.MethodPost, api+"/v1/crawl/seeds", string(body), nil); code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("POST /v1/crawl/seeds: %d", code)
	}
	if code := c.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("crawlnode exited %d:\n%s", code, tail(c.stderr.String(), 3000))
	}
	checkClean(t, w.Report(reportOptions(0)), 0)
}

// TestListModeJobPatch: PATCH /v1/job sets max_depth 0 (the seeds only) on a running node
// and null goes back to its --max-depth; the server then sees only the seeds.
func TestListModeJobPatch(t *testing.T) {
	w, addr := smallWeb(t, 4, 0)
	data := filepath.Join(t.TempDir(), "data")
	c := startCrawler(t, loneNodeArgs(data, addr, "--http", "127.0.0.1:0")...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(tail(c.stderr.String(), 3000))
		}
	})
	api := apiOf(t, c, data)
	var job struct {
		Effective struct {
			MaxDepth int `json:"max_depth"`
		} `json:"effective"`
	}
	patch := func(body string, want int) {
		t.Helper()
		code := 0
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if code = send(t, http.MethodPatch, api+"/v1/job", body, &job); code != http.StatusServiceUnavailable {
				break // 503 not_ready: the node's Raft group is not up yet
			}
		}
		if code != http.StatusOK || job.Effective.MaxDepth != want {
			t.Fatalf("PATCH /v1/job %s: %d, max_depth %d, want 200 and %d", body, code, job.Effective.MaxDepth, want)
		}
	}
	patch(`{"max_depth": 0}`, 0)
	patch(`{"max_depth": null}`, 16)
	patch(`{"max_depth": 0}`, 0)
	body, _ := json.Marshal(map[string]any{"urls": w.Seeds()})
	if code := send(t, http.MethodPost, api+"/v1/crawl/seeds", string(body), nil); code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("POST /v1/crawl/seeds: %d", code)
	}
	if code := c.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("crawlnode exited %d:\n%s", code, tail(c.stderr.String(), 3000))
	}
	checkOnly(t, w, w.Seeds())
}
