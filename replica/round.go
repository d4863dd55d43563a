package replica

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/gossip"
	"github.com/crawlnode/crawlnode/internal/wire"
	"github.com/crawlnode/crawlnode/ring"
)

// A round goes out in two phases: first the additions to every backup, then, only if
// every backup took them, the completions (see round).
const (
	phaseAll    = iota // one request with everything (tests)
	phaseAdd           // additions only; the section ends at its since version
	phaseFinish        // completions, and whole sections for full copies
)

// backups maps each partition this node holds (and may send: no handoff under way) to
// its backup.
func (r *Replicator) backups() map[string][]uint16 {
	c := r.cluster
	if !c.InContact() {
		return nil
	}
	rg := c.Ring()
	var others []string
	for _, m := range rg.Members() {
		if m != r.self {
			others = append(others, m)
		}
	}
	if len(others) == 0 {
		return nil
	}
	without := c.RingOf(others)
	alive := c.Alive()
	out := map[string][]uint16{}
	for p := range uint16(ring.PartitionCount) {
		if owner, _ := c.OwnerOf(p); owner != r.self || !c.HoldsLocal(p) {
			continue
		}
		b := without.Owner(p)
		if _, ok := alive[b]; !ok || b == "" {
			continue
		}
		out[b] = append(out[b], p)
	}
	if ob := outboxBackup(r.self, others, alive); ob != "" {
		out[ob] = append(out[ob], outboxSlot)
	}
	return out
}

// outboxBackup is the member a node's outbox is copied to: the first alive one after self
// in name order, wrapping around, so that in a steady cluster every member backs up
// exactly one other's outbox. The outbox is the busiest copy a node sends (every link for
// another node's host is written to it and deleted once acknowledged): when every node's
// went to the backup of partition 0, that one member applied the outbox traffic of all the
// others, and in 4-node runs fetched 20-25% fewer pages than the rest on the same CPU
// (docs/bench-log/cluster-scaling.md, 099af90). others is every member but self;
// "" when none is alive.
func outboxBackup(self string, others []string, alive map[string]gossip.Member) string {
	sorted := slices.Sorted(slices.Values(others))
	i, _ := slices.BinarySearch(sorted, self) // the first member after self
	for k := range sorted {
		m := sorted[(i+k)%len(sorted)]
		if _, ok := alive[m]; ok {
			return m
		}
	}
	return ""
}

// keepHeldLocked forgets the copies of partitions no longer held here and returns the
// version each remaining copy stands at (for the change log's settle). A partition still
// held but left out of this round's groups (no contact with the leader, its backup not
// alive to gossip for the moment, a hold for a handoff) keeps its copy's version, and
// the change log its keys since: when the backup is back the round sends what changed
// meanwhile, not the partition in full. Forgetting it made every missed heartbeat of a
// CPU-starved node cost full copies of all its partitions (docs/bench-log/
// cluster-scaling.md, 1b8fea8). Callers hold mu.
func (r *Replicator) keepHeldLocked(groups map[string][]uint16) map[uint16]uint64 {
	sent := map[uint16]bool{}
	for _, parts := range groups {
		for _, p := range parts {
			sent[p] = true
		}
	}
	for p := range r.parts {
		switch {
		case sent[p]:
		case r.stillHeld != nil && r.stillHeld(p):
			r.skipped.Add(1)
		default:
			delete(r.parts, p)
		}
	}
	acked := make(map[uint16]uint64, len(r.parts))
	for p, st := range r.parts {
		acked[p] = st.version
	}
	return acked
}

