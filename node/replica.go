package node

// Partition replicas: every partition this node holds is copied, asynchronously and in
// order, to one backup node, so that when this node is lost for good its partitions go on
// from where replication stood instead of from nothing.
//
// The backup of partition p is the node that would own p if this node were gone: the
// owner of p in the ring over the other members. When a member is gone past the grace
// period the leader gives its partitions to exactly those owners (the ring without it),
// so the replica is usually already where the lease goes; if membership moved meanwhile,
// the replica still merges in and the sweep ships it on to the owner.
//
// Each round (ClusterConfig.ReplicaInterval, 1 s by default) the owner exports, per held
// partition, the frontier keys written or deleted since the Badger version its backup
// acknowledged last (frontier.View.ExportPartitionSince), and streams them, zstd-compressed, in
// one request per backup. Every partition and the outbox of a round are read from one
// Badger snapshot: a consistent cut. A page's links (a redirect's target) are committed,
// in other partitions or the outbox, before the page is recorded fetched, so a cut that
// has the page fetched has its links too; reading each partition at its own moment could
// copy the page as fetched and its link as never seen, and the promoted copies would lose
// the link. And as a round reaches its backups one request at a time (a node killed in
// the middle of a round leaves copies from two adjacent rounds), it goes out in two
// phases: the additions (frontier.Completes false) to every backup, then, only if every
// backup took them, the completions (fetched records, deletions). What remains: a full
// copy (new backup, reset) travels whole in the second phase. The backup applies a
// partition's delta only if it starts where its copy ends (same source, same version);
// otherwise it asks for a full copy (a reset).
//
// What a round reads: not a scan of the versions since the copy's. Badger's iterators
// step over every version still in the memtables (up to tens of MiB), whatever SinceTs
// says, so a scan costs the memtable's size, not the round's changes. A change log
// (changeLog, replica_changes.go) follows Badger's feed of committed writes (DB.Subscribe)
// for the frontier's exported families and the outbox, so every writer (adds, completions,
// retries, host clocks, imports, deletions, the outbox) is in it without reporting its
// keys, and keeps per partition the keys committed with their versions. The round waits
// until the feed has delivered every commit up to its snapshot's read version (the feed
// comes in commit order; a marker write after the snapshot passes it when nothing else
// does), then reads, from that same snapshot, just the keys with a version in (the copy's
// version, the snapshot's]: the consistent cut stays, a key absent from the snapshot goes
// as a deletion, and a write committed while the round is in flight waits for the next
// round. The log drops a key's versions once the backup acknowledged a round read at or
// after them, and a partition's keys when it is no longer held. The first round after a
// start, a new backup or a reset (a full copy), a copy older than the log's coverage
// (the feed started after it, or the partition overflowed the log's bound and was
// dropped from it) and a log that is not running take the full pass: one pass per key
// family over the partitions whose copies stand at one version
// (frontier.View.ExportPartitionsSince), else partition by partition.
//
// The backup applies a request's sections in one write batch, flushed at its end, and
// checks each against the copy's meta as it keeps it in memory (in step with Badger's).
//
// Copies live in the node's Badger under their own prefix (R), apart from the frontier's
// own keys: a replica is not crawled, counted or swept.
//
// The node's outbox (links found here for partitions other nodes hold, not yet
// acknowledged by them) is copied the same way, as one more section, to the next alive
// member in name order (outboxBackup): a page whose fetch the copies record as done may
// have links only that outbox still held. That backup keeps each source's outbox copy in
// a slot of its own (outboxSlotFor: it may back up several nodes' outboxes, while a
// member is down or after membership moved, until the stale copy is dropped). When the
// node is gone past the grace period (no longer a registered member), that backup queues
// the copied links in its own outbox; their owners drop the ones they already have.
//
// Promotion: when p's lease has moved away from the replica's source and the source is
// not alive, the backup imports the copy into its frontier with ImportPartition (union
// merge: a URL the new owner knows is kept as it is there, a final state beats a queued
// one) and deletes it. If the source is alive the lease moved by a handoff, which carried
// the partition itself, so the copy is dropped. The pages the lost node fetched after its
// last replicated round are queued again in the copy and fetched again (duplicates,
// counted by the chaos suite), which finds their links again.
//
// Links a peer forwards are deleted from its outbox once this node acknowledges them, so
// they must be in a copy by then: the acknowledgement waits (waitCopied, through
// forward.HandlerSync) until the backups of the batch's partitions acknowledged a round
// read after the commit, and asks for that round at once (rounds are spaced by at least
// minGap, so concurrent batches share them). Acknowledged at the commit, links that
// arrived after the last round were lost with the node: nobody else had them. A backup
// that does not answer within ackCopyWait does not hold the links up: they are
// acknowledged anyway and counted (replica_ack_unreplicated_total).
//
// Written here, not taken from a library: Badger's own Stream/Backup framework copies a
// whole database with its versions, while a replica is one key range of a live database
// applied on a peer under another prefix; the wire format is the same kind of framing as
// the snapshot package's, without its single-partition header.

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/klauspost/compress/zstd"

	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/gossip"
	"github.com/crawlnode/crawlnode/ring"
)

// replicaPath is the internal route a backup receives deltas on.
const replicaPath = "/internal/v1/replica"

