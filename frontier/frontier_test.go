package frontier

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBFSOrderWithinHost(t *testing.T) {
	type add struct {
		path     string
		depth    int
		priority uint8
	}
	cases := []struct {
		name    string
		batches [][]add
		want    []string
	}{
		{
			name:    "depth then arrival",
			batches: [][]add{{{"/a", 2, 0}, {"/b", 1, 0}, {"/c", 0, 0}, {"/d", 1, 0}}},
			want:    []string{"/c", "/b", "/d", "/a"},
		},
		{
			name:    "priority first",
			batches: [][]add{{{"/low", 0, 5}, {"/deep", 9, 0}, {"/mid", 3, 1}}},
			want:    []string{"/deep", "/mid", "/low"},
		},
		{
			name: "later shallow URLs overtake a full prefetch buffer",
			batches: [][]add{
				{{"/d3-0", 3, 0}, {"/d3-1", 3, 0}, {"/d3-2", 3, 0}, {"/d3-3", 3, 0}, {"/d3-4", 3, 0},
					{"/d3-5", 3, 0}, {"/d3-6", 3, 0}, {"/d3-7", 3, 0}, {"/d3-8", 3, 0}, {"/d3-9", 3, 0}},
				{{"/d1-0", 1, 0}, {"/d2-0", 2, 0}},
				{{"/d1-1", 1, 0}, {"/d4-0", 4, 0}},
			},
			want: []string{"/d1-0", "/d1-1", "/d2-0", "/d3-0", "/d3-1", "/d3-2", "/d3-3", "/d3-4", "/d3-5",
				"/d3-6", "/d3-7", "/d3-8", "/d3-9", "/d4-0"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := openF(t, noDelay(openDB(t, "")))
			first := true
			for _, b := range tc.batches {
				var cs []Candidate
				for _, a := range b {
					c := u("h.test", a.path)
					c.Depth, c.Priority = a.depth, a.priority
					cs = append(cs, c)
				}
				mustAdd(t, f, cs...)
				if first {
					// Load the prefetch buffer before the later batches arrive.
					f.mu.Lock()
					h := f.hosts["h.test"]
					f.mu.Unlock()
					f.mu.Lock()
					if err := f.refill(h); err != nil {
						t.Fatal(err)
					}
					first = false
				}
			}
			got := drain(t, f)
			var want []string
			for _, p := range tc.want {
				want = append(want, "http://h.test"+p)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("order\n got %v\nwant %v", got, want)
			}
		})
	}
}

