package frontier

import (
	"hash/maphash"
	"sync"
)

// seenCache is a small, bounded set of canonical URLs known to be in the seen set: the
// links a crawl meets again and again (navigation, footers) are answered from it without a
// Badger lookup. It holds two generations per shard; when the young one is full the old one
// is dropped, an approximate LRU with O(1) work and a hard memory bound: 2*size entries of
// 32 bytes of slots (16-byte slots, tables at most half full; 4 MiB at the default size),
// allocated at once, whatever URLs a hostile site makes up. Entries are only ever added for
// URLs whose seen key is committed, and only DropPartition deletes seen keys (it resets the
// cache), so a hit is as exact as the seen key.
//
// An entry is two 64-bit hashes of the URL under two random seeds (maphash: some 10 ns a
// URL, where SHA-256, URLHash, was the largest single cost of a link check that the cache
// answers: 0.37 us of about 1 us on a CPU without SHA instructions, docs/bench-log/seen-set-at-scale.md). A hit
// needs both to match: 127 bits (the first hash's lowest bit is always set), so a URL the
// cache does not hold is taken for one it holds with a chance of 2^-110 per lookup at the
// default size (2^17 entries; 2^-100 at the largest), of the order of the chance that a
// new URL shares its seen key with one of 100M URLs held (URLHash's 128 bits: 2^-101). The
// seeds are the process's own and never leave it. The slots hold no URL bytes: a lookup
// reads one slot (one cache line) per generation, where a table of URLs read the slot and
// then the URL's bytes in an arena (16 MiB more at the default size, and a second likely
// cache and TLB miss per lookup; docs/bench-log/seen-set-at-scale.md has what dropping it gained), and a URL up
// to cacheMaxURL bytes can be held (the arena left URLs over 512 bytes out), none pinning
// the buffer it was sliced from.
type seenCache struct {
	shards      [16]seenShard
	per         int // entries per generation per shard
	seed, seed2 maphash.Seed
}

// A shard's generations are open-addressed tables of hash pairs, at most half full: a
// lookup hashes the URL twice (the shard, the slot and the slot's check all come from the
// first hash) and compares the second only where the first matches. A Go map of strings
// cost more than twice as much here (it hashes again and reaches the key's header through
// its groups).
type seenShard struct {
	mu         sync.Mutex
	young, old cacheTable
	touched    uint64 // hasMany's sum of the loads it made early
}

const (
	// maxSeenCache caps the size (the exactness bound above is for this many entries).
	maxSeenCache = 1 << 26
	// cacheMaxURL: a URL longer than this is neither hashed nor held (a miss, exact
	// either way), so a hostile page's huge links cost no hashing before the trap checks
	// reject them; 8 KiB is the longest URL the forward wire carries, four times the
	// frontier's default MaxURLLength.
	cacheMaxURL = 8 << 10
)

type cacheTable struct {
	slots []cacheSlot // len a power of two, at least twice the generation's size
	n     int
}

type cacheSlot struct {
	h  uint64 // the URL's first hash with its lowest bit set; 0: empty
	h2 uint64 // its second hash
}

func newSeenCache(size int) *seenCache {
	c := &seenCache{per: max(min(size, maxSeenCache)/16, 1), seed: maphash.MakeSeed(), seed2: maphash.MakeSeed()}
	n := 4
	for n < 2*c.per {
		n *= 2
	}
	for i := range c.shards {
		c.shards[i].young.slots = make([]cacheSlot, n)
		c.shards[i].old.slots = make([]cacheSlot, n)
	}
	return c
}

// find returns the slot that holds the hashes (h, h2), or the empty slot where they would
// go.
func (t *cacheTable) find(h, h2 uint64) *cacheSlot {
	mask := uint64(len(t.slots) - 1)
	for i := (h >> 1) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.h == 0 || (s.h == h && s.h2 == h2) {
			return s
		}
	}
}

// hash is u's pair of hashes in the cache (h never 0) and the index of its shard.
func (c *seenCache) hash(u string) (h, h2 uint64, shard int) {
	h = maphash.String(c.seed, u) | 1
	return h, maphash.String(c.seed2, u), int(h >> 60)
}

