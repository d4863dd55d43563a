package corpus

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer for a logger written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestStageExtractPanic: a page that panics the extractor gets a record rejected
// "extract_panic", is logged once with its URL and a stack, is counted, and leaves the
// backlog: a restart does not process it again. The other pages are kept.
func TestStageExtractPanic(t *testing.T) {
	db := openMemDB(t)
	dir := t.TempDir()
	st := newSite()
	const bad = "http://bad.sim.test/boom"
	var jobs []Job
	for i := 0; i < 6; i++ {
		url := fmt.Sprintf("http://h%d.sim.test/article", i)
		st.add(url, genPage(fmt.Sprintf("Article %d", i), genParagraphs(uint64(500+i), 8, 60), pageOpts{}))
		jobs = append(jobs, jobFor(url, i))
	}
	st.add(bad, genPage("Boom", genParagraphs(99, 8, 60), pageOpts{}))
	jobs = append(jobs, jobFor(bad, 50))

	var logs syncBuffer
	cfg := testConfig(db, dir, st)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.extractor.beforeParse = func(j *Job) {
		if j.URL == bad {
			var m map[string]int
			m["boom"]++ // a real runtime panic: assignment to entry in nil map
		}
	}
	if err := s.Enqueue(jobs...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	stats := s.Stats()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	recs := readAll(t, dir)
	if len(recs) != len(jobs) {
		t.Fatalf("%d records for %d jobs", len(recs), len(jobs))
	}
	for _, r := range recs {
		switch {
		case r.URL == bad:
			if r.Rejected != RejectExtractPanic || !strings.Contains(r.RejectDetail, "nil map") {
				t.Errorf("panicking page: rejected %q detail %q", r.Rejected, r.RejectDetail)
			}
			if r.WARCFile == "" || r.Text != "" {
				t.Errorf("panicking page's record: warc %q text %d bytes", r.WARCFile, len(r.Text))
			}
		case !r.Kept():
			t.Errorf("%s not kept: rejected %q", r.URL, r.Rejected)
		}
	}
	if stats.ExtractPanics != 1 || stats.Rejected[RejectExtractPanic] != 1 || stats.Backlog != 0 {
		t.Errorf("stats: panics %d, rejected %v, backlog %d", stats.ExtractPanics, stats.Rejected, stats.Backlog)
	}
	out := logs.String()
	if n := strings.Count(out, "extractor panicked"); n != 1 {
		t.Errorf("%d panic log lines, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, bad) || !strings.Contains(out, "(*extractor).runPage") {
		t.Errorf("the panic's log line lacks the URL or the stack:\n%s", out)
	}

	// A restart finds nothing to redo: the page is never retried.
	s2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s2.extractor.beforeParse = s.extractor.beforeParse
	if err := s2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s2.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if b := s2.Backlog(); b != 0 {
		t.Errorf("backlog after restart: %d", b)
	}
	if err := s2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	loads := st.loads[bad]
	st.mu.Unlock()
	if loads != 1 {
		t.Errorf("the panicking page was loaded %d times, want 1", loads)
	}
}

// TestStageHold: while Config.Hold says so (the node's disk is full) the workers process
// nothing and the jobs stay queued; once it clears, every page gets its record.
func TestStageHold(t *testing.T) {
	db := openMemDB(t)
	dir := t.TempDir()
	st := newSite()
	var jobs []Job
	for i := 0; i < 5; i++ {
		url := fmt.Sprintf("http://h%d.sim.test/held", i)
		st.add(url, genPage(fmt.Sprintf("Held %d", i), genParagraphs(uint64(700+i), 8, 60), pageOpts{}))
		jobs = append(jobs, jobFor(url, i))
	}
	var hold atomic.Bool
	hold.Store(true)
	cfg := testConfig(db, dir, st)
	cfg.Hold = hold.Load
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(jobs...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * HoldPoll)
	if p, b := s.Stats().Processed, s.Backlog(); p != 0 || b != len(jobs) {
		t.Errorf("while held: %d processed, backlog %d", p, b)
	}
	hold.Store(false)
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if recs := readAll(t, dir); len(recs) != len(jobs) {
		t.Errorf("%d records for %d jobs after the hold", len(recs), len(jobs))
	}
}
