package frontier

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Next blocks until a URL of a ready host can be leased: the host is below PerHost leases,
// its next-allowed time has come and it is not deferred. It returns ctx.Err() when ctx ends
// and ErrClosed after Close. It waits on timers and wake-ups, never spinning.
func (f *Frontier) Next(ctx context.Context) (*Lease, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l, wait, wake, err := f.poll()
		if err != nil || l != nil {
			return l, err
		}
		var timer *time.Timer
		var tc <-chan time.Time
		if wait >= 0 {
			timer = time.NewTimer(wait)
			tc = timer.C
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-tc:
		}
		if timer != nil {
			timer.Stop()
		}
		f.mu.Lock()
		f.waiters--
		f.mu.Unlock()
	}
}

// poll leases a URL if one is ready. Otherwise it returns how long to wait (-1: until woken)
// and the channel that is closed on the next change; the caller then owns one waiter count.
func (f *Frontier) poll() (*Lease, time.Duration, <-chan struct{}, error) {
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return nil, 0, nil, ErrClosed
		}
		now := f.cfg.Now().UnixNano()
		if f.retryNext != 0 && f.retryNext <= now && !f.moving {
			f.moving = true
			f.mu.Unlock()
			if err := f.moveDue(now); err != nil {
				return nil, 0, nil, err
			}
			continue
		}
		for f.waiting.Len() > 0 && f.waiting.hs[0].nextAt <= now {
			heap.Push(&f.ready, heap.Pop(&f.waiting))
		}
		if f.ready.Len() > 0 {
			h := f.ready.hs[0]
			if h.nextAt > now { // its clock moved without a fix; cannot happen, but be safe
				heap.Pop(&f.ready)
				heap.Push(&f.waiting, h)
				f.mu.Unlock()
				continue
			}
			if len(h.prefetch) > 0 {
				l := f.leaseLocked(h, now)
				f.mu.Unlock()
				return l, 0, nil, nil
			}
			if err := f.refill(h); err != nil { // unlocks mu
				return nil, 0, nil, err
			}
			continue
		}
		var hostNext, retryNext int64
		if f.waiting.Len() > 0 {
			hostNext = f.waiting.hs[0].nextAt
		}
		if !f.moving {
			retryNext = f.retryNext
		}
		wait := pollWait(now, hostNext, f.waiting.Len() > 0, retryNext)
		f.waiters++
		wake := f.wake
		f.mu.Unlock()
		return nil, wait, wake, nil
	}
}

func (f *Frontier) leaseLocked(h *host, now int64) *Lease {
	i := f.pickLocked(h)
	it := h.prefetch[i]
	h.prefetch[i] = item{}
	if i == 0 {
		h.prefetch = h.prefetch[1:]
	} else {
		h.prefetch = slices.Delete(h.prefetch, i, i+1)
	}
	if len(h.prefetch) == 0 {
		h.prefetch = nil
	}
	h.inflight++
	f.inflight++
	h.leased = append(h.leased, it.key)
	prev := h.nextAt
	h.nextAt = nextAtLease(now, f.delayOf(h))
	f.fixLocked(h)
	r := it.rec
	return &Lease{
		URL: r.URL, Host: h.name, Depth: r.Depth, Hops: r.Hops, Attempts: r.Attempts, From: r.From, Priority: r.Priority,
		Cash: r.Cash, History: r.History, Revisit: prioOfKey(it.key) == bandRevisit, Validators: r.Val, Refetch: r.Refetch,
		issuer: f, part: h.part, key: it.key, rec: r, prevNext: prev, leaseNext: h.nextAt,
	}
}

// refill loads the first Prefetch non-leased q records of h from Badger. Called with mu
// held; returns with mu released. The host leaves the heap while loading.
func (f *Frontier) refill(h *host) error {
	h.loading = true
	h.loadLow = nil
	f.fixLocked(h)
	gen := h.queueGen
	leased := slices.Clone(h.leased)
	cursor := h.cursor
	want := h.queued - h.inflight
	f.mu.Unlock()

	items, err := f.scanQueue(h, cursor, leased)
	full := cursor == nil
	if err == nil && !full && len(items) < f.cfg.Prefetch && len(items) != want {
		// Fewer keys past the cursor than the count says: rescan from the head rather
		// than trust either the cursor or a count that may have drifted.
		items, err = f.scanQueue(h, nil, leased)
		full = true
	}

	f.mu.Lock()
	h.loading = false
	if err == nil {
		scanned := len(items)
		if len(f.committing) > 0 {
			items = slices.DeleteFunc(items, func(it item) bool {
				_, ok := f.committing[string(it.key)]
				return ok
			})
		}
		h.prefetch = items
		if len(items) > 0 {
			h.cursor = append(slices.Clone(items[len(items)-1].key), 0) // just after the last read
		}
		if h.loadLow != nil && (h.cursor == nil || bytes.Compare(h.loadLow, h.cursor) < 0) {
			h.cursor = h.loadLow
		}
		if gen == h.queueGen && full && scanned < f.cfg.Prefetch && scanned == len(items) {
			// The scan saw the whole non-leased queue: heal the count if it drifted.
			if want := h.inflight + len(items); want != h.queued {
				f.log.Warn("queue count corrected", "host", h.name, "had", h.queued, "want", want)
				f.queued += want - h.queued
				h.queued = want
			}
		}
	}
	h.loadLow = nil
	f.fixLocked(h)
	f.signalLocked()
	f.mu.Unlock()
	if err != nil {
		return fmt.Errorf("frontier: load queue: %w", err)
	}
	return nil
}

// scanQueue reads up to Prefetch non-leased q records of h from key from (nil: the head).
func (f *Frontier) scanQueue(h *host, from []byte, leased [][]byte) ([]item, error) {
	var items []item
	err := f.db.View(func(txn *badger.Txn) error {
		prefix := qHostPrefix(h.part, h.name)
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: f.cfg.Prefetch, Prefix: prefix})
		defer it.Close()
		if from == nil {
			from = prefix
		}
	next:
		for it.Seek(from); it.Valid() && len(items) < f.cfg.Prefetch; it.Next() {
			k := it.Item().Key()
			for _, l := range leased {
				if bytes.Equal(l, k) {
					continue next
				}
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			r, err := decodeQrec(v)
			if err != nil {
				return err
			}
			items = append(items, item{key: it.Item().KeyCopy(nil), rec: r})
		}
		return nil
	})
	return items, err
}
