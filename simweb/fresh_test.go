package simweb

import (
	"bytes"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"
)

// testClock is a settable clock for simweb's change schedule.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func changingConfig(clk *testClock) Config {
	c := smallConfig()
	c.ChangeIntervals = []time.Duration{0, 5 * time.Second, 20 * time.Second}
	c.Clock = clk.now
	return c
}

// pageWith finds an article of host 0 whose change interval is p.
func pageWith(t *testing.T, w *Web, p time.Duration) string {
	t.Helper()
	h := w.hosts[0]
	for k := 1; k < h.pages; k++ {
		u := w.url(h, w.articlePath(h, k))
		if w.changeInterval(w.route(h.name, w.articlePath(h, k))) == p {
			return u
		}
	}
	t.Fatalf("no page of host 0 changes every %s", p)
	return ""
}

func TestPagesChangeAndAnswerConditionalRequests(t *testing.T) {
	clk := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	w, cl := startWeb(t, changingConfig(clk))
	u := pageWith(t, w, 5*time.Second)
	never := pageWith(t, w, 0)

	a := get(cl, u)
	etag, lm := a.hdr.Get("ETag"), a.hdr.Get("Last-Modified")
	if a.status != 200 || etag == "" || lm == "" {
		t.Fatalf("first fetch: %d etag %q last-modified %q", a.status, etag, lm)
	}
	if b := get(cl, u, "If-None-Match", etag); b.status != 304 || len(b.body) != 0 {
		t.Fatalf("If-None-Match with the current tag: %d, %d bytes", b.status, len(b.body))
	}
	if b := get(cl, u, "If-Modified-Since", lm); b.status != 304 {
		t.Fatalf("If-Modified-Since the current Last-Modified: %d", b.status)
	}
	clk.advance(5 * time.Second) // exactly one change
	c := get(cl, u, "If-None-Match", etag)
	if c.status != 200 || c.hdr.Get("ETag") == etag || bytes.Equal(c.body, a.body) {
		t.Fatalf("after a change: %d, etag %q (was %q), same body %v", c.status, c.hdr.Get("ETag"), etag, bytes.Equal(c.body, a.body))
	}
	if d := get(cl, u, "If-Modified-Since", lm); d.status != 200 {
		t.Fatalf("If-Modified-Since an older version: %d", d.status)
	}
	n1 := get(cl, never)
	clk.advance(time.Hour)
	if n2 := get(cl, never, "If-None-Match", n1.hdr.Get("ETag")); n2.status != 304 {
		t.Fatalf("a page that never changes: %d", n2.status)
	}
	// The log carries the versions served or confirmed.
	var vs []int
	for _, r := range w.Log() {
		if r.CanonicalURL == u {
			vs = append(vs, r.Version)
		}
	}
	if len(vs) != 5 || vs[0] != vs[1] || vs[3] != vs[0]+1 || vs[4] != vs[3] {
		t.Fatalf("versions in the log: %v", vs)
	}
}

func TestFreshnessAndTooSoon(t *testing.T) {
	clk := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	w, cl := startWeb(t, changingConfig(clk))
	fast, never := pageWith(t, w, 5*time.Second), pageWith(t, w, 0)
	from := clk.now()
	get(cl, fast)
	get(cl, never)
	// The fast page changes once within 5s (at a phase-dependent instant): fetched at
	// from only, over [from, from+20s] it is fresh until its first change.
	clk.advance(20 * time.Second)
	rep := w.Freshness(from, clk.now(), 0)
	first := w.nextChange(fast, 5*time.Second, from).Sub(from)
	want := (1 + first.Seconds()/20) / 2
	if rep.Pages != 2 || math.Abs(rep.Freshness-want) > 1e-6 || rep.ByInterval["never"] != 1 {
		t.Fatalf("freshness %+v, want %.4f", rep, want)
	}
	// Fetching the fast page every second keeps it fresh but for the instants between a
	// change and the next fetch; a 1s minimum flags nothing, a 2s minimum every revisit.
	from = clk.now()
	for i := 0; i < 20; i++ {
		get(cl, fast)
		clk.advance(time.Second)
	}
	rep = w.Freshness(from, clk.now(), time.Second)
	if f := rep.ByInterval["5s"]; f < 0.8 || f >= 1 {
		t.Fatalf("fetching every second: freshness %.3f, want in [0.8, 1)", f)
	}
	if rep.TooSoon != 0 || rep.Requests != 20 {
		t.Fatalf("too soon %d, requests %d", rep.TooSoon, rep.Requests)
	}
	// The first fetch of the round came 20s after the one before: not too soon.
	if rep = w.Freshness(from, clk.now(), 2*time.Second); rep.TooSoon != 19 || rep.MinGap != time.Second {
		t.Fatalf("too soon with a 2s minimum: %d (min gap %s)", rep.TooSoon, rep.MinGap)
	}
}

func TestPageRank(t *testing.T) {
	w, err := New(smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	o := ReportOptions{UserAgent: "crawlnode/0.1"}
	pr := w.PageRank(o)
	if len(pr) != len(w.MustReach(o)) {
		t.Fatalf("%d ranks for %d must-reach pages", len(pr), len(w.MustReach(o)))
	}
	sum, top, topURL := 0.0, 0.0, ""
	for u, v := range pr {
		sum += v
		if v > top {
			top, topURL = v, u
		}
	}
	if math.Abs(sum-1) > 1e-6 {
		t.Fatalf("ranks sum to %v", sum)
	}
	// Home pages collect links from every page of their host: the top page is one.
	if hn, pq := splitURL(topURL); pq != "/" || hn == "" {
		t.Fatalf("top page %s (%.4f)", topURL, top)
	}
	if top < 3/float64(len(pr)) {
		t.Fatalf("no skew: top rank %.5f, mean %.5f", top, 1/float64(len(pr)))
	}
	// The share report over a log of requests in a given order.
	srv, cl := startWeb(t, smallConfig())
	byRank := srv.MustReach(o)
	prs := srv.PageRank(o)
	best := ""
	for u, v := range prs {
		if best == "" || v > prs[best] {
			best = u
		}
	}
	get(cl, best)
	// The request is logged when its handler returns, which can be just after the client
	// has read the answer.
	rep := srv.PageRankShare(o, 0.01)
	for deadline := time.Now().Add(5 * time.Second); rep.Fetched == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		rep = srv.PageRankShare(o, 0.01)
	}
	if rep.Fetched != 1 || math.Abs(rep.Share-prs[best]) > 1e-12 || rep.Best < rep.Share || rep.MustReach != len(byRank) {
		t.Fatalf("share report %+v (rank of %s: %v)", rep, best, prs[best])
	}
	_ = http.StatusOK
}