// round sends every held partition's changes to its backup.
func (r *Replicator) round(ctx context.Context) {
	groups := r.backups()
	var oldest time.Time
	r.mu.Lock()
	for b, parts := range groups {
		for _, p := range parts {
			st := r.parts[p]
			if st == nil || st.backup != b {
				st = &replOut{backup: b}
				r.parts[p] = st
			}
		}
	}
	acked := r.keepHeldLocked(groups)
	// The lag counts the copies left out of this round too: they are getting older.
	for _, st := range r.parts {
		if !st.readAt.IsZero() && (oldest.IsZero() || st.readAt.Before(oldest)) {
			oldest = st.readAt // (a partition not yet copied at all is not counted)
		}
	}
	r.mu.Unlock()
	if r.changes != nil {
		// The change log keeps only what a copy still lacks.
		r.changes.settle(acked)
	}
	if !oldest.IsZero() {
		lag := int64(r.since(oldest))
		r.lagNanos.Store(lag)
		if lag > r.lagMax.Load() {
			r.lagMax.Store(lag)
		}
	} else {
		r.lagNanos.Store(0)
	}
	names := make([]string, 0, len(groups))
	for b := range groups {
		names = append(names, b)
	}
	slices.Sort(names)
	// One snapshot for the whole round: the copies must be a consistent cut of the
	// frontier and the outbox. A page fetched in one partition queues its links (and a
	// redirect its target) in others, or in the outbox, before the page is recorded
	// fetched; a round reading a target's partition before that and the page's after it
	// would copy the page as fetched and its links nowhere, lost if the copies are ever
	// promoted.
	if len(names) > 0 {
		r.openSnap()
		defer r.closeSnap()
		r.prefetch(ctx, groups)
	}
	// A round reaches its backups one request at a time, so a node killed in the middle
	// of one leaves some copies at this round and others at the last: a page recorded
	// fetched in a copy already at this round could have queued its links in one that is
	// not. So the round goes out in two phases: the additions (queued URLs, links in the
	// outbox, host state) to every backup, and only once every backup took them the
	// completions (fetched records, deletions). A copy that shows a page fetched then
	// has, at every backup, the links the fetch queued. A backup that fails the first
	// phase holds back the second for all of them (their copies still take additions,
	// and are at worst a round behind in what is done: repeated fetches, not lost URLs).
	// Full copies (a new backup, a reset) travel whole in the second phase.
	complete := true
	for _, phase := range []int{phaseAdd, phaseFinish} {
		if !complete {
			break
		}
		for _, b := range names {
			// A backup that died before gossip noticed must not stall the others' rounds.
			sctx, cancel := context.WithTimeout(ctx, replicaSendTimeout)
			err := r.send(sctx, b, groups[b], phase)
			cancel()
			if err != nil && ctx.Err() == nil {
				complete = false
				r.failures.Add(1)
				r.log.Debug("replication to backup failed; next round retries", "backup", b, "partitions", len(groups[b]), "phase", phase, "err", err)
			}
		}
	}
	r.rounds.Add(1)
	r.endRound()
}

// answer is the backup's reply: the versions it now holds and the partitions it
// wants in full.
type answer struct {
	Applied map[uint16]uint64 `json:"applied"`
	Resync  []uint16          `json:"resync"`
}

// send streams the deltas of parts to backup b and records what b acknowledged.
func (r *Replicator) send(ctx context.Context, b string, parts []uint16, phase int) error {
	base, ok := r.cluster.InternalURL(b)
	if !ok {
		return fmt.Errorf("no address for %s", b)
	}
	versions := make(map[uint16]sent, len(parts))
	pr, pw := io.Pipe()
	cw := &wire.Counter{W: pw}
	encDone := make(chan struct{})
	go func() {
		defer close(encDone)
		// Rounds go out one at a time: one encoder, reset per request.
		var err error
		if r.encoder == nil {
			r.encoder, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		zw := r.encoder
		zw.Reset(cw)
		bw := bufio.NewWriterSize(zw, 64<<10)
		err = r.encodePhase(bw, parts, phase, func(p uint16, v uint64, at time.Time) { versions[p] = sent{v, at} })
		if err == nil {
			err = bw.Flush()
		}
		if cerr := zw.Close(); err == nil {
			err = cerr
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+Path, pr)
	if err != nil {
		pr.CloseWithError(err)
		<-encDone
		return err
	}
	req.Header.Set("Content-Type", "application/x-crawlnode-replica")
	resp, err := r.cluster.Do(req)
	pr.CloseWithError(errors.New("request over"))
	<-encDone // the encoder is free again, and versions complete
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s answered %d: %s", b, resp.StatusCode, body)
	}
	var ans answer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ans); err != nil {
		return fmt.Errorf("%s: bad answer: %w", b, err)
	}
	r.bytesSent.Add(cw.N)
	return r.noteAnswer(b, phase, versions, ans)
}

