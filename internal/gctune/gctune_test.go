package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		headroom, live uint64
		floor, want    int
	}{
		{256 * mib, 64 * mib, 100, 400},
		{256 * mib, 100 * mib, 100, 256},
		{256 * mib, 256 * mib, 100, 100},
		{256 * mib, 1024 * mib, 100, 100}, // a large heap collects as before
		{256 * mib, 1024 * mib, 150, 150}, // never below the user's GOGC
		{256 * mib, 0, 100, MaxPercent},
		{256 * mib, 1, 100, MaxPercent},
		{256 * mib, 20 * mib, 100, 1280},
	} {
		if got := Percent(c.headroom, c.live, c.floor); got != c.want {
			t.Errorf("Percent(%d MiB, %d bytes, %d) = %d, want %d", c.headroom/mib, c.live, c.floor, got, c.want)
		}
	}
}

func read(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// collect runs a collection and waits until the tuner has adjusted after it.
func collect(t *testing.T, tu *Tuner) {
	t.Helper()
	before := tu.Updates()
	runtime.GC()
	deadline := time.Now().Add(5 * time.Second)
	for tu.Updates() == before {
		if time.Now().After(deadline) {
			t.Fatalf("no adjustment after a collection (updates %d)", before)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

var keep [][]*[64]byte

// TestTunerFollowsTheLiveHeap: the runtime's GOGC and heap goal follow the live heap after
// each collection: the headroom above a small heap, GOGC's own growth above a large one.
func TestTunerFollowsTheLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const headroom = 64 << 20
	tu := Start(headroom)
	if tu == nil {
		t.Fatal("Start returned nil at GOGC=100")
	}
	defer tu.Stop()

	collect(t, tu)
	live := read(liveMetric)
	if live >= headroom/2 {
		t.Skipf("test binary's live heap %d MiB already large", live>>20)
	}
	gogc := int(read(gogcMetric))
	if gogc != tu.GCPercent() || gogc != Percent(headroom, live, 100) || gogc <= 200 {
		t.Fatalf("small heap: runtime GOGC %d, tuner %d, want Percent(%d) = %d (> 200)", gogc, tu.GCPercent(), live, Percent(headroom, live, 100))
	}
	if goal := read("/gc/heap/goal:bytes"); goal < live+headroom*9/10 {
		t.Fatalf("small heap: goal %d MiB, want about live %d MiB + headroom %d MiB", goal>>20, live>>20, headroom>>20)
	}

	// 128 MiB live, in pointerful objects: GOGC back to the floor.
	for i := 0; i < 128; i++ {
		row := make([]*[64]byte, 1<<14)
		for j := range row {
			row[j] = new([64]byte)
		}
		keep = append(keep, row)
	}
	collect(t, tu)
	if live = read(liveMetric); live < 128<<20 {
		t.Fatalf("live heap %d MiB after keeping 128 MiB", live>>20)
	}
	if gogc := int(read(gogcMetric)); gogc != 100 || tu.GCPercent() != 100 {
		t.Fatalf("large heap (%d MiB): runtime GOGC %d, tuner %d, want 100", live>>20, gogc, tu.GCPercent())
	}

	keep = nil
	collect(t, tu)
	if gogc := int(read(gogcMetric)); gogc <= 200 {
		t.Fatalf("heap freed (%d MiB live): GOGC %d, want > 200", read(liveMetric)>>20, gogc)
	}

	tu.Stop()
	if gogc := read(gogcMetric); gogc != 100 {
		t.Fatalf("after Stop: GOGC %d, want 100 restored", gogc)
	}
	n := tu.Updates()
	runtime.GC()
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	if tu.Updates() != n || read(gogcMetric) != 100 {
		t.Fatalf("stopped tuner still adjusting: updates %d -> %d, GOGC %d", n, tu.Updates(), read(gogcMetric))
	}
}

func TestStartLeavesOffAndZeroAlone(t *testing.T) {
	old := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(old)
	off := read(gogcMetric)
	if tu := Start(64 << 20); tu != nil {
		tu.Stop()
		t.Fatal("Start with GOGC=off returned a tuner")
	}
	if got := read(gogcMetric); got != off {
		t.Fatalf("GOGC=off changed: %d -> %d", off, got)
	}
	debug.SetGCPercent(100)
	if tu := Start(0); tu != nil {
		t.Fatal("Start(0) returned a tuner")
	}
	if got := read(gogcMetric); got != 100 {
		t.Fatalf("Start(0) changed GOGC to %d", got)
	}
	var nilTuner *Tuner
	nilTuner.Stop()
}
