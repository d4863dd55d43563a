package frontier

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

// TestSeenCacheKeysAreCopies: a URL sliced from a large buffer (a page, a forwarded batch)
// is stored as a copy, so the cache does not keep the buffer alive.
func TestSeenCacheKeysAreCopies(t *testing.T) {
	c := newSeenCache(64)
	buf := strings.Repeat("x", 1<<20) + "http://a.test/p"
	u := buf[len(buf)-len("http://a.test/p"):]
	c.add(u)
	if !c.has("http://a.test/p") {
		t.Fatal("added URL not found")
	}
	b0 := uintptr(unsafe.Pointer(unsafe.StringData(buf)))
	for i := range c.shards {
		tb := &c.shards[i].young
		for _, sl := range tb.slots {
			if sl.h == 0 {
				continue
			}
			key := tb.urls[sl.off : sl.off+sl.len]
			if p := uintptr(unsafe.Pointer(&key[0])); p >= b0 && p < b0+uintptr(len(buf)) {
				t.Fatalf("cache key %q points into the caller's buffer", key)
			}
			if string(key) != "http://a.test/p" {
				t.Fatalf("cache key %q, want the URL added", key)
			}
		}
	}
}

// TestSeenCacheBounded: at most two generations of size/16 entries per shard, and the URLs
// added last are still there.
func TestSeenCacheBounded(t *testing.T) {
	c := newSeenCache(160)
	for i := range 10_000 {
		c.add(fmt.Sprintf("http://h.test/%d", i))
	}
	total := 0
	for i := range c.shards {
		s := &c.shards[i]
		if s.young.n > c.per || s.old.n > c.per {
			t.Fatalf("shard %d: young %d, old %d, want at most %d each", i, s.young.n, s.old.n, c.per)
		}
		for _, tb := range []cacheTable{s.young, s.old} {
			held := 0
			for _, sl := range tb.slots {
				if sl.h != 0 {
					held++
				}
			}
			if held != tb.n {
				t.Fatalf("shard %d: %d slots used, n = %d", i, held, tb.n)
			}
		}
		total += s.young.n + s.old.n
	}
	if total > 2*160 {
		t.Fatalf("%d entries, want at most %d", total, 2*160)
	}
	if !c.has("http://h.test/9999") {
		t.Fatal("the last URL added is gone")
	}
	if c.has("http://h.test/99999") {
		t.Fatal("a URL never added is found")
	}
	c.reset()
	if c.has("http://h.test/9999") {
		t.Fatal("found after reset")
	}

	// Long URLs (a hostile site's) fill a generation by their bytes, not their count, and
	// URLs over cacheMaxURL are not held at all.
	long := strings.Repeat("a", cacheMaxURL)
	for i := range 10_000 {
		c.add(fmt.Sprintf("http://h.test/%d/%s", i, long)[:cacheMaxURL])
	}
	held := 0
	for i := range c.shards {
		for _, tb := range []cacheTable{c.shards[i].young, c.shards[i].old} {
			b := 0
			for _, sl := range tb.slots {
				b += int(sl.len)
			}
			if b != len(tb.urls) || b > c.per*cacheURLBytes || cap(tb.urls) > c.per*cacheURLBytes {
				t.Fatalf("shard %d: %d URL bytes held (arena %d, cap %d), want at most %d", i, b, len(tb.urls), cap(tb.urls), c.per*cacheURLBytes)
			}
			held += b
		}
	}
	if held > 2*160*cacheURLBytes {
		t.Fatalf("%d URL bytes held, want at most %d", held, 2*160*cacheURLBytes)
	}
	tooLong := "http://h.test/" + strings.Repeat("b", cacheMaxURL)
	c.add(tooLong)
	if c.has(tooLong) {
		t.Fatal("a URL over cacheMaxURL was cached")
	}
}

// TestAddCachedLinks: links the seen cache answers (no hash computed for them) are counted
// already seen, once per occurrence, beside new links and statically rejected ones in the
// same batch.
func TestAddCachedLinks(t *testing.T) {
	f := openF(t, noDelay(openDB(t, "")))
	mustAdd(t, f, u("h.test", "/a"), u("h.test", "/b"))
	if !f.cache.has("http://h.test/a") {
		t.Fatal("an added URL is not in the seen cache")
	}
	st0 := f.Stats()
	r := mustAdd(t, f, u("h.test", "/a"), u("h.test", "/c"), u("h.test", "/a"), u("h.test", "/b"), u("h.test", "/c"),
		Candidate{URL: "not a url"})
	if r.Added != 1 || r.AlreadySeen != 4 || r.Rejected[RejectInvalidURL] != 1 {
		t.Fatalf("add %+v, want 1 added, 4 already seen, 1 invalid", r)
	}
	// /a and /b were answered by the cache: no confirmation (at most one, a Bloom false
	// positive for the new /c).
	if n := f.Stats().BloomChecks - st0.BloomChecks; n > 1 {
		t.Fatalf("%d confirmations past the cache, want at most 1", n)
	}
	if s := f.Stats(); s.Seen != 3 || s.Queued != 3 {
		t.Fatalf("stats %+v", s)
	}
	// A cached link is answered before the trap checks: met again past the depth limit,
	// it counts as seen, not rejected, and is not queued either way. An uncached one past
	// the limit is still rejected.
	deep := u("h.test", "/b")
	deep.Depth = 17
	newDeep := u("h.test", "/d")
	newDeep.Depth = 17
	r = mustAdd(t, f, deep, newDeep)
	if r.Added != 0 || r.AlreadySeen != 1 || r.Rejected[RejectMaxDepth] != 1 {
		t.Fatalf("add %+v, want the cached link seen and the new deep one rejected", r)
	}
}

// BenchmarkSeenCache: the seen cache's share of a link check in the scale benchmark's mix:
// 80% of lookups from a hot set of 5,000 URLs, 20% cold URLs that miss and are then added
// (as a confirmation adds them).
//
//	go test -run '^$' -bench SeenCache ./frontier/
func BenchmarkSeenCache(b *testing.B) {
	c := newSeenCache(1 << 16)
	const hot = 5000
	urls := make([]string, 1<<20)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://host%d.scale.test/section/%d/page-%d.html", i%2000, i%97, i)
	}
	for i := range hot {
		c.add(urls[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	cold := hot
	for i := 0; i < b.N; i++ {
		if i%5 == 4 {
			u := urls[hot+cold%(len(urls)-hot)]
			cold += 7919
			if !c.has(u) {
				c.add(u)
			}
			continue
		}
		c.has(urls[(i*7919)%hot])
	}
}

// TestSeenCacheSameHashDifferentURL: two URLs whose hashes are equal (forced here) are two
// entries; a hit needs the URL's bytes to match, not only the hash.
func TestSeenCacheSameHashDifferentURL(t *testing.T) {
	c := newSeenCache(64)
	s := &c.shards[0]
	const h = 0x1234567 | 1
	a, b := "http://a.test/1", "http://a.test/2" // the same length
	c.addLocked(s, h, a)
	if got := s.young.find(h, b); got.h != 0 {
		t.Fatalf("%q found under %q's hash", b, a)
	}
	c.addLocked(s, h, b)
	for _, u := range []string{a, b} {
		sl := s.young.find(h, u)
		if sl.h != h || string(s.young.urls[sl.off:sl.off+sl.len]) != u {
			t.Fatalf("%q: slot %+v", u, *sl)
		}
	}
	if s.young.n != 2 {
		t.Fatalf("%d entries, want 2", s.young.n)
	}
}
