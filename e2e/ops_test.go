package e2e

import (
	"github.com/crawlnode/crawlnode/internal/clustertest"

	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/simweb"
)

// TestOperatorControls drives a running node through `crawlnode pause|resume|block|
// unblock|status --api` with an API token, and judges by the server's log: no request while
// paused, none to a blocked domain while it is blocked, and the crawl resumes after both.
func TestOperatorControls(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	w, addr := web(t, func(c *simweb.Config) { plainWeb(c); c.Hosts = 4; c.Seed = 8 })
	data := filepath.Join(t.TempDir(), "data")
	var args []string
	for _, a := range crawlArgs(data, addr, w, t, "--api-token", "s3cret") {
		if a != "--exit-when-done" {
			args = append(args, a)
		}
	}
	// A 150 ms delay keeps the crawl going for the length of the test.
	for i, a := range args {
		if a == "--delay" {
			args[i+1] = "150ms"
		}
	}
	c := startCrawler(t, args...)
	defer func() {
		c.cmd.Process.Signal(syscall.SIGTERM)
		c.wait(t, 20*time.Second)
	}()
	api := apiAddr(t, data)
	waitRequests(t, w, 20, 30*time.Second)

	cli := func(args ...string) (string, error) {
		out, err := exec.Command(crawlnodeBin, append(args, "--api", api, "--api-token", "s3cret")...).CombinedOutput()
		return string(out), err
	}
	requestsSince := func(from time.Time, host string) int {
		n := 0
		for _, r := range w.Log() {
			if r.Arrival.After(from) && (host == "" || r.Host == host) {
				n++
			}
		}
		return n
	}

	// Without the token a mutating request is refused.
	resp, err := http.Post(api+"/v1/crawl/pause", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("pause without token: %d, want 401", resp.StatusCode)
	}

	// Pause: fetches in flight finish, then nothing.
	if out, err := cli("pause"); err != nil {
		t.Fatalf("pause: %v %s", err, out)
	}
	time.Sleep(time.Second)
	quiet := time.Now()
	time.Sleep(2 * time.Second)
	if n := requestsSince(quiet, ""); n != 0 {
		t.Errorf("%d requests while paused", n)
	}
	out, err := cli("status")
	if err != nil || !strings.Contains(out, `"state": "paused"`) {
		t.Errorf("status while paused: %v %s", err, out)
	}
	resumed := time.Now()
	if out, err := cli("resume"); err != nil {
		t.Fatalf("resume: %v %s", err, out)
	}
	clustertest.Eventually(t, 10*time.Second, "requests after resume", func() bool { return requestsSince(resumed, "") > 0 })

	// Block one host's domain: no request to it; the others go on. Then unblock.
	const blocked = "h1.sim.test"
	if out, err := cli("block", strings.ToUpper(blocked)); err != nil {
		t.Fatalf("block: %v %s", err, out)
	}
	time.Sleep(time.Second)
	from := time.Now()
	time.Sleep(2500 * time.Millisecond)
	if n := requestsSince(from, blocked); n != 0 {
		t.Errorf("%d requests to blocked %s", n, blocked)
	}
	if n := requestsSince(from, ""); n == 0 {
		t.Errorf("no request to the other hosts while %s was blocked", blocked)
	}
	var bl struct{ Domains []string }
	getJSON(t, api+"/v1/domains/blocked", &bl)
	if len(bl.Domains) != 1 || bl.Domains[0] != blocked {
		t.Errorf("blocked domains %v", bl.Domains)
	}
	unblocked := time.Now()
	if out, err := cli("unblock", blocked); err != nil {
		t.Fatalf("unblock: %v %s", err, out)
	}
	clustertest.Eventually(t, 15*time.Second, "requests to the unblocked host", func() bool { return requestsSince(unblocked, blocked) > 0 })

	// Read-only views.
	var hv struct {
		Host   string
		Queued int
		Robots []struct {
			URL    string
			Status int
		}
	}
	if code := getJSON(t, api+"/v1/hosts/h0.sim.test", &hv); code != 200 || hv.Host != "h0.sim.test" || len(hv.Robots) == 0 {
		t.Errorf("host view: %d %+v", code, hv)
	}
	var top struct{ Hosts []struct{ Host string } }
	getJSON(t, api+"/v1/hosts?top=3&by=queue", &top)
	var cl struct {
		Leader  string
		Members []struct {
			Name       string
			Partitions int
		}
	}
	if code := getJSON(t, api+"/v1/cluster", &cl); code != 200 || len(cl.Members) != 1 || cl.Members[0].Partitions != 271 || cl.Leader != cl.Members[0].Name {
		t.Errorf("cluster: %d %+v", code, cl)
	}
	var e struct{ Error string }
	if code := getJSON(t, api+"/v1/hosts?by=size", &e); code != 400 {
		t.Errorf("bad top-hosts order: %d", code)
	}
	if out, err := cli("block", "not a domain/x"); err == nil {
		t.Errorf("blocking a bad domain succeeded: %s", out)
	}
	// The crawl is stopped midway, so coverage is not the point; politeness and robots are.
	rep := w.Report(reportOptions(150 * time.Millisecond))
	if rep.RobotsViolations+rep.BeforeRobots+rep.PolitenessViolations+rep.DuplicateFetches+rep.RetryAfterIgnored != 0 {
		t.Errorf("violations: robots %d, before robots %d, politeness %d %v, duplicates %d, retry-after %d",
			rep.RobotsViolations, rep.BeforeRobots, rep.PolitenessViolations, first(rep.PolitenessSamples, 5), rep.DuplicateFetches, rep.RetryAfterIgnored)
	}
	t.Logf("operator controls: paused and blocked windows quiet; top hosts %v", top.Hosts)
}