// famReplica prefixes every replica key: R | partition(2) | the frontier key. The meta
// record of a replica is R | partition(2) | 0x00 (frontier keys start with a letter).
const famReplica = 'R'

const replicaMagic = "CNREPL1\n"

// replicaMeta is what a backup remembers of one partition's copy.
type replicaMeta struct {
	Source  string    `json:"source"`
	Version uint64    `json:"version"` // the source's Badger version the copy is complete up to; 0: incomplete
	At      time.Time `json:"at"`      // when the last delta was applied
}

// outboxSlot is the pseudo-partition number a node's outbox travels under. A backup can
// hold the outboxes of several sources at once (the next member after one that is down
// backs up both its predecessors' outboxes; a source whose backup moved leaves its old
// copy behind until it is stale), so it keeps each source's copy in a slot of its own,
// from outboxSlot up to outboxSlot+maxOutboxCopies-1 (outboxSlotFor):
// one slot for all of them would let each source's full copy replace the other's, and a
// node lost while its outbox's copy was the other one's would lose its unsent links.
const outboxSlot = ring.PartitionCount

// maxOutboxCopies bounds the outbox copies a node keeps (one per source; a source's copy
// goes once the source is gone and its links are queued here, or once it stopped sending
// for replicaStaleAfter).
const maxOutboxCopies = 256

// isOutboxSlot tells a local outbox-copy slot from a partition's.
func isOutboxSlot(p uint16) bool { return p >= outboxSlot && p < outboxSlot+maxOutboxCopies }

func replicaPrefix(p uint16) []byte { return []byte{famReplica, byte(p >> 8), byte(p)} }
func replicaMetaKey(p uint16) []byte {
	return []byte{famReplica, byte(p >> 8), byte(p), 0}
}
func replicaKey(p uint16, key []byte) []byte {
	return append(replicaPrefix(p), key...)
}

// replOut is the sender's state of one partition's replication.
type replOut struct {
	backup  string
	version uint64    // acknowledged by backup
	readAt  time.Time // when the acknowledged version was read: the copy is this old
	addedAt time.Time // the copy has every addition (frontier.Completes false) read up to then
}

// A round goes out in two phases: first the additions to every backup, then, only if
// every backup took them, the completions (see round).
const (
	phaseAll    = iota // one request with everything (tests)
	phaseAdd           // additions only; the section ends at its since version
	phaseFinish        // completions, and whole sections for full copies
)

// replicator is a node's replication: sending its partitions and keeping copies of others'.
type replicator struct {
	c        *cluster
	interval time.Duration
	self     string
	db       *badger.DB
	// export is frontier.ExportPartitionSince, or exportOutbox for outboxSlot.
	export func(p uint16, since uint64, fn func(family byte, key, value []byte, deleted bool) error) (uint64, error)
	// exportMany is frontier.View.ExportPartitionsSince from the round's snapshot (nil: every
	// partition goes through export).
	exportMany func(parts []uint16, since uint64, fn func(p uint16, family byte, key, value []byte, deleted bool) error) (uint64, error)

	mu    sync.Mutex
	parts map[uint16]*replOut // held partitions, and outboxSlot
	// copies maps each partition copied here to its source (what fence reads), metas to
	// its meta (what apply checks a delta against): loaded from Badger at the first use,
	// then kept in step by apply and clear.
	copies     map[uint16]string
	metas      map[uint16]replicaMeta
	copiesInit bool
	// outboxes maps each source whose outbox is copied here to its slot (isOutboxSlot);
	// a slot is reserved here before its first copy's meta is written, so two sources'
	// first copies never take the same one.
	outboxes       map[string]uint16
	lastStaleCheck time.Time // promote's last pass over every copy's meta

	zw *zstd.Encoder // send's, reused (sends are sequential)

	// snap is the read snapshot a round's exports read, every partition and the outbox
	// of every backup's request alike, and snapAt when it was taken. Set by round for all
	// its sends (or by encode for itself when called alone); only the goroutine running
	// the round's current encode reads it.
	snap   *frontier.View
	snapAt time.Time
	// scan is what the round read ahead for every backup's request and both phases
	// (prefetch); nil outside a round or when there was nothing to share.
	scan *roundScan
	// changes is the log of the keys committed since the copies' versions (nil: every
	// round takes the full pass).
	changes *changeLog
	// stillHeld reports whether p (a partition, or the outbox) is still this node's to
	// copy: its lease is held here, whether or not a handoff holds it for the moment
	// (nil: nothing left out of a round is kept).
	stillHeld func(p uint16) bool

	// kick asks run for a round now (waitCopied: an acknowledgement waits for it);
	// roundDone is closed, and replaced, when a round ends (under mu).
	kick      chan struct{}
	roundDone chan struct{}

	// Metrics.
	bytesSent, records, rounds, resets, promoted, dropped, failures atomic.Int64
	keyed                                                           atomic.Int64 // partition exports read from the change log's keys
	cutMisses                                                       atomic.Int64 // rounds whose snapshot the change log did not reach in time (full pass)
	logMisses                                                       atomic.Int64 // partition exports whose copy stood below the log's coverage (full pass)
	fullCopies, fullRecords                                         atomic.Int64 // sections sent whole (no copy yet, a new backup, a reset), and their records
	unscanned                                                       atomic.Int64 // delta sections exported on their own (not read ahead by the round)
	skipped                                                         atomic.Int64 // held partitions a round left out (no contact, backup away), copy kept
	logValues, logReads                                             atomic.Int64 // of their keys: values the log held, keys read from the snapshot
	ackUncopied                                                     atomic.Int64 // forwarded links acknowledged before a copy held them (waitCopied gave up)
	lagNanos                                                        atomic.Int64 // the oldest held copy's age at the last round
	lagMax                                                          atomic.Int64 // the largest lagNanos seen
}