func (c *seenCache) has(u string) bool {
	if c == nil || len(u) > cacheMaxURL {
		return false
	}
	h, h2, k := c.hash(u)
	s := &c.shards[k]
	s.mu.Lock()
	ok := c.hasLocked(s, h, h2)
	s.mu.Unlock()
	return ok
}

func (c *seenCache) hasLocked(s *seenShard, h, h2 uint64) bool {
	if s.young.find(h, h2).h != 0 {
		return true
	}
	if s.old.find(h, h2).h != 0 {
		c.addLocked(s, h, h2) // promote
		return true
	}
	return false
}

// cacheBatch is how many URLs hasMany looks up at a time (its arrays are on the stack).
const cacheBatch = 128

// hasMany sets hit[i] to whether the cache holds cands[i].URL, as has would, for every i
// (len(hit) >= len(cands)). It hashes a batch's URLs first and looks them up shard by
// shard, one lock a shard, after a pass that reads each one's first slot in both
// generations: those loads do not depend on one another, so their cache misses overlap,
// where has, one URL at a time, waits for each in turn (its lock's atomic instructions
// order every load around them). The slots are 4 MiB at the default size, more than a
// core's cache holds, so most lookups miss; docs/bench-log/seen-set-at-scale.md has the figures.
func (c *seenCache) hasMany(cands []Candidate, hit []bool) {
	if c == nil {
		return
	}
	for base := 0; base < len(cands); base += cacheBatch {
		cs := cands[base:min(base+cacheBatch, len(cands))]
		var hs, hs2 [cacheBatch]uint64 // hs[i] 0: not looked up (over cacheMaxURL)
		var shard [cacheBatch]uint8
		var start [len(c.shards) + 1]uint8 // shard k's URLs are order[start[k]:start[k+1]]
		for i := range cs {
			hit[base+i] = false
			if u := cs[i].URL; len(u) <= cacheMaxURL {
				h, h2, k := c.hash(u)
				hs[i], hs2[i], shard[i] = h, h2, uint8(k)
				start[k+1]++
			}
		}
		for k := 1; k < len(start); k++ {
			start[k] += start[k-1]
		}
		var order [cacheBatch]uint8
		next := start
		for i := range cs {
			if hs[i] != 0 {
				order[next[shard[i]]] = uint8(i)
				next[shard[i]]++
			}
		}
		for k := range c.shards {
			group := order[start[k]:start[k+1]]
			if len(group) == 0 {
				continue
			}
			s := &c.shards[k]
			s.mu.Lock()
			var touched uint64
			for _, i := range group {
				touched += s.young.touch(hs[i]) + s.old.touch(hs[i])
			}
			s.touched = touched // the loads are used: not optimized away
			for _, i := range group {
				hit[base+int(i)] = c.hasLocked(s, hs[i], hs2[i])
			}
			s.mu.Unlock()
		}
	}
}

// touch reads the slot where a lookup of hash h starts, with no branch on what it reads,
// so that the CPU runs ahead to the next touch.
func (t *cacheTable) touch(h uint64) uint64 {
	return t.slots[(h>>1)&uint64(len(t.slots)-1)].h
}

func (c *seenCache) add(u string) {
	if c == nil || len(u) > cacheMaxURL {
		return
	}
	h, h2, k := c.hash(u)
	s := &c.shards[k]
	s.mu.Lock()
	c.addLocked(s, h, h2)
	s.mu.Unlock()
}

func (c *seenCache) addLocked(s *seenShard, h, h2 uint64) {
	slot := s.young.find(h, h2)
	if slot.h != 0 {
		return
	}
	if s.young.n >= c.per {
		// The young generation is full: it becomes the old one, and the old one,
		// cleared, the young one.
		s.young, s.old = s.old, s.young
		s.young.clear()
		slot = s.young.find(h, h2)
	}
	*slot = cacheSlot{h: h, h2: h2}
	s.young.n++
}

func (t *cacheTable) clear() {
	clear(t.slots)
	t.n = 0
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
		s.young.clear()
		s.old.clear()
		s.mu.Unlock()
	}
}
