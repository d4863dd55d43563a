// Package gctune keeps the Go garbage collector's heap goal at least a fixed headroom above
// the live heap.
//
// Duties: a Tuner (Start) that resets GOGC after every collection so that the next one
// comes after at least a fixed headroom of growth, and Percent, the pure arithmetic of
// that setting.
//
// With the default GOGC=100 the collector runs each time the heap has grown by what the
// last collection found live. A crawl node's live heap is small (70-100 MiB on the fetch
// path with the extract stage) while it allocates fast (response buffers, parse trees,
// Badger's table builders), so at GOGC=100 it collected about twice a second in the
// single-node benchmark, and each collection stopped the world and borrowed the fetch
// stage's goroutines for mark assists. Worse, the stop-the-world phases wait for every
// running goroutine, the extract workers' included, whose threads are in SCHED_IDLE and get
// the CPU last: pauses of 20-60 ms where the crawl's own took under 3 ms (docs/bench-log/
// extract-stage.md).
//
// A Tuner sets GOGC after every collection to headroom/live (as a percentage), never below
// the GOGC in effect when it started: the next collection comes when the heap has grown by
// the headroom or by the live heap, whichever is larger. The extra memory is bounded by the
// headroom, and a large frontier (live heap over the headroom) collects exactly as before; a
// soft memory limit (GOMEMLIMIT or debug.SetMemoryLimit) still caps the goal, since the
// runtime takes the lower of the two.
//
// Why hand-written: the runtime has no "minimum heap headroom" setting (GOMEMLIMIT is a
// ceiling, not a floor, and GOGC=off with a limit collects continuously once the live heap
// nears it), and the known tuners (Uber's, CockroachDB's) are parts of larger programs, not
// libraries; the mechanism is a finalizer that re-arms itself, about forty lines.
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// MaxPercent caps the GOGC the tuner sets, for an almost empty heap (at start-up).
const MaxPercent = 10000

const (
	liveMetric = "/gc/heap/live:bytes"
	gogcMetric = "/gc/gogc:percent"
)

// Tuner adjusts GOGC after each collection. Stop it to restore the GOGC it started from.
type Tuner struct {
	headroom uint64
	floor    int // the GOGC in effect at Start

	mu      sync.Mutex // serializes adjust and Stop
	stopped bool
	percent atomic.Int64 // last GOGC set
	updates atomic.Int64 // collections seen
	sample  []metrics.Sample
}

// sentinel is garbage from birth: its finalizer runs once after each collection and re-arms
// itself on the same object.
type sentinel struct {
	t *Tuner
	_ [8]byte // not a tiny allocation: finalizers on tiny objects may never run
}

// Start starts a Tuner keeping headroom bytes of heap growth between collections. It
// returns nil (and changes nothing) when headroom is 0 or the collector is off (GOGC=off).
func Start(headroom uint64) *Tuner {
	if headroom == 0 {
		return nil
	}
	cur := []metrics.Sample{{Name: gogcMetric}}
	metrics.Read(cur)
	if cur[0].Value.Kind() != metrics.KindUint64 {
		return nil // a runtime without the metric: leave GOGC alone
	}
	floor := int(cur[0].Value.Uint64())
	if floor <= 0 || floor >= MaxPercent {
		return nil // GOGC=off (-1) reads as a huge number; a huge GOGC needs no tuning
	}
	t := &Tuner{headroom: headroom, floor: floor, sample: []metrics.Sample{{Name: liveMetric}}}
	t.percent.Store(int64(floor))
	t.adjust()
	runtime.SetFinalizer(&sentinel{t: t}, rearm)
	return t
}

func rearm(s *sentinel) {
	if s.t.adjust() {
		runtime.SetFinalizer(s, rearm)
	}
}

// Percent for a live heap of live bytes: headroom as a share of live, within [floor, MaxPercent].
func Percent(headroom, live uint64, floor int) int {
	p := MaxPercent
	if live > 0 && headroom/live < MaxPercent/100 {
		p = int(headroom * 100 / live)
	}
	return max(p, floor)
}

// adjust sets GOGC for the live heap the last collection found; false once stopped.
func (t *Tuner) adjust() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.sample)
	var live uint64
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	p := Percent(t.headroom, live, t.floor)
	if int64(p) != t.percent.Load() {
		debug.SetGCPercent(p)
		t.percent.Store(int64(p))
	}
	t.updates.Add(1)
	return true
}

// GCPercent is the GOGC the tuner set last (the floor before the first collection).
func (t *Tuner) GCPercent() int { return int(t.percent.Load()) }

// Updates is the number of collections the tuner has adjusted after (plus one at Start).
func (t *Tuner) Updates() int64 { return t.updates.Load() }

// Stop stops adjusting and restores the GOGC in effect at Start. Safe on a nil Tuner.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	debug.SetGCPercent(t.floor)
	t.percent.Store(int64(t.floor))
}