func newReplicator(c *cluster, interval time.Duration) *replicator {
	r := &replicator{c: c, interval: interval, self: c.self, db: c.n.db, parts: map[uint16]*replOut{},
		kick: make(chan struct{}, 1), roundDone: make(chan struct{})}
	r.export = r.frontierExport(c.n.front)
	r.stillHeld = func(p uint16) bool {
		if isOutboxSlot(p) {
			return true
		}
		if c.tab.Load() == nil {
			return false
		}
		owner, _ := c.ownerOf(p)
		return owner == c.self
	}
	r.exportMany = func(parts []uint16, since uint64, fn func(uint16, byte, []byte, []byte, bool) error) (uint64, error) {
		return r.snap.ExportPartitionsSince(parts, since, fn)
	}
	r.changes = newChangeLog(r.db)
	return r
}

// frontierExport is the export of a node's partitions (front's, which lives in r.db)
// and of its outbox, from the round's snapshot (r.snap).
func (r *replicator) frontierExport(front *frontier.Frontier) func(uint16, uint64, func(byte, []byte, []byte, bool) error) (uint64, error) {
	return func(p uint16, since uint64, fn func(byte, []byte, []byte, bool) error) (uint64, error) {
		if p == outboxSlot {
			return r.exportOutbox(since, fn)
		}
		return r.snap.ExportPartitionSince(p, since, fn)
	}
}

// openSnap takes the round's read snapshot. The time is read first: the copies made
// from it are at least that old.
func (r *replicator) openSnap() {
	r.snapAt = time.Now()
	r.snap = frontier.OpenView(r.db)
}

func (r *replicator) closeSnap() {
	r.snap.Close()
	r.snap = nil
	r.scan = nil
}

// roundScan is what a round read ahead from its snapshot (version), per partition (and
// outboxSlot) with the version its copy stood at: the changes in export order, for both
// phases of the round and every backup's request. Read from the change log's keys where
// it covers the copy's version, else in one pass per family for the partitions whose
// copies stand at the most common version. Exporting partition by partition cost two
// iterator seeks per partition and family each phase (a CPU profile of
// TestClusterInProcess: Iterator.Rewind 65% of the export), and the one pass steps over
// every version in the memtables (its cost the memtable's size, not the changes').
type roundScan struct {
	version uint64
	parts   map[uint16]scanPart // every partition read ahead, changes or not
}

type scanPart struct {
	since uint64
	recs  []scanRec
}

type scanRec struct {
	fam     byte
	key     []byte
	value   []byte
	deleted bool
}

// of returns the pass's changes of p when the pass covered p from since.
func (sc *roundScan) of(p uint16, since uint64) ([]scanRec, bool) {
	if sc == nil {
		return nil, false
	}
	sp, ok := sc.parts[p]
	if !ok || sp.since != since {
		return nil, false
	}
	return sp.recs, true
}

// maxRoundScanBytes bounds the keys and values a round's shared pass keeps; a larger
// delta (copies far behind) is exported partition by partition, streaming.
const maxRoundScanBytes = 32 << 20

