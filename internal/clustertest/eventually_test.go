package clustertest

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the message and ends the goroutine.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls Eventually on a recorder in its own goroutine (Fatalf ends it).
func run(deadline time.Duration, cond func() bool) (msg string, took time.Duration) {
	r := &recorder{TB: nil}
	done := make(chan struct{})
	go func() {
		defer close(done)
		took = Eventually(r, deadline, "the thing", cond)
	}()
	<-done
	return r.msg, took
}

func TestEventuallyHolds(t *testing.T) {
	var polls atomic.Int32
	msg, took := run(time.Second, func() bool { return polls.Add(1) == 5 })
	if msg != "" {
		t.Fatalf("failed: %s", msg)
	}
	if polls.Load() != 5 {
		t.Errorf("%d polls, want 5 (stop at the first that holds)", polls.Load())
	}
	// Four sleeps of 1, 2, 4 and 8 ms.
	if took < 15*time.Millisecond || took > time.Second {
		t.Errorf("took %v, want about 15 ms of backoff", took)
	}
}

func TestEventuallyTimesOut(t *testing.T) {
	var polls atomic.Int32
	start := time.Now()
	msg, _ := run(50*time.Millisecond, func() bool { polls.Add(1); return false })
	if want := "timed out after 50ms waiting for the thing"; msg != want {
		t.Errorf("message %q, want %q", msg, want)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Errorf("gave up after %v, before the deadline", el)
	}
	// 1+2+4+8 ms, then every 10 ms: about 8 polls in 50 ms, never a busy loop.
	if n := polls.Load(); n < 4 || n > 60 {
		t.Errorf("%d polls in 50 ms", n)
	}
}

func TestEventuallyLastChance(t *testing.T) {
	// The condition comes true while the deadline passes: the check after it counts.
	var polls atomic.Int32
	msg, _ := run(0, func() bool { return polls.Add(1) >= 2 })
	if msg != "" || polls.Load() != 2 {
		t.Errorf("msg %q after %d polls, want a pass on the second", msg, polls.Load())
	}
}