// TestScope seeds two hosts of a web whose pages link across all hosts, with
// --scope seed-hosts and an --exclude pattern: the server sees requests for those two hosts
// only, and none for excluded paths.
func TestScope(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	w, addr := web(t, func(c *simweb.Config) { plainWeb(c); c.Hosts = 6; c.Seed = 9 })
	data := filepath.Join(t.TempDir(), "data")
	args := crawlArgs(data, addr, w, t, "--scope", "seed-hosts", "--exclude", `/docs/`)
	for i, a := range args {
		if a == "--seeds" {
			args = append(args[:i], args[i+2:]...)
			break
		}
	}
	args = append(args, "--seed", "http://h0.sim.test/", "--seed", "http://h1.sim.test/")
	c := startCrawler(t, args...)
	if code := c.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("crawlnode exited %d:\n%s", code, tail(c.stderr.String(), 2000))
	}
	hosts := map[string]int{}
	docs := 0
	for _, r := range w.Log() {
		hosts[r.Host]++
		if strings.HasPrefix(r.Path, "/docs/") {
			docs++
		}
	}
	for h := range hosts {
		if h != "h0.sim.test" && h != "h1.sim.test" {
			t.Errorf("requests to %s, outside the seed hosts", h)
		}
	}
	if docs != 0 {
		t.Errorf("%d requests for excluded /docs/ paths", docs)
	}
	if hosts["h0.sim.test"] < 10 || hosts["h1.sim.test"] < 10 {
		t.Errorf("the seed hosts were hardly crawled: %v", hosts)
	}
	t.Logf("scope seed-hosts, exclude /docs/: requests by host %v", hosts)
}

// TestSeedCrawlDepth adds a seed through the API with crawl_depth 1: the server sees that
// host's home page and pages it links to, nothing deeper.
func TestSeedCrawlDepth(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	// No cross-host links: h1's pages are reachable only from its own home page.
	w, addr := web(t, func(c *simweb.Config) { plainWeb(c); c.Hosts = 3; c.Seed = 10; c.CrossHostLinks = 0 })
	data := filepath.Join(t.TempDir(), "data")
	args := []string{"--data", data, "--seed", "http://h0.sim.test/", "--scope", "seed-hosts",
		"--resolve", "*.sim.test=" + addr, "--delay", "0", "--http", "127.0.0.1:0", "--log-level", "warn",
		"--robots-retry", "200ms", "--retry-base", "200ms"}
	c := startCrawler(t, args...)
	defer func() {
		c.cmd.Process.Signal(syscall.SIGTERM)
		c.wait(t, 20*time.Second)
	}()
	api := apiAddr(t, data)
	out, err := exec.Command(crawlnodeBin, "seed", "--api", api, "http://h2.sim.test/").CombinedOutput()
	if err != nil {
		t.Fatalf("seed: %v %s", err, out)
	}
	body := strings.NewReader(`{"urls": ["http://h1.sim.test/"], "crawl_depth": 1}`)
	resp, err := http.Post(api+"/v1/crawl/seeds", "application/json", body)
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("seed with crawl_depth: %v %v", err, resp)
	}
	resp.Body.Close()
	var st struct {
		PagesQueued    int64 `json:"pages_queued"`
		InFlight       int64 `json:"in_flight"`
		RetryPending   int64 `json:"retry_pending"`
		PagesCrawled   int64 `json:"pages_crawled"`
		ExtractBacklog int64 `json:"extract_backlog"`
	}
	clustertest.Eventually(t, 2*time.Minute, "a settled crawl", func() bool {
		getJSON(t, api+"/v1/crawl/status", &st)
		return st.PagesCrawled > 0 && st.PagesQueued == 0 && st.InFlight == 0 && st.RetryPending == 0
	})
	home, ok := w.Page("http://h1.sim.test/")
	if !ok {
		t.Fatal("simweb has no h1 home page")
	}
	allowed := map[string]bool{"http://h1.sim.test/": true}
	for _, l := range home.Links {
		allowed[l] = true
	}
	deeper, h1, h2 := 0, 0, 0
	for _, r := range w.Log() {
		switch {
		case r.RobotsFile || strings.HasSuffix(r.Path, "tdmrep.json"):
		case r.Host == "h1.sim.test":
			h1++
			if !allowed[r.CanonicalURL] {
				deeper++
				if deeper <= 5 {
					t.Errorf("%s fetched: deeper than crawl_depth 1", r.CanonicalURL)
				}
			}
		case r.Host == "h2.sim.test":
			h2++
		}
	}
	if h1 < 2 {
		t.Errorf("only %d requests to h1: its home page's links were not followed", h1)
	}
	if h2 < 10 {
		t.Errorf("only %d requests to h2, seeded without a depth limit through `crawlnode seed`", h2)
	}
	t.Logf("crawl_depth 1: %d requests to h1 (home + %d links), %d beyond; seed without limit: %d requests to h2", h1, len(home.Links), deeper, h2)
}