func TestPoliteness(t *testing.T) {
	ms := time.Millisecond
	type step struct {
		advance time.Duration
		op      string // "lease" (expect one), "none" (expect none and this wait; -1 = until woken), "done" (oldest lease), "doneFinishedAgo" (oldest lease, its response ended wait ago)
		wait    time.Duration
	}
	cases := []struct {
		name    string
		perHost int
		delay   time.Duration
		hostDly time.Duration // SetHostDelay if > 0
		steps   []step
	}{
		{
			name: "start-to-start when the response is quick to finish", perHost: 1, delay: 1000 * ms,
			steps: []step{
				{0, "lease", 0}, {0, "none", -1},
				{100 * ms, "done", 0}, // finished at 100ms: next = max(1000, 100+1000) = 1100
				{0, "none", 1000 * ms},
				{999 * ms, "none", 1 * ms},
				{1 * ms, "lease", 0},
			},
		},
		{
			name: "delay after finish for a slow response", perHost: 1, delay: 1000 * ms,
			steps: []step{
				{0, "lease", 0},
				{2500 * ms, "done", 0}, // next = 2500+1000
				{0, "none", 1000 * ms},
				{999 * ms, "none", 1 * ms},
				{1 * ms, "lease", 0},
			},
		},
		{
			// The caller closed a connection the server may still be answering on and
			// gives it 700ms: the delay runs from then (a future Finished is honoured).
			name: "delay runs from a finish ahead of Done", perHost: 1, delay: 1000 * ms,
			steps: []step{
				{0, "lease", 0},
				{2500 * ms, "doneFinishedAgo", -700 * ms}, // next = 3200+1000
				{0, "none", 1700 * ms},
				{1699 * ms, "none", 1 * ms},
				{1 * ms, "lease", 0},
			},
		},
		{
			// The caller spent 500ms archiving and parsing after the response ended at 2000ms:
			// the delay runs from the end of the response, not from Done.
			name: "delay runs from the response's finish", perHost: 1, delay: 1000 * ms,
			steps: []step{
				{0, "lease", 0},
				{2500 * ms, "doneFinishedAgo", 500 * ms}, // next = 2000+1000
				{0, "none", 500 * ms},
				{499 * ms, "none", 1 * ms},
				{1 * ms, "lease", 0},
			},
		},
		{
			// A lease dropped without a request (robots.txt disallows it) gives its slot back.
			name: "an outcome without a request keeps the host's clock", perHost: 1, delay: 1000 * ms,
			steps: []step{
				{0, "lease", 0}, {0, "done", 0}, // a real fetch at 0: next = 1000
				{1000 * ms, "lease", 0},       // t=1000
				{10 * ms, "doneNoRequest", 0}, // nothing sent: next goes back to 1000
				{0, "lease", 0},               // t=1010, at once
				{0, "done", 0},
				{0, "none", 1000 * ms},
			},
		},
		{
			name: "robots crawl-delay overrides the default", perHost: 1, delay: 1000 * ms, hostDly: 250 * ms,
			steps: []step{
				{0, "lease", 0}, {0, "done", 0},
				{0, "none", 250 * ms},
				{249 * ms, "none", 1 * ms},
				{1 * ms, "lease", 0},
			},
		},
		{
			name: "per-host 2: start-to-start only", perHost: 2, delay: 1000 * ms,
			steps: []step{
				{0, "lease", 0},
				{0, "none", 1000 * ms},
				{999 * ms, "none", 1 * ms},
				{1 * ms, "lease", 0},    // t=1000, two in flight
				{5000 * ms, "none", -1}, // t=6000, host full: waits for a Done
				{0, "done", 0},          // next stays 2000 (no after-finish rule when PerHost > 1)
				{0, "lease", 0},         // t=6000
				{0, "done", 0},
				{0, "none", 1000 * ms},
				{1000 * ms, "lease", 0},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			f := openF(t, Config{DB: openDB(t, ""), Now: clk.Now, PerHost: tc.perHost, DefaultDelay: tc.delay})
			mustAdd(t, f, urls("h.test", 10)...)
			if tc.hostDly > 0 {
				f.SetHostDelay("h.test", tc.hostDly)
			}
			var leases []*Lease
			for i, s := range tc.steps {
				clk.Advance(s.advance)
				switch s.op {
				case "lease":
					l, w := tryNext(t, f)
					if l == nil {
						t.Fatalf("step %d: no lease, wait %v", i, w)
					}
					leases = append(leases, l)
				case "none":
					l, w := tryNext(t, f)
					if l != nil {
						t.Fatalf("step %d: unexpected lease %s", i, l.URL)
					}
					if w != s.wait {
						t.Fatalf("step %d: wait %v, want %v", i, w, s.wait)
					}
				case "done":
					mustDone(t, f, leases[0], Outcome{Kind: Fetched, Status: 200})
					leases = leases[1:]
				case "doneNoRequest":
					mustDone(t, f, leases[0], Outcome{Kind: Drop, Err: "disallowed", NoRequest: true})
					leases = leases[1:]
				case "doneFinishedAgo":
					mustDone(t, f, leases[0], Outcome{Kind: Fetched, Status: 200, Finished: clk.Now().Add(-s.wait)})
					leases = leases[1:]
				}
			}
		})
	}
}

