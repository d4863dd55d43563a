package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/crawlnode/crawlnode/dashboard/browsertest"
	"github.com/crawlnode/crawlnode/simweb"
)

// dashStatus is the part of GET /v1/crawl/status the dashboard test compares.
type dashStatus struct {
	State          string `json:"state"`
	PagesCrawled   int64  `json:"pages_crawled"`
	PagesQueued    int64  `json:"pages_queued"`
	InFlight       int64  `json:"in_flight"`
	RetryPending   int64  `json:"retry_pending"`
	DeadLetters    int64  `json:"dead_letters"`
	ExtractBacklog int64  `json:"extract_backlog"`
	HostsKnown     int64  `json:"hosts_known"`
	SeenURLs       int64  `json:"seen_urls"`
	BytesFetched   int64  `json:"bytes_fetched"`
	RateHistory    []struct {
		T         string  `json:"t"`
		PagesPerS float64 `json:"pages_per_s"`
	} `json:"rate_history"`
}

// dashView is what the page shows: element texts and raw values (data-value) by id.
type dashView struct {
	Polls  int
	Text   map[string]string
	Value  map[string]string
	Points int
}

const dashViewJS = `(() => {
	const ids = ["state","pages-crawled","pages-queued","in-flight","retry-pending","dead-letters",
		"extract-backlog","hosts-known","seen-urls","bytes-fetched","member-count","leader","partition-count","dead-letters-total"];
	const g = id => document.getElementById(id);
	return {
		Polls: +g("poll-count").textContent,
		Text: Object.fromEntries(ids.map(id => [id, g(id).textContent])),
		Value: Object.fromEntries(ids.map(id => [id, g(id).dataset.value || ""])),
		Points: +g("rate-chart").dataset.points,
	};
})()`

