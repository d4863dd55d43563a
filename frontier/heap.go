package frontier

// hostHeap orders schedulable hosts. A host is in one of the frontier's two heaps only
// while it has queued URLs that are not leased, is below PerHost requests in flight (leases
// not released) and is not being (re)loaded or parked:
//
//   - waiting, by the time the host may next be fetched (unix ns), then name;
//   - ready, hosts whose time has come, by the rank of the first URL of their buffer
//     (headRank: revisits, then seed class, then OPIC importance; an unloaded buffer
//     counts as the best so it gets loaded), then time, then name.
//
// So Next takes the most important ready host in O(log hosts), and breadth-first order
// (time, then name) stays the tie-break. A host's heapIdx is its index in the heap it is in.
type hostHeap struct {
	hs   []*host
	prio bool // the ready heap
}

func (h *hostHeap) Len() int { return len(h.hs) }
func (h *hostHeap) Less(i, j int) bool {
	a, b := h.hs[i], h.hs[j]
	if h.prio {
		if pa, pb := a.headRank(), b.headRank(); pa != pb {
			return pa < pb
		}
	}
	if a.nextAt != b.nextAt {
		return a.nextAt < b.nextAt
	}
	return a.name < b.name
}
func (h *hostHeap) Swap(i, j int) {
	h.hs[i], h.hs[j] = h.hs[j], h.hs[i]
	h.hs[i].heapIdx = i
	h.hs[j].heapIdx = j
}
func (h *hostHeap) Push(x any) {
	e := x.(*host)
	e.heapIdx = len(h.hs)
	e.inReady = h.prio
	h.hs = append(h.hs, e)
}
func (h *hostHeap) Pop() any {
	old := h.hs
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.heapIdx = -1
	e.inReady = false
	h.hs = old[:n-1]
	return e
}

// headPrio is the queue-key priority byte of the URL the host would lease next (0, the
// best, while its buffer is not loaded).
func (h *host) headPrio() uint8 {
	if len(h.prefetch) == 0 {
		return 0
	}
	return prioOfKey(h.prefetch[0].key)
}

// headRank orders ready hosts: the priority byte of the URL the host would lease next, with
// its cash bucket from the URL's importance now (host.importance) rather than when its
// key was written. The key's band keeps the order within the host; across hosts the
// forecast moves with what the frontier has learnt of each site since (its size, how many
// of its pages link to the URL), so a URL that looked like navigation when its site's
// first page was fetched, and whose band is stale, does not keep outranking other sites'
// navigation pages. Every change to the counters importance reads (admitted, fetched)
// goes through fixLocked, which re-heaps the host.
func (h *host) headRank() uint8 {
	p := h.headPrio()
	if p == bandRevisit || len(h.prefetch) == 0 {
		return p
	}
	r := h.prefetch[0].rec
	if !(r.Cash > 0) {
		return p
	}
	return queueBand((p-1)/cashBuckets, h.importance(r.Cash, r.Links, h.pagesKnown()))
}
