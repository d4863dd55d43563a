package corpus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/internal/clustertest"
)

// flakyDecider is an in-memory Decider (exact map, MemNearIndex) that fails while down.
type flakyDecider struct {
	down  atomic.Bool
	calls atomic.Int64
	mu    sync.Mutex
	exact map[string]string
	near  *MemNearIndex
}

func newFlakyDecider() *flakyDecider {
	return &flakyDecider{exact: map[string]string{}, near: NewMemNearIndex()}
}

func (d *flakyDecider) Decide(_ context.Context, pages []DedupPage) ([]DedupVerdict, error) {
	d.calls.Add(1)
	if d.down.Load() {
		return nil, errors.New("owner unreachable")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]DedupVerdict, len(pages))
	for i, p := range pages {
		if ref, ok := d.exact[string(p.Hash)]; ok && ref != p.Ref {
			out[i] = DedupVerdict{Of: ref, Kind: DupExact}
			continue
		}
		if m, found, _, _ := d.near.Lookup(p.SimHash); found && m.Ref != p.Ref {
			out[i] = DedupVerdict{Of: m.Ref, Kind: DupNear, Distance: m.Distance}
			continue
		}
		d.exact[string(p.Hash)] = p.Ref
		_ = d.near.Insert(p.SimHash, p.Ref)
	}
	return out, nil
}

// TestStageDeciderUnreachable: while the duplicate keys' owners cannot be asked, the stage
// writes nothing, keeps every job queued (through a shutdown too) and retries with
// backoff; once they answer, every page gets its one record with the decision.
func TestStageDeciderUnreachable(t *testing.T) {
	db := openMemDB(t)
	dir := t.TempDir()
	st := newSite()
	var jobs []Job
	for i := 0; i < 6; i++ {
		url := fmt.Sprintf("http://h%d.sim.test/a", i)
		st.add(url, genPage(fmt.Sprintf("A %d", i), genParagraphs(uint64(500+i), 8, 60), pageOpts{}))
		jobs = append(jobs, jobFor(url, i))
	}
	st.add("http://mirror.sim.test/a", genPage("A 0", genParagraphs(500, 8, 60), pageOpts{navLinks: 3}))
	jobs = append(jobs, jobFor("http://mirror.sim.test/a", 50))

	dec := newFlakyDecider()
	dec.down.Store(true)
	cfg := testConfig(db, dir, st)
	cfg.Decider = dec
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(jobs...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 10*time.Second, "retries of the failed decision", func() bool { return dec.calls.Load() >= 3 })
	if b := s.Backlog(); b != len(jobs) {
		t.Fatalf("backlog %d while undecided, want %d", b, len(jobs))
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(readAll(t, dir)); n != 0 {
		t.Fatalf("%d records written while no decision could be made", n)
	}
	if f := s.Stats().DecideFailures; f < 2 {
		t.Errorf("DecideFailures %d", f)
	}

	// The owners answer again; a new stage on the same DB picks the jobs up.
	dec.down.Store(false)
	s2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Backlog() != len(jobs) {
		t.Fatalf("backlog after restart %d, want %d", s2.Backlog(), len(jobs))
	}
	if err := s2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s2.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, dir)
	if len(recs) != len(jobs) {
		t.Fatalf("%d records for %d jobs", len(recs), len(jobs))
	}
	dups := 0
	for _, r := range recs {
		if r.DuplicateOf != "" {
			dups++
			if r.URL != "http://mirror.sim.test/a" || r.DuplicateOf != "http://h0.sim.test/a" || r.DuplicateKind != DupExact {
				t.Errorf("%s: duplicate_of %q (%s)", r.URL, r.DuplicateOf, r.DuplicateKind)
			}
		}
	}
	if dups != 1 {
		t.Errorf("%d duplicates, want 1 (the mirror)", dups)
	}
}

// recordingDecider answers every page as an original and keeps what it was asked.
type recordingDecider struct {
	mu    sync.Mutex
	pages map[string]DedupPage // by URL
}

func (d *recordingDecider) Decide(_ context.Context, pages []DedupPage) ([]DedupVerdict, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range pages {
		u, _, _ := strings.Cut(p.Ref, "\t")
		d.pages[u] = p
	}
	return make([]DedupVerdict, len(pages)), nil
}

// TestStageRefetchReachesTheDecider: Job.Refetch (a first fetch, not a revisit) is what the
// Decider sees as DedupPage.Refetch, through the durable backlog.
func TestStageRefetchReachesTheDecider(t *testing.T) {
	db := openMemDB(t)
	dir := t.TempDir()
	st := newSite()
	var jobs []Job
	for i := 0; i < 2; i++ {
		url := fmt.Sprintf("http://h%d.sim.test/a", i)
		st.add(url, genPage(fmt.Sprintf("A %d", i), genParagraphs(uint64(700+i), 8, 60), pageOpts{}))
		j := jobFor(url, i)
		j.Refetch = i == 1
		jobs = append(jobs, j)
	}
	dec := &recordingDecider{pages: map[string]DedupPage{}}
	cfg := testConfig(db, dir, st)
	cfg.Decider = dec
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(jobs...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		p, ok := dec.pages[j.URL]
		if !ok || p.Refetch != (i == 1) {
			t.Errorf("%s: asked %v, Refetch %v, want %v", j.URL, ok, p.Refetch, i == 1)
		}
	}
}
