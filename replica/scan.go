package replica

import (
	"context"
	"errors"
	"maps"
	"slices"
)

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

// errScanTooLarge stops a read-ahead past maxRoundScanBytes.
var errScanTooLarge = errors.New("round scan too large")

// prefetch reads ahead the changes of the partitions in groups (and the outbox): from
// the change log's keys where it covers the copy's version, then, in one pass per key
// family, those of the rest whose copy stands at the most common version. Called by round
// with the snapshot open.
func (r *Replicator) prefetch(ctx context.Context, groups map[string][]uint16) {
	sc := &roundScan{version: r.snap.Version(), parts: map[uint16]scanPart{}}
	size := 0
	if r.changes != nil {
		r.prefetchLogged(ctx, groups, sc, &size)
	}
	if len(sc.parts) > 0 {
		r.scan = sc
	}
	if r.exportMany == nil || size > maxRoundScanBytes {
		return
	}
	r.prefetchShared(groups, sc, &size)
}

// prefetchLogged reads ahead, into sc, the partitions whose copy stands at a version the
// change log covers: just the keys it saw committed since, their values from the log
// where it holds them, else from the snapshot. size counts the bytes kept.
func (r *Replicator) prefetchLogged(ctx context.Context, groups map[string][]uint16, sc *roundScan, size *int) {
	readTs := sc.version
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
	if len(since) == 0 {
		return
	}
	if !r.changes.cut(ctx, readTs) {
		r.cutMisses.Add(1)
		return
	}
	for _, p := range slices.Sorted(maps.Keys(since)) {
		keys, ok := r.changes.changed(p, since[p], readTs)
		if !ok {
			r.logMisses.Add(1)
			continue
		}
		recs, err := r.readChanged(keys, size)
		switch {
		case errors.Is(err, errScanTooLarge):
			return // the rest go one by one
		case err != nil:
			r.log.Debug("replica round: changed-key export failed; partitions go one by one", "err", err)
			return
		}
		sc.parts[p] = scanPart{since: since[p], recs: recs}
		r.keyed.Add(1)
	}
}

// readChanged turns the change log's keys of one partition into the round's records:
// the log's value where it holds the one the snapshot sees, else a read of the key from
// the snapshot. size counts the bytes kept; past maxRoundScanBytes it stops with
// errScanTooLarge.
func (r *Replicator) readChanged(keys []changedKey, size *int) ([]scanRec, error) {
	var recs []scanRec
	add := func(fam byte, k, v []byte, deleted bool) error {
		*size += len(k) + len(v) + 48
		if *size > maxRoundScanBytes {
			return errScanTooLarge
		}
		recs = append(recs, scanRec{fam: fam, key: k, value: v, deleted: deleted})
		return nil
	}
	// The log's key and value are the round's to keep (the log never changes a value in
	// place); a value read is the snapshot's, copied.
	read := func(fam byte, k, v []byte, deleted bool) error { return add(fam, k, slices.Clone(v), deleted) }
	one := make([][]byte, 1)
	for _, ck := range keys {
		var err error
		switch {
		case ck.deleted:
			r.logValues.Add(1)
			err = add(ck.key[0], ck.key, nil, true)
		case ck.val != nil:
			r.logValues.Add(1)
			err = add(ck.key[0], ck.key, ck.val, false)
		default:
			r.logReads.Add(1)
			one[0] = ck.key
			err = r.snap.ExportKeys(one, read)
		}
		if err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// prefetchShared reads ahead, into sc, in one pass per key family, the partitions not
// read yet whose copies stand at the most common version (when there are at least two).
func (r *Replicator) prefetchShared(groups map[string][]uint16, sc *roundScan, size *int) {
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
		*size += len(k) + len(v) + 48
		if *size > maxRoundScanBytes {
			return errScanTooLarge
		}
		pass[p] = append(pass[p], scanRec{fam: fam, key: slices.Clone(k), value: slices.Clone(v), deleted: deleted})
		return nil
	})
	if err != nil {
		if !errors.Is(err, errScanTooLarge) {
			r.log.Debug("replica round: shared export failed; partitions go one by one", "err", err)
		}
		return
	}
	if version != sc.version {
		return // not the round's snapshot (cannot happen: exportMany reads r.snap)
	}
	for _, p := range parts {
		sc.parts[p] = scanPart{since: since, recs: pass[p]}
	}
	r.scan = sc
}