func TestRetryBackoffAndDeadLetter(t *testing.T) {
	clk := newFakeClock()
	f := openF(t, Config{DB: openDB(t, ""), Now: clk.Now, DefaultDelaySet: true, Rand: func() float64 { return 0.5 }})
	mustAdd(t, f, u("h.test", "/a"), u("h.test", "/b"))

	l, _ := tryNext(t, f)
	if l.URL != "http://h.test/a" {
		t.Fatalf("first lease %s", l.URL)
	}
	// Full jitter at 0.5 over 2s, 4s, 8s, 16s.
	wantBackoff := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	for attempt := 1; attempt <= 5; attempt++ {
		if l.Attempts != attempt-1 {
			t.Fatalf("attempt %d: lease says %d attempts", attempt, l.Attempts)
		}
		mustDone(t, f, l, Outcome{Kind: Retry, Status: 503, Err: fmt.Sprintf("err%d", attempt)})
		if attempt == 5 {
			break
		}
		if attempt == 1 {
			// The retry wait must not block the host's other URL.
			b, _ := tryNext(t, f)
			if b == nil || b.URL != "http://h.test/b" {
				t.Fatalf("other URL of the host blocked by a retry: %v", b)
			}
			mustDone(t, f, b, Outcome{Kind: Fetched, Status: 200})
		}
		if st := f.Stats(); st.RetryPending != 1 || st.Queued != 0 {
			t.Fatalf("stats during backoff %+v", st)
		}
		if f.Idle() {
			t.Fatal("idle while a retry is pending")
		}
		bo := wantBackoff[attempt-1]
		if x, w := tryNext(t, f); x != nil || w != bo {
			t.Fatalf("attempt %d: lease %v wait %v, want none and %v", attempt, x, w, bo)
		}
		clk.Advance(bo - time.Millisecond)
		if x, _ := tryNext(t, f); x != nil {
			t.Fatalf("attempt %d: leased 1ms before backoff ended", attempt)
		}
		clk.Advance(time.Millisecond)
		if l, _ = tryNext(t, f); l == nil || l.URL != "http://h.test/a" {
			t.Fatalf("attempt %d: retry not leased when due: %v", attempt, l)
		}
	}
	var dls []DeadLetter
	if err := f.DeadLetters(func(d DeadLetter) bool { dls = append(dls, d); return true }); err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].URL != "http://h.test/a" || dls[0].Attempts != 5 || dls[0].LastErr != "err5" || dls[0].Status != 503 || dls[0].Host != "h.test" {
		t.Fatalf("dead letters %+v", dls)
	}
	sr, ok, err := f.Lookup("http://h.test/a")
	if err != nil || !ok || sr.State != StateDead || sr.Reason != "err5" {
		t.Fatalf("lookup %+v %v %v", sr, ok, err)
	}
	if st := f.Stats(); st.DeadLetters != 1 || st.RetryPending != 0 || st.InFlight != 0 || !f.Idle() {
		t.Fatalf("final stats %+v idle %v", st, f.Idle())
	}
}

func TestBackoffCapAndJitterRange(t *testing.T) {
	cases := []struct {
		attempt int
		r       float64
		want    time.Duration
	}{
		{1, 0.999999, 2 * time.Second}, {1, 0, 0}, {2, 1, 4 * time.Second}, {3, 0.25, 2 * time.Second},
		{10, 1, 10 * time.Minute}, {60, 1, 10 * time.Minute}, {60, 0.5, 5 * time.Minute},
	}
	for _, tc := range cases {
		f := &Frontier{cfg: Config{BackoffBase: 2 * time.Second, BackoffMax: 10 * time.Minute, Rand: func() float64 { return tc.r }}}
		got := f.backoff(tc.attempt)
		if d := got - tc.want; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("backoff(%d, r=%v) = %v, want %v", tc.attempt, tc.r, got, tc.want)
		}
	}
}

func TestRetryAfterIsHostWide(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	db := openDB(t, dir)
	f := openF(t, Config{DB: db, Now: clk.Now, DefaultDelaySet: true, Rand: func() float64 { return 0 }})
	mustAdd(t, f, u("h1.test", "/a"), u("h1.test", "/b"), u("h2.test", "/c"))
	var a *Lease
	for {
		l, _ := tryNext(t, f)
		if l == nil {
			t.Fatal("no lease for h1/a")
		}
		if l.Host == "h1.test" {
			a = l
			break
		}
		mustDone(t, f, l, Outcome{Kind: Requeue})
	}
	mustDone(t, f, a, Outcome{Kind: Retry, Status: 429, Err: "429", RetryAfter: 30 * time.Second})
	// h2 is unaffected; h1 (both its URLs, including /a whose own backoff is 0) waits 30s.
	l, _ := tryNext(t, f)
	if l == nil || l.Host != "h2.test" {
		t.Fatalf("want h2 lease, got %v", l)
	}
	mustDone(t, f, l, Outcome{Kind: Fetched})
	if l, w := tryNext(t, f); l != nil || w != 30*time.Second {
		t.Fatalf("h1 leased during Retry-After: %v wait %v", l, w)
	}
	// The Retry-After survives a restart.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = openF(t, Config{DB: db, Now: clk.Now, DefaultDelaySet: true, Rand: func() float64 { return 0 }})
	clk.Advance(30*time.Second - time.Millisecond)
	if l, _ := tryNext(t, f); l != nil {
		t.Fatalf("h1 leased 1ms before Retry-After ended: %s", l.URL)
	}
	clk.Advance(time.Millisecond)
	got := drain(t, f)
	slices.Sort(got)
	if !slices.Equal(got, []string{"http://h1.test/a", "http://h1.test/b"}) {
		t.Fatalf("after Retry-After got %v", got)
	}
}

