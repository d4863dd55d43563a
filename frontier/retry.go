package frontier

import (
	"fmt"
	"math"

	"github.com/dgraph-io/badger/v4"
)

// moveDue moves retry records whose time has come back into their queues.
func (f *Frontier) moveDue(now int64) error {
	f.retryScanMu.Lock()
	defer f.retryScanMu.Unlock()
	f.mu.Lock()
	var parts []uint16
	var floors []int64
	for p, d := range f.retryDue {
		if d <= now && !f.pausedLocked(p) {
			parts = append(parts, p)
			floors = append(floors, f.retryFloor[p])
			f.retryDue[p] = math.MaxInt64 // scanning; concurrent Retry outcomes lower it
		}
	}
	f.mu.Unlock()

	var firstErr error
	for i, p := range parts {
		nextDue, err := f.movePartition(p, now, floors[i])
		if err != nil && firstErr == nil {
			firstErr = err
		}
		f.mu.Lock()
		cur := f.retryDue[p]
		if err == nil {
			// Everything due <= now is moved; keys noted meanwhile are >= cur.
			f.retryFloor[p] = min(now, cur)
		}
		if err != nil {
			cur = now // try again later
		} else if nextDue != 0 && nextDue < cur {
			cur = nextDue
		}
		if cur == math.MaxInt64 {
			delete(f.retryDue, p)
		} else {
			f.retryDue[p] = cur
		}
		f.mu.Unlock()
	}
	f.mu.Lock()
	f.moving = false
	f.recomputeRetryNextLocked()
	f.signalLocked()
	f.mu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("frontier: move retries: %w", firstErr)
	}
	return nil
}

// movePartition moves the due r keys of one partition; it returns the due time of the
// first r key left (0 if none).
func (f *Frontier) movePartition(p uint16, now, floor int64) (int64, error) {
	for {
		mc, err := f.moveChunk(p, now, floor)
		f.mu.Lock()
		for _, m := range mc.moved {
			delete(f.committing, string(m.it.key))
		}
		if err != nil {
			f.mu.Unlock()
			return 0, err
		}
		for _, m := range mc.moved {
			h := f.hostLocked(m.host)
			h.queued++
			f.queued++
			if m.rev {
				f.revisitPending--
			} else {
				f.retryPending--
			}
			if prioOfKey(m.it.key) == bandRevisit {
				h.revisits++
				f.revisitQueued++
			}
			f.insertLocked(h, m.it)
			f.fixLocked(h)
		}
		nextDue := mc.nextDue
		for _, due := range mc.later {
			if due < nextDue || nextDue == 0 {
				nextDue = due
			}
		}
		f.mu.Unlock()
		if !mc.full {
			return nextDue, nil
		}
	}
}

// movedRetry is an r key moved back to its host's queue.
type movedRetry struct {
	host string
	it   item
	rev  bool // an r key with the revisit bit
}

// retryChunk is what one moveChunk committed.
type retryChunk struct {
	moved   []movedRetry
	later   []int64 // the new due times of revisits pushed back
	nextDue int64   // the due time of the first r key left unscanned, 0 if none seen
	full    bool    // the chunk is full: more may be due
}

// moveChunk moves up to moveChunkSize due r keys of partition p (from floor on) in one
// transaction: each to its q key, or, for a revisit of a host whose queue holds its
// share of revisits already, to a later r key (revisitPushBack). The moved q keys are in
// committing when it returns; the caller takes them out.
func (f *Frontier) moveChunk(p uint16, now, floor int64) (retryChunk, error) {
	var mc retryChunk
	perHost := map[string]int{} // revisits moved or pushed back in this chunk
	txn := f.db.NewTransaction(true)
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 64, Prefix: famPrefix(famRetry, p)})
	var err error
	for it.Seek(rKey(p, floor, 0)); it.Valid() && len(mc.moved)+len(mc.later) < moveChunkSize; it.Next() {
		rk := it.Item().KeyCopy(nil)
		_, due, rseq, ok := parseRKey(rk)
		if !ok {
			continue
		}
		if due > now {
			mc.nextDue = due
			break
		}
		var v []byte
		if v, err = it.Item().ValueCopy(nil); err != nil {
			break
		}
		qk, r, derr := decodeR(v)
		if derr != nil {
			err = derr
			break
		}
		hn, _, ok := parseQKey(qk)
		if !ok {
			err = fmt.Errorf("%w: retry key", ErrCorrupt)
			break
		}
		if err = txn.Delete(rk); err != nil {
			break
		}
		if prioOfKey(qk) == bandRevisit {
			// Revisits wait in the order they came due (depth 0, a new sequence), not
			// in the order of their depth, so none is starved behind a home page.
			qk = qKey(p, hn, bandRevisit, 0, f.seq.Add(1))
			f.mu.Lock()
			waitingRev := perHost[hn]
			if h := f.hosts[hn]; h != nil {
				waitingRev += h.revisits
			}
			delay := f.delayOf(f.hostLocked(hn))
			f.mu.Unlock()
			perHost[hn]++
			if nd, later := revisitPushBack(now, delay, waitingRev, f.revisitSlots()); later {
				if err = txn.Set(rKey(p, nd, rseq), v); err != nil {
					break
				}
				mc.later = append(mc.later, nd)
				continue
			}
		}
		if err = txn.Set(qk, r.encode()); err != nil {
			break
		}
		mc.moved = append(mc.moved, movedRetry{hn, item{key: qk, rec: r}, rseq&revisitBit != 0})
	}
	mc.full = len(mc.moved)+len(mc.later) >= moveChunkSize
	it.Close()
	if err != nil {
		txn.Discard()
		return mc, err
	}
	f.mu.Lock()
	for _, m := range mc.moved {
		f.committing[string(m.it.key)] = struct{}{}
	}
	f.mu.Unlock()
	return mc, txn.Commit()
}

// moveChunkSize bounds the r keys one moveChunk transaction moves.
const moveChunkSize = 512
