package frontier

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Partition errors.
var (
	// ErrPartitionBusy: leases of the partition are in flight; pause it and wait for
	// InFlight to reach 0.
	ErrPartitionBusy = errors.New("frontier: partition has leases in flight")
	// ErrForeignKey: an imported key belongs to another partition (or its host maps to
	// another partition under this node's PartitionOf).
	ErrForeignKey = errors.New("frontier: key of another partition")
)

// exportFamilies is the order ExportPartition streams the families in. Import does not
// depend on it for correctness (see ImportPartition), but queue records before seen
// records lets a merge see the queue first, the common case of a handoff.
var exportFamilies = []byte{famQueue, famRetry, famSeen, famDead, famHost}

// ExportFamilies returns the key families (first key byte) the partition exports cover,
// in the order they stream them: a partition's keys are family | partition(2) | rest.
func ExportFamilies() []byte { return slices.Clone(exportFamilies) }

// PartitionOf returns the partition of a host key (Config.PartitionOf).
func (f *Frontier) PartitionOf(host string) uint16 { return f.cfg.PartitionOf(host) }

// pausedLocked reports whether partition p is paused (by the user or a running import or
// drop). Callers hold mu.
func (f *Frontier) pausedLocked(p uint16) bool {
	if len(f.pauseUser) == 0 && len(f.pauseOps) == 0 {
		return false
	}
	return f.pauseUser[p] || f.pauseOps[p] > 0
}

// hostsOfLocked returns the in-memory hosts of partition p (O(hosts)).
func (f *Frontier) hostsOfLocked(p uint16) []*host {
	var hs []*host
	for _, h := range f.hosts {
		if h.part == p {
			hs = append(hs, h)
		}
	}
	return hs
}

// refixLocked re-evaluates the heap slot of every host of p and the retry schedule after
// its pause state changed, and wakes Next.
func (f *Frontier) refixLocked(p uint16) {
	for _, h := range f.hostsOfLocked(p) {
		f.fixLocked(h)
	}
	f.recomputeRetryNextLocked()
	f.signalLocked()
}

// PausePartition stops leasing URLs of p's hosts and moving p's due retries, until
// ResumePartition. Leases already issued stay valid and finish through Done; Add still
// queues URLs of p (they are exported with it, or swept later). Idempotent.
func (f *Frontier) PausePartition(p uint16) {
	f.mu.Lock()
	f.pauseUser[p] = true
	f.refixLocked(p)
	f.mu.Unlock()
}

// ResumePartition lifts PausePartition: p's ready hosts go back into the schedule at once.
func (f *Frontier) ResumePartition(p uint16) {
	f.mu.Lock()
	delete(f.pauseUser, p)
	f.refixLocked(p)
	f.mu.Unlock()
}

// RestPartition keeps every in-memory host of p from being leased before until (a host
// whose next allowed request is later keeps its time). The receiver of a handoff calls it
// after importing the stream the old owner sent while it still held the lease: the
// imported next-allowed times come from the old owner's clock, and its last response
// may still be leaving the server. The rest lives in memory only; a restart takes longer.
func (f *Frontier) RestPartition(p uint16, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := until.UnixNano()
	for _, h := range f.hostsOfLocked(p) {
		if n := deferredUntil(h.nextAt, u, 0); n != h.nextAt {
			h.nextAt = n
			f.fixLocked(h)
		}
	}
}

// Paused reports whether PausePartition is in effect for p.
func (f *Frontier) Paused(p uint16) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pauseUser[p]
}

// InFlight returns how many leases of p's hosts are out (issued by Next, Done not yet
// called). A handoff pauses p and waits for 0 before it exports.
func (f *Frontier) InFlight(p uint16) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inflightLocked(p)
}

func (f *Frontier) inflightLocked(p uint16) int {
	n := 0
	for _, h := range f.hosts {
		if h.part == p {
			n += h.inflight
		}
	}
	return n
}

// beginPartitionOp pauses p for an import or a drop, waits for a refill of one of its
// hosts that started before the pause, and refuses while p has leases in flight. The
// caller holds partitionOpMu and calls endPartitionOp when done (also after an error).
func (f *Frontier) beginPartitionOp(p uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		f.pauseOps[p]++ // endPartitionOp undoes it
		return ErrClosed
	}
	f.pauseOps[p]++
	f.refixLocked(p)
	for {
		loading := false
		for _, h := range f.hostsOfLocked(p) {
			loading = loading || h.loading
		}
		if !loading {
			break
		}
		f.mu.Unlock()
		time.Sleep(time.Millisecond) // a refill takes one short Badger scan
		f.mu.Lock()
	}
	if n := f.inflightLocked(p); n > 0 {
		return fmt.Errorf("%w: partition %d has %d", ErrPartitionBusy, p, n)
	}
	return nil
}

