package frontier

import (
	"sort"
	"time"
)

// HostInfo is what the frontier knows of one host, for operators.
type HostInfo struct {
	Host      string        `json:"host"`
	Partition uint16        `json:"partition"`
	Queued    int           `json:"queued"`    // queued URLs, leased ones included
	InFlight  int           `json:"in_flight"` // leased, not yet Done
	Admitted  int           `json:"admitted"`  // URLs admitted over the crawl (MaxPagesPerHost)
	Generated int           `json:"generated"` // of which looked generated (GeneratedBudget)
	Delay     time.Duration `json:"delay"`     // the host's delay (Crawl-delay or the default)
	NextAt    time.Time     `json:"next_at"`   // no lease before
}

func (f *Frontier) hostInfoLocked(h *host) HostInfo {
	return HostInfo{
		Host: h.name, Partition: h.part, Queued: h.queued, InFlight: h.inflight,
		Admitted: h.admitted, Generated: h.generated, Delay: f.delayOf(h), NextAt: time.Unix(0, h.nextAt),
	}
}

// Host returns what the frontier knows of host, and false for a host it never admitted.
func (f *Frontier) Host(host string) (HostInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hosts[host]
	if h == nil {
		return HostInfo{}, false
	}
	return f.hostInfoLocked(h), true
}

// TopHostsByQueue returns the n hosts with the most queued URLs, most first. It walks every
// host (O(hosts) under the lock), so it is meant for dashboards polling every few seconds,
// not for the fetch path.
func (f *Frontier) TopHostsByQueue(n int) []HostInfo {
	if n <= 0 {
		return nil
	}
	f.mu.Lock()
	top := make([]*host, 0, n+1)
	for _, h := range f.hosts {
		if h.queued == 0 {
			continue
		}
		if len(top) == n && h.queued <= top[n-1].queued {
			continue
		}
		i := sort.Search(len(top), func(i int) bool { return top[i].queued < h.queued })
		top = append(top, nil)
		copy(top[i+1:], top[i:])
		top[i] = h
		if len(top) > n {
			top = top[:n]
		}
	}
	out := make([]HostInfo, len(top))
	for i, h := range top {
		out[i] = f.hostInfoLocked(h)
	}
	f.mu.Unlock()
	return out
}
