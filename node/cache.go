package node

import "sync"

// hostCache is a bounded in-memory map of per-host facts (parsed robots.txt, TDMRep
// policies) keyed by scheme://host. When full it evicts an arbitrary tenth: an evicted
// entry is reloaded from the host state in Badger, so eviction costs a read, never a fetch.
type hostCache[T any] struct {
	mu  sync.Mutex
	max int
	m   map[string]T
}

func newHostCache[T any](max int) *hostCache[T] {
	return &hostCache[T]{max: max, m: make(map[string]T)}
}

func (c *hostCache[T]) get(key string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *hostCache[T]) put(key string, v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		n := max(1, c.max/10)
		for k := range c.m {
			delete(c.m, k)
			if n--; n <= 0 {
				break
			}
		}
	}
	c.m[key] = v
}