func (f *Frontier) endPartitionOp(p uint16) {
	f.mu.Lock()
	if f.pauseOps[p]--; f.pauseOps[p] <= 0 {
		delete(f.pauseOps, p)
	}
	f.refixLocked(p)
	f.mu.Unlock()
}

// Partitions returns, in ascending order, the partitions that have any key in this
// node's frontier (any of the five families): what a sweep compares with the lease table.
// It seeks from partition to partition, so it costs one seek per partition present.
func (f *Frontier) Partitions() ([]uint16, error) {
	present := make(map[uint16]bool)
	err := f.db.View(func(txn *badger.Txn) error {
		for _, fam := range exportFamilies {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{fam}}) // keys only
			for it.Seek(famPrefix(fam, 0)); it.Valid(); {
				k := it.Item().Key()
				if len(k) < 3 {
					it.Next()
					continue
				}
				p := binary.BigEndian.Uint16(k[1:3])
				present[p] = true
				if p == 0xffff {
					break
				}
				it.Seek(famPrefix(fam, p+1))
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("frontier: partitions: %w", err)
	}
	out := make([]uint16, 0, len(present))
	for p := range present {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// ExportPartition calls fn for every key of partition p in the families q, r, s, d and h
// (in that order, keys ascending within a family), from one consistent Badger read
// snapshot. key and value are valid only during the call. An error from fn stops the
// export and is returned as is (wrapped).
//
// The in-memory host records of p (their politeness clocks) are written first.
//
// For a handoff, pause p and wait for InFlight(p) == 0 first: a leased URL is exported as
// queued, so exporting a partition that is still being fetched may fetch those URLs
// twice (never loses them). A plain backup may export a live partition.
//
// It uses a transaction iterator rather than Badger's Stream: one partition is a single
// prefix range, the snapshot stream is sequential anyway, and the order (queues first)
// is useful to the receiver.
func (f *Frontier) ExportPartition(p uint16, fn func(family byte, key, value []byte) error) error {
	// The hosts' politeness clocks (next allowed request) live in memory and are written
	// to Badger only now and then: write p's first, so the receiver knows when each host
	// was last fetched here and waits its delay from there.
	f.mu.Lock()
	var names []string
	for _, h := range f.hostsOfLocked(p) {
		names = append(names, h.name)
	}
	f.mu.Unlock()
	if len(names) > 0 {
		if err := f.persistHosts(names...); err != nil {
			return fmt.Errorf("frontier: export partition %d: %w", p, err)
		}
	}
	err := f.db.View(func(txn *badger.Txn) error {
		for _, fam := range exportFamilies {
			it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 256, Prefix: famPrefix(fam, p)})
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				k := item.Key()
				if err := item.Value(func(v []byte) error { return fn(fam, k, v) }); err != nil {
					it.Close()
					return err
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("frontier: export partition %d: %w", p, err)
	}
	return nil
}

// ExportPartitionSince calls fn for every key of partition p in the families q, r, s, d
// and h written or deleted after Badger version since (0: every live key), newest value
// per key, deleted=true (value nil) for a key deleted since. It returns the read version
// of the snapshot it exported: pass it as since next time, and the calls together carry
// every change in order (what a replica applies).
//
// It does not write the in-memory host clocks first (ExportPartition does): a replica
// only needs them roughly, and writing them every round would ship every host record
// every round. A deletion whose tombstone compaction has already discarded is missed;
// the replica then keeps a stale q or r key, which the s record's final state overrides
// when the replica is imported (ImportPartition's merge rules), at worst one repeated
// fetch, never a lost URL.
func (f *Frontier) ExportPartitionSince(p uint16, since uint64, fn func(family byte, key, value []byte, deleted bool) error) (uint64, error) {
	txn := f.db.NewTransaction(false)
	defer txn.Discard()
	return f.ExportPartitionSinceTxn(txn, p, since, fn)
}

// ExportPartitionSinceTxn is ExportPartitionSince reading from txn, a read transaction of
// the frontier's DB (Config.DB) that the caller discards. Exports of several partitions
// (and of other keys of the DB) from one txn are one consistent cut: a URL queued in one
// partition by a page recorded fetched in another (a redirect, a link) is in the cut if
// the fetch is. A replica built from separate snapshots could show the page fetched and
// not the link, and lose the link when it is promoted.
func (f *Frontier) ExportPartitionSinceTxn(txn *badger.Txn, p uint16, since uint64, fn func(family byte, key, value []byte, deleted bool) error) (uint64, error) {
	prefixes := make([][]byte, len(exportFamilies))
	for i, fam := range exportFamilies {
		prefixes[i] = famPrefix(fam, p)
	}
	readTs, err := ExportSinceTxn(txn, since, fn, prefixes...)
	if err != nil {
		return 0, fmt.Errorf("frontier: export partition %d since %d: %w", p, since, err)
	}
	return readTs, nil
}

// Completes reports whether a change that ExportSince reports (family, value, deleted)
// completes work rather than adds it: a deletion (a URL leaving its queue, an outbox
// entry its owner acknowledged) or a seen record in a final state (fetched, dropped,
// dead). Every other change adds: queued seen records, q and r records, host state,
// dead letters, outbox entries. A copy that has a round's additions before any of its
// completions never shows a page fetched without the links the fetch queued.
func Completes(family byte, value []byte, deleted bool) bool {
	if deleted {
		return true
	}
	if family != famSeen {
		return false
	}
	sr, err := decodeSeen(value)
	return err == nil && sr.State != StateQueued
}

// ExportSince calls fn, prefix by prefix from one read snapshot, for every key under the
// prefixes written or deleted after Badger version since (0: every live key), newest
// value per key, deleted=true for a deletion; fn's family is the key's first byte. It
// returns the snapshot's read version (the next call's since).
func ExportSince(db *badger.DB, since uint64, fn func(family byte, key, value []byte, deleted bool) error, prefixes ...[]byte) (uint64, error) {
	txn := db.NewTransaction(false)
	defer txn.Discard()
	return ExportSinceTxn(txn, since, fn, prefixes...)
}

// ExportSinceTxn is ExportSince reading from the read transaction txn (its snapshot).
func ExportSinceTxn(txn *badger.Txn, since uint64, fn func(family byte, key, value []byte, deleted bool) error, prefixes ...[]byte) (uint64, error) {
	return exportSinceTxn(txn, since, nil, fn, prefixes...)
}

// ExportKeysTxn calls fn, in the order of keys, for each key as the read transaction
// txn's snapshot holds it: its value, or deleted=true (value nil) when the snapshot has
// no live version of it. Given exactly the keys that have a version in (since,
// txn.ReadTs()], it reports what ExportSinceTxn(txn, since, ...) reports for them,
// without stepping over the versions of every other key (what a replica round does with
// the keys it saw committed; see node/replica.go).
func ExportKeysTxn(txn *badger.Txn, keys [][]byte, fn func(family byte, key, value []byte, deleted bool) error) error {
	for _, k := range keys {
		item, err := txn.Get(k)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			err = fn(k[0], k, nil, true)
		case err != nil:
			return fmt.Errorf("frontier: export keys: %w", err)
		default:
			err = item.Value(func(v []byte) error { return fn(k[0], k, v, false) })
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// exportSinceTxn is ExportSinceTxn that skips, value unread, every key keep refuses
// (nil keeps all).
func exportSinceTxn(txn *badger.Txn, since uint64, keep func(key []byte) bool, fn func(family byte, key, value []byte, deleted bool) error, prefixes ...[]byte) (uint64, error) {
	readTs := txn.ReadTs()
	for _, prefix := range prefixes {
		// With since > 0 every version is read: deletions are versions too.
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, SinceTs: since, AllVersions: since > 0})
		var last []byte
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()
			if last != nil && bytes.Equal(k, last) {
				continue // an older version of the key just sent
			}
			last = append(last[:0], k...)
			if keep != nil && !keep(k) {
				continue
			}
			var err error
			switch {
			case item.IsDeletedOrExpired() && since == 0:
			case item.IsDeletedOrExpired():
				err = fn(k[0], k, nil, true)
			default:
				err = item.Value(func(v []byte) error { return fn(k[0], k, v, false) })
			}
			if err != nil {
				it.Close()
				return readTs, err
			}
		}
		it.Close()
	}
	return readTs, nil
}

// ExportPartitionsSinceTxn is ExportPartitionSinceTxn for every partition in parts at
// once, all from one since > 0: one iterator per family over all partitions instead of
// one per partition and family. Positioning an iterator (a seek in every memtable and
// every table newer than since) is most of the cost of a small delta, and a replica
// round exports a hundred partitions or more, most with a handful of changes. fn
// receives each change with its partition; a partition's changes come in the order
// ExportPartitionSinceTxn gives them (family by family, keys in order). Keys of
// partitions not in parts are skipped. It returns the read version of txn.
func (f *Frontier) ExportPartitionsSinceTxn(txn *badger.Txn, parts []uint16, since uint64, fn func(p uint16, family byte, key, value []byte, deleted bool) error) (uint64, error) {
	if since == 0 {
		return 0, errors.New("frontier: export partitions: since must be > 0 (a full copy goes partition by partition)")
	}
	want := make([]bool, 1<<16)
	for _, p := range parts {
		want[p] = true
	}
	prefixes := make([][]byte, len(exportFamilies))
	for i, fam := range exportFamilies {
		prefixes[i] = []byte{fam}
	}
	keep := func(k []byte) bool { return len(k) >= 3 && want[binary.BigEndian.Uint16(k[1:3])] }
	readTs, err := exportSinceTxn(txn, since, keep, func(fam byte, k, v []byte, deleted bool) error {
		return fn(binary.BigEndian.Uint16(k[1:3]), fam, k, v, deleted)
	}, prefixes...)
	if err != nil {
		return readTs, fmt.Errorf("frontier: export partitions since %d: %w", since, err)
	}
	return readTs, nil
}

// ImportStats says what ImportPartition did with the records it read.
type ImportStats struct {
	Records      int // records read
	Queued       int // q records added to a local queue
	Retries      int // r records added to the local retry set
	QueueKept    int // q/r records not added: the URL was already queued, waiting or final here
	SeenNew      int // s records written where this node had none
	SeenUpdated  int // local s records replaced by a more advanced (or later final) one
	SeenKept     int // local s records kept (as advanced or later)
	Unqueued     int // local queued URLs removed because the import says they are final
	Orphans      int // "queued" s records that came without their q/r record: not marked seen
	Dead         int // dead letters added
	DeadKept     int // dead letters already here
	Hosts        int // host records merged
	HostMeta     int // host meta blobs adopted (this node had none)
	HostMetaKept int // host meta blobs kept (this node had one)
	Chunks       int // write batches committed
}

// importChunkRecords and importChunkBytes bound what one import step holds in memory and
// holds addMu for.
const (
	importChunkRecords = 4096
	importChunkBytes   = 8 << 20
)

type rawRec struct {
	fam  byte
	k, v []byte
}

// ImportPartition merges a stream of partition p's records (as written by ExportPartition
// on another node) into this frontier. next returns the records and io.EOF at the end;
// any other error aborts the import and is returned (wrapped), after the records read so
// far are applied: the merge is idempotent, so the sender simply retries the whole
// stream. A truncated or corrupt stream must therefore surface as an error from next,
// never as io.EOF (snapshot.Reader does that).
//
// Merge rules (idempotent: importing the same stream twice changes nothing the second time):
//   - q and r records: added only if this node has no seen record for the URL. Every
//     writer of a "queued" seen record writes the URL's q or r key in the same
//     transaction, so a seen record means the URL is queued, waiting, leased or final
//     here, and a URL is never queued twice. Imported entries get fresh local sequence
//     numbers (keeping their priority, depth and relative order), so they cannot collide
//     with local keys.
//   - s records: union; when both sides have one, the more advanced state wins
//     (fetched/dropped/dead beat queued) and of two finals the later At. A final record
//     that beats a local "queued" one also removes the URL from the local queue or retry
//     set (found in an index of p's local q/r keys, built when first needed; a URL that
//     Add queues after that stays queued and may be fetched once more, never lost). A "queued" record whose URL has no
//     local record is not written (an orphan without its q/r record would be a URL marked
//     seen that no queue holds).
//   - d records: union (a local dead letter is kept).
//   - h records: the more cautious politeness: the later next-allowed time, the longer
//     delay when both sides set one (else the one that is set), the larger admitted and
//     generated counters. The host meta blob (robots.txt) is kept if present, else adopted.
//
// The import pauses p while it runs and refuses (ErrPartitionBusy) while p has leases in
// flight here. It works in chunks of at most importChunkRecords records; each chunk holds
// addMu (Adds wait) while it reads the local state and commits. After each chunk the
// in-memory state (host structs, counters, Bloom filter, prefetch buffers) includes the
// chunk, so Next and Add see imported data at once when p is not paused by the caller.
func (f *Frontier) ImportPartition(p uint16, next func() (family byte, key, value []byte, err error)) (ImportStats, error) {
	var st ImportStats
	f.partitionOpMu.Lock()
	defer f.partitionOpMu.Unlock()
	err := f.beginPartitionOp(p)
	defer f.endPartitionOp(p)
	if err != nil {
		return st, fmt.Errorf("frontier: import partition %d: %w", p, err)
	}
	im := &importer{f: f, p: p, st: &st, newHosts: map[string]bool{}}
	defer im.fixChildren()
	var chunk []rawRec
	size := 0
	for {
		fam, k, v, rerr := next()
		if rerr == nil {
			st.Records++
			chunk = append(chunk, rawRec{fam, slices.Clone(k), slices.Clone(v)})
			size += len(k) + len(v)
			if len(chunk) < importChunkRecords && size < importChunkBytes {
				continue
			}
		}
		if len(chunk) > 0 {
			if err := im.apply(chunk); err != nil {
				return st, fmt.Errorf("frontier: import partition %d: %w", p, err)
			}
			st.Chunks++
			chunk, size = chunk[:0], 0
		}
		if rerr == io.EOF { //nolint:errorlint // only the bare io.EOF ends a stream; a wrapped one is a failure
			return st, nil
		}
		if rerr != nil {
			return st, fmt.Errorf("frontier: import partition %d: stream: %w", p, rerr)
		}
	}
}

// importer is the state of one ImportPartition.
type importer struct {
	f  *Frontier
	p  uint16
	st *ImportStats
	// local maps the URL hash of every q/r key of p that existed when first needed (a
	// final import record beat a local "queued" one) to that key; built lazily, updated
	// with what the import adds. Memory: one entry per locally queued URL of p, usually
	// few on a receiver that did not own p.
	local    map[[16]byte]localRef
	newHosts map[string]bool
}

type localRef struct {
	key   []byte
	host  string
	retry bool
}

// revisit says the key schedules a fetched URL's next visit (an r key with the revisit
// bit, or a q key in the revisit band): its seen record is final by design, so a final
// seen record does not unqueue it.
func (r localRef) revisit() bool {
	if r.retry {
		_, _, seq, _ := parseRKey(r.key)
		return seq&revisitBit != 0
	}
	return prioOfKey(r.key) == bandRevisit
}

// effect is what one committed write group changes in memory.
type effect struct {
	kind    int
	host    string
	it      item   // effQueue: the new q key and record
	delKey  []byte // effUnqueue: the removed local q or r key
	retry   bool   // effUnqueue: delKey is an r key
	due     int64  // effRetry
	seenNew bool   // a new s key was written (seen+1, Bloom)
	hash    [16]byte
}

const (
	effNone = iota
	effQueue
	effRetry
	effUnqueue
	effDead
)

type seenState struct {
	rec    SeenRecord
	exists bool
}

// apply merges one chunk. It holds addMu (no Add confirms or writes meanwhile), hostRecMu (host
// records) and retryScanMu (no retry moves) from the local reads to the in-memory update.
func (im *importer) apply(chunk []rawRec) error {
	f := im.f
	f.addMu.Lock()
	defer f.addMu.Unlock()
	f.hostRecMu.Lock()
	defer f.hostRecMu.Unlock()
	f.retryScanMu.Lock()
	defer f.retryScanMu.Unlock()

	type group struct {
		ops []op
		eff effect
	}
	var groups []group
	var metaKeys [][]byte
	// pending seen state of URLs written earlier in this chunk
	pend := make(map[[16]byte]seenState)
	var hostRecs []struct {
		name string
		rec  hostRec
	}

	err := f.db.View(func(txn *badger.Txn) error {
		localSeen := func(h [16]byte) (seenState, error) {
			if s, ok := pend[h]; ok {
				return s, nil
			}
			it, err := txn.Get(hashKey(famSeen, im.p, h))
			if errors.Is(err, badger.ErrKeyNotFound) {
				return seenState{}, nil
			}
			if err != nil {
				return seenState{}, err
			}
			var sr SeenRecord
			err = it.Value(func(v []byte) error {
				var derr error
				sr, derr = decodeSeen(v)
				return derr
			})
			return seenState{rec: sr, exists: true}, err
		}
		exists := func(k []byte) (bool, error) {
			_, err := txn.Get(k)
			if errors.Is(err, badger.ErrKeyNotFound) {
				return false, nil
			}
			return err == nil, err
		}
		for _, r := range chunk {
			if len(r.k) < 3 || r.k[0] != r.fam {
				return fmt.Errorf("%w: key of family %q does not start with it", ErrCorrupt, r.fam)
			}
			if binary.BigEndian.Uint16(r.k[1:3]) != im.p {
				return fmt.Errorf("%w: key of partition %d", ErrForeignKey, binary.BigEndian.Uint16(r.k[1:3]))
			}
			switch r.fam {
			case famQueue, famRetry:
				var qk []byte
				var rec qrec
				var due int64
				var rseq uint64
				var err error
				if r.fam == famQueue {
					qk = r.k
					rec, err = decodeQrec(r.v)
				} else {
					var ok bool
					if _, due, rseq, ok = parseRKey(r.k); !ok {
						return fmt.Errorf("%w: retry key", ErrCorrupt)
					}
					qk, rec, err = decodeR(r.v)
				}
				if err != nil {
					return err
				}
				hn, _, ok := parseQKey(qk)
				if !ok || binary.BigEndian.Uint16(qk[1:3]) != im.p {
					return fmt.Errorf("%w: queue key", ErrCorrupt)
				}
				if f.cfg.PartitionOf(hn) != im.p {
					return fmt.Errorf("%w: host %q maps to partition %d here", ErrForeignKey, hn, f.cfg.PartitionOf(hn))
				}
				hash := URLHash(rec.URL)
				ls, err := localSeen(hash)
				if err != nil {
					return err
				}
				if ls.exists {
					im.st.QueueKept++
					continue
				}
				nk := binary.BigEndian.AppendUint64(slices.Clone(qk[:len(qk)-8]), f.seq.Add(1))
				sr := SeenRecord{URL: rec.URL, State: StateQueued, At: f.cfg.Now(), QKey: nk}
				pend[hash] = seenState{rec: sr, exists: true}
				g := group{ops: []op{{k: hashKey(famSeen, im.p, hash), v: sr.encode()}}}
				g.eff = effect{host: hn, seenNew: true, hash: hash}
				if r.fam == famQueue {
					g.ops = append(g.ops, op{k: nk, v: rec.encode()})
					g.eff.kind, g.eff.it = effQueue, item{key: nk, rec: rec}
				} else {
					rk := rKey(im.p, due, f.seq.Add(1)|rseq&revisitBit)
					g.ops = append(g.ops, op{k: rk, v: encodeR(nk, &rec)})
					g.eff.kind, g.eff.due, g.eff.delKey = effRetry, due, rk
				}
				groups = append(groups, g)
			case famSeen:
				if len(r.k) != 19 {
					return fmt.Errorf("%w: seen key", ErrCorrupt)
				}
				sr, err := decodeSeen(r.v)
				if err != nil {
					return err
				}
				var hash [16]byte
				copy(hash[:], r.k[3:])
				ls, err := localSeen(hash)
				if err != nil {
					return err
				}
				switch {
				case !ls.exists && sr.State == StateQueued:
					im.st.Orphans++
				case !ls.exists:
					pend[hash] = seenState{rec: sr, exists: true}
					groups = append(groups, group{ops: []op{{k: r.k, v: r.v}}, eff: effect{seenNew: true, hash: hash}})
					im.st.SeenNew++
				case !seenWins(ls.rec, sr):
					im.st.SeenKept++
				default:
					pend[hash] = seenState{rec: sr, exists: true}
					g := group{ops: []op{{k: r.k, v: r.v}}}
					if ls.rec.State == StateQueued {
						ref, ok, err := im.localRef(txn, hash)
						if err != nil {
							return err
						}
						if ok && !ref.revisit() {
							if present, err := exists(ref.key); err != nil {
								return err
							} else if present {
								g.ops = append(g.ops, op{k: ref.key, del: true})
								g.eff = effect{kind: effUnqueue, host: ref.host, delKey: ref.key, retry: ref.retry}
								delete(im.local, hash)
							}
						}
					}
					groups = append(groups, g)
					im.st.SeenUpdated++
				}
			case famDead:
				if len(r.k) != 19 {
					return fmt.Errorf("%w: dead key", ErrCorrupt)
				}
				if _, err := decodeDead(r.v); err != nil {
					return err
				}
				ok, err := exists(r.k)
				if err != nil {
					return err
				}
				if ok {
					im.st.DeadKept++
					continue
				}
				groups = append(groups, group{ops: []op{{k: r.k, v: r.v}}, eff: effect{kind: effDead}})
				im.st.Dead++
			case famHost:
				rest := r.k[3:]
				if i := bytes.IndexByte(rest, 0); i >= 0 {
					if !bytes.Equal(rest[i:], []byte{0, 'm'}) || i == 0 {
						return fmt.Errorf("%w: host key", ErrCorrupt)
					}
					if f.cfg.PartitionOf(string(rest[:i])) != im.p {
						return fmt.Errorf("%w: host %q", ErrForeignKey, rest[:i])
					}
					ok, err := exists(r.k)
					if err != nil {
						return err
					}
					if ok || slices.ContainsFunc(metaKeys, func(k []byte) bool { return bytes.Equal(k, r.k) }) {
						im.st.HostMetaKept++
						continue
					}
					metaKeys = append(metaKeys, r.k)
					groups = append(groups, group{ops: []op{{k: r.k, v: r.v}}})
					im.st.HostMeta++
					continue
				}
				if len(rest) == 0 {
					return fmt.Errorf("%w: host key", ErrCorrupt)
				}
				if f.cfg.PartitionOf(string(rest)) != im.p {
					return fmt.Errorf("%w: host %q", ErrForeignKey, rest)
				}
				hr, err := decodeHost(r.v)
				if err != nil {
					return err
				}
				hostRecs = append(hostRecs, struct {
					name string
					rec  hostRec
				}{string(rest), hr})
			default:
				return fmt.Errorf("%w: unknown family %q", ErrCorrupt, r.fam)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}

	// Host records merge with the in-memory state (which is newer than Badger's: next is
	// not persisted at every lease) and are written as merged.
	f.mu.Lock()
	for _, hr := range hostRecs {
		h := im.hostLocked(hr.name)
		m := mergeHost(h.rec(), hr.rec)
		h.delay, h.delaySet, h.nextAt, h.admitted, h.generated = m.Delay, m.DelaySet, m.Next, m.Admitted, m.Generated
		groups = append(groups, group{ops: []op{{k: hKey(im.p, hr.name), v: m.encode()}}})
		im.st.Hosts++
	}
	for _, g := range groups {
		if g.eff.kind == effQueue {
			im.hostLocked(g.eff.host)
			f.committing[string(g.eff.it.key)] = struct{}{}
		}
	}
	f.mu.Unlock()

	b := newBatch(f.db)
	defer b.discard()
	for _, g := range groups {
		if err = b.group(g.ops...); err != nil {
			break
		}
	}
	if err == nil {
		err = b.commit()
	}
	done := groups[:min(b.commited, len(groups))]

	f.bloomMu.Lock()
	for _, g := range done {
		if g.eff.seenNew {
			f.bloom.add(im.p, g.eff.hash) // (not cached: an import's URLs are not links met just now)
		}
	}
	f.bloomMu.Unlock()

	f.mu.Lock()
	for _, g := range groups {
		if g.eff.kind == effQueue {
			delete(f.committing, string(g.eff.it.key))
		}
	}
	for _, g := range done {
		e := g.eff
		if e.seenNew {
			f.seen++
		}
		switch e.kind {
		case effQueue:
			h := im.hostLocked(e.host)
			h.queued++
			f.queued++
			if prioOfKey(e.it.key) == bandRevisit {
				h.revisits++
				f.revisitQueued++
			}
			f.insertLocked(h, e.it)
			f.fixLocked(h)
			im.noteLocal(e.hash, localRef{key: e.it.key, host: e.host})
			im.st.Queued++
		case effRetry:
			if (localRef{key: e.delKey, retry: true}).revisit() {
				f.revisitPending++
			} else {
				f.retryPending++
			}
			f.noteRetryLocked(im.p, e.due)
			im.noteLocal(e.hash, localRef{key: e.delKey, host: e.host, retry: true})
			im.st.Retries++
		case effUnqueue:
			if e.retry {
				f.retryPending--
			} else {
				h := im.hostLocked(e.host)
				h.queued--
				f.queued--
				if prioOfKey(e.delKey) == bandRevisit {
					h.revisits--
					f.revisitQueued--
				}
				h.queueGen++
				if i := slices.IndexFunc(h.prefetch, func(it item) bool { return bytes.Equal(it.key, e.delKey) }); i >= 0 {
					h.prefetch = slices.Delete(h.prefetch, i, i+1)
				}
				f.fixLocked(h)
			}
			im.st.Unqueued++
		case effDead:
			f.dead++
		}
	}
	f.signalLocked()
	f.mu.Unlock()
	return err
}

// hostLocked is Frontier.hostLocked that remembers which hosts the import created.
func (im *importer) hostLocked(name string) *host {
	if im.f.hosts[name] == nil {
		im.newHosts[name] = true
	}
	return im.f.hostLocked(name)
}

func (im *importer) noteLocal(h [16]byte, r localRef) {
	if im.local != nil {
		im.local[h] = r
	}
}

// localRef finds the local q or r key of a URL of p, building the index on first use.
func (im *importer) localRef(txn *badger.Txn, h [16]byte) (localRef, bool, error) {
	if im.local == nil {
		im.local = make(map[[16]byte]localRef)
		for _, fam := range []byte{famQueue, famRetry} {
			it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 256, Prefix: famPrefix(fam, im.p)})
			for it.Rewind(); it.Valid(); it.Next() {
				v, err := it.Item().ValueCopy(nil)
				if err != nil {
					it.Close()
					return localRef{}, false, err
				}
				var rec qrec
				qk := it.Item().KeyCopy(nil)
				if fam == famQueue {
					rec, err = decodeQrec(v)
				} else {
					qk, rec, err = decodeR(v)
				}
				if err != nil {
					it.Close()
					return localRef{}, false, err
				}
				hn, _, _ := parseQKey(qk)
				ref := localRef{key: it.Item().KeyCopy(nil), host: hn, retry: fam == famRetry}
				im.local[URLHash(rec.URL)] = ref
			}
			it.Close()
		}
	}
	r, ok := im.local[h]
	return r, ok, nil
}

// fixChildren counts the subdomain children (MaxSubdomains) the import's new hosts add.
func (im *importer) fixChildren() {
	if len(im.newHosts) == 0 {
		return
	}
	f := im.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for name := range f.hosts {
		parent := parentHost(name)
		if ph := f.hosts[parent]; ph != nil && (im.newHosts[name] || im.newHosts[parent]) {
			ph.children++
		}
	}
}

// seenWins reports whether an imported seen record replaces the local one: a final state
// (fetched, dropped, dead) beats queued; of two finals the later At wins (ties keep the
// local one); of two queued the local one stays.
func seenWins(local, imported SeenRecord) bool {
	lf, inf := local.State != StateQueued, imported.State != StateQueued
	switch {
	case lf && inf:
		return imported.At.After(local.At)
	case inf:
		return true
	default:
		return false
	}
}

// DropPartition deletes every key of partition p (families q, r, s, d, h) and forgets its
// hosts in memory. It refuses (ErrPartitionBusy) while leases of p are in flight. A
// handoff calls it only after the receiver committed the import and the lease moved
// (copy, acknowledge, then delete); the pause state set by PausePartition is kept.
//
// The keys are deleted with ordinary write transactions (tombstones that compaction
// reclaims), not Badger's DropPrefix: in badger v4 DropPrefix blocks every write to the
// whole DB while it flushes and compacts, and concurrent writers (other partitions' Add
// and Done, the node's own keys in the same DB) fail with ErrBlockedWrites instead of
// waiting. Adds wait (addMu) while the drop runs.
//
// The Bloom filter keeps the dropped hashes' bits: that only costs a Badger lookup for a
// URL that comes back later, never a lost URL (every "maybe" is confirmed). The seen
// cache, whose hits are trusted without a lookup, is cleared.
func (f *Frontier) DropPartition(p uint16) error {
	f.partitionOpMu.Lock()
	defer f.partitionOpMu.Unlock()
	err := f.beginPartitionOp(p)
	defer f.endPartitionOp(p)
	if err != nil {
		return fmt.Errorf("frontier: drop partition %d: %w", p, err)
	}
	f.addMu.Lock()
	defer f.addMu.Unlock()
	f.hostRecMu.Lock()
	defer f.hostRecMu.Unlock()
	f.retryScanMu.Lock()
	defer f.retryScanMu.Unlock()

	type del struct {
		fam  byte
		key  []byte
		host string
	}
	b := newBatch(f.db)
	defer b.discard()
	var dels []del
	err = f.db.View(func(txn *badger.Txn) error {
		for _, fam := range exportFamilies {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: famPrefix(fam, p)})
			for it.Rewind(); it.Valid(); it.Next() {
				d := del{fam: fam, key: it.Item().KeyCopy(nil)}
				if fam == famQueue {
					d.host, _, _ = parseQKey(d.key)
				}
				if err := b.group(op{k: d.key, del: true}); err != nil {
					it.Close()
					return err
				}
				dels = append(dels, d)
			}
			it.Close()
		}
		return nil
	})
	if err == nil {
		err = b.commit()
	}
	done := dels[:min(b.commited, len(dels))]
	f.cache.reset()
	f.seenIdx.drop(p) // after the commit: runs read before it no longer answer for p

	f.mu.Lock()
	defer f.mu.Unlock()
	perHost := make(map[string]int)
	for _, d := range done {
		switch d.fam {
		case famQueue:
			perHost[d.host]++
			if prioOfKey(d.key) == bandRevisit {
				f.revisitQueued--
				if h := f.hosts[d.host]; h != nil {
					h.revisits--
				}
			}
		case famRetry:
			if (localRef{key: d.key, retry: true}).revisit() {
				f.revisitPending--
			} else {
				f.retryPending--
			}
		case famSeen:
			f.seen--
		case famDead:
			f.dead--
		}
	}
	if err != nil {
		// Partly deleted: keep the hosts, with counts that match what is left.
		for name, n := range perHost {
			if h := f.hosts[name]; h != nil {
				h.queued -= n
				f.queued -= n
				h.prefetch, h.cursor, h.loadLow = nil, nil, nil
				h.queueGen++
			}
		}
		return fmt.Errorf("frontier: drop partition %d: %w", p, err)
	}
	for _, h := range f.hostsOfLocked(p) {
		f.queued -= h.queued
		f.unheapLocked(h)
		if ph := f.hosts[parentHost(h.name)]; ph != nil && ph.part != p {
			ph.children--
		}
		delete(f.hosts, h.name)
	}
	delete(f.retryDue, p)
	delete(f.retryFloor, p)
	f.recomputeRetryNextLocked()
	return nil
}
