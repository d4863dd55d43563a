package frontier

// hostHeap orders schedulable hosts by the time they may next be fetched (unix ns).
// A host is in the heap only while it has queued URLs that are not leased, is below
// PerHost leases and is not being (re)loaded or parked; so Next pops in O(log hosts).
type hostHeap []*host

func (h hostHeap) Len() int { return len(h) }
func (h hostHeap) Less(i, j int) bool {
	if h[i].next != h[j].next {
		return h[i].next < h[j].next
	}
	return h[i].name < h[j].name
}
func (h hostHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}
func (h *hostHeap) Push(x any) {
	e := x.(*host)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *hostHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.idx = -1
	*h = old[:n-1]
	return e
}
