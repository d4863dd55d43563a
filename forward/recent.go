package forward

// recentCache remembers about size recently added 64-bit URL hashes in two generations:
// when the current generation holds size/2 hashes it becomes the previous one and the
// oldest generation is dropped. Not safe for concurrent use (the Outbox locks it).
// A nil *recentCache remembers nothing.
type recentCache struct {
	half      int
	cur, prev map[uint64]struct{}
}

func newRecentCache(size int) *recentCache {
	if size <= 0 {
		return nil
	}
	half := max(1, size/2)
	return &recentCache{half: half, cur: make(map[uint64]struct{}, min(half, 1<<16))}
}

func (c *recentCache) has(h uint64) bool {
	if c == nil {
		return false
	}
	if _, ok := c.cur[h]; ok {
		return true
	}
	_, ok := c.prev[h]
	return ok
}

func (c *recentCache) add(h uint64) {
	if c == nil {
		return
	}
	if len(c.cur) >= c.half {
		c.prev, c.cur = c.cur, make(map[uint64]struct{}, min(c.half, 1<<16))
	}
	c.cur[h] = struct{}{}
}

// remove forgets h (an Add whose write failed).
func (c *recentCache) remove(h uint64) {
	if c == nil {
		return
	}
	delete(c.cur, h)
	delete(c.prev, h)
}

// len is the number of remembered hashes.
func (c *recentCache) len() int {
	if c == nil {
		return 0
	}
	return len(c.cur) + len(c.prev)
}