// sent is what a request carried of one partition: the version its section ends at and
// when the snapshot was read.
type sent struct {
	version uint64
	readAt  time.Time
}

// noteAnswer records what backup b acknowledged of a request; an error says the request's
// phase is not complete at b.
func (r *Replicator) noteAnswer(b string, phase int, versions map[uint16]sent, ans answer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, v := range ans.Applied {
		st := r.parts[p]
		if st == nil || st.backup != b {
			continue
		}
		if s, ok := versions[p]; ok && s.version == v {
			if phase != phaseAdd {
				st.version, st.readAt = v, s.readAt
			}
			if s.readAt.After(st.addedAt) {
				st.addedAt = s.readAt
			}
		}
	}
	for _, p := range ans.Resync {
		if st := r.parts[p]; st != nil && st.backup == b {
			st.version = 0
			r.resets.Add(1)
		}
	}
	if phase == phaseAdd && len(ans.Resync) > 0 {
		return fmt.Errorf("%s wants %d partitions in full", b, len(ans.Resync))
	}
	return nil
}

// encode writes the stream: magic, sender, then per partition a header, its records and
// the version the records are complete up to. Record: op (1 set, 2 delete), key, value.
func (r *Replicator) encode(w *bufio.Writer, parts []uint16, done func(p uint16, version uint64, readAt time.Time)) error {
	return r.encodePhase(w, parts, phaseAll, done)
}

// encodePhase is encode with only the records of one phase (phaseAdd: the additions, each
// section ending at the version it started from, as the copy is not complete beyond it;
// phaseFinish: the completions, and whole sections for full copies, which phaseAdd skips).
func (r *Replicator) encodePhase(w *bufio.Writer, parts []uint16, phase int, done func(p uint16, version uint64, readAt time.Time)) error {
	if _, err := w.WriteString(streamMagic); err != nil {
		return err
	}
	if r.snap == nil {
		r.openSnap()
		defer r.closeSnap()
	}
	readAt := r.snapAt
	wire.WriteBytes(w, []byte(r.self))
	for _, p := range parts {
		r.mu.Lock()
		st := r.parts[p]
		var since uint64
		if st != nil {
			since = st.version
		}
		r.mu.Unlock()
		full := since == 0
		if phase == phaseAdd && full {
			continue
		}
		w.WriteByte('P')
		wire.WriteUvarint(w, uint64(p))
		wire.WriteUvarint(w, since)
		var n int64
		record := func(fam byte, k, v []byte, deleted bool) error {
			if phase != phaseAll && !full && frontier.Completes(fam, v, deleted) != (phase == phaseFinish) {
				return nil
			}
			n++
			if deleted {
				w.WriteByte(2)
				wire.WriteBytes(w, k)
				return nil
			}
			w.WriteByte(1)
			wire.WriteBytes(w, k)
			wire.WriteBytes(w, v)
			return nil
		}
		var version uint64
		var err error
		if recs, ok := r.scan.of(p, since); ok {
			for _, x := range recs {
				if err = record(x.fam, x.key, x.value, x.deleted); err != nil {
					break
				}
			}
			version = r.scan.version
		} else {
			if full {
				r.fullCopies.Add(1)
			} else {
				r.unscanned.Add(1)
			}
			version, err = r.export(p, since, record)
		}
		if err != nil {
			return err
		}
		if full {
			r.fullRecords.Add(n)
		}
		if phase == phaseAdd {
			version = since
		}
		w.WriteByte(0)
		wire.WriteUvarint(w, version)
		r.records.Add(n)
		done(p, version, readAt)
	}
	return w.WriteByte('E')
}

// exportOutbox is ExportPartitionSince for the outbox's keys.
func (r *Replicator) exportOutbox(since uint64, fn func(byte, []byte, []byte, bool) error) (uint64, error) {
	return r.snap.ExportSince(since, fn, []byte{forward.KeyPrefix})
}

// openSnap takes the round's read snapshot. The time is read first: the copies made
// from it are at least that old.
func (r *Replicator) openSnap() {
	r.snapAt = r.now()
	r.snap = frontier.OpenView(r.db)
}

func (r *Replicator) closeSnap() {
	r.snap.Close()
	r.snap = nil
	r.scan = nil
}