func TestRequeueCountsNoAttempt(t *testing.T) {
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true, MaxAttempts: 2})
	mustAdd(t, f, u("h.test", "/a"))
	for i := 0; i < 10; i++ {
		l, _ := tryNext(t, f)
		if l == nil || l.Attempts != 0 {
			t.Fatalf("round %d: lease %+v", i, l)
		}
		mustDone(t, f, l, Outcome{Kind: Requeue})
	}
	if st := f.Stats(); st.Queued != 1 || st.DeadLetters != 0 {
		t.Fatalf("stats %+v", st)
	}
	l, _ := tryNext(t, f)
	mustDone(t, f, l, Outcome{Kind: Fetched, Status: 200, Meta: []byte("warc:1:2")})
	if err := f.Done(l, Outcome{Kind: Fetched}); !errors.Is(err, ErrLeaseDone) {
		t.Fatalf("second Done: %v", err)
	}
	sr, ok, err := f.Lookup("http://h.test/a")
	if err != nil || !ok || sr.State != StateFetched || sr.Status != 200 || string(sr.Meta) != "warc:1:2" {
		t.Fatalf("lookup %+v %v %v", sr, ok, err)
	}
	if !f.Idle() {
		t.Fatal("not idle")
	}
}

func TestParkHost(t *testing.T) {
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true, PerHost: 2, Rand: func() float64 { return 0.9 }})
	mustAdd(t, f, urls("h.test", 20)...)
	mustAdd(t, f, urls("other.test", 3)...)
	var h []*Lease
	for len(h) < 2 {
		l, _ := tryNext(t, f)
		if l.Host == "h.test" {
			h = append(h, l)
		} else {
			mustDone(t, f, l, Outcome{Kind: Requeue})
		}
	}
	mustDone(t, f, h[0], Outcome{Kind: Retry, Err: "timeout"}) // retry-pending, parked too
	n, err := f.ParkHost("h.test", "robots.txt unreachable")
	if err != nil {
		t.Fatal(err)
	}
	if n != 19 { // 20 - the one still leased
		t.Fatalf("parked %d, want 19", n)
	}
	// The leased one finishes normally; nothing else of h.test comes out.
	mustDone(t, f, h[1], Outcome{Kind: Fetched, Status: 200})
	got := drain(t, f)
	if len(got) != 3 {
		t.Fatalf("after park drained %v", got)
	}
	for _, g := range got {
		if g[:len("http://other")] != "http://other" {
			t.Fatalf("parked host leased: %s", g)
		}
	}
	dead := 0
	_ = f.DeadLetters(func(d DeadLetter) bool {
		if d.LastErr != "robots.txt unreachable" || d.Host != "h.test" {
			t.Errorf("dead letter %+v", d)
		}
		dead++
		return true
	})
	if st := f.Stats(); dead != 19 || st.DeadLetters != 19 || st.RetryPending != 0 || !f.Idle() {
		t.Fatalf("dead %d stats %+v idle %v", dead, st, f.Idle())
	}
}

func TestTrapDefensesInAdd(t *testing.T) {
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true, MaxDepth: 3, MaxURLLength: 60, MaxRepeatedSegments: 2,
		MaxQueryParams: 3, MaxPagesPerHost: 4, GeneratedBudget: 2})
	cases := []struct {
		c    Candidate
		want string // "" = added
	}{
		{Candidate{URL: "not a url"}, RejectInvalidURL},
		{Candidate{URL: "http://a.test/deep", Depth: 4}, RejectMaxDepth},
		{Candidate{URL: "http://a.test/ok", Depth: 3}, ""},
		{u("a.test", "/"+string(make([]byte, 60))), RejectURLTooLong},
		{u("a.test", "/x/y/x/y/x"), RejectRepeatedSegments},
		{u("a.test", "/x/y/x/y"), ""},
		{u("a.test", "/q?a=1&b=2&c=3&d=4"), RejectTooManyParams},
		{u("a.test", "/q?a=1&b=2&c=3"), ""},
		{u("a.test", "/p4"), ""}, // 4th page of a.test
		{u("a.test", "/p5"), RejectHostPageCap},
		{u("g.test", "/calendar/2024/05/17/"), ""},
		{u("g.test", "/s/0123456789abcdef0123"), ""},
		{u("g.test", "/list?sort=price"), RejectGeneratedBudget},
		{u("g.test", "/plain"), ""},
	}
	for i, tc := range cases {
		r := mustAdd(t, f, tc.c)
		if tc.want == "" {
			if r.Added != 1 {
				t.Errorf("case %d %q: want added, got %+v", i, tc.c.URL, r)
			}
			continue
		}
		if r.Rejected[tc.want] != 1 || r.Added != 0 {
			t.Errorf("case %d %q: want rejected %s, got %+v", i, tc.c.URL, tc.want, r)
		}
	}
}

