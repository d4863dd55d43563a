package frontier

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestSeenCacheHoldsNoURLBytes: a URL sliced from a large buffer (a page, a forwarded
// batch) is held by its hashes alone: the cache neither pins the buffer nor reads it again,
// so the buffer's reuse changes nothing, and the slots have no pointers for the collector.
func TestSeenCacheHoldsNoURLBytes(t *testing.T) {
	c := newSeenCache(64)
	const want = "http://a.test/p"
	buf := append(bytes.Repeat([]byte("x"), 1<<20), want...)
	c.add(unsafe.String(&buf[len(buf)-len(want)], len(want)))
	copy(buf[len(buf)-len(want):], "http://b.test/q") // the buffer reused
	if !c.has(want) {
		t.Fatal("the URL added is not found once its buffer was reused")
	}
	if c.has("http://b.test/q") {
		t.Fatal("the buffer's new content is found")
	}
	if typ := reflect.TypeFor[cacheSlot](); typ.Size() != 16 {
		t.Fatalf("a slot is %d bytes, want 16", typ.Size())
	}
	for i := range reflect.TypeFor[cacheSlot]().NumField() {
		if k := reflect.TypeFor[cacheSlot]().Field(i).Type.Kind(); k != reflect.Uint64 {
			t.Fatalf("slot field %d is a %v: slots hold only hashes", i, k)
		}
	}
}

// TestSeenCacheHasMany: hasMany answers as has, one URL after another, would: over batches
// longer than cacheBatch, with repeats within a batch, long URLs, hits in the old
// generation (promoted) and generations turning over; two caches with the same seeds, one
// asked with has and one with hasMany, stay the same.
func TestSeenCacheHasMany(t *testing.T) {
	one, many := newSeenCache(256), newSeenCache(256)
	many.seed, many.seed2 = one.seed, one.seed2
	r := rand.New(rand.NewPCG(9, 10))
	url := func(i int) string {
		if i%97 == 0 {
			return "http://long.test/" + strings.Repeat("x", 2000) + strconv.Itoa(i)
		}
		if i%89 == 0 { // over cacheMaxURL: never held, by either
			return "http://huge.test/" + strings.Repeat("x", cacheMaxURL) + strconv.Itoa(i)
		}
		return "http://h" + strconv.Itoa(i%13) + ".test/p/" + strconv.Itoa(i)
	}
	var hits, misses int
	for round := range 300 {
		cands := make([]Candidate, 1+r.IntN(3*cacheBatch))
		for j := range cands {
			switch {
			case j > 0 && r.IntN(10) == 0:
				cands[j] = cands[r.IntN(j)] // a repeat within the batch
			case r.IntN(2) == 0:
				cands[j].URL = url(r.IntN(200)) // a small hot set
			default:
				cands[j].URL = url(r.IntN(5000))
			}
		}
		want := make([]bool, len(cands))
		for j := range cands {
			want[j] = one.has(cands[j].URL)
		}
		got := make([]bool, len(cands))
		for j := range got {
			got[j] = j%2 == 0 // hasMany must set every answer, false too
		}
		many.hasMany(cands, got)
		for j := range cands {
			if got[j] != want[j] {
				t.Fatalf("round %d, URL %d (%.40q): hasMany %v, has %v", round, j, cands[j].URL, got[j], want[j])
			}
			if want[j] {
				hits++
				continue
			}
			misses++
			one.add(cands[j].URL)
			many.add(cands[j].URL)
		}
	}
	if hits == 0 || misses == 0 {
		t.Fatalf("%d hits and %d misses: the mix tested only one side", hits, misses)
	}
	// The same promotions and turnovers: every shard holds as many entries in each
	// generation (which had turned over: the young one full or past it at least once).
	turned := false
	for k := range one.shards {
		a, b := &one.shards[k], &many.shards[k]
		if a.young.n != b.young.n || a.old.n != b.old.n {
			t.Fatalf("shard %d: has left %d young / %d old entries, hasMany %d / %d", k, a.young.n, a.old.n, b.young.n, b.old.n)
		}
		turned = turned || a.old.n > 0
	}
	if !turned {
		t.Fatal("no generation turned over: promotions went untested")
	}
	var nilCache *seenCache
	hit := []bool{false}
	nilCache.hasMany([]Candidate{{URL: "http://a.test/"}}, hit)
	if hit[0] {
		t.Fatal("a nil cache hit")
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

	// Long URLs (a hostile site's): over cacheMaxURL they are not held; up to it they take
	// a slot each, like any other. The bound is in entries, the memory the slots allocated
	// at the start.
	slots := func() (n int) {
		for i := range c.shards {
			n += len(c.shards[i].young.slots) + len(c.shards[i].old.slots)
		}
		return n
	}
	before := slots()
	long := strings.Repeat("a", cacheMaxURL/2)
	for i := range 2_000 {
		c.add(fmt.Sprintf("http://h.test/%d/%s", i, long))
	}
	entries := 0
	for i := range c.shards {
		entries += c.shards[i].young.n + c.shards[i].old.n
	}
	if entries > 2*160 || slots() != before {
		t.Fatalf("after long URLs: %d entries (want at most %d), %d slots (were %d)", entries, 2*160, slots(), before)
	}
	if last := fmt.Sprintf("http://h.test/%d/%s", 1_999, long); !c.has(last) {
		t.Fatal("the last long URL added is gone")
	}
	huge := "http://h.test/" + strings.Repeat("b", cacheMaxURL)
	k := int(maphash.String(c.seed, huge) >> 60)
	n0 := c.shards[k].young.n
	c.add(huge)
	if c.has(huge) || c.shards[k].young.n != n0 {
		t.Fatal("a URL over cacheMaxURL was held")
	}
	edge := "http://h.test/" + strings.Repeat("e", cacheMaxURL-len("http://h.test/"))
	c.add(edge)
	if !c.has(edge) {
		t.Fatal("a URL of cacheMaxURL bytes is not held")
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
	const hot = 5000
	urls := make([]string, 1<<20)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://host%d.scale.test/section/%d/page-%d.html", i%2000, i%97, i)
	}
	// The stream, drawn before the timer: batches of 100 as Add sends them, 80 hot, 20
	// cold (added when missed); 8,192 batches, whose 163,840 cold URLs are more than the
	// cache holds, so a cold URL met again on the next pass has been dropped.
	const batch, batches = 100, 1 << 13
	stream := make([]Candidate, batch*batches)
	cold := hot
	for j := range stream {
		if j%5 == 4 {
			stream[j].URL = urls[hot+cold%(len(urls)-hot)]
			cold += 7919
		} else {
			stream[j].URL = urls[(j*7919)%hot]
		}
	}
	// one: has, a URL at a time; many: hasMany, a batch at a time.
	for _, name := range []string{"one", "many"} {
		b.Run(name, func(b *testing.B) {
			c := newSeenCache(1 << 16)
			for i := range hot {
				c.add(urls[i])
			}
			hit := make([]bool, batch)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				k := (i / batch) % batches
				cands := stream[k*batch : (k+1)*batch]
				if name == "one" {
					for j := range cands {
						hit[j] = c.has(cands[j].URL)
					}
				} else {
					c.hasMany(cands, hit)
				}
				for j := range cands {
					if !hit[j] {
						c.add(cands[j].URL)
					}
				}
			}
		})
	}
}

// TestSeenCacheSameHashDifferentSecond: two entries whose first hashes are equal (forced
// here) are two entries, and a lookup hits only where both hashes match: the first alone
// (the slot's place and check) does not make a hit, nor the second alone.
func TestSeenCacheSameHashDifferentSecond(t *testing.T) {
	c := newSeenCache(64)
	s := &c.shards[0]
	const h = 0x1234567 | 1
	c.addLocked(s, h, 1)
	if got := s.young.find(h, 2); got.h != 0 {
		t.Fatalf("(h, 2) found under (h, 1): slot %+v", *got)
	}
	c.addLocked(s, h, 2)
	for _, h2 := range []uint64{1, 2} {
		if sl := s.young.find(h, h2); sl.h != h || sl.h2 != h2 {
			t.Fatalf("(h, %d): slot %+v", h2, *sl)
		}
		if !c.hasLocked(s, h, h2) {
			t.Fatalf("(h, %d) not found", h2)
		}
	}
	if c.hasLocked(s, h, 3) || c.hasLocked(s, h+2, 1) {
		t.Fatal("a hit on one of the two hashes alone")
	}
	if s.young.n != 2 {
		t.Fatalf("%d entries, want 2", s.young.n)
	}
}
