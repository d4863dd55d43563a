package replica

import (
	"slices"
	"time"
)

// Stats are this node's replication figures.
type Stats struct {
	Rounds   int64 `json:"rounds"`
	Bytes    int64 `json:"bytes"`
	Records  int64 `json:"records"`
	Resets   int64 `json:"resets"`
	Failures int64 `json:"failures"`
	Promoted int64 `json:"promoted"`
	// Refetched counts fetched URLs that promotions queued again: their captures never
	// reached the output store.
	Refetched  int64   `json:"refetched"`
	Dropped    int64   `json:"dropped"`
	LagSeconds float64 `json:"lag_seconds"` // age of the oldest copy of a partition held here
	Copies     int     `json:"copies"`      // partitions of others copied here
	// OutboxCopies lists the nodes whose outbox is copied here.
	OutboxCopies []string `json:"outbox_copies"`
}

// Stats returns the replication figures of the cluster API (it reads the copies' metas
// from Badger).
func (r *Replicator) Stats() Stats {
	st := Stats{
		Rounds: r.rounds.Load(), Bytes: r.bytesSent.Load(), Records: r.records.Load(), Resets: r.resets.Load(),
		Failures: r.failures.Load(), Promoted: r.promoted.Load(), Refetched: r.refetched.Load(), Dropped: r.dropped.Load(),
		LagSeconds: time.Duration(r.lagNanos.Load()).Seconds(), OutboxCopies: []string{},
	}
	for p, m := range r.held() {
		if isOutboxSlot(p) {
			st.OutboxCopies = append(st.OutboxCopies, m.Source)
		} else {
			st.Copies++
		}
	}
	slices.Sort(st.OutboxCopies)
	return st
}

// Counters are the replicator's running counters, for metrics: totals since the start
// unless marked.
type Counters struct {
	Bytes, Records, Rounds, Resets, Promoted, Dropped, Failures int64
	Keyed                                                       int64 // partition exports read from the change log's keys
	CutMisses                                                   int64 // rounds whose snapshot the change log did not reach in time (full pass)
	LogMisses                                                   int64 // partition exports whose copy stood below the log's coverage (full pass)
	FullCopies                                                  int64 // sections sent whole (no copy yet, a new backup, a reset)
	FullRecords                                                 int64 // records of those sections
	Unscanned                                                   int64 // delta sections exported on their own (not read ahead by the round)
	Skipped                                                     int64 // held partitions a round left out (no contact, backup away), copy kept
	LogValues                                                   int64 // changed keys whose values the change log held (no read)
	LogReads                                                    int64 // changed keys read from the round's snapshot
	AckUncopied                                                 int64 // forwarded link batches acknowledged before a copy held them (WaitCopied gave up)
	// LogOverflows counts the change log's dropped partitions (their next export takes
	// the full pass); OutboxSkipped the outbox entries rounds left out (set and deleted
	// within a round's span).
	LogOverflows, OutboxSkipped int64
	Lag                         time.Duration // the oldest held copy's age at the last round (a gauge)
	LagMax                      time.Duration // the largest Lag seen
}

// Counters returns the running counters; cheap (atomic loads), no Badger read.
func (r *Replicator) Counters() Counters {
	c := Counters{
		Bytes: r.bytesSent.Load(), Records: r.records.Load(), Rounds: r.rounds.Load(), Resets: r.resets.Load(),
		Promoted: r.promoted.Load(), Dropped: r.dropped.Load(), Failures: r.failures.Load(),
		Keyed: r.keyed.Load(), CutMisses: r.cutMisses.Load(), LogMisses: r.logMisses.Load(),
		FullCopies: r.fullCopies.Load(), FullRecords: r.fullRecords.Load(), Unscanned: r.unscanned.Load(),
		Skipped: r.skipped.Load(), LogValues: r.logValues.Load(), LogReads: r.logReads.Load(),
		AckUncopied: r.ackUncopied.Load(),
		Lag:         time.Duration(r.lagNanos.Load()), LagMax: time.Duration(r.lagMax.Load()),
	}
	if r.changes != nil {
		c.LogOverflows, c.OutboxSkipped = r.changes.overflows.Load(), r.changes.skipped.Load()
	}
	return c
}
