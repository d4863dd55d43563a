package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
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