func TestAddDuplicates(t *testing.T) {
	f := openF(t, noDelay(openDB(t, "")))
	r := mustAdd(t, f, u("h.test", "/a"), u("h.test", "/a"), u("h.test", "/b"))
	if r.Added != 2 || r.AlreadySeen != 1 {
		t.Fatalf("%+v", r)
	}
	r = mustAdd(t, f, u("h.test", "/a"), Candidate{URL: "http://h.test/b", Host: "h.test"}, u("h.test", "/c"))
	if r.Added != 1 || r.AlreadySeen != 2 {
		t.Fatalf("%+v", r)
	}
	if st := f.Stats(); st.Seen != 3 || st.Queued != 3 || st.Hosts != 1 || st.ReadyHosts != 1 {
		t.Fatalf("%+v", st)
	}
}

// A Bloom filter with a 90% false-positive rate must still lose no URL: every "maybe"
// is confirmed against the exact key.
func TestBloomFalsePositivesLoseNoURL(t *testing.T) {
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true, ExpectedURLs: 16, BloomFPRate: 0.9, MaxPagesPerHost: -1})
	const n = 10000
	all := make([]string, 0, n)
	var batch []Candidate
	for i := 0; i < n; i++ {
		c := u(fmt.Sprintf("h%d.test", i%50), fmt.Sprintf("/page/%d", i))
		all = append(all, c.URL)
		batch = append(batch, c)
		if len(batch) == 100 {
			if r := mustAdd(t, f, batch...); r.Added != 100 {
				t.Fatalf("batch at %d: %+v", i, r)
			}
			batch = batch[:0]
		}
	}
	if fp := f.bloomFalsePos.Load(); fp < n/4 {
		t.Fatalf("only %d Bloom false positives: the filter is not stressed", fp)
	}
	got := drain(t, f)
	if len(got) != n {
		t.Fatalf("drained %d URLs, want %d", len(got), n)
	}
	slices.Sort(got)
	slices.Sort(all)
	if !slices.Equal(got, all) {
		t.Fatal("drained set differs from added set")
	}
	// And everything is now seen.
	var again []Candidate
	for _, s := range all[:1000] {
		again = append(again, Candidate{URL: s})
	}
	if r := mustAdd(t, f, again...); r.AlreadySeen != 1000 || r.Added != 0 {
		t.Fatalf("re-add %+v", r)
	}
}

func TestRestartReissuesOnlyInFlight(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	cfg := Config{DB: db, DefaultDelaySet: true, PerHost: 3, Rand: func() float64 { return 0 }}
	f, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var all []Candidate
	for h := 0; h < 10; h++ {
		all = append(all, urls(fmt.Sprintf("h%d.test", h), 10)...)
	}
	mustAdd(t, f, all...)
	emitted := map[string]int{}
	// Finish 40, retry 1 (due immediately with Rand 0), and leave 5 leases outstanding.
	for i := 0; i < 40; i++ {
		l, _ := tryNext(t, f)
		emitted[l.URL]++
		mustDone(t, f, l, Outcome{Kind: Fetched, Status: 200})
	}
	var outstanding []string
	for i := 0; i < 5; i++ {
		l, _ := tryNext(t, f)
		emitted[l.URL]++
		outstanding = append(outstanding, l.URL)
	}
	// "kill -9": no Done, no Close of the frontier. Reopen the same directory.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := openDB(t, dir)
	cfg.DB = db2
	f2 := openF(t, cfg)
	if st := f2.Stats(); st.Seen != 100 || st.Queued != 60 || st.InFlight != 0 {
		t.Fatalf("after restart %+v", st)
	}
	if r := mustAdd(t, f2, all...); r.AlreadySeen != 100 {
		t.Fatalf("seen set lost: %+v", r)
	}
	got := drain(t, f2)
	for _, g := range got {
		emitted[g]++
	}
	twice := 0
	for _, c := range all {
		switch n := emitted[c.URL]; {
		case n == 0:
			t.Errorf("lost %s", c.URL)
		case n == 2:
			twice++
			if !slices.Contains(outstanding, c.URL) {
				t.Errorf("%s emitted twice but was not in flight", c.URL)
			}
		case n > 2:
			t.Errorf("%s emitted %d times", c.URL, n)
		}
	}
	if twice != len(outstanding) {
		t.Fatalf("%d re-issued, want the %d in flight", twice, len(outstanding))
	}
	_ = f // the "killed" frontier is simply abandoned
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}

