package corpus

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// cpuGate holds the extract workers back from starting a page while the machine has less
// than Config.DeferBelowIdle cores idle, not counting the CPU the workers themselves use
// (Linux: the machine's times from /proc/stat, the workers' threads' from
// /proc/self/task/<tid>/stat, both read with prometheus/procfs, sampled every
// gateInterval and smoothed over about two samples).
//
// Why, with the workers already in SCHED_IDLE: SCHED_IDLE gives the crawl the CPU first,
// but a worker that runs at all still costs the crawl. Each garbage collection's
// stop-the-world waits for every running goroutine, and a starved SCHED_IDLE thread is the
// last to get a CPU to stop on (6-60 ms pauses measured against under 3.2 ms without
// extraction); extraction's allocations make the collections more frequent; and even a
// foreign SCHED_IDLE process lengthened a CPU-bound crawl's span by 3-10% on these VMs
// (caches, the other core's cycles). A worker parked between pages costs none of that. So
// when the crawl (or anything else) keeps the machine busy, pages wait in the durable
// backlog (the stage may lag; it must not slow the fetch stage), and when the crawl leaves
// CPU idle, as a polite crawl of real hosts does, the workers run as before.
//
// It never holds work for good: a worker waits at most gateMaxWait per page (a machine
// another tenant keeps busy still gets its pages extracted, slowly), and the gate is open
// while the backlog is above half of MaxBacklog (before Enqueue would push back on the
// fetch stage) and while Drain waits. The decision is written here: procfs reads the
// times, but no library measures a machine's idle CPU net of some of its own threads.
type cpuGate struct {
	below float64 // open at this many idle cores or more
	read  func(tids []int) (cpuSample, error)

	mu     sync.Mutex
	tids   []int // the workers' threads
	prev   cpuSample
	have   bool
	free   float64 // smoothed idle cores, the workers' own use counted as idle
	primed bool

	open   atomic.Bool
	held   atomic.Int64 // nanoseconds workers spent held back
	closes atomic.Int64 // times the gate closed
}

// cpuSample is a reading of the machine's CPU times (all CPUs together, in seconds), its
// CPU count, and the summed CPU time of the workers' threads (threads of them read).
type cpuSample struct {
	total, idle, workers float64
	cpus, threads        int
}

const (
	gateInterval = 100 * time.Millisecond
	gateMaxWait  = 10 * time.Second
	gatePoll     = 10 * time.Millisecond
)

func newCPUGate(below float64, read func(tids []int) (cpuSample, error)) *cpuGate {
	g := &cpuGate{below: below, read: read}
	g.open.Store(true)
	return g
}

// register adds a worker's thread.
func (g *cpuGate) register(tid int) {
	g.mu.Lock()
	g.tids = append(g.tids, tid)
	g.mu.Unlock()
}

// run samples until ctx ends. If the times cannot be read the gate opens for good and
// run returns the error.
func (g *cpuGate) run(ctx context.Context) error {
	t := time.NewTicker(gateInterval)
	defer t.Stop()
	for {
		if err := g.sample(); err != nil {
			g.open.Store(true)
			return err
		}
		select {
		case <-ctx.Done():
			g.open.Store(true)
			return nil
		case <-t.C:
		}
	}
}

// sample reads the times and decides the gate from the change since the last reading.
func (g *cpuGate) sample() error {
	g.mu.Lock()
	tids := append([]int(nil), g.tids...)
	g.mu.Unlock()
	s, err := g.read(tids)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	prev, had := g.prev, g.have
	g.prev, g.have = s, true
	if !had || s.total <= prev.total || s.cpus <= 0 {
		return nil
	}
	idle := s.idle - prev.idle
	if s.threads == prev.threads && s.workers >= prev.workers {
		// The workers' own time counts as idle (when a thread came or went between the
		// readings, this sample goes without it).
		idle += s.workers - prev.workers
	}
	free := min(idle/(s.total-prev.total), 1) * float64(s.cpus)
	if !g.primed {
		g.free, g.primed = free, true
	} else {
		g.free = (g.free + free) / 2
	}
	open := g.free >= g.below
	if g.open.Swap(open) && !open {
		g.closes.Add(1)
	}
	return nil
}

// wait returns when the gate is open, or open says so (the backlog is high or the stage
// drains), or after gateMaxWait, or when ctx ends.
func (g *cpuGate) wait(ctx context.Context, open func() bool) {
	if g.open.Load() || open() {
		return
	}
	start := time.Now()
	t := time.NewTicker(gatePoll)
	defer t.Stop()
	defer func() { g.held.Add(int64(time.Since(start))) }()
	for time.Since(start) < gateMaxWait {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if g.open.Load() || open() {
			return
		}
	}
}
