package frontier

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestChangeRateAndNextInterval(t *testing.T) {
	s := time.Second
	rc := Recrawl{Enabled: true, Min: 2 * s, Max: 64 * s}
	cases := []struct {
		name       string
		v          Validators
		importance float64
		want       time.Duration
	}{
		{"first fetch: geometric mean of the bounds", Validators{}, 0, 0}, // set below
		{"first fetch with a sitemap hint", Validators{Hint: int64(5 * s)}, 0, 5 * s},
		{"hint below the minimum", Validators{Hint: int64(s)}, 0, 2 * s},
		{"no change seen: back off to 1.5 times the last interval", Validators{Visits: 3, Observed: int64(30 * s), Interval: int64(10 * s)}, 0, 15 * s},
		{"no change, capped at the maximum", Validators{Visits: 3, Observed: int64(150 * s), Interval: int64(50 * s)}, 0, 64 * s},
		// n=4, x=4, mean 20s: r = ln(9)/20 = 0.1099/s -> 1/(4r) = 2.276s
		{"changes every visit", Validators{Visits: 4, Changes: 4, Observed: int64(80 * s), Interval: int64(20 * s)}, 0, 2276 * time.Millisecond},
		{"changes every visit: at most half the last interval", Validators{Visits: 4, Changes: 4, Observed: int64(80 * s), Interval: int64(4 * s)}, 0, 2 * s},
		{"changes every visit, held at the minimum", Validators{Visits: 4, Changes: 4, Observed: int64(40 * s), Interval: int64(10 * s)}, 0, 2 * s},
		// n=4, x=1, mean 10s: r = -ln(3.5/4.5)/10 = 0.02513 -> 1/(4r) = 9.948s
		{"one change in four", Validators{Visits: 4, Changes: 1, Observed: int64(40 * s), Interval: int64(10 * s)}, 0, 9948 * time.Millisecond},
		{"important pages come sooner (factor 2 at most)", Validators{Visits: 4, Changes: 1, Observed: int64(40 * s)}, 256, 4974 * time.Millisecond},
		{"unimportant pages later (factor 0.5 at most)", Validators{Visits: 4, Changes: 1, Observed: int64(40 * s)}, 1.0 / 256, 19896 * time.Millisecond},
		{"an average page: no factor", Validators{Visits: 4, Changes: 1, Observed: int64(40 * s)}, 1, 9948 * time.Millisecond},
	}
	cases[0].want = time.Duration(math.Sqrt(float64(2*s) * float64(64*s)))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := NextInterval(rc, tc.v, tc.importance)
			if d := got - tc.want; d < -5*time.Millisecond || d > 5*time.Millisecond {
				t.Fatalf("NextInterval = %v, want %v", got, tc.want)
			}
		})
	}
	fixed := Recrawl{Enabled: true, Min: 7 * s, Max: 7 * s}
	for _, v := range []Validators{{}, {Visits: 9, Changes: 9, Observed: int64(9 * s)}, {Visits: 9, Observed: int64(900 * s), Interval: int64(100 * s)}} {
		if got := NextInterval(fixed, v, 100); got != 7*s {
			t.Fatalf("fixed interval: got %v for %+v", got, v)
		}
	}
}

func TestObserve(t *testing.T) {
	t0 := time.Unix(1000, 0)
	v := Observe(Validators{}, &Version{ETag: `"a"`, Hash: 1}, t0)
	if v.Visits != 0 || v.Fetched != t0.UnixNano() || v.ETag != `"a"` || v.Hash != 1 {
		t.Fatalf("first fetch: %+v", v)
	}
	v = Observe(v, &Version{NotModified: true}, t0.Add(10*time.Second))
	if v.Visits != 1 || v.Changes != 0 || v.Observed != int64(10*time.Second) || v.ETag != `"a"` || v.Hash != 1 {
		t.Fatalf("304: %+v", v)
	}
	v = Observe(v, &Version{ETag: `"a"`, Hash: 1}, t0.Add(20*time.Second))
	if v.Visits != 2 || v.Changes != 0 {
		t.Fatalf("same hash: %+v", v)
	}
	v = Observe(v, &Version{ETag: `"b"`, Hash: 2}, t0.Add(30*time.Second))
	if v.Visits != 3 || v.Changes != 1 || v.ETag != `"b"` || v.Hash != 2 {
		t.Fatalf("changed: %+v", v)
	}
	for i := 0; i < 20; i++ {
		v = Observe(v, &Version{Hash: uint64(10 + i)}, t0.Add(time.Duration(40+10*i)*time.Second))
	}
	if v.Visits > maxVisits || v.Changes > v.Visits {
		t.Fatalf("counts not bounded: %+v", v)
	}
}