func TestRestartKeepsRetryPending(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	db := openDB(t, dir)
	cfg := Config{DB: db, Now: clk.Now, DefaultDelaySet: true, Rand: func() float64 { return 0.5 }}
	f := openF(t, cfg)
	mustAdd(t, f, u("h.test", "/a"))
	l, _ := tryNext(t, f)
	mustDone(t, f, l, Outcome{Kind: Retry, Err: "reset"})
	_ = f.Close()
	f2 := openF(t, cfg)
	if st := f2.Stats(); st.RetryPending != 1 || f2.Idle() {
		t.Fatalf("%+v", st)
	}
	if l, w := tryNext(t, f2); l != nil || w != time.Second {
		t.Fatalf("lease %v wait %v", l, w)
	}
	clk.Advance(time.Second)
	l, _ = tryNext(t, f2)
	if l == nil || l.Attempts != 1 || l.URL != "http://h.test/a" {
		t.Fatalf("%+v", l)
	}
}

func TestNextBlocksAndWakes(t *testing.T) {
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelay: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if _, err := f.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("empty frontier: %v", err)
	}
	cancel()
	got := make(chan *Lease, 1)
	go func() {
		l, err := f.Next(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(10 * time.Millisecond)
	mustAdd(t, f, u("h.test", "/a"), u("h.test", "/b"))
	a := <-got
	start := time.Now()
	mustDone(t, f, a, Outcome{Kind: Fetched})
	b, err := f.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("second lease after %v, delay is 50ms", el)
	}
	mustDone(t, f, b, Outcome{Kind: Fetched})
	// Close wakes waiters with ErrClosed.
	errc := make(chan error, 1)
	go func() { _, err := f.Next(context.Background()); errc <- err }()
	time.Sleep(10 * time.Millisecond)
	_ = f.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

func TestConcurrentAddNextDone(t *testing.T) {
	const (
		hosts   = 40
		perHost = 2
		n       = 3000
	)
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true, PerHost: perHost, MaxAttempts: 1000,
		BackoffBase: time.Millisecond, BackoffMax: 3 * time.Millisecond, ExpectedURLs: 500, Prefetch: 2})
	var all []Candidate
	for i := 0; i < n; i++ {
		all = append(all, u(fmt.Sprintf("h%d.test", i%hosts), fmt.Sprintf("/%d", i)))
	}
	var (
		mu       sync.Mutex
		inflight = map[string]int{}
		fetched  = map[string]int{}
		added    atomic.Int64
		bad      atomic.Int64
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var workers sync.WaitGroup
	for w := 0; w < 8; w++ {
		workers.Add(1)
		go func(seed uint64) {
			defer workers.Done()
			rnd := rand.New(rand.NewPCG(seed, 1))
			for {
				l, err := f.Next(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				inflight[l.Host]++
				if inflight[l.Host] > perHost {
					bad.Add(1)
				}
				mu.Unlock()
				time.Sleep(time.Duration(rnd.IntN(200)) * time.Microsecond)
				o := Outcome{Kind: Fetched, Status: 200}
				switch rnd.IntN(10) {
				case 0:
					o = Outcome{Kind: Retry, Err: "timeout"}
				case 1:
					o = Outcome{Kind: Requeue}
				}
				mu.Lock()
				inflight[l.Host]--
				if o.Kind == Fetched {
					fetched[l.URL]++
				}
				mu.Unlock()
				if err := f.Done(l, o); err != nil {
					t.Error(err)
					return
				}
			}
		}(uint64(w))
	}
	var adders sync.WaitGroup
	for a := 0; a < 4; a++ {
		adders.Add(1)
		go func(a int) {
			defer adders.Done()
			// Every adder offers every URL, in its own order and batch size: each must be
			// admitted exactly once.
			rnd := rand.New(rand.NewPCG(uint64(a), 2))
			perm := rnd.Perm(n)
			bs := 10 + a*20
			for i := 0; i < n; i += bs {
				var b []Candidate
				for _, j := range perm[i:min(i+bs, n)] {
					b = append(b, all[j])
				}
				r, err := f.Add(b)
				if err != nil {
					t.Error(err)
					return
				}
				added.Add(int64(r.Added))
			}
		}(a)
	}
	adders.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for !f.Idle() {
		if time.Now().After(deadline) {
			t.Fatalf("not idle: %+v", f.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	workers.Wait()
	if added.Load() != n {
		t.Fatalf("added %d, want %d", added.Load(), n)
	}
	if bad.Load() > 0 {
		t.Fatalf("%d times a host had more than %d leases", bad.Load(), perHost)
	}
	for _, c := range all {
		if fetched[c.URL] != 1 {
			t.Fatalf("%s fetched %d times", c.URL, fetched[c.URL])
		}
	}
	if st := f.Stats(); st.Seen != n || st.Queued != 0 || st.InFlight != 0 || st.RetryPending != 0 {
		t.Fatalf("%+v", st)
	}
}

// TestQueueOrderModel drives one host through random Add/lease/Done sequences with a tiny
// prefetch buffer and checks every lease against a model: it must be the smallest
// (priority, depth, arrival) among the URLs queued and not leased.
func TestQueueOrderModel(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 7))
			clk := newFakeClock()
			f := openF(t, Config{DB: openDB(t, ""), Now: clk.Now, DefaultDelaySet: true, PerHost: 3, Prefetch: 2,
				MaxAttempts: 1 << 20, Rand: func() float64 { return 0 }, MaxDepth: -1, MaxPagesPerHost: -1})
			type key struct {
				prio, depth uint8
				order       int
			}
			queued := map[string]key{} // not leased
			leased := map[string]*Lease{}
			order := 0
			for step := 0; step < 3000; step++ {
				switch op := rnd.IntN(10); {
				case op < 3:
					var cs []Candidate
					for i := rnd.IntN(4); i >= 0; i-- {
						c := u("h.test", fmt.Sprintf("/%d", order))
						c.Priority, c.Depth = uint8(rnd.IntN(2)), rnd.IntN(4)
						queued[c.URL] = key{c.Priority, uint8(c.Depth), order}
						order++
						cs = append(cs, c)
					}
					mustAdd(t, f, cs...)
				case op < 6:
					l, _ := tryNext(t, f)
					if len(queued) == 0 || len(leased) == 3 {
						if l != nil {
							t.Fatalf("step %d: unexpected lease %s", step, l.URL)
						}
						continue
					}
					if l == nil {
						t.Fatalf("step %d: no lease with %d queued", step, len(queued))
					}
					best := ""
					for u, k := range queued {
						b, ok := queued[best]
						if !ok || k.prio < b.prio || (k.prio == b.prio && (k.depth < b.depth || (k.depth == b.depth && k.order < b.order))) {
							best = u
						}
					}
					if l.URL != best {
						t.Fatalf("step %d: leased %s %+v, want %s %+v", step, l.URL, queued[l.URL], best, queued[best])
					}
					leased[l.URL] = l
					delete(queued, l.URL)
				default:
					for u, l := range leased {
						k := Outcome{Kind: OutcomeKind(rnd.IntN(4))}
						mustDone(t, f, l, k)
						delete(leased, u)
						if k.Kind == Requeue || k.Kind == Retry {
							var d int
							_, _ = fmt.Sscanf(u, "http://h.test/%d", &d)
							queued[u] = key{l.Priority, uint8(l.Depth), d}
						}
						break
					}
				}
			}
			if st := f.Stats(); st.Queued+st.RetryPending != len(queued) || st.InFlight != len(leased) {
				t.Fatalf("stats %+v, model queued %d leased %d", st, len(queued), len(leased))
			}
		})
	}
}