// TestDashboard opens a running node's dashboard in headless Chromium: the figures match
// the API, Pause stops fetching (as simweb sees it) and Resume restarts it, the block
// control reaches the node, and a screenshot is saved to e2e/artifacts/dashboard.png.
func TestDashboard(t *testing.T) {
	if browsertest.Find() == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no chromium (or chromium-browser) on PATH; CI must install Debian's chromium package")
		}
		t.Skip("no chromium on PATH")
	}
	// Hosts with a Crawl-delay keep the crawl going for a minute at ~20 requests/s.
	w, addr := web(t, func(c *simweb.Config) {
		plainWeb(c)
		c.Hosts, c.Seed = 8, 9
		c.MeanPages = 400
		c.CrawlDelayHosts, c.CrawlDelay, c.CrawlDelayMaxPages = 8, 300*time.Millisecond, 200
	})
	data := filepath.Join(t.TempDir(), "data")
	const token = "dash-token"
	args := slices.DeleteFunc(crawlArgs(data, addr, w, t, "--api-token", token), func(a string) bool { return a == "--exit-when-done" })
	c := startCrawler(t, args...)
	defer func() {
		c.cmd.Process.Signal(syscall.SIGTERM)
		c.wait(t, 20*time.Second)
	}()
	api := apiAddr(t, data)
	status := func() dashStatus {
		var s dashStatus
		if code := getJSON(t, api+"/v1/crawl/status", &s); code != 200 {
			t.Fatalf("status: %d", code)
		}
		return s
	}
	resp, err := http.Get(api + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(page), `id="pages-crawled"`) {
		t.Fatalf("GET / on the node: %d %s, %d bytes: not the dashboard", resp.StatusCode, resp.Header.Get("Content-Type"), len(page))
	}
	waitRequests(t, w, 30, time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	launched := time.Now()
	p, stop, err := browsertest.Start(ctx, browsertest.Options{Width: 1280, Height: 900})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := chromedp.Do(p, browsertest.RecordCSP(), chromedp.Navigate(api+"/#token="+token)); err != nil {
		t.Fatal(err)
	}
	view := func() dashView {
		v, err := chromedp.Run(p, chromedp.Evaluate[dashView](dashViewJS))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// waitPolls waits until the page finished n more polls than it had at the call, and
	// returns what it shows.
	waitPolls := func(n int) dashView {
		target := view().Polls + n
		for {
			v := view()
			if v.Polls >= target {
				return v
			}
			if ctx.Err() != nil {
				t.Fatalf("the page stopped polling at %d", v.Polls)
			}
			time.Sleep(30 * time.Millisecond)
		}
	}
	eval := func(expr string) {
		t.Helper()
		if err := chromedp.Do(p, chromedp.Evaluate[chromedp.Void](expr)); err != nil {
			t.Fatal(err)
		}
	}
	waitPage := func(what, expr string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			if ok, err := chromedp.Run(p, chromedp.Evaluate[bool](expr)); err == nil && ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("page: %s: not within 15 s (%s); shows %+v", what, expr, view())
			}
			time.Sleep(30 * time.Millisecond)
		}
	}
	firstView := waitPolls(1)
	rendered := time.Since(launched)
	if firstView.Text["state"] != "running" {
		t.Errorf("page shows state %q while crawling", firstView.Text["state"])
	}

	// While crawling: every counter the page shows lies between two API readings taken
	// before the poll that produced it started and after it was read.
	before := status()
	shown := waitPolls(2)
	after := status()
	for _, f := range []struct {
		id     string
		lo, hi int64
	}{
		{"pages-crawled", before.PagesCrawled, after.PagesCrawled},
		{"seen-urls", before.SeenURLs, after.SeenURLs},
		{"bytes-fetched", before.BytesFetched, after.BytesFetched},
		{"hosts-known", before.HostsKnown, after.HostsKnown},
	} {
		v, err := strconv.ParseInt(shown.Value[f.id], 10, 64)
		if err != nil || v < f.lo || v > f.hi {
			t.Errorf("while crawling, the page shows %s = %q, the API said %d before and %d after", f.id, shown.Value[f.id], f.lo, f.hi)
		}
	}
	if after.PagesCrawled == before.PagesCrawled {
		t.Errorf("pages_crawled did not move during the bracket (%d): is the crawl running?", before.PagesCrawled)
	}

	// Pause from the page: the node says paused and the server sees no new request after a
	// grace second for fetches in flight.
	eval(`document.getElementById("pause").click()`)
	clicked := time.Now()
	waitPage("state paused", `document.getElementById("state").textContent === "paused" && document.getElementById("resume").disabled === false`)
	if s := status(); s.State != "paused" {
		t.Fatalf("after clicking Pause the API says state %q", s.State)
	}
	const grace = time.Second
	time.Sleep(grace + 3*time.Second)
	var late []string
	recentBefore := 0
	for _, r := range w.Log() {
		if r.Arrival.After(clicked.Add(grace)) {
			late = append(late, fmt.Sprintf("%s %s%s", r.Arrival.Format("15:04:05.000"), r.Host, r.Path))
		}
		if r.Arrival.Before(clicked) && r.Arrival.After(clicked.Add(-2*time.Second)) {
			recentBefore++
		}
	}
	if len(late) > 0 {
		t.Errorf("%d requests reached the server more than %s after Pause: %v", len(late), grace, first(late, 3))
	}
	if recentBefore == 0 {
		t.Error("no request in the 2 s before Pause: the pause check proves nothing")
	}

	// Paused, the figures settle: the page must then show exactly what the API says.
	var settled dashStatus
	for deadline := time.Now().Add(20 * time.Second); ; {
		a := status()
		time.Sleep(500 * time.Millisecond)
		b := status()
		if a.InFlight == 0 && a.PagesCrawled == b.PagesCrawled && a.PagesQueued == b.PagesQueued &&
			a.RetryPending == b.RetryPending && a.DeadLetters == b.DeadLetters && a.SeenURLs == b.SeenURLs &&
			a.ExtractBacklog == b.ExtractBacklog && a.HostsKnown == b.HostsKnown {
			settled = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("figures did not settle while paused: %+v", b)
		}
	}
	shown = waitPolls(2)
	if s := status(); s.PagesCrawled != settled.PagesCrawled || s.PagesQueued != settled.PagesQueued {
		t.Fatalf("figures moved while paused: %+v then %+v", settled, s)
	}
	var cl struct {
		Leader         string `json:"leader"`
		PartitionCount int    `json:"partition_count"`
		Members        []struct {
			Name       string `json:"name"`
			Partitions int    `json:"partitions"`
		} `json:"members"`
	}
	getJSON(t, api+"/v1/cluster", &cl)
	var dl struct {
		Total int64 `json:"total"`
	}
	getJSON(t, api+"/v1/deadletters?limit=20", &dl)
	want := map[string]string{
		"state": "paused", "pages-crawled": comma(settled.PagesCrawled), "pages-queued": comma(settled.PagesQueued),
		"in-flight": comma(settled.InFlight), "retry-pending": comma(settled.RetryPending), "dead-letters": comma(settled.DeadLetters),
		"extract-backlog": comma(settled.ExtractBacklog), "hosts-known": comma(settled.HostsKnown), "seen-urls": comma(settled.SeenURLs),
		"member-count": strconv.Itoa(len(cl.Members)), "leader": cl.Leader, "partition-count": comma(int64(cl.PartitionCount)),
		"dead-letters-total": comma(dl.Total),
	}
	for id, v := range want {
		if shown.Text[id] != v {
			t.Errorf("paused: the page shows %s = %q, the API says %q", id, shown.Text[id], v)
		}
	}
	if shown.Value["bytes-fetched"] != strconv.FormatInt(settled.BytesFetched, 10) {
		t.Errorf("paused: bytes-fetched %q, the API says %d", shown.Value["bytes-fetched"], settled.BytesFetched)
	}
	if len(settled.RateHistory) > 0 && shown.Points == 0 {
		t.Errorf("the API has %d rate samples, the chart none", len(settled.RateHistory))
	}
	ring, err := chromedp.Run(p, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#members tr")].map(tr => tr.cells[0].textContent + "=" + tr.cells[3].textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	var wantRing []string
	for _, m := range cl.Members {
		wantRing = append(wantRing, m.Name+"="+comma(int64(m.Partitions)))
	}
	if !slices.Equal(ring, wantRing) {
		t.Errorf("members table %v, the API says %v", ring, wantRing)
	}

	// Block and unblock a domain from the page.
	eval(`document.getElementById("block-input").value = "dashboard-blocked.sim.test"; document.getElementById("block-button").click()`)
	waitPage("blocked domain listed", `document.getElementById("blocked-domains").textContent.includes("dashboard-blocked.sim.test")`)
	var bl struct{ Domains []string }
	if getJSON(t, api+"/v1/domains/blocked", &bl); !slices.Contains(bl.Domains, "dashboard-blocked.sim.test") {
		t.Errorf("blocked from the page, the API lists %v", bl.Domains)
	}
	eval(`document.querySelector("#blocked-domains button").click()`)
	waitPage("blocked domain gone", `!document.getElementById("blocked-domains").textContent.includes("dashboard-blocked.sim.test")`)
	if getJSON(t, api+"/v1/domains/blocked", &bl); slices.Contains(bl.Domains, "dashboard-blocked.sim.test") {
		t.Errorf("unblocked from the page, the API still lists %v", bl.Domains)
	}

	// Resume: requests reach the server again.
	n0 := len(w.Log())
	resumed := time.Now()
	eval(`document.getElementById("resume").click()`)
	waitPage("state running", `document.getElementById("state").textContent === "running"`)
	waitRequests(t, w, n0+10, 15*time.Second)
	t.Logf("resume: 10 new requests %s after the click", time.Since(resumed).Round(time.Millisecond))
	waitPolls(3) // let the chart and tables show the resumed crawl

	if csp, err := chromedp.Run(p, chromedp.Evaluate[[]string](`window.__csp`)); err != nil || len(csp) > 0 {
		t.Errorf("content security policy violations: %v %v", csp, err)
	}
	png, err := chromedp.Run(p, browsertest.FullPage())
	if err != nil {
		t.Fatal(err)
	}
	shot, _ := filepath.Abs(filepath.Join("artifacts", "dashboard.png"))
	if err := os.MkdirAll(filepath.Dir(shot), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard: first render %s after launching Chromium; %d pages crawled when paused; screenshot %s (%d bytes)",
		rendered.Round(time.Millisecond), settled.PagesCrawled, shot, len(png))
}

// comma formats n the way the page does (en-US grouping).
func comma(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}
