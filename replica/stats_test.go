package replica

import (
	"testing"
	"time"
)

// TestCounters: each running counter reaches the field of Counters that metrics export
// it under (every counter set to a value of its own).
func TestCounters(t *testing.T) {
	r := newReplicator(Config{})
	r.changes = newChangeLog(nil)
	sets := []struct {
		set  func(int64)
		get  func(Counters) int64
		name string
	}{
		{r.bytesSent.Store, func(c Counters) int64 { return c.Bytes }, "Bytes"},
		{r.records.Store, func(c Counters) int64 { return c.Records }, "Records"},
		{r.rounds.Store, func(c Counters) int64 { return c.Rounds }, "Rounds"},
		{r.resets.Store, func(c Counters) int64 { return c.Resets }, "Resets"},
		{r.promoted.Store, func(c Counters) int64 { return c.Promoted }, "Promoted"},
		{r.dropped.Store, func(c Counters) int64 { return c.Dropped }, "Dropped"},
		{r.failures.Store, func(c Counters) int64 { return c.Failures }, "Failures"},
		{r.keyed.Store, func(c Counters) int64 { return c.Keyed }, "Keyed"},
		{r.cutMisses.Store, func(c Counters) int64 { return c.CutMisses }, "CutMisses"},
		{r.logMisses.Store, func(c Counters) int64 { return c.LogMisses }, "LogMisses"},
		{r.fullCopies.Store, func(c Counters) int64 { return c.FullCopies }, "FullCopies"},
		{r.fullRecords.Store, func(c Counters) int64 { return c.FullRecords }, "FullRecords"},
		{r.unscanned.Store, func(c Counters) int64 { return c.Unscanned }, "Unscanned"},
		{r.skipped.Store, func(c Counters) int64 { return c.Skipped }, "Skipped"},
		{r.logValues.Store, func(c Counters) int64 { return c.LogValues }, "LogValues"},
		{r.logReads.Store, func(c Counters) int64 { return c.LogReads }, "LogReads"},
		{r.ackUncopied.Store, func(c Counters) int64 { return c.AckUncopied }, "AckUncopied"},
		{r.changes.overflows.Store, func(c Counters) int64 { return c.LogOverflows }, "LogOverflows"},
		{r.changes.skipped.Store, func(c Counters) int64 { return c.OutboxSkipped }, "OutboxSkipped"},
		{r.lagNanos.Store, func(c Counters) int64 { return int64(c.Lag) }, "Lag"},
		{r.lagMax.Store, func(c Counters) int64 { return int64(c.LagMax) }, "LagMax"},
	}
	for i, s := range sets {
		s.set(int64(i + 1))
	}
	c := r.Counters()
	for i, s := range sets {
		if got := s.get(c); got != int64(i+1) {
			t.Errorf("%s = %d, want %d", s.name, got, i+1)
		}
	}
	if c.Lag != 20*time.Nanosecond {
		t.Errorf("Lag %v", c.Lag)
	}
	r.changes = nil // replicas without a change log
	if c := r.Counters(); c.LogOverflows != 0 || c.OutboxSkipped != 0 || c.Bytes != 1 {
		t.Errorf("without a change log: %+v", c)
	}
}
