package frontier

import (
	"bytes"
	"container/heap"
	"math"
	"slices"
	"time"
)

// hostLocked returns the host, creating its state. Callers hold mu (or are Open).
func (f *Frontier) hostLocked(name string) *host {
	h := f.hosts[name]
	if h == nil {
		h = &host{name: name, part: f.cfg.PartitionOf(name), heapIdx: -1}
		f.hosts[name] = h
	}
	return h
}

func (f *Frontier) delayOf(h *host) time.Duration {
	return hostDelay(h.delay, h.delaySet, f.cfg.DefaultDelay)
}

// fixLocked puts the host into the waiting heap (poll moves it to the ready heap when its
// time comes), moves it, or takes it out of whichever heap it is in.
func (f *Frontier) fixLocked(h *host) {
	want := !h.loading && h.queued-h.inflight > 0 && h.inflight-h.released < f.cfg.PerHost && !f.pausedLocked(h.part)
	switch {
	case h.heapIdx >= 0 && h.inReady:
		heap.Remove(&f.ready, h.heapIdx)
	case want && h.heapIdx >= 0:
		heap.Fix(&f.waiting, h.heapIdx)
		return
	case h.heapIdx >= 0:
		heap.Remove(&f.waiting, h.heapIdx)
	}
	if want {
		heap.Push(&f.waiting, h)
	}
}

// unheapLocked takes the host out of whichever heap it is in.
func (f *Frontier) unheapLocked(h *host) {
	switch {
	case h.heapIdx >= 0 && h.inReady:
		heap.Remove(&f.ready, h.heapIdx)
	case h.heapIdx >= 0:
		heap.Remove(&f.waiting, h.heapIdx)
	}
}

// insertLocked records that key k became a non-leased queued key of h (h.queued already
// counts it) and keeps the buffer a prefix of the host's non-leased queue.
func (f *Frontier) insertLocked(h *host, it item) {
	h.queueGen++
	if h.loading {
		if h.loadLow == nil || bytes.Compare(it.key, h.loadLow) < 0 {
			h.loadLow = it.key
		}
		return
	}
	before := h.queued - h.inflight - 1
	n := len(h.prefetch)
	if n == before || (n > 0 && bytes.Compare(it.key, h.prefetch[n-1].key) < 0) {
		i, found := slices.BinarySearchFunc(h.prefetch, it.key, func(a item, k []byte) int { return bytes.Compare(a.key, k) })
		if found {
			return // cannot happen while committing works; never lease a key twice
		}
		h.prefetch = slices.Insert(h.prefetch, i, it)
		if len(h.prefetch) > f.cfg.Prefetch {
			last := len(h.prefetch) - 1
			lowerCursor(h, h.prefetch[last].key)
			h.prefetch[last] = item{}
			h.prefetch = h.prefetch[:last]
		}
		return
	}
	lowerCursor(h, it.key)
}

func lowerCursor(h *host, k []byte) {
	if h.cursor != nil && bytes.Compare(k, h.cursor) < 0 {
		h.cursor = k
	}
}

// signalLocked wakes every Next waiting for a change.
func (f *Frontier) signalLocked() {
	if f.waiters > 0 {
		close(f.wake)
		f.wake = make(chan struct{})
	}
}

func (f *Frontier) noteRetryLocked(part uint16, due int64) {
	if fl, ok := f.retryFloor[part]; ok && due < fl {
		f.retryFloor[part] = due // the clock went back
	}
	if cur, ok := f.retryDue[part]; !ok || due < cur {
		f.retryDue[part] = due
	}
	if (f.retryNext == 0 || due < f.retryNext) && !f.pausedLocked(part) {
		f.retryNext = due
	}
}

func (f *Frontier) recomputeRetryNextLocked() {
	f.retryNext = 0
	for p, d := range f.retryDue {
		if d != math.MaxInt64 && (f.retryNext == 0 || d < f.retryNext) && !f.pausedLocked(p) {
			f.retryNext = d
		}
	}
}