// A refill that reads a key Add has committed but not yet inserted in memory must not let
// that URL be leased twice.
func TestRefillDuringAddCommit(t *testing.T) {
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true, PerHost: 3, Prefetch: 2})
	for i := 0; i < 10; i++ {
		c := u("h.test", fmt.Sprintf("/d2-%d", i))
		c.Depth = 2
		mustAdd(t, f, c)
	}
	var leases []*Lease
	for i := 0; i < 2; i++ {
		l, _ := tryNext(t, f)
		leases = append(leases, l)
	}
	f.afterAddCommit = func() {
		f.afterAddCommit = nil
		f.mu.Lock()
		h := f.hosts["h.test"]
		if len(h.prefetch) != 0 {
			f.mu.Unlock()
			t.Error("buffer not empty: the race is not set up")
			return
		}
		if err := f.refill(h); err != nil {
			t.Error(err)
		}
	}
	c := u("h.test", "/d1")
	c.Depth = 1
	mustAdd(t, f, c)
	for _, l := range leases {
		mustDone(t, f, l, Outcome{Kind: Fetched})
	}
	got := drain(t, f)
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
		if seen[g] > 1 {
			t.Fatalf("%s leased twice", g)
		}
	}
	if len(got) != 9 || got[0] != "http://h.test/d1" {
		t.Fatalf("got %v", got)
	}
}

