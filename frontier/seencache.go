package frontier

import "sync"

// seenCache is a small, bounded set of URL hashes known to be in the seen set: the links a
// crawl meets again and again (navigation, footers) are answered from it without a Badger
// lookup. It holds two generations per shard; when the young one is full the old one is
// dropped, an approximate LRU with O(1) work and a hard memory bound of
// 2*size entries (about 40 bytes each). Entries are only ever added for hashes whose seen
// key is committed, and the frontier never deletes seen keys, so a hit is exact.
type seenCache struct {
	shards [16]seenShard
	per    int // entries per generation per shard
}

type seenShard struct {
	mu         sync.Mutex
	young, old map[[16]byte]struct{}
}

func newSeenCache(size int) *seenCache {
	c := &seenCache{per: max(size/16, 1)}
	for i := range c.shards {
		c.shards[i].young = make(map[[16]byte]struct{}, c.per)
	}
	return c
}

func (c *seenCache) has(h [16]byte) bool {
	if c == nil {
		return false
	}
	s := &c.shards[h[0]&15]
	s.mu.Lock()
	_, ok := s.young[h]
	if !ok {
		if _, ok = s.old[h]; ok {
			c.addLocked(s, h) // promote
		}
	}
	s.mu.Unlock()
	return ok
}

func (c *seenCache) add(h [16]byte) {
	if c == nil {
		return
	}
	s := &c.shards[h[0]&15]
	s.mu.Lock()
	c.addLocked(s, h)
	s.mu.Unlock()
}

func (c *seenCache) addLocked(s *seenShard, h [16]byte) {
	if len(s.young) >= c.per {
		s.old = s.young
		s.young = make(map[[16]byte]struct{}, c.per)
	}
	s.young[h] = struct{}{}
}

// reset forgets every entry. DropPartition calls it: a hit must stay exact, and the
// dropped seen keys are gone.
func (c *seenCache) reset() {
	if c == nil {
		return
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.young = make(map[[16]byte]struct{}, c.per)
		s.old = nil
		s.mu.Unlock()
	}
}
