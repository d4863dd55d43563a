package e2e

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/simweb"
)

// apiAddr waits for the node to write its API address into the data directory.
func apiAddr(t *testing.T, data string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(filepath.Join(data, "http.addr")); err == nil && len(b) > 0 {
			return "http://" + strings.TrimSpace(string(b))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the node wrote no http.addr")
	return ""
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %d, not JSON: %v: %s", url, resp.StatusCode, err, b)
		}
	}
	return resp.StatusCode
}

// TestAPI drives a running node through its HTTP API: health, status, seeds (bad URLs are
// listed back), JSON errors, and a page's record and main text by URL and by hash, checked
// against the text simweb planted.
func TestAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	w, addr := web(t, func(c *simweb.Config) { plainWeb(c); c.Hosts = 4; c.Seed = 5 })
	data := filepath.Join(t.TempDir(), "data")
	args := crawlArgs(data, addr, w, t)
	// Keep serving after the crawl: no --exit-when-done.
	var kept []string
	for _, a := range args {
		if a != "--exit-when-done" {
			kept = append(kept, a)
		}
	}
	c := startCrawler(t, kept...)
	defer func() {
		c.cmd.Process.Signal(syscall.SIGTERM)
		c.wait(t, 20*time.Second)
	}()
	api := apiAddr(t, data)

	var health map[string]string
	if code := getJSON(t, api+"/healthz", &health); code != 200 || health["status"] != "ok" {
		t.Fatalf("healthz: %d %v", code, health)
	}
	var e struct{ Error, Code string }
	if code := getJSON(t, api+"/v1/nothing-here", &e); code != 404 || e.Error == "" {
		t.Errorf("unknown route: %d %+v", code, e)
	}
	resp, err := http.Post(api+"/v1/crawl/seeds", "application/json", strings.NewReader(`{"urls": [`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("malformed seeds body: %d, want 400", resp.StatusCode)
	}
	body, _ := json.Marshal(map[string]any{"urls": []string{"http://h1.sim.test/", "mailto:x@y", "::bad"}, "priority": "high", "crawl_depth": 2})
	resp, err = http.Post(api+"/v1/crawl/seeds", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var sr struct {
		JobID       string `json:"job_id"`
		SeedsQueued int    `json:"seeds_queued"`
		AlreadySeen int    `json:"already_seen"`
		Status      string
		Rejected    []struct{ URL, Reason string }
	}
	json.NewDecoder(resp.Body).Decode(&sr)
	resp.Body.Close()
	if resp.StatusCode != 202 || sr.JobID == "" || len(sr.Rejected) != 2 || sr.SeedsQueued+sr.AlreadySeen != 1 {
		t.Errorf("seeds: %d %+v", resp.StatusCode, sr)
	}

	// Wait for the crawl to finish, then look a page up.
	var st struct {
		PagesCrawled   int64 `json:"pages_crawled"`
		PagesQueued    int64 `json:"pages_queued"`
		InFlight       int64 `json:"in_flight"`
		ExtractBacklog int64 `json:"extract_backlog"`
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		getJSON(t, api+"/v1/crawl/status", &st)
		if st.PagesCrawled > 0 && st.PagesQueued == 0 && st.InFlight == 0 && st.ExtractBacklog == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawl did not settle: %+v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Status agrees with the server: every page fetched once.
	rep := w.Report(reportOptions(0))
	checkClean(t, rep, 0)

	var article string
	var info simweb.PageInfo
	for _, r := range w.Log() {
		if p, ok := w.Page(r.CanonicalURL); ok && r.Status == 200 && len(p.MainText) > 2 && p.MirrorOf == "" && p.NearDupOf == "" && len(p.OptOut) == 0 {
			article, info = r.CanonicalURL, p
			break
		}
	}
	if article == "" {
		t.Fatal("no article page in the log")
	}
	type page struct {
		URLHash string `json:"url_hash"`
		URL     string
		State   string
		Status  int
		Corpus  *struct {
			Title, Text string
			Rejected    string
		}
	}
	var byURL, byHash page
	if code := getJSON(t, api+"/v1/pages?url="+article, &byURL); code != 200 {
		t.Fatalf("page by url: %d", code)
	}
	h := frontier.URLHash(article)
	if byURL.URLHash != hex.EncodeToString(h[:]) || byURL.State != "fetched" || byURL.Status != 200 || byURL.Corpus == nil {
		t.Fatalf("page by url: %+v", byURL)
	}
	for _, para := range info.MainText[:2] {
		if !strings.Contains(byURL.Corpus.Text, para[:min(60, len(para))]) {
			t.Errorf("page text lacks planted paragraph %q", para[:min(60, len(para))])
		}
	}
	if code := getJSON(t, api+"/v1/pages/"+byURL.URLHash, &byHash); code != 200 || byHash.URL != article {
		t.Errorf("page by hash: %d %+v", code, byHash)
	}
	if code := getJSON(t, api+"/v1/pages/00000000000000000000000000000000", &e); code != 404 {
		t.Errorf("unknown page: %d", code)
	}
	if code := getJSON(t, api+"/v1/pages/xyz", &e); code != 400 {
		t.Errorf("bad hash: %d", code)
	}
	// /metrics agrees with the status endpoint and with the server.
	resp, err = http.Get(api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metricsText := string(mb)
	ok2xx := promValue(metricsText, `crawlnode_pages_fetched_total{class="2xx"}`)
	served2xx := 0
	for _, r := range w.Log() {
		if r.Status/100 == 2 && !r.RobotsFile && !strings.HasSuffix(r.Path, "tdmrep.json") {
			served2xx++
		}
	}
	if resp.StatusCode != 200 || ok2xx != float64(served2xx) {
		t.Errorf("metrics: %d; crawlnode_pages_fetched_total{class=\"2xx\"} = %v, the server answered %d pages with 2xx", resp.StatusCode, ok2xx, served2xx)
	}
	// Every lease passes through the group commit: it recorded at least every page
	// answered with 2xx, in at most as many commits as leases, and every such page but
	// the seeds (the web's and the one posted above) came to it as a link.
	batches, leases := promValue(metricsText, "crawlnode_commit_batches_total"), promValue(metricsText, "crawlnode_commit_leases_total")
	if links := promValue(metricsText, "crawlnode_commit_links_total"); batches < 1 || leases < float64(served2xx) || batches > leases || links < float64(served2xx-len(w.Seeds())-1) {
		t.Errorf("metrics: group commits %v, their leases %v, links %v; the server answered %d pages with 2xx", batches, leases, links, served2xx)
	}
	for _, name := range []string{"crawlnode_fetch_duration_seconds_bucket", "crawlnode_frontier_queued_urls", "crawlnode_extract_backlog", "crawlnode_frontier_hosts_ready", "crawlnode_bloom_filter_bytes"} {
		if !strings.Contains(metricsText, name) {
			t.Errorf("metrics lack %s", name)
		}
	}
	// Every metric the Grafana dashboard in the repo queries exists.
	gb, err := os.ReadFile("../grafana/crawlnode.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range regexp.MustCompile(`crawlnode_[a-z_]+`).FindAllString(string(gb), -1) {
		base := strings.TrimSuffix(name, "_bucket")
		if !strings.Contains(metricsText, base) {
			t.Errorf("grafana/crawlnode.json queries %s, which /metrics does not serve", name)
		}
	}
	t.Logf("API: %d pages crawled; page %s: %d chars of text; metrics 2xx %v", st.PagesCrawled, article, len(byURL.Corpus.Text), ok2xx)
}

// promValue reads one sample from Prometheus text exposition ("name{labels} value").
func promValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, series+" ") {
			var v float64
			fmt.Sscan(strings.TrimPrefix(line, series+" "), &v)
			return v
		}
	}
	return -1
}