// prefetch reads ahead the changes of the partitions in groups (and the outbox): from
// the change log's keys where it covers the copy's version, then, in one pass per key
// family, those of the rest whose copy stands at the most common version. Called by round
// with the snapshot open.
func (r *replicator) prefetch(ctx context.Context, groups map[string][]uint16) {
	readTs := r.snap.Version()
	sc := &roundScan{version: readTs, parts: map[uint16]scanPart{}}
	size := 0
	errTooLarge := errors.New("round scan too large")
	if r.changes != nil {
		since := map[uint16]uint64{}
		r.mu.Lock()
		for b, parts := range groups {
			for _, p := range parts {
				if st := r.parts[p]; st != nil && st.backup == b && st.version > 0 {
					since[p] = st.version
				}
			}
		}
		r.mu.Unlock()
		cut := len(since) > 0 && r.changes.cut(ctx, readTs)
		if len(since) > 0 && !cut {
			r.cutMisses.Add(1)
		}
		if cut {
		parts:
			for _, p := range slices.Sorted(maps.Keys(since)) {
				keys, ok := r.changes.changed(p, since[p], readTs)
				if !ok {
					r.logMisses.Add(1)
					continue
				}
				var recs []scanRec
				add := func(fam byte, k, v []byte, deleted bool) error {
					size += len(k) + len(v) + 48
					if size > maxRoundScanBytes {
						return errTooLarge
					}
					recs = append(recs, scanRec{fam: fam, key: k, value: v, deleted: deleted})
					return nil
				}
				// The log's key and value are the round's to keep (the log never changes
				// a value in place); a value read is the snapshot's, copied.
				read := func(fam byte, k, v []byte, deleted bool) error { return add(fam, k, slices.Clone(v), deleted) }
				one := make([][]byte, 1)
				var err error
				for _, ck := range keys {
					if ck.deleted {
						r.logValues.Add(1)
						err = add(ck.key[0], ck.key, nil, true)
					} else if ck.val != nil {
						r.logValues.Add(1)
						err = add(ck.key[0], ck.key, ck.val, false)
					} else {
						r.logReads.Add(1)
						one[0] = ck.key
						err = r.snap.ExportKeys(one, read)
					}
					if err != nil {
						break
					}
				}
				switch {
				case errors.Is(err, errTooLarge):
					break parts // the rest go one by one
				case err != nil:
					r.c.log.Debug("replica round: changed-key export failed; partitions go one by one", "err", err)
					break parts
				}
				sc.parts[p] = scanPart{since: since[p], recs: recs}
				r.keyed.Add(1)
			}
		}
	}
	if len(sc.parts) > 0 {
		r.scan = sc
	}
	if r.exportMany == nil || size > maxRoundScanBytes {
		return
	}
	count := map[uint64]int{}
	r.mu.Lock()
	for b, parts := range groups {
		for _, p := range parts {
			if _, done := sc.parts[p]; done {
				continue
			}
			if st := r.parts[p]; p != outboxSlot && st != nil && st.backup == b && st.version > 0 {
				count[st.version]++
			}
		}
	}
	var since uint64
	for v, n := range count {
		if n > count[since] || (n == count[since] && v > since) {
			since = v
		}
	}
	var parts []uint16
	for b, ps := range groups {
		for _, p := range ps {
			if _, done := sc.parts[p]; done {
				continue
			}
			if st := r.parts[p]; p != outboxSlot && st != nil && st.backup == b && st.version == since {
				parts = append(parts, p)
			}
		}
	}
	r.mu.Unlock()
	if since == 0 || len(parts) < 2 {
		return
	}
	pass := make(map[uint16][]scanRec, len(parts))
	version, err := r.exportMany(parts, since, func(p uint16, fam byte, k, v []byte, deleted bool) error {
		size += len(k) + len(v) + 48
		if size > maxRoundScanBytes {
			return errTooLarge
		}
		pass[p] = append(pass[p], scanRec{fam: fam, key: slices.Clone(k), value: slices.Clone(v), deleted: deleted})
		return nil
	})
	if err != nil {
		if !errors.Is(err, errTooLarge) {
			r.c.log.Debug("replica round: shared export failed; partitions go one by one", "err", err)
		}
		return
	}
	if version != readTs {
		return // not the round's snapshot (cannot happen: exportMany reads r.snap)
	}
	for _, p := range parts {
		sc.parts[p] = scanPart{since: since, recs: pass[p]}
	}
	r.scan = sc
}

// copiesLocked returns the copies map, loading it (and metas) on first use; callers
// hold mu.
func (r *replicator) copiesLocked() map[uint16]string {
	if !r.copiesInit {
		r.copies = map[uint16]string{}
		r.metas = map[uint16]replicaMeta{}
		r.outboxes = map[string]uint16{}
		for p, m := range r.held() {
			r.copies[p] = m.Source
			r.metas[p] = m
			if isOutboxSlot(p) {
				r.outboxes[m.Source] = p
			}
		}
		r.copiesInit = true
	}
	return r.copies
}

// outboxSlotFor returns the slot source's outbox copy is kept in here; with alloc (a
// full copy arrives) a free slot is reserved for a source that has none. ok is false
// when source has no slot (a delta without a copy: the sender is asked for a full one)
// or every slot is taken.
func (r *replicator) outboxSlotFor(source string, alloc bool) (uint16, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.copiesLocked()
	if s, ok := r.outboxes[source]; ok {
		return s, true
	}
	if !alloc {
		return 0, false
	}
	taken := make(map[uint16]bool, len(r.outboxes))
	for _, s := range r.outboxes {
		taken[s] = true
	}
	for s := uint16(outboxSlot); isOutboxSlot(s); s++ {
		if _, used := r.metas[s]; !used && !taken[s] {
			r.outboxes[source] = s
			return s, true
		}
	}
	return 0, false
}

// releaseOutboxSlot frees an outbox slot whose copy was dropped or promoted.
func (r *replicator) releaseOutboxSlot(slot uint16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.copiesLocked()
	if _, copied := r.metas[slot]; copied {
		return // a full copy came in meanwhile: the slot is its source's again
	}
	for src, s := range r.outboxes {
		if s == slot {
			delete(r.outboxes, src)
		}
	}
}

// blocked lists the partitions whose copy from a source that is not alive waits to be
// imported: this node must not fetch them before (it would fetch again what the copy
// says the lost node fetched).
func (r *replicator) blocked() map[uint16]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	copies := r.copiesLocked()
	if len(copies) == 0 {
		return nil
	}
	alive := r.c.aliveMembers()
	out := map[uint16]bool{}
	for p, src := range copies {
		if isOutboxSlot(p) {
			continue
		}
		if _, ok := alive[src]; !ok {
			out[p] = true
		}
	}
	return out
}

// noteCopy records p's copy meta as apply committed it (nil: clear deleted the copy).
func (r *replicator) noteCopy(p uint16, m *replicaMeta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.copiesLocked()
	if m == nil {
		delete(c, p)
		delete(r.metas, p)
	} else {
		c[p] = m.Source
		r.metas[p] = *m
	}
}