// recrawlF is a frontier with recrawl on, bounds 10s..80s, a fake clock, no delay.
func recrawlF(t *testing.T, dir string, clk *fakeClock) *Frontier {
	t.Helper()
	cfg := noDelay(openDB(t, dir))
	cfg.Now = clk.Now
	cfg.Recrawl = Recrawl{Enabled: true, Min: 10 * time.Second, Max: 80 * time.Second, Share: 0.5}
	return openF(t, cfg)
}

func TestRecrawlSchedulesRevisitsWithValidators(t *testing.T) {
	clk := newFakeClock()
	f := recrawlF(t, "", clk)
	mustAdd(t, f, Candidate{URL: "http://h.test/a", Cash: 1})
	l, _ := tryNext(t, f)
	if l == nil || l.Revisit {
		t.Fatalf("first lease %+v", l)
	}
	mustDone(t, f, l, Outcome{Kind: Fetched, Status: 200, Version: &Version{ETag: `"v1"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT", Hash: 7}})
	if st := f.Stats(); st.RevisitPending != 1 || st.Queued != 0 {
		t.Fatalf("after the first fetch: %+v", st)
	}
	if f.Idle() {
		t.Fatal("a continuous crawl with a scheduled revisit reports idle")
	}
	// First interval: sqrt(10s*80s) = 28.28s, importance 1 leaves it as is.
	clk.Advance(28 * time.Second)
	if l, wait := tryNext(t, f); l != nil || wait <= 0 || wait > time.Second {
		t.Fatalf("revisit before its time: %v, wait %v", l, wait)
	}
	clk.Advance(time.Second)
	l, _ = tryNext(t, f)
	if l == nil || !l.Revisit || l.Validators.ETag != `"v1"` || l.Validators.Hash != 7 || l.Validators.LastModified == "" {
		t.Fatalf("revisit lease %+v", l)
	}
	// 304: no change; the next interval is 1.5 times longer (42.4s).
	mustDone(t, f, l, Outcome{Kind: Fetched, Status: 304, Version: &Version{NotModified: true}})
	clk.Advance(42 * time.Second)
	if l, _ := tryNext(t, f); l != nil {
		t.Fatalf("unchanged page revisited before its back-off: %s", l.URL)
	}
	clk.Advance(time.Second)
	if l, _ = tryNext(t, f); l == nil || l.Validators.Visits != 1 {
		t.Fatalf("second revisit %+v", l)
	}
	checkCounters(t, f)
}

func TestRecrawlSurvivesRestartAndHandoff(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	db := openDB(t, dir)
	cfg := partCfg(db, clk)
	cfg.Recrawl = Recrawl{Enabled: true, Min: 10 * time.Second, Max: 10 * time.Second}
	f, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, f, Candidate{URL: "http://p3-a.test/x"}, Candidate{URL: "http://p3-a.test/y"})
	for l, _ := tryNext(t, f); l != nil; l, _ = tryNext(t, f) {
		mustDone(t, f, l, Outcome{Kind: Fetched, Status: 200, Version: &Version{Hash: 1}})
	}
	// One revisit comes due and waits in the queue; the other stays scheduled.
	clk.Advance(10 * time.Second)
	l, _ := tryNext(t, f)
	if l == nil || !l.Revisit {
		t.Fatalf("revisit %+v", l)
	}
	mustDone(t, f, l, Outcome{Kind: Requeue, NoRequest: true})
	st := f.Stats()
	if st.RevisitQueued+st.RevisitPending != 2 {
		t.Fatalf("stats %+v", st)
	}
	checkCounters(t, f)
	_ = f.Close()

	// Restart: the schedule is in Badger.
	f, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st := f.Stats(); st.RevisitQueued+st.RevisitPending != 2 {
		t.Fatalf("after restart %+v", st)
	}
	// Handoff: partition 3 moves to another node with its revisits.
	g := openF(t, partCfg(openDB(t, ""), clk))
	g.SetRecrawl(cfg.Recrawl)
	transfer(t, f, g, 3)
	checkCounters(t, g)
	var got []string
	for l, _ := tryNext(t, g); l != nil; l, _ = tryNext(t, g) {
		if !l.Revisit {
			t.Fatalf("imported %s is not a revisit", l.URL)
		}
		got = append(got, l.URL)
		mustDone(t, g, l, Outcome{Kind: Fetched, Status: 304, Version: &Version{NotModified: true}})
	}
	clk.Advance(10 * time.Second)
	for l, _ := tryNext(t, g); l != nil; l, _ = tryNext(t, g) {
		got = append(got, l.URL)
		mustDone(t, g, l, Outcome{Kind: Fetched, Status: 304, Version: &Version{NotModified: true}})
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"http://p3-a.test/x", "http://p3-a.test/x", "http://p3-a.test/y", "http://p3-a.test/y"}) {
		t.Fatalf("revisits on the receiver: %v", got)
	}
	if rec, ok, _ := g.Lookup("http://p3-a.test/x"); !ok || rec.State != StateFetched {
		t.Fatalf("seen record on the receiver: %+v %v", rec, ok)
	}
	checkCounters(t, g)
}

func TestRevisitShareOfAHost(t *testing.T) {
	clk := newFakeClock()
	f := recrawlF(t, "", clk)
	f.SetRecrawl(Recrawl{Enabled: true, Min: 10 * time.Second, Max: 10 * time.Second, Share: 0.25})
	mustAdd(t, f, urls("h.test", 8)...)
	drain(t, f)
	// 8 revisits due and 40 new URLs: a quarter of the leases go to revisits.
	mustAdd(t, f, func() []Candidate {
		var cs []Candidate
		for i := 0; i < 40; i++ {
			cs = append(cs, u("h.test", "/new"+string(rune('a'+i%26))+string(rune('a'+i/26))))
		}
		return cs
	}()...)
	clk.Advance(10 * time.Second)
	rev := 0
	for i := 0; i < 32; i++ {
		l, _ := tryNext(t, f)
		if l == nil {
			t.Fatalf("lease %d: none", i)
		}
		if l.Revisit {
			rev++
		}
		mustDone(t, f, l, Outcome{Kind: Fetched, Status: 200})
		clk.Advance(100 * time.Millisecond) // the revisits pushed back come due
	}
	if rev != 8 {
		t.Fatalf("%d of 32 leases were revisits, want 8 (share 0.25)", rev)
	}
	checkCounters(t, f)
}

func TestOPICCashMovesURLsUp(t *testing.T) {
	cfg := noDelay(openDB(t, ""))
	cfg.Importance = true
	f := openF(t, cfg)
	// Ten URLs of one host, admitted with little cash in arrival order.
	var cs []Candidate
	for i := 0; i < 10; i++ {
		c := u("h.test", "/p"+string(rune('0'+i)))
		c.Depth, c.Cash = 2, 0.001
		cs = append(cs, c)
	}
	mustAdd(t, f, cs...)
	// Later links pass cash to /p7 (three times) and /p4 (once).
	for _, p := range []string{"/p7", "/p7", "/p4", "/p7"} {
		c := u("h.test", p)
		c.Depth, c.Cash = 1, 0.5
		if r := mustAdd(t, f, c); r.AlreadySeen != 1 {
			t.Fatalf("add %+v", r)
		}
	}
	got := drain(t, f)
	want := []string{"/p7", "/p4", "/p0", "/p1", "/p2", "/p3", "/p5", "/p6", "/p8", "/p9"}
	for i := range want {
		want[i] = "http://h.test" + want[i]
	}
	if !slices.Equal(got, want) {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
}

func TestReadyHostsByPriority(t *testing.T) {
	f := openF(t, noDelay(openDB(t, "")))
	// Three hosts ready at once: the one whose first URL has the most cash goes first,
	// then the seed classes' breadth-first order.
	mustAdd(t, f,
		Candidate{URL: "http://a.test/", Cash: 0.01},
		Candidate{URL: "http://b.test/", Cash: 4},
		Candidate{URL: "http://c.test/", Cash: 0.5},
		Candidate{URL: "http://d.test/", Cash: 0.5, Priority: 0},
	)
	got := drain(t, f)
	want := []string{"http://b.test/", "http://c.test/", "http://d.test/", "http://a.test/"}
	if !slices.Equal(got, want) {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
}

// TestOPICBatchDuplicatesPassCash: one Add carries the links of several pages, so a URL can
// come several times; every occurrence is an in-link and brings its cash, whether the URL is
// new or already queued.
func TestOPICBatchDuplicatesPassCash(t *testing.T) {
	cfg := noDelay(openDB(t, ""))
	cfg.Importance = true
	f := openF(t, cfg)
	c := func(path string, cash float64) Candidate {
		x := u("h.test", path)
		x.Depth, x.Cash = 1, cash
		return x
	}
	mustAdd(t, f, c("/old", 0.01))
	r := mustAdd(t, f, c("/new", 0.1), c("/old", 0.1), c("/new", 0.1), c("/old", 0.1), c("/new", 0.1), c("/once", 0.2))
	if r.Added != 2 || r.AlreadySeen != 4 {
		t.Fatalf("add %+v, want 2 added and 4 already seen", r)
	}
	cash := map[string]float64{}
	var order []string
	for {
		l, _ := tryNext(t, f)
		if l == nil {
			break
		}
		cash[l.URL], order = l.Cash, append(order, l.URL)
		mustDone(t, f, l, Outcome{Kind: Fetched, Status: 200})
	}
	want := map[string]float64{"http://h.test/new": 0.3, "http://h.test/old": 0.21, "http://h.test/once": 0.2}
	for k, v := range want {
		if math.Abs(cash[k]-v) > 1e-9 {
			t.Errorf("%s leased with cash %v, want %v", k, cash[k], v)
		}
	}
	if order[0] != "http://h.test/new" {
		t.Errorf("order %v: the URL three pages link to should go first", order)
	}
}

// TestOPICBoostsEveryURL: cash passed to more queued URLs than one Badger transaction
// holds reaches all of them (it used to stop at the first 512).
func TestOPICBoostsEveryURL(t *testing.T) {
	cfg := noDelay(openDB(t, ""))
	cfg.Importance = true
	f := openF(t, cfg)
	const n = 1300
	cs := make([]Candidate, n)
	for i := range cs {
		cs[i] = Candidate{URL: fmt.Sprintf("http://h%d.test/p", i), Depth: 1, Cash: 0.001}
	}
	mustAdd(t, f, cs...)
	for i := range cs {
		cs[i].Cash = 0.5
	}
	if r := mustAdd(t, f, cs...); r.AlreadySeen != n {
		t.Fatalf("add %+v", r)
	}
	got := 0
	for {
		l, _ := tryNext(t, f)
		if l == nil {
			break
		}
		if math.Abs(l.Cash-0.501) > 1e-9 {
			t.Errorf("%s leased with cash %v, want 0.501", l.URL, l.Cash)
		}
		got++
		mustDone(t, f, l, Outcome{Kind: Fetched, Status: 200})
	}
	if got != n {
		t.Fatalf("leased %d of %d", got, n)
	}
}

// TestOPICTemplateLinksFirst: a link found on every fetched page of a site (its navigation)
// ranks above links found once, even when each occurrence carried less cash: the forecast
// counts the in-links the site's pages not yet fetched will give it.
func TestOPICTemplateLinksFirst(t *testing.T) {
	cfg := noDelay(openDB(t, ""))
	cfg.Importance = true
	f := openF(t, cfg)
	mustAdd(t, f, Candidate{URL: "http://h.test/", Cash: 1})
	if got := drain(t, f); len(got) != 1 {
		t.Fatalf("drained %v", got)
	}
	// Three pages, each linking to the navigation page /nav and to 20 pages of their own;
	// the navigation link carries a fifth of the cash of the others.
	for p := 0; p < 3; p++ {
		cs := []Candidate{{URL: "http://h.test/nav", Depth: 1, Cash: 0.01}}
		for i := 0; i < 20; i++ {
			cs = append(cs, Candidate{URL: fmt.Sprintf("http://h.test/a%d-%d", p, i), Depth: 1, Cash: 0.05})
		}
		mustAdd(t, f, cs...)
	}
	l, _ := tryNext(t, f)
	if l == nil || l.URL != "http://h.test/nav" {
		t.Fatalf("first lease %v, want the navigation page", l)
	}
}

// TestOPICLargerSiteNavigationFirst: two sites, each with its home page and one section
// page fetched; the navigation links are on both pages of each site, but b.test's section
// page listed 40 new pages and a.test's 3. b.test's navigation goes first (every page of
// the larger site will link to it), although a.test sorts first by name and the links
// carry the same cash; the pages linked once come after both sites' navigation.
func TestOPICLargerSiteNavigationFirst(t *testing.T) {
	cfg := noDelay(openDB(t, ""))
	cfg.Importance = true
	f := openF(t, cfg)
	mustAdd(t, f, Candidate{URL: "http://a.test/", Cash: 1}, Candidate{URL: "http://b.test/", Cash: 1})
	page := func(host string, listed int) []Candidate {
		var cs []Candidate
		for i := 0; i < 8; i++ {
			cs = append(cs, Candidate{URL: fmt.Sprintf("http://%s/s%d/", host, i), Depth: 1, Cash: 0.05})
		}
		for i := 0; i < listed; i++ {
			cs = append(cs, Candidate{URL: fmt.Sprintf("http://%s/a%d.html", host, i), Depth: 2, Cash: 0.05})
		}
		return cs
	}
	// The home pages (as the node does: the links are added, then the lease is done).
	for i := 0; i < 2; i++ {
		l, _ := tryNext(t, f)
		mustAdd(t, f, page(l.Host, 10)...)
		mustDone(t, f, l, Outcome{Kind: Fetched, Status: 200})
	}
	// One section page of each site, fetched at the same time.
	listed := map[string]int{"a.test": 3, "b.test": 40}
	l1, _ := tryNext(t, f)
	l2, _ := tryNext(t, f)
	for _, l := range []*Lease{l1, l2} {
		if l == nil || !strings.Contains(l.URL, "/s0/") {
			t.Fatalf("lease %s, want a section page", l.URL)
		}
		cs := page(l.Host, 0)
		for j := 0; j < listed[l.Host]; j++ {
			cs = append(cs, Candidate{URL: fmt.Sprintf("http://%s/s0/%d.html", l.Host, j), Depth: 2, Cash: 0.01})
		}
		mustAdd(t, f, cs...)
		mustDone(t, f, l, Outcome{Kind: Fetched, Status: 200})
	}
	// Every page fetched from now on links the navigation too.
	var got []string
	for {
		l, _ := tryNext(t, f)
		if l == nil {
			break
		}
		got = append(got, l.URL)
		mustAdd(t, f, page(l.Host, 0)...)
		mustDone(t, f, l, Outcome{Kind: Fetched, Status: 200})
	}
	var want []string
	for _, h := range []string{"b.test", "a.test"} {
		for i := 1; i < 8; i++ {
			want = append(want, fmt.Sprintf("http://%s/s%d/", h, i))
		}
	}
	if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Fatalf("order\n got %v\nwant first %v", got, want)
	}
}

// TestReleaseFreesHost: Release gives the host's request slot back while the URL stays
// leased: the host's next URL can be leased once its delay has passed from the response's
// end, before Done; Done later records the first lease without moving the host's clock,
// and the counts stay exact. A RetryAfter given to Release holds the host.
func TestReleaseFreesHost(t *testing.T) {
	clk := newFakeClock()
	f := openF(t, Config{DB: openDB(t, ""), Now: clk.Now, DefaultDelaySet: true, DefaultDelay: time.Second})
	mustAdd(t, f, u("h.test", "/a"), u("h.test", "/b"), u("h.test", "/c"))
	la, _ := tryNext(t, f)
	clk.Advance(3 * time.Second)
	if l, _ := tryNext(t, f); l != nil {
		t.Fatalf("leased %s while the host's request is in flight", l.URL)
	}
	f.Release(la, Outcome{Kind: Fetched, Finished: clk.Now()})
	f.Release(la, Outcome{Kind: Fetched, Finished: clk.Now()}) // a second Release is a no-op
	if l, wait := tryNext(t, f); l != nil || wait != time.Second {
		t.Fatalf("lease %v, wait %v: want none before the delay after the response (1s)", l, wait)
	}
	clk.Advance(time.Second)
	lb, _ := tryNext(t, f)
	if lb == nil || lb.URL != "http://h.test/b" {
		t.Fatalf("lease %v after Release and the delay, want /b", lb)
	}
	if s := f.Stats(); s.InFlight != 2 {
		t.Fatalf("in flight %d, want 2 (a released lease stays leased until Done)", s.InFlight)
	}
	mustDone(t, f, la, Outcome{Kind: Fetched, Status: 200})
	f.Release(lb, Outcome{Kind: Retry, Status: 503, RetryAfter: time.Minute, Finished: clk.Now()})
	clk.Advance(30 * time.Second)
	if l, _ := tryNext(t, f); l != nil {
		t.Fatalf("leased %s during the Retry-After given to Release", l.URL)
	}
	mustDone(t, f, lb, Outcome{Kind: Fetched, Status: 200})
	clk.Advance(31 * time.Second)
	if l, _ := tryNext(t, f); l == nil || l.URL != "http://h.test/c" {
		t.Fatalf("lease %v after the Retry-After, want /c", l)
	} else {
		mustDone(t, f, l, Outcome{Kind: Fetched, Status: 200})
	}
	checkCounters(t, f)
}

// TestOPICFirstPageInPageOrder: before a site's second page, every link of its first page
// may be navigation, so the forecast goes to all of them alike and they keep the page's
// order, even where a link from another site brought a little more cash; and every URL of
// one Add sees the same size of its site, so a URL late in the batch does not outrank the
// earlier ones.
func TestOPICFirstPageInPageOrder(t *testing.T) {
	cfg := noDelay(openDB(t, ""))
	cfg.Importance = true
	f := openF(t, cfg)
	mustAdd(t, f, Candidate{URL: "http://h.test/", Cash: 1})
	home, _ := tryNext(t, f)
	var cs []Candidate
	var want []string
	for i := 0; i < 8; i++ {
		cs = append(cs, Candidate{URL: fmt.Sprintf("http://h.test/s%d/", i), Depth: 1, Cash: 0.03})
		want = append(want, cs[i].URL)
	}
	for i := 0; i < 30; i++ {
		c := Candidate{URL: fmt.Sprintf("http://h.test/a%d.html", i), Depth: 1, Cash: 0.03}
		if i%10 == 3 {
			c.Cash = 0.045 // also linked from another site
		}
		cs = append(cs, c)
	}
	mustAdd(t, f, cs...)
	mustDone(t, f, home, Outcome{Kind: Fetched, Status: 200})
	if got := drain(t, f); !slices.Equal(got[:8], want) {
		t.Fatalf("order\n got %v\nwant first %v", got, want)
	}
}
