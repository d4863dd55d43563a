package frontier

import (
	"hash/maphash"
	"sync"
)

// seenCache is a small, bounded set of canonical URLs known to be in the seen set: the
// links a crawl meets again and again (navigation, footers) are answered from it without a
// Badger lookup. It holds two generations per shard; when the young one is full (in
// entries or in URL bytes) the old one is dropped, an approximate LRU with O(1) work and a
// hard memory bound: 2*size entries of 32 bytes of slots (16-byte slots, tables at most
// half full) and arenas of 2*size*cacheURLBytes bytes for the URLs (16 MiB at the default
// size, allocated at once and touched as they fill, whatever URLs a hostile site makes up;
// URLs over cacheMaxURL bytes are not cached at all). Entries are only ever added for URLs
// whose seen key is committed, and only DropPartition deletes seen keys (it resets the
// cache), so a hit is exact.
//
// Keyed by the URL itself, not its URLHash: a hit then costs no hash of the URL at all,
// and SHA-256 was the largest single cost of a link check that the cache answers (0.37 us
// of about 1 us on a CPU without SHA instructions, BENCHMARKS.md). The key is the full
// string, so a hit is as exact as the seen key. Keys are copied into their generation's
// byte arena: a candidate's URL may be a slice of a large buffer (a page, a forwarded
// batch) that the cache must not pin, and an arena costs no allocation per entry and no
// pointers for the collector to scan (a string per entry was one allocation per cold link
// confirmed, and 131,072 pointers in every mark phase).
type seenCache struct {
	shards [16]seenShard
	per    int // entries per generation per shard
	seed   maphash.Seed
}

// A shard's generations are open-addressed tables of (hash, URL) slots, at most half full:
// a lookup hashes the URL once (the shard, the slot and the slot's check all come from that
// hash) and compares the string only where the hash matches. A Go map of strings cost more
// than twice as much here (it hashes again and reaches the key's header through its groups).
type seenShard struct {
	mu         sync.Mutex
	young, old cacheTable
	touched    uint64 // hasMany's sum of the loads it made early
}

// A generation's URL bytes average at most cacheURLBytes an entry (typical URLs are well
// under it); a URL over cacheMaxURL bytes is left to the hash path.
const (
	cacheURLBytes = 128
	cacheMaxURL   = 512
	// maxSeenCache caps the size, so that an arena's offsets fit a slot's uint32 (the
	// conversion below fails to compile if they would not).
	maxSeenCache = 1 << 26
)

var _ = uint32(maxSeenCache / 16 * cacheURLBytes)

type cacheTable struct {
	slots []cacheSlot // len a power of two, at least twice the generation's size
	urls  []byte      // the URLs held, end to end; cap: the generation's byte bound
	n     int
}

// A slot is pointer-free: its URL is urls[off:off+len] of its table.
type cacheSlot struct {
	h   uint64 // the URL's hash with its lowest bit set; 0: empty
	off uint32
	len uint32
}

func newSeenCache(size int) *seenCache {
	c := &seenCache{per: max(min(size, maxSeenCache)/16, 1), seed: maphash.MakeSeed()}
	n := 4
	for n < 2*c.per {
		n *= 2
	}
	for i := range c.shards {
		for _, t := range []*cacheTable{&c.shards[i].young, &c.shards[i].old} {
			t.slots = make([]cacheSlot, n)
			t.urls = make([]byte, 0, max(c.per*cacheURLBytes, cacheMaxURL))
		}
	}
	return c
}

// find returns the slot that holds u, or the empty slot where u would go.
func (t *cacheTable) find(h uint64, u string) *cacheSlot {
	mask := uint64(len(t.slots) - 1)
	for i := (h >> 1) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.h == 0 || (s.h == h && int(s.len) == len(u) && string(t.urls[s.off:s.off+s.len]) == u) {
			return s
		}
	}
}

// hash is u's hash in the cache (never 0) and the index of its shard.
func (c *seenCache) hash(u string) (h uint64, shard int) {
	h = maphash.String(c.seed, u) | 1
	return h, int(h >> 60)
}

func (c *seenCache) has(u string) bool {
	if c == nil || len(u) > cacheMaxURL {
		return false
	}
	h, k := c.hash(u)
	s := &c.shards[k]
	s.mu.Lock()
	ok := c.hasLocked(s, h, u)
	s.mu.Unlock()
	return ok
}

func (c *seenCache) hasLocked(s *seenShard, h uint64, u string) bool {
	if s.young.find(h, u).h != 0 {
		return true
	}
	if s.old.find(h, u).h != 0 {
		c.addLocked(s, h, u) // promote
		return true
	}
	return false
}

// cacheBatch is how many URLs hasMany looks up at a time (its arrays are on the stack).
const cacheBatch = 128

// hasMany sets hit[i] to whether the cache holds cands[i].URL, as has would, for every i
// (len(hit) >= len(cands)). It hashes a batch's URLs first and looks them up shard by
// shard, one lock a shard, after a pass that reads each one's first slot in both
// generations and the URL bytes that slot names: those loads do not depend on one
// another, so their cache misses overlap, where has, one URL at a time, waits for each in
// turn (its lock's atomic instructions order every load around them). The slots and
// arenas are 20 MB at the default size, far more than a core's cache holds, so nearly
// every lookup missed; BENCHMARKS.md has the figures.
func (c *seenCache) hasMany(cands []Candidate, hit []bool) {
	if c == nil {
		return
	}
	for base := 0; base < len(cands); base += cacheBatch {
		cs := cands[base:min(base+cacheBatch, len(cands))]
		var hs [cacheBatch]uint64 // 0: not looked up (too long to be cached)
		var shard [cacheBatch]uint8
		var start [len(c.shards) + 1]uint8 // shard k's URLs are order[start[k]:start[k+1]]
		for i := range cs {
			hit[base+i] = false
			if u := cs[i].URL; len(u) <= cacheMaxURL {
				h, k := c.hash(u)
				hs[i], shard[i] = h, uint8(k)
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
				hit[base+int(i)] = c.hasLocked(s, hs[i], cs[i].URL)
			}
			s.mu.Unlock()
		}
	}
}

// touch reads the slot where a lookup of hash h starts and a byte of the URL bytes that
// slot names (any URL's, or stale bytes past the arena's end: only the load matters), with
// no branch on what it reads, so that the CPU runs ahead to the next touch.
func (t *cacheTable) touch(h uint64) uint64 {
	sl := &t.slots[(h>>1)&uint64(len(t.slots)-1)]
	arena := t.urls[:cap(t.urls)]
	return sl.h + uint64(arena[min(int(sl.off), len(arena)-1)])
}

func (c *seenCache) add(u string) {
	if c == nil || len(u) > cacheMaxURL {
		return
	}
	h, k := c.hash(u)
	s := &c.shards[k]
	s.mu.Lock()
	c.addLocked(s, h, u)
	s.mu.Unlock()
}

func (c *seenCache) addLocked(s *seenShard, h uint64, u string) {
	slot := s.young.find(h, u)
	if slot.h != 0 {
		return
	}
	if s.young.n >= c.per || len(s.young.urls)+len(u) > cap(s.young.urls) {
		// The young generation is full: it becomes the old one, and the old one,
		// cleared, the young one.
		s.young, s.old = s.old, s.young
		s.young.clear()
		slot = s.young.find(h, u)
	}
	*slot = cacheSlot{h: h, off: uint32(len(s.young.urls)), len: uint32(len(u))}
	s.young.urls = append(s.young.urls, u...)
	s.young.n++
}

func (t *cacheTable) clear() {
	clear(t.slots)
	t.urls = t.urls[:0]
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