func TestHostMetaAndDeferSurviveRestart(t *testing.T) {
	clk := newFakeClock()
	db := openDB(t, t.TempDir())
	cfg := Config{DB: db, Now: clk.Now, DefaultDelay: 2 * time.Second}
	f := openF(t, cfg)
	if b, err := f.HostMeta("h.test"); err != nil || b != nil {
		t.Fatalf("meta of unknown host: %q %v", b, err)
	}
	if err := f.SetHostMeta("h.test", []byte("robots: disallow /x")); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, f, urls("h.test", 3)...)
	f.SetHostDelay("h.test", 0)
	f.DeferHost("h.test", 90*time.Second)
	if l, w := tryNext(t, f); l != nil || w != 90*time.Second {
		t.Fatalf("deferred host: lease %v wait %v", l, w)
	}
	_ = f.Close()
	f = openF(t, cfg)
	if b, err := f.HostMeta("h.test"); err != nil || string(b) != "robots: disallow /x" {
		t.Fatalf("meta after restart: %q %v", b, err)
	}
	clk.Advance(90*time.Second - time.Millisecond)
	if l, _ := tryNext(t, f); l != nil {
		t.Fatal("deferral lost in restart")
	}
	clk.Advance(time.Millisecond)
	// The host delay 0 (set by SetHostDelay, overriding the 2s default) survived: all three
	// come out back to back.
	if got := drain(t, f); len(got) != 3 {
		t.Fatalf("got %v", got)
	}
}

func TestConfigValidate(t *testing.T) {
	db := openDB(t, "")
	cases := []struct {
		name string
		cfg  Config
	}{
		{"no db", Config{}},
		{"fp rate", Config{DB: db, BloomFPRate: 1.5}},
		{"backoff", Config{DB: db, BackoffBase: time.Hour, BackoffMax: time.Second}},
		{"negative delay", Config{DB: db, DefaultDelay: -time.Second}},
	}
	for _, tc := range cases {
		if _, err := Open(tc.cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", tc.name, err)
		}
	}
}

// TestDoneBatch: one DoneBatch records each kind of outcome as Done would, reports the
// completions it could not record by index, and a recorded lease cannot be recorded again.
func TestDoneBatch(t *testing.T) {
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true, MaxAttempts: 3, Rand: func() float64 { return 0 }})
	mustAdd(t, f, u("a.test", "/1"), u("b.test", "/1"), u("c.test", "/1"), u("d.test", "/1"))
	var ls []*Lease
	for i := 0; i < 4; i++ {
		l, _ := tryNext(t, f)
		if l == nil {
			t.Fatalf("no lease %d: %+v", i, f.Stats())
		}
		ls = append(ls, l)
	}
	mustDone(t, f, ls[3], Outcome{Kind: Drop, Err: "disallowed", NoRequest: true})
	cs := []Completion{
		{Lease: ls[0], Outcome: Outcome{Kind: Fetched, Status: 200, Meta: []byte("m0")}},
		{Lease: ls[1], Outcome: Outcome{Kind: Retry, Err: "timeout"}},
		{Lease: ls[2], Outcome: Outcome{Kind: Requeue, NoRequest: true}},
		{Lease: ls[3], Outcome: Outcome{Kind: Fetched}}, // recorded already
		{Lease: nil, Outcome: Outcome{Kind: Fetched}},
	}
	failed := map[int]error{}
	f.DoneBatch(cs, func(i int, err error) { failed[i] = err })
	if len(failed) != 2 || !errors.Is(failed[3], ErrLeaseDone) || !errors.Is(failed[4], ErrBadLease) {
		t.Fatalf("failed %v", failed)
	}
	st := f.Stats()
	if st.InFlight != 0 || st.Queued != 1 || st.RetryPending != 1 {
		t.Fatalf("stats %+v", st)
	}
	sr, ok, err := f.Lookup(ls[0].URL)
	if err != nil || !ok || sr.State != StateFetched || string(sr.Meta) != "m0" {
		t.Fatalf("lookup %+v %v %v", sr, ok, err)
	}
	if err := f.Done(ls[0], Outcome{Kind: Fetched}); !errors.Is(err, ErrLeaseDone) {
		t.Fatalf("second Done: %v", err)
	}
	// The requeued URL is leasable again at once (the retry, due at once with Rand 0, may
	// come first).
	got := map[string]bool{}
	for i := 0; i < 2; i++ {
		if l, _ := tryNext(t, f); l != nil {
			got[l.URL] = true
		}
	}
	if !got[ls[2].URL] {
		t.Fatalf("requeued URL not leased again: %v", got)
	}
}
