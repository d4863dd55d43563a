package frontier

import (
	"fmt"
	"math"
	"time"

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
	const chunk = 512
	for {
		type moved struct {
			host string
			it   item
			rev  bool // an r key with the revisit bit
		}
		var ms []moved
		var nextDue int64
		type pushed struct {
			due    int64
			wasRev bool
		}
		var later []pushed
		perHost := map[string]int{} // revisits moved or pushed back in this chunk
		txn := f.db.NewTransaction(true)
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 64, Prefix: famPrefix(famRetry, p)})
		var err error
		for it.Seek(rKey(p, floor, 0)); it.Valid() && len(ms)+len(later) < chunk; it.Next() {
			rk := it.Item().KeyCopy(nil)
			_, due, _, ok := parseRKey(rk)
			if !ok {
				continue
			}
			if due > now {
				nextDue = due
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
				// At most revisitSlots revisits of a host wait in its queue; the rest are
				// pushed back by the host's pace (one delay per place in the line).
				f.mu.Lock()
				waitingRev := perHost[hn]
				if h := f.hosts[hn]; h != nil {
					waitingRev += h.revisits
				}
				step := int64(max(f.delayOf(f.hostLocked(hn)), 50*time.Millisecond))
				f.mu.Unlock()
				perHost[hn]++
				if waitingRev >= f.revisitSlots() {
					_, _, seq, _ := parseRKey(rk)
					nd := now + step*int64(waitingRev-f.revisitSlots()+1)
					if err = txn.Set(rKey(p, nd, seq), v); err != nil {
						break
					}
					later = append(later, pushed{nd, seq&revisitBit != 0})
					continue
				}
			}
			if err = txn.Set(qk, r.encode()); err != nil {
				break
			}
			_, _, rseq, _ := parseRKey(rk)
			ms = append(ms, moved{hn, item{key: qk, rec: r}, rseq&revisitBit != 0})
		}
		full := len(ms)+len(later) >= chunk
		it.Close()
		if err == nil {
			f.mu.Lock()
			for _, m := range ms {
				f.committing[string(m.it.key)] = struct{}{}
			}
			f.mu.Unlock()
			err = txn.Commit()
		} else {
			txn.Discard()
		}
		f.mu.Lock()
		for _, m := range ms {
			delete(f.committing, string(m.it.key))
		}
		if err != nil {
			f.mu.Unlock()
			return 0, err
		}
		for _, m := range ms {
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
		for _, l := range later {
			if l.due < nextDue || nextDue == 0 {
				nextDue = l.due
			}
		}
		f.mu.Unlock()
		if !full {
			return nextDue, nil
		}
	}
}
