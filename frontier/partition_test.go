package frontier

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/snapshot"
	"github.com/dgraph-io/badger/v4"
)

// partOf puts hosts "pN-..." into partition N (default 99).
func partOf(h string) uint16 {
	var p uint16
	if _, err := fmt.Sscanf(h, "p%d-", &p); err != nil {
		return 99
	}
	return p
}

func partCfg(db *badger.DB, clk *fakeClock) Config {
	c := noDelay(db)
	c.PartitionOf = partOf
	c.Now = clk.Now
	c.Rand = func() float64 { return 0.5 }
	c.BackoffBase, c.BackoffMax = time.Second, time.Second
	return c
}

// transfer exports p from a and imports it into b through a snapshot stream.
func transfer(t *testing.T, a, b *Frontier, p uint16) ImportStats {
	t.Helper()
	var buf bytes.Buffer
	if _, err := snapshot.Write(&buf, snapshot.Header{Partition: p, Epoch: 1}, func(fn func(byte, []byte, []byte) error) error {
		return a.ExportPartition(p, fn)
	}); err != nil {
		t.Fatal(err)
	}
	rd, err := snapshot.Read(&buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	st, err := b.ImportPartition(p, rd.Next)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// checkCounters compares the in-memory counters with what Open counts from Badger.
func checkCounters(t *testing.T, f *Frontier) {
	t.Helper()
	g, err := Open(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, want := f.Stats(), g.Stats()
	got.Queued += got.InFlight
	if got.Queued != want.Queued || got.RetryPending != want.RetryPending || got.DeadLetters != want.DeadLetters || got.Seen != want.Seen ||
		got.RevisitPending != want.RevisitPending || got.RevisitQueued != want.RevisitQueued {
		t.Fatalf("in-memory counters %+v, Badger says %+v", got, want)
	}
}

func leaseAll(t *testing.T, f *Frontier) []*Lease {
	var ls []*Lease
	for {
		l, _ := tryNext(t, f)
		if l == nil {
			return ls
		}
		ls = append(ls, l)
	}
}

func TestExportImportPartition(t *testing.T) {
	clk := newFakeClock()
	a := openF(t, partCfg(openDB(t, ""), clk))
	b := openF(t, partCfg(openDB(t, ""), clk))
	var cands []Candidate
	for _, h := range []string{"p1-a.test", "p1-b.test", "p2-a.test", "p3-a.test"} {
		for i := range 30 {
			cands = append(cands, u(h, fmt.Sprintf("/x%d", i)))
		}
	}
	mustAdd(t, a, cands...)
	a.SetHostDelay("p1-a.test", 3*time.Second)
	if err := a.SetHostMeta("p1-a.test", []byte("robots")); err != nil {
		t.Fatal(err)
	}
	// Partition 1: fetch some, fail one (retry pending), park one host's leftovers later.
	var fetched, retried []string
	for _, l := range leaseAll(t, a) {
		switch {
		case partOf(l.Host) == 1 && len(retried) == 0:
			retried = append(retried, l.URL)
			mustDone(t, a, l, Outcome{Kind: Retry, Err: "timeout"})
		case partOf(l.Host) == 1:
			fetched = append(fetched, l.URL)
			mustDone(t, a, l, Outcome{Kind: Fetched, Status: 200})
		default:
			mustDone(t, a, l, Outcome{Kind: Requeue, NoRequest: true})
		}
	}
	if _, err := a.ParkHost("p1-b.test", "unreachable"); err != nil {
		t.Fatal(err)
	}
	a.PausePartition(1)
	if n := a.InFlight(1); n != 0 {
		t.Fatalf("in flight %d", n)
	}
	parts, err := a.Partitions()
	if err != nil || !slices.Equal(parts, []uint16{1, 2, 3}) {
		t.Fatalf("partitions %v %v", parts, err)
	}

	st := transfer(t, a, b, 1)
	if st.Queued != 29 || st.Retries != 1 || st.Dead != 29 || st.HostMeta != 1 || st.Hosts != 2 || st.Orphans != 0 {
		t.Fatalf("import stats %+v", st)
	}
	checkCounters(t, b)
	if parts, _ := b.Partitions(); !slices.Equal(parts, []uint16{1}) {
		t.Fatalf("b partitions %v", parts)
	}
	// Politeness state came along.
	b.mu.Lock()
	if h := b.hosts["p1-a.test"]; h == nil || !h.delaySet || h.delay != 3*time.Second {
		t.Fatalf("host state not imported: %+v", h)
	}
	b.mu.Unlock()
	if m, _ := b.HostMeta("p1-a.test"); string(m) != "robots" {
		t.Fatalf("host meta %q", m)
	}
	// Every queued URL of partition 1 comes out of b exactly once, and nothing else.
	got := map[string]int{}
	for i := 0; !b.Idle() && i < 1000; i++ {
		for _, l := range leaseAll(t, b) {
			got[l.URL]++
			mustDone(t, b, l, Outcome{Kind: Fetched, Status: 200})
		}
		clk.Advance(time.Second)
	}
	want := map[string]bool{}
	for i := range 30 {
		want[fmt.Sprintf("http://p1-a.test/x%d", i)] = true
	}
	for _, f := range fetched {
		delete(want, f)
	}
	if len(got) != len(want) {
		t.Fatalf("leased %d distinct URLs, want %d: %v", len(got), len(want), got)
	}
	for u, n := range got {
		if !want[u] || n != 1 {
			t.Fatalf("%s leased %d times (wanted: %v)", u, n, want[u])
		}
	}
	if !want[retried[0]] {
		t.Fatal("the retry-pending URL should be among the queued ones")
	}
	// Fetched and dead records came along; the Bloom filter knows them.
	for _, f := range fetched {
		if sr, ok, _ := b.Lookup(f); !ok || sr.State != StateFetched {
			t.Fatalf("%s: %+v %v", f, sr, ok)
		}
	}
	var dead int
	_ = b.DeadLetters(func(DeadLetter) bool { dead++; return true })
	if dead != 29 {
		t.Fatalf("dead letters %d", dead)
	}
	r := mustAdd(t, b, u("p1-b.test", "/x3"), Candidate{URL: fetched[0]})
	if r.Added != 0 || r.AlreadySeen != 2 {
		t.Fatalf("imported seen URLs re-added: %+v", r)
	}
	checkCounters(t, b)
}

func TestImportIdempotent(t *testing.T) {
	clk := newFakeClock()
	a := openF(t, partCfg(openDB(t, ""), clk))
	b := openF(t, partCfg(openDB(t, ""), clk))
	mustAdd(t, a, urls("p5-a.test", 50)...)
	mustAdd(t, a, urls("p5-b.test", 50)...)
	for _, l := range leaseAll(t, a) {
		mustDone(t, a, l, Outcome{Kind: Fetched, Status: 200})
	}
	a.DeferHost("p5-a.test", time.Hour)
	first := transfer(t, a, b, 5)
	dump := func() map[string]string {
		m := map[string]string{}
		_ = b.ExportPartition(5, func(fam byte, k, v []byte) error {
			if fam == famQueue {
				k = k[:len(k)-8] // local sequence numbers
			}
			if fam == famSeen {
				sr, _ := decodeSeen(v)
				if sr.State == StateQueued {
					v = nil // At is the import time
				}
			}
			m[string(k)+"|"+fmt.Sprint(len(m))] = ""
			m["v:"+string(k)] += string(v)
			return nil
		})
		return m
	}
	before, statsBefore := dump(), b.Stats()
	second := transfer(t, a, b, 5)
	if second.Queued != 0 || second.SeenNew != 0 || second.SeenUpdated != 0 || second.QueueKept != first.Queued || second.Dead != 0 {
		t.Fatalf("second import changed things: %+v (first %+v)", second, first)
	}
	after := dump()
	if len(before) != len(after) {
		t.Fatalf("key count %d -> %d", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("key %q changed", k)
		}
	}
	if s := b.Stats(); s.Queued != statsBefore.Queued || s.Seen != statsBefore.Seen {
		t.Fatalf("stats %+v -> %+v", statsBefore, s)
	}
	checkCounters(t, b)
}

func TestImportMergeCases(t *testing.T) {
	const url = "http://p4-m.test/page"
	type side struct {
		state    string // "", "queued", "fetched", "dropped", "dead"
		at       time.Duration
		delay    time.Duration
		deferFor time.Duration
	}
	cases := []struct {
		name        string
		local, imp  side
		wantState   SeenState
		wantStatus  int
		wantLeases  int
		wantDelay   time.Duration
		wantNextMin time.Duration
	}{
		{name: "local queued, imported fetched", local: side{state: "queued"}, imp: side{state: "fetched"}, wantState: StateFetched, wantStatus: 201, wantLeases: 0},
		{name: "local fetched, imported queued", local: side{state: "fetched"}, imp: side{state: "queued"}, wantState: StateFetched, wantStatus: 200, wantLeases: 0},
		{name: "both queued", local: side{state: "queued"}, imp: side{state: "queued"}, wantState: StateQueued, wantLeases: 1},
		{name: "only imported queued", imp: side{state: "queued"}, wantState: StateQueued, wantLeases: 1},
		{name: "only local queued", local: side{state: "queued"}, wantState: StateQueued, wantLeases: 1},
		{name: "two finals: later imported wins", local: side{state: "fetched"}, imp: side{state: "dropped", at: time.Minute}, wantState: StateDropped, wantLeases: 0},
		{name: "two finals: later local wins", local: side{state: "fetched", at: time.Minute}, imp: side{state: "dropped"}, wantState: StateFetched, wantStatus: 200, wantLeases: 0},
		{name: "local queued, imported dead", local: side{state: "queued"}, imp: side{state: "dead"}, wantState: StateDead, wantLeases: 0},
		{name: "host: longer delay, later next", local: side{state: "queued", delay: 2 * time.Second}, imp: side{state: "queued", delay: 5 * time.Second, deferFor: time.Hour},
			wantState: StateQueued, wantLeases: 1, wantDelay: 5 * time.Second, wantNextMin: time.Hour},
		{name: "host: local more cautious", local: side{state: "queued", delay: 9 * time.Second, deferFor: 2 * time.Hour}, imp: side{state: "queued", delay: time.Second, deferFor: time.Hour},
			wantState: StateQueued, wantLeases: 1, wantDelay: 9 * time.Second, wantNextMin: 2 * time.Hour},
	}
	setup := func(t *testing.T, f *Frontier, clk *fakeClock, s side, status int) {
		clk.Advance(s.at)
		if s.state != "" {
			mustAdd(t, f, Candidate{URL: url})
		}
		if s.delay > 0 {
			f.SetHostDelay("p4-m.test", s.delay)
		}
		switch s.state {
		case "fetched", "dropped", "dead":
			l, _ := tryNext(t, f)
			if l == nil {
				t.Fatal("no lease")
			}
			switch s.state {
			case "fetched":
				mustDone(t, f, l, Outcome{Kind: Fetched, Status: status})
			case "dropped":
				mustDone(t, f, l, Outcome{Kind: Drop, Err: "robots"})
			case "dead":
				mustDone(t, f, l, Outcome{Kind: Requeue, NoRequest: true})
				if _, err := f.ParkHost("p4-m.test", "gone"); err != nil {
					t.Fatal(err)
				}
			}
		}
		if s.deferFor > 0 {
			f.DeferHost("p4-m.test", s.deferFor)
		}
		clk.Advance(-s.at)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clkA, clkB := newFakeClock(), newFakeClock()
			a := openF(t, partCfg(openDB(t, ""), clkA))
			b := openF(t, partCfg(openDB(t, ""), clkB))
			setup(t, a, clkA, tc.imp, 201)
			setup(t, b, clkB, tc.local, 200)
			transfer(t, a, b, 4)
			checkCounters(t, b)
			sr, ok, err := b.Lookup(url)
			if err != nil || !ok || sr.State != tc.wantState || (tc.wantStatus != 0 && sr.Status != tc.wantStatus) {
				t.Fatalf("seen %+v %v %v, want %s status %d", sr, ok, err, tc.wantState, tc.wantStatus)
			}
			if tc.wantDelay != 0 || tc.wantNextMin != 0 {
				b.mu.Lock()
				h := b.hosts["p4-m.test"]
				d, next := h.delay, h.nextAt
				b.mu.Unlock()
				if d != tc.wantDelay || next < clkB.Now().Add(tc.wantNextMin).UnixNano() {
					t.Fatalf("host delay %v next %v, want %v and >= now+%v", d, time.Unix(0, next).Sub(clkB.Now()), tc.wantDelay, tc.wantNextMin)
				}
				clkB.Advance(tc.wantNextMin + time.Second)
			}
			n := 0
			for _, l := range leaseAll(t, b) {
				n++
				mustDone(t, b, l, Outcome{Kind: Fetched, Status: 200})
			}
			if n != tc.wantLeases {
				t.Fatalf("leased %d times, want %d", n, tc.wantLeases)
			}
		})
	}
}

func TestImportDeadLettersUnion(t *testing.T) {
	clk := newFakeClock()
	a := openF(t, partCfg(openDB(t, ""), clk))
	b := openF(t, partCfg(openDB(t, ""), clk))
	mustAdd(t, a, u("p6-a.test", "/1"), u("p6-a.test", "/2"))
	mustAdd(t, b, u("p6-a.test", "/2"), u("p6-b.test", "/3"))
	for _, f := range []*Frontier{a, b} {
		for _, h := range []string{"p6-a.test", "p6-b.test"} {
			if _, err := f.ParkHost(h, "down"); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := transfer(t, a, b, 6)
	if st.Dead != 1 || st.DeadKept != 1 {
		t.Fatalf("stats %+v", st)
	}
	var got []string
	_ = b.DeadLetters(func(dl DeadLetter) bool { got = append(got, dl.URL); return true })
	slices.Sort(got)
	if want := []string{"http://p6-a.test/1", "http://p6-a.test/2", "http://p6-b.test/3"}; !slices.Equal(got, want) {
		t.Fatalf("dead letters %v", got)
	}
	checkCounters(t, b)
}

func TestPausePartition(t *testing.T) {
	clk := newFakeClock()
	f := openF(t, partCfg(openDB(t, ""), clk))
	mustAdd(t, f, urls("p1-a.test", 3)...)
	mustAdd(t, f, urls("p2-a.test", 3)...)
	l1, _ := tryNext(t, f) // one lease of either partition stays in flight
	f.PausePartition(partOf(l1.Host))
	if !f.Paused(partOf(l1.Host)) || f.InFlight(partOf(l1.Host)) != 1 {
		t.Fatal("pause state")
	}
	mustAdd(t, f, urls(l1.Host, 6)...) // Adds of a paused partition still queue
	var other []string
	for {
		l, _ := tryNext(t, f)
		if l == nil {
			break
		}
		if l.Host == l1.Host {
			t.Fatalf("leased %s of a paused partition", l.URL)
		}
		other = append(other, l.URL)
		mustDone(t, f, l, Outcome{Kind: Fetched})
	}
	if len(other) != 3 {
		t.Fatalf("other partition leased %d", len(other))
	}
	// A retry of the paused partition is not moved back while paused.
	mustDone(t, f, l1, Outcome{Kind: Retry, Err: "x"})
	clk.Advance(time.Hour)
	if l, _ := tryNext(t, f); l != nil {
		t.Fatalf("leased %s while paused", l.URL)
	}
	if f.InFlight(partOf(l1.Host)) != 0 {
		t.Fatal("in flight after Done")
	}
	f.ResumePartition(partOf(l1.Host))
	n := len(drain(t, f))
	if n != 6 { // 2 queued + 3 new (1 is /p0 again: already seen) + the retry
		t.Fatalf("after resume leased %d, want 6", n)
	}
}

func TestDropPartition(t *testing.T) {
	clk := newFakeClock()
	f := openF(t, partCfg(openDB(t, ""), clk))
	mustAdd(t, f, urls("p1-a.test", 10)...)
	mustAdd(t, f, urls("p1-b.test", 10)...)
	mustAdd(t, f, urls("p2-a.test", 10)...)
	if _, err := f.ParkHost("p1-b.test", "x"); err != nil {
		t.Fatal(err)
	}
	// leaseP1 leases one URL of partition 1 (one lease per host is out at a time).
	leaseP1 := func() *Lease {
		var p1 *Lease
		for _, l := range leaseAll(t, f) {
			if partOf(l.Host) == 1 && p1 == nil {
				p1 = l
				continue
			}
			mustDone(t, f, l, Outcome{Kind: Requeue, NoRequest: true})
		}
		if p1 == nil {
			t.Fatal("no lease of partition 1")
		}
		return p1
	}
	mustDone(t, f, leaseP1(), Outcome{Kind: Retry, Err: "x"}) // an r key
	l := leaseP1()
	if err := f.DropPartition(1); !errors.Is(err, ErrPartitionBusy) {
		t.Fatalf("drop with a lease in flight: %v", err)
	}
	mustDone(t, f, l, Outcome{Kind: Fetched})
	if err := f.DropPartition(1); err != nil {
		t.Fatal(err)
	}
	if parts, _ := f.Partitions(); !slices.Equal(parts, []uint16{2}) {
		t.Fatalf("partitions after drop %v", parts)
	}
	s := f.Stats()
	if s.Queued != 10 || s.Seen != 10 || s.DeadLetters != 0 || s.RetryPending != 0 || s.Hosts != 1 {
		t.Fatalf("stats after drop %+v", s)
	}
	checkCounters(t, f)
	if _, ok, _ := f.Lookup("http://p1-a.test/p1"); ok {
		t.Fatal("seen record survived the drop")
	}
	// A URL of the dropped partition can be admitted again (the seen cache was cleared;
	// the Bloom filter's stale bits only cost a lookup).
	if r := mustAdd(t, f, u("p1-a.test", "/p1")); r.Added != 1 {
		t.Fatalf("re-add after drop: %+v", r)
	}
	got := drain(t, f)
	if len(got) != 11 {
		t.Fatalf("drained %d: %v", len(got), got)
	}
	checkCounters(t, f)
}

func TestImportRefusals(t *testing.T) {
	clk := newFakeClock()
	a := openF(t, partCfg(openDB(t, ""), clk))
	b := openF(t, partCfg(openDB(t, ""), clk))
	mustAdd(t, a, urls("p2-a.test", 3)...)
	// Records of partition 2 offered as partition 1.
	var recs [][3][]byte
	_ = a.ExportPartition(2, func(fam byte, k, v []byte) error {
		recs = append(recs, [3][]byte{{fam}, bytes.Clone(k), bytes.Clone(v)})
		return nil
	})
	i := 0
	next := func() (byte, []byte, []byte, error) {
		if i == len(recs) {
			return 0, nil, nil, io.EOF
		}
		i++
		return recs[i-1][0][0], recs[i-1][1], recs[i-1][2], nil
	}
	if _, err := b.ImportPartition(1, next); !errors.Is(err, ErrForeignKey) {
		t.Fatalf("foreign partition: %v", err)
	}
	// A lease in flight refuses an import.
	mustAdd(t, b, urls("p2-b.test", 1)...)
	l, _ := tryNext(t, b)
	i = 0
	if _, err := b.ImportPartition(2, next); !errors.Is(err, ErrPartitionBusy) {
		t.Fatalf("busy: %v", err)
	}
	mustDone(t, b, l, Outcome{Kind: Fetched})
	// A stream error fails the import; a retry completes it.
	i = 0
	boom := errors.New("cut")
	n := 0
	cut := func() (byte, []byte, []byte, error) {
		if n++; n > 4 {
			return 0, nil, nil, boom
		}
		return next()
	}
	if _, err := b.ImportPartition(2, cut); !errors.Is(err, boom) {
		t.Fatalf("cut stream: %v", err)
	}
	i = 0
	if _, err := b.ImportPartition(2, next); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, b); len(got) != 3 || !strings.Contains(strings.Join(got, " "), "p2-a.test/p2") {
		t.Fatalf("after retry drained %v", got)
	}
	checkCounters(t, b)
}

func TestSeenWinsAndMergeHost(t *testing.T) {
	t0 := time.Unix(100, 0)
	rec := func(s SeenState, at int) SeenRecord {
		return SeenRecord{State: s, At: t0.Add(time.Duration(at) * time.Second)}
	}
	for _, c := range []struct {
		local, imp SeenRecord
		want       bool
	}{
		{rec(StateQueued, 0), rec(StateFetched, 0), true},
		{rec(StateQueued, 5), rec(StateDead, 0), true},
		{rec(StateFetched, 0), rec(StateQueued, 9), false},
		{rec(StateQueued, 0), rec(StateQueued, 9), false},
		{rec(StateFetched, 0), rec(StateDropped, 1), true},
		{rec(StateFetched, 1), rec(StateDropped, 0), false},
		{rec(StateFetched, 1), rec(StateFetched, 1), false},
	} {
		if got := seenWins(c.local, c.imp); got != c.want {
			t.Errorf("seenWins(%s@%v, %s@%v) = %v", c.local.State, c.local.At, c.imp.State, c.imp.At, got)
		}
	}
	for _, c := range []struct{ local, imp, want hostRec }{
		{hostRec{Next: 5, Admitted: 3}, hostRec{Next: 9, Admitted: 1, Generated: 2}, hostRec{Next: 9, Admitted: 3, Generated: 2}},
		{hostRec{DelaySet: true, Delay: 2}, hostRec{DelaySet: true, Delay: 7}, hostRec{DelaySet: true, Delay: 7}},
		{hostRec{DelaySet: true, Delay: 7}, hostRec{DelaySet: true, Delay: 0}, hostRec{DelaySet: true, Delay: 7}},
		{hostRec{}, hostRec{DelaySet: true, Delay: 0}, hostRec{DelaySet: true, Delay: 0}},
		{hostRec{DelaySet: true, Delay: 3}, hostRec{Delay: 99}, hostRec{DelaySet: true, Delay: 3}},
	} {
		if got := mergeHost(c.local, c.imp); got != c.want {
			t.Errorf("mergeHost(%+v, %+v) = %+v, want %+v", c.local, c.imp, got, c.want)
		}
	}
}

// TestExportPartitionSince: deltas applied in order to a copy keep it equal to a full
// export, deletions included, and a copy imported elsewhere continues the partition.
func TestExportPartitionSince(t *testing.T) {
	clk := newFakeClock()
	a := openF(t, partCfg(openDB(t, ""), clk))
	replica := map[string][]byte{} // family+key -> value
	var since uint64
	sync := func() (changes, deletes int) {
		t.Helper()
		ts, err := a.ExportPartitionSince(1, since, func(fam byte, k, v []byte, deleted bool) error {
			changes++
			if deleted {
				deletes++
				delete(replica, string(k))
				return nil
			}
			replica[string(k)] = slices.Clone(v)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if ts < since {
			t.Fatalf("read version went back: %d after %d", ts, since)
		}
		since = ts
		return changes, deletes
	}
	full := func() map[string][]byte {
		m := map[string][]byte{}
		if err := a.ExportPartition(1, func(fam byte, k, v []byte) error { m[string(k)] = slices.Clone(v); return nil }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// equal compares the replica with a full export (which first writes the host clocks:
	// the sync after it ships those).
	equal := func(step string) {
		t.Helper()
		want := full()
		sync()
		if len(want) != len(replica) {
			t.Fatalf("%s: replica has %d keys, a full export %d", step, len(replica), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(replica[k], v) {
				t.Fatalf("%s: key %q differs", step, k)
			}
		}
	}
	var cands []Candidate
	for i := range 20 {
		cands = append(cands, u("p1-a.test", fmt.Sprintf("/x%d", i)), u("p2-a.test", fmt.Sprintf("/x%d", i)))
	}
	mustAdd(t, a, cands...)
	if n, _ := sync(); n != 41 { // 20 q, 20 s, 1 h
		t.Fatalf("first sync: %d records, want 41", n)
	}
	equal("first")
	if n, _ := sync(); n != 0 {
		t.Fatalf("no change, yet %d records", n)
	}
	// Fetch some (q deleted, s final), fail one (q -> r), add more.
	var fetched []string
	for i, l := range leaseAll(t, a) {
		switch {
		case partOf(l.Host) != 1:
			mustDone(t, a, l, Outcome{Kind: Requeue, NoRequest: true})
		case i%3 == 0:
			mustDone(t, a, l, Outcome{Kind: Retry, Err: "timeout"})
		default:
			fetched = append(fetched, l.URL)
			mustDone(t, a, l, Outcome{Kind: Fetched, Status: 200})
		}
	}
	mustAdd(t, a, u("p1-a.test", "/new1"), u("p1-a.test", "/new2"))
	if _, del := sync(); del == 0 {
		t.Fatal("fetched URLs left the queue, yet no deletion shipped")
	}
	equal("after fetches")
	// Deltas only carry what changed.
	mustAdd(t, a, u("p1-a.test", "/new3"))
	if n, _ := sync(); n != 2 && n != 3 {
		t.Fatalf("one added URL shipped %d records, want q and s (and maybe its host's record)", n)
	}
	equal("one add")

	// The replica, imported into another frontier, continues the partition: the fetched
	// URLs are known there and the rest is queued.
	b := openF(t, partCfg(openDB(t, ""), clk))
	keys := make([]string, 0, len(replica))
	for k := range replica {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int { // queues first, like ExportPartition
		return slices.Index(exportFamilies, x[0]) - slices.Index(exportFamilies, y[0])
	})
	i := 0
	st, err := b.ImportPartition(1, func() (byte, []byte, []byte, error) {
		if i == len(keys) {
			return 0, nil, nil, io.EOF
		}
		k := keys[i]
		i++
		return k[0], []byte(k), replica[k], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Orphans != 0 {
		t.Fatalf("import stats %+v", st)
	}
	checkCounters(t, b)
	for _, f := range fetched {
		if sr, ok, _ := b.Lookup(f); !ok || sr.State != StateFetched {
			t.Fatalf("%s: %+v %v", f, sr, ok)
		}
	}
	if got, want := b.Stats().Queued+b.Stats().RetryPending, a.Stats().Queued+a.Stats().RetryPending-20; got != want {
		t.Fatalf("b has %d queued or waiting, a has %d in partition 1", got, want)
	}
}

// TestCompletes: deletions and final seen records complete work; everything else adds.
func TestCompletes(t *testing.T) {
	queued := (&SeenRecord{URL: "http://a/", State: StateQueued}).encode()
	fetched := (&SeenRecord{URL: "http://a/", State: StateFetched}).encode()
	dropped := (&SeenRecord{URL: "http://a/", State: StateDropped}).encode()
	cases := []struct {
		fam     byte
		v       []byte
		deleted bool
		want    bool
	}{
		{famSeen, queued, false, false},
		{famSeen, fetched, false, true},
		{famSeen, dropped, false, true},
		{famSeen, nil, true, true},
		{famQueue, []byte{1}, false, false},
		{famQueue, nil, true, true},
		{famRetry, []byte{1}, false, false},
		{famHost, []byte{1}, false, false},
		{famDead, []byte{1}, false, false},
		{'o', []byte{1}, false, false},
		{'o', nil, true, true},
	}
	for _, c := range cases {
		if got := Completes(c.fam, c.v, c.deleted); got != c.want {
			t.Errorf("Completes(%q, deleted %v) = %v, want %v", c.fam, c.deleted, got, c.want)
		}
	}
}

// TestRestPartition: a rested partition's hosts are not leased before the rest ends, a
// later clock stays, and other partitions go on.
func TestRestPartition(t *testing.T) {
	clk := newFakeClock()
	f := openF(t, partCfg(openDB(t, ""), clk))
	mustAdd(t, f, urls("p1-a.test", 2)...)
	mustAdd(t, f, urls("p1-b.test", 2)...)
	mustAdd(t, f, urls("p2-a.test", 2)...)
	f.DeferHost("p1-b.test", 5*time.Second)
	f.RestPartition(1, clk.Now().Add(time.Second))
	for _, l := range leaseAll(t, f) {
		if partOf(l.Host) == 1 {
			t.Fatalf("leased %s of a rested partition", l.URL)
		}
		mustDone(t, f, l, Outcome{Kind: Fetched})
	}
	clk.Advance(time.Second)
	var hosts []string
	for _, l := range leaseAll(t, f) {
		hosts = append(hosts, l.Host)
		mustDone(t, f, l, Outcome{Kind: Fetched})
	}
	if !slices.Contains(hosts, "p1-a.test") || slices.Contains(hosts, "p1-b.test") {
		t.Fatalf("after the rest leased hosts %v, want p1-a.test and not p1-b.test (deferred longer)", hosts)
	}
	clk.Advance(4 * time.Second)
	hosts = hosts[:0]
	for _, l := range leaseAll(t, f) {
		hosts = append(hosts, l.Host)
	}
	if !slices.Contains(hosts, "p1-b.test") {
		t.Fatalf("after its own defer leased hosts %v, want p1-b.test", hosts)
	}
}
