package frontier

import (
	"encoding/binary"
	"errors"
	"fmt"
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
var exportFamilies = []byte{famQueue, famRetry, famSeen, famDead, famHost, famDedup}

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
// node's frontier (any of the export families): what a sweep compares with the lease table.
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

// ExportPartition calls fn for every key of partition p in the families q, r, s, d, h and D
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

// ExportPartitionSince calls fn for every key of partition p in the families q, r, s, d,
// h and D written or deleted after Badger version since (0: every live key), newest value
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
	v := OpenView(f.db)
	defer v.Close()
	return v.ExportPartitionSince(p, since, fn)
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

// DropPartition deletes every key of partition p (families q, r, s, d, h, D) and forgets its
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