// run sends a round every interval and checks the copies held here for promotion.
func (r *replicator) run(ctx context.Context) {
	if r.interval <= 0 {
		return
	}
	// Copies are checked for promotion more often than rounds go out (the partition waits
	// unfetched until its copy is in), and on a goroutine of their own: a round can wait
	// seconds on a backup that just died, which must not hold up its partitions' promotion.
	done := make(chan struct{})
	go func() {
		defer close(done)
		check := time.NewTicker(min(r.interval, 200*time.Millisecond))
		defer check.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-check.C:
				r.promote(ctx)
			}
		}
	}()
	defer func() { <-done }()
	if r.changes != nil {
		fed := make(chan struct{})
		r.changes.start()
		go func() {
			defer close(fed)
			r.changes.run(ctx)
		}()
		defer func() { <-fed }()
	}
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	gap := r.minGap()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-r.kick:
		}
		r.round(ctx)
		// Kicked rounds come at most every gap: waiting acknowledgements share them.
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
	}
}

// minGap is the least time between the end of a round and the start of the next.
func (r *replicator) minGap() time.Duration {
	return max(r.interval/2, 20*time.Millisecond)
}

// endRound wakes waitCopied's waiters after a round.
func (r *replicator) endRound() {
	r.mu.Lock()
	close(r.roundDone)
	r.roundDone = make(chan struct{})
	r.mu.Unlock()
}

// waitCopied waits until the backups of parts acknowledged the additions of a round read
// after committed,
// asking for a round at once (run spaces them by minGap). It is what a node does before it
// acknowledges links a peer forwarded (their sender then deletes them): if this node were
// lost right after the acknowledgement, a copy from before the links were committed would
// be promoted and the links would exist nowhere. Partitions without a backup (no other
// live member, replicas off) are not waited for. It gives up after ackCopyWait (a backup
// that is down or far behind must not stop the links from coming in) and reports false.
func (r *replicator) waitCopied(ctx context.Context, parts []uint16, committed time.Time) bool {
	if r.interval <= 0 {
		return true
	}
	timeout := time.NewTimer(ackCopyWait(r.interval))
	defer timeout.Stop()
	for {
		r.mu.Lock()
		ok := true
		for _, p := range parts {
			if st := r.parts[p]; st != nil && !st.addedAt.After(committed) {
				ok = false
				break
			}
		}
		done := r.roundDone
		r.mu.Unlock()
		if ok {
			return true
		}
		select {
		case r.kick <- struct{}{}:
		default:
		}
		select {
		case <-done:
		case <-ctx.Done():
			return false
		case <-timeout.C:
			return false
		}
	}
}

// ackCopyWait bounds waitCopied: a few rounds, within the forward sender's timeout (10 s).
func ackCopyWait(interval time.Duration) time.Duration {
	return min(max(4*interval, 2*time.Second), 5*time.Second)
}

// backups maps each partition this node holds (and may send: no handoff under way) to
// its backup.
func (r *replicator) backups() map[string][]uint16 {
	c := r.c
	if !c.ctl.InContact() {
		return nil
	}
	rg := c.ringNow()
	var others []string
	for _, m := range rg.Members() {
		if m != c.self {
			others = append(others, m)
		}
	}
	if len(others) == 0 {
		return nil
	}
	without := c.ringOf(others)
	alive := c.aliveMembers()
	out := map[string][]uint16{}
	for p := range uint16(ring.PartitionCount) {
		if owner, _ := c.ownerOf(p); owner != c.self || !c.holdsLocal(p) {
			continue
		}
		b := without.Owner(p)
		if _, ok := alive[b]; !ok || b == "" {
			continue
		}
		out[b] = append(out[b], p)
	}
	if ob := outboxBackup(c.self, others, alive); ob != "" {
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
func (r *replicator) keepHeldLocked(groups map[string][]uint16) map[uint16]uint64 {
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
func (r *replicator) round(ctx context.Context) {
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
		lag := int64(time.Since(oldest))
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
				r.c.log.Debug("replication to backup failed; next round retries", "backup", b, "partitions", len(groups[b]), "phase", phase, "err", err)
			}
		}
	}
	r.rounds.Add(1)
	r.endRound()
}

// replicaAnswer is the backup's reply: the versions it now holds and the partitions it
// wants in full.
type replicaAnswer struct {
	Applied map[uint16]uint64 `json:"applied"`
	Resync  []uint16          `json:"resync"`
}

