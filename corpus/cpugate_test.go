package corpus

import (
	"context"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/internal/clustertest"
)

// scripted is a CPU reader that returns the samples it is given, one per read.
type scripted struct {
	mu sync.Mutex
	s  []cpuSample
}

func (r *scripted) read([]int) (cpuSample, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.s[0]
	if len(r.s) > 1 {
		r.s = r.s[1:]
	}
	return s, nil
}

// The gate counts the workers' own CPU time as idle: a machine kept busy by extraction alone
// is idle to it, one kept busy by anything else is not, and it opens again when idle CPU
// comes back (smoothed: the mean of the last figure and the new reading).
func TestCPUGateDecides(t *testing.T) {
	// Two CPUs, 20 units of CPU time a reading (the gate uses only ratios of them).
	r := &scripted{s: []cpuSample{
		{total: 0, idle: 0, workers: 0, cpus: 2, threads: 2},
		{total: 20, idle: 0, workers: 18, cpus: 2, threads: 2},   // the workers use 1.8 cores: 1.8 idle
		{total: 40, idle: 0, workers: 20, cpus: 2, threads: 2},   // the crawl takes most: 0.2
		{total: 60, idle: 0, workers: 20, cpus: 2, threads: 2},   // all: 0
		{total: 80, idle: 0, workers: 20, cpus: 2, threads: 2},   // 0
		{total: 100, idle: 10, workers: 20, cpus: 2, threads: 2}, // 1.0
		{total: 120, idle: 10, workers: 9, cpus: 2, threads: 1},  // a thread ended: its time is not idle
	}}
	g := newCPUGate(0.5, r.read)
	want := []struct {
		open   bool
		free   float64
		closes int64
	}{{true, 0, 0}, {true, 1.8, 0}, {true, 1.0, 0}, {true, 0.5, 0}, {false, 0.25, 1}, {true, 0.625, 1}, {false, 0.3125, 2}}
	for i, w := range want {
		if err := g.sample(); err != nil {
			t.Fatal(err)
		}
		if got := g.open.Load(); got != w.open || math.Abs(g.free-w.free) > 1e-9 || g.closes.Load() != w.closes {
			t.Fatalf("reading %d: open %v, free %.4f, closed %d times; want %v, %.4f, %d", i, got, g.free, g.closes.Load(), w.open, w.free, w.closes)
		}
	}
}

// wait returns at once when the gate is open or open() says so, waits while it is
// closed, and returns when ctx ends.
func TestCPUGateWait(t *testing.T) {
	g := newCPUGate(0.5, nil)
	never := func() bool { return false }
	g.wait(context.Background(), never) // open
	g.open.Store(false)
	g.wait(context.Background(), func() bool { return true })
	if g.held.Load() != 0 {
		t.Fatalf("held %v without waiting", time.Duration(g.held.Load()))
	}
	go func() { time.Sleep(50 * time.Millisecond); g.open.Store(true) }()
	start := time.Now()
	g.wait(context.Background(), never)
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Fatalf("a closed gate let the worker go after %v", d)
	}
	if h := time.Duration(g.held.Load()); h < 40*time.Millisecond {
		t.Fatalf("held %v, want the wait counted", h)
	}
	g.open.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start = time.Now()
	g.wait(ctx, never)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("wait outlived its context by %v", d)
	}
}

// The real reader on this machine: the machine's times grow, and a busy thread's CPU time
// are read back.
func TestReadCPU(t *testing.T) {
	tid := make(chan int)
	stop := make(chan struct{})
	go func() {
		lowerThreadPriority(0) // locks the goroutine to its thread
		tid <- threadID()
		for {
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	id := <-tid
	defer close(stop)
	a, err := gateReader([]int{id, 1 << 30})
	if err != nil {
		t.Skip("no CPU times here:", err)
	}
	time.Sleep(300 * time.Millisecond)
	b, err := gateReader([]int{id, 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if a.cpus < 1 || b.total <= a.total || a.threads != 1 || b.workers <= a.workers {
		t.Fatalf("readings %+v then %+v: want CPUs, growing totals, one thread read (the other does not exist), its time growing", a, b)
	}
}

// A stage whose gate says the machine is busy holds its pages, and lets them go once the
// machine is idle again, or when Drain waits for them.
func TestStageHoldsPagesWhileBusy(t *testing.T) {
	db := openMemDB(t)
	dir := t.TempDir()
	st := newSite()
	var jobs []Job
	for i := range 6 {
		url := "http://h" + strconv.Itoa(i) + ".sim.test/article"
		st.add(url, genPage("Article "+strconv.Itoa(i), genParagraphs(uint64(700+i), 8, 60), pageOpts{}))
		jobs = append(jobs, jobFor(url, i))
	}
	var mu sync.Mutex
	busy, ticks := true, 0.0
	saved := gateReader
	gateReader = func([]int) (cpuSample, error) {
		mu.Lock()
		defer mu.Unlock()
		ticks += 20
		s := cpuSample{total: ticks, cpus: 2}
		if !busy {
			s.idle = ticks
		}
		return s, nil
	}
	t.Cleanup(func() { gateReader = saved })

	cfg := testConfig(db, dir, st)
	cfg.Nice = 5
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	// Open until its second reading; then closed.
	clustertest.Eventually(t, 5*time.Second, "the gate to close", func() bool { return !s.gate.open.Load() })
	if err := s.Enqueue(jobs[:3]...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // four more readings of a busy machine
	if n := s.Stats().Processed; n != 0 {
		t.Fatalf("%d pages extracted while the machine was busy", n)
	}
	mu.Lock()
	busy = false
	mu.Unlock()
	clustertest.Eventually(t, 5*time.Second, "three records processed", func() bool { return s.Stats().Processed == 3 })
	st1 := s.Stats()
	if st1.Held < 200*time.Millisecond || st1.HeldSpells < 1 {
		t.Fatalf("held %v in %d spells; want the wait counted", st1.Held, st1.HeldSpells)
	}

	mu.Lock()
	busy = true
	mu.Unlock()
	time.Sleep(300 * time.Millisecond)
	if err := s.Enqueue(jobs[3:]...); err != nil {
		t.Fatal(err)
	}
	// Drain opens the gate while it waits: well within the 10 s a held page waits at most.
	dctx, dcancel := context.WithTimeout(ctx, gateMaxWait*8/10)
	defer dcancel()
	if err := s.Drain(dctx); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().Processed; n != int64(len(jobs)) {
		t.Fatalf("%d records after Drain, want %d", n, len(jobs))
	}
}
