package frontier

import (
	"math"
	"slices"
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