// send streams the deltas of parts to backup b and records what b acknowledged.
func (r *replicator) send(ctx context.Context, b string, parts []uint16, phase int) error {
	base, ok := r.c.internalURL(b)
	if !ok {
		return fmt.Errorf("no address for %s", b)
	}
	versions := make(map[uint16]sent, len(parts))
	pr, pw := io.Pipe()
	cw := &countWriter{w: pw}
	encDone := make(chan struct{})
	go func() {
		defer close(encDone)
		// Rounds go out one at a time: one encoder, reset per request.
		var err error
		if r.zw == nil {
			r.zw, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		zw := r.zw
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+replicaPath, pr)
	if err != nil {
		pr.CloseWithError(err)
		<-encDone
		return err
	}
	req.Header.Set("Content-Type", "application/x-crawlnode-replica")
	r.c.authorize(req)
	resp, err := r.c.client.Do(req)
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
	var ans replicaAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ans); err != nil {
		return fmt.Errorf("%s: bad answer: %w", b, err)
	}
	r.bytesSent.Add(cw.n)
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
func (r *replicator) noteAnswer(b string, phase int, versions map[uint16]sent, ans replicaAnswer) error {
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
func (r *replicator) encode(w *bufio.Writer, parts []uint16, done func(p uint16, version uint64, readAt time.Time)) error {
	return r.encodePhase(w, parts, phaseAll, done)
}

// encodePhase is encode with only the records of one phase (phaseAdd: the additions, each
// section ending at the version it started from, as the copy is not complete beyond it;
// phaseFinish: the completions, and whole sections for full copies, which phaseAdd skips).
func (r *replicator) encodePhase(w *bufio.Writer, parts []uint16, phase int, done func(p uint16, version uint64, readAt time.Time)) error {
	if _, err := w.WriteString(replicaMagic); err != nil {
		return err
	}
	if r.snap == nil {
		r.openSnap()
		defer r.closeSnap()
	}
	readAt := r.snapAt
	writeBytes(w, []byte(r.self))
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
		writeUvarint(w, uint64(p))
		writeUvarint(w, since)
		var n int64
		record := func(fam byte, k, v []byte, deleted bool) error {
			if phase != phaseAll && !full && frontier.Completes(fam, v, deleted) != (phase == phaseFinish) {
				return nil
			}
			n++
			if deleted {
				w.WriteByte(2)
				writeBytes(w, k)
				return nil
			}
			w.WriteByte(1)
			writeBytes(w, k)
			writeBytes(w, v)
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
		writeUvarint(w, version)
		r.records.Add(n)
		done(p, version, readAt)
	}
	return w.WriteByte('E')
}

// exportOutbox is ExportPartitionSince for the outbox's keys.
func (r *replicator) exportOutbox(since uint64, fn func(byte, []byte, []byte, bool) error) (uint64, error) {
	return r.snap.ExportSince(since, fn, []byte{forward.KeyPrefix})
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

func writeUvarint(w *bufio.Writer, v uint64) {
	var b [binary.MaxVarintLen64]byte
	w.Write(b[:binary.PutUvarint(b[:], v)])
}

func writeBytes(w *bufio.Writer, b []byte) {
	writeUvarint(w, uint64(len(b)))
	w.Write(b)
}

// maxReplicaField bounds a key or value in a replica stream (frontier records are small;
// a host meta blob holds a robots.txt of at most 500 KiB).
const maxReplicaField = 4 << 20

func readBytes(r *bufio.Reader, buf []byte) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > maxReplicaField {
		return nil, fmt.Errorf("replica: field of %d bytes", n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err = io.ReadFull(r, buf)
	return buf, err
}

// receive applies a replica stream (the backup's side).
func (r *replicator) receive(w http.ResponseWriter, req *http.Request) {
	zr, err := zstd.NewReader(req.Body, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(64<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_stream", "%v", err)
		return
	}
	defer zr.Close()
	ans, err := r.apply(bufio.NewReaderSize(zr, 64<<10))
	if err != nil {
		// What was applied before the error stays (each partition's meta moves only at
		// its end); the sender resends from its last acknowledged version.
		writeError(w, http.StatusBadRequest, "bad_stream", "replica: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

func (r *replicator) apply(br *bufio.Reader) (replicaAnswer, error) {
	ans := replicaAnswer{Applied: map[uint16]uint64{}}
	magic := make([]byte, len(replicaMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != replicaMagic {
		return ans, fmt.Errorf("not a replica stream")
	}
	src, err := readBytes(br, nil)
	if err != nil {
		return ans, err
	}
	source := string(src)
	// One write batch for the whole stream, flushed at its end: a batch (and a commit
	// to wait for) per partition, and a Badger read of its meta, were most of the apply's
	// own cost with a hundred-odd small sections a request. On an error nothing of the
	// batch is acknowledged; what it committed already (a large batch commits as it
	// grows) is applied again by the resent delta (sets and deletions are idempotent).
	wb := r.db.NewWriteBatch()
	type done struct {
		p, slot uint16 // the partition as sent, where its copy is kept
		meta    replicaMeta
	}
	var applied []done
	fail := func(err error) (replicaAnswer, error) {
		wb.Cancel()
		return replicaAnswer{}, err
	}
	var kbuf, vbuf []byte
	for {
		tag, err := br.ReadByte()
		if err != nil {
			return fail(err)
		}
		if tag == 'E' {
			break
		}
		if tag != 'P' {
			return fail(fmt.Errorf("bad section tag %q", tag))
		}
		pv, err := binary.ReadUvarint(br)
		if err != nil {
			return fail(err)
		}
		if pv > outboxSlot {
			return fail(fmt.Errorf("partition %d out of range", pv))
		}
		p := uint16(pv)
		since, err := binary.ReadUvarint(br)
		if err != nil {
			return fail(err)
		}
		// slot is where p's copy is kept here: p itself, or for an outbox the source's
		// own slot.
		slot, accept := p, true
		if p == outboxSlot {
			// No slot: a delta without a copy here (asked for a full one below), or a
			// full copy with every slot taken (refused, the partitions still apply).
			if slot, accept = r.outboxSlotFor(source, since == 0); !accept && since == 0 && r.c != nil {
				r.c.log.Warn("replica: no room for another outbox copy; refused", "source", source, "kept", maxOutboxCopies)
			}
		}
		meta, _ := r.meta(slot)
		switch {
		case !accept:
		case since == 0:
			// A full copy: what was here of p goes first.
			if err := r.clear(slot); err != nil {
				return fail(err)
			}
			if err := wb.Set(replicaMetaKey(slot), mustJSON(replicaMeta{Source: source})); err != nil {
				return fail(err)
			}
		case meta.Source != source || meta.Version != since:
			accept = false
		}
		for {
			op, err := br.ReadByte()
			if err != nil {
				return fail(err)
			}
			if op == 0 {
				break
			}
			if kbuf, err = readBytes(br, kbuf); err != nil {
				return fail(err)
			}
			if len(kbuf) < 3 || (p == outboxSlot) != (kbuf[0] == forward.KeyPrefix) || (p != outboxSlot && binary.BigEndian.Uint16(kbuf[1:3]) != p) {
				return fail(fmt.Errorf("key of another partition in partition %d", p))
			}
			switch op {
			case 1:
				if vbuf, err = readBytes(br, vbuf); err != nil {
					return fail(err)
				}
				if accept {
					err = wb.Set(replicaKey(slot, kbuf), slices.Clone(vbuf))
				}
			case 2:
				if accept {
					err = wb.Delete(replicaKey(slot, kbuf))
				}
			default:
				return fail(fmt.Errorf("bad record op %d", op))
			}
			if err != nil {
				return fail(err)
			}
		}
		version, err := binary.ReadUvarint(br)
		if err != nil {
			return fail(err)
		}
		if !accept {
			ans.Resync = append(ans.Resync, p)
			continue
		}
		m := replicaMeta{Source: source, Version: version, At: time.Now()}
		if err := wb.Set(replicaMetaKey(slot), mustJSON(m)); err != nil {
			return fail(err)
		}
		applied = append(applied, done{p, slot, m})
	}
	if err := wb.Flush(); err != nil {
		return replicaAnswer{}, err
	}
	for _, d := range applied {
		r.noteCopy(d.slot, &d.meta)
		ans.Applied[d.p] = d.meta.Version
	}
	return ans, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// meta returns p's replica meta (as apply and clear keep it in memory, in step with
// Badger's); ok is false when there is none.
func (r *replicator) meta(p uint16) (replicaMeta, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.copiesLocked()
	m, ok := r.metas[p]
	return m, ok
}

// clear deletes p's copy (meta included).
func (r *replicator) clear(p uint16) error {
	db := r.db
	wb := db.NewWriteBatch()
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: replicaPrefix(p)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := wb.Delete(it.Item().KeyCopy(nil)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		wb.Cancel()
		return err
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	r.noteCopy(p, nil)
	return nil
}

// held lists the partitions this node keeps a copy of, with their metas.
func (r *replicator) held() map[uint16]replicaMeta {
	out := map[uint16]replicaMeta{}
	_ = r.db.View(func(txn *badger.Txn) error {
		for p := range uint16(outboxSlot + maxOutboxCopies) {
			it, err := txn.Get(replicaMetaKey(p))
			if err != nil {
				continue
			}
			var m replicaMeta
			if it.Value(func(v []byte) error { return json.Unmarshal(v, &m) }) == nil {
				out[p] = m
			}
		}
		return nil
	})
	return out
}

// replicaSendTimeout bounds one round's request to one backup.
const replicaSendTimeout = 10 * time.Second

// replicaStaleAfter: a copy whose source still holds the partition but has sent nothing
// for this long went to another backup; it is dropped.
const replicaStaleAfter = 10 * time.Minute

// promote imports the copies whose source lost the partition while gone, and drops the
// copies nobody needs.
func (r *replicator) promote(ctx context.Context) {
	c := r.c
	if !c.ctl.InContact() {
		return
	}
	states := map[string]gossip.Member{}
	for _, m := range c.g.Members() {
		states[m.Name] = m
	}
	r.mu.Lock()
	copies := maps.Clone(r.copiesLocked())
	r.mu.Unlock()
	full := time.Since(r.lastStaleCheck) >= time.Minute
	if full {
		r.lastStaleCheck = time.Now()
	}
	for p, source := range copies {
		if isOutboxSlot(p) {
			r.promoteOutbox(p, states, full)
			continue
		}
		owner, _ := c.ownerOf(p)
		if owner == source && !full {
			continue // the usual case: nothing to do, and no Badger read
		}
		m, ok := r.meta(p)
		if !ok {
			continue
		}
		src, known := states[m.Source]
		alive := known && src.Status == gossip.StatusAlive
		switch {
		case owner == "":
			continue
		case owner == m.Source:
			if alive && !m.At.IsZero() && time.Since(m.At) > replicaStaleAfter {
				r.drop(p, "stale")
			}
			continue
		case alive || (known && src.Status == gossip.StatusLeft):
			// Moved by a handoff (or the source decommissioned): the partition travelled
			// with its lease.
			r.drop(p, "handed off")
			continue
		case m.Version == 0:
			// Incomplete copy: still better than nothing; merge what arrived.
		}
		if err := r.importCopy(ctx, p, m); err != nil {
			if ctx.Err() == nil {
				c.log.Warn("replica: promotion failed; will retry", "partition", p, "source", m.Source, "err", err)
			}
			continue
		}
	}
}

// promoteOutbox queues a lost node's copied outbox (kept in slot) in this node's own,
// once the node is gone past the grace period (the leader removed it from the members)
// or left. The copy of a source that is alive but has sent nothing here for
// replicaStaleAfter (its outbox went to another backup) is dropped, on full passes.
func (r *replicator) promoteOutbox(slot uint16, states map[string]gossip.Member, full bool) {
	c := r.c
	m, ok := r.meta(slot)
	if !ok {
		return
	}
	src, known := states[m.Source]
	if known && src.Status == gossip.StatusAlive {
		if full && !m.At.IsZero() && time.Since(m.At) > replicaStaleAfter {
			r.drop(slot, "stale")
		}
		return
	}
	if registered(c.tab.Load(), m.Source) && !(known && src.Status == gossip.StatusLeft) {
		return // within the grace period: it may come back with its outbox
	}
	var links []forward.Link
	err := c.n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: replicaPrefix(slot)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) <= 3 || k[3] == 0 {
				continue
			}
			if err := it.Item().Value(func(v []byte) error {
				ls, err := forward.EntryLinks(v)
				if err != nil {
					c.log.Warn("replica: bad outbox entry in a copy; skipped", "source", m.Source, "err", err)
					return nil
				}
				links = append(links, ls...)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		c.log.Warn("replica: reading an outbox copy failed; will retry", "source", m.Source, "err", err)
		return
	}
	for len(links) > 0 {
		n := min(len(links), 1000)
		if err := c.out.Add(links[:n]); err != nil {
			c.log.Warn("replica: queueing an outbox copy failed; will retry", "source", m.Source, "err", err)
			return
		}
		links = links[n:]
	}
	if err := r.clear(slot); err != nil {
		return
	}
	r.releaseOutboxSlot(slot)
	r.promoted.Add(1)
	c.log.Warn("replica: a lost node's unsent links are queued here", "source", m.Source)
}

func (r *replicator) drop(p uint16, why string) {
	if err := r.clear(p); err != nil {
		r.c.log.Warn("replica: drop failed", "partition", p, "err", err)
		return
	}
	if isOutboxSlot(p) {
		r.releaseOutboxSlot(p)
	}
	r.dropped.Add(1)
	r.c.log.Debug("replica dropped", "partition", p, "why", why)
}

// importCopy merges p's copy into the local frontier, then deletes it. If this node
// holds p's lease the partition is held (no fetching) during the import; if another node
// does, the sweep ships the merged partition to it.
func (r *replicator) importCopy(ctx context.Context, p uint16, m replicaMeta) error {
	c := r.c
	if owner, _ := c.ownerOf(p); owner == c.self {
		if err := c.acquire(ctx, p, false, 15*time.Second); err != nil {
			return err
		}
		defer c.release(p, false)
	}
	st, err := r.importInto(c.n.front, p)
	if err != nil {
		return err
	}
	if err := r.clear(p); err != nil {
		return err
	}
	r.promoted.Add(1)
	c.log.Warn("replica promoted: a lost node's partition goes on from its copy", "partition", p, "source", m.Source,
		"copy_age", time.Since(m.At).Round(time.Millisecond).String(), "records", st.Records, "queued", st.Queued+st.Retries, "seen_new", st.SeenNew)
	return nil
}

// importInto merges p's copy into front (ImportPartition); the copy stays.
func (r *replicator) importInto(front *frontier.Frontier, p uint16) (frontier.ImportStats, error) {
	txn := r.db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: replicaPrefix(p), PrefetchValues: true, PrefetchSize: 256})
	defer it.Close()
	it.Rewind()
	pre := len(replicaPrefix(p))
	return front.ImportPartition(p, func() (byte, []byte, []byte, error) {
		for it.Valid() {
			item := it.Item()
			k := item.KeyCopy(nil) // the item is valid only until Next
			if len(k) <= pre || k[pre] == 0 {
				it.Next()
				continue // the meta record
			}
			v, err := item.ValueCopy(nil)
			it.Next()
			if err != nil {
				return 0, nil, nil, err
			}
			return k[pre], k[pre:], v, nil
		}
		return 0, nil, nil, io.EOF
	})
}

// ReplicaStats are this node's replication figures.
type ReplicaStats struct {
	Rounds     int64   `json:"rounds"`
	Bytes      int64   `json:"bytes"`
	Records    int64   `json:"records"`
	Resets     int64   `json:"resets"`
	Failures   int64   `json:"failures"`
	Promoted   int64   `json:"promoted"`
	Dropped    int64   `json:"dropped"`
	LagSeconds float64 `json:"lag_seconds"` // age of the oldest copy of a partition held here
	Copies     int     `json:"copies"`      // partitions of others copied here
	// OutboxCopies lists the nodes whose outbox is copied here.
	OutboxCopies []string `json:"outbox_copies"`
}

func (r *replicator) stats() ReplicaStats {
	st := ReplicaStats{
		Rounds: r.rounds.Load(), Bytes: r.bytesSent.Load(), Records: r.records.Load(), Resets: r.resets.Load(),
		Failures: r.failures.Load(), Promoted: r.promoted.Load(), Dropped: r.dropped.Load(),
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
