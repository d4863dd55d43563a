package frontier

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/crawlnode/crawlnode/internal/badgermem"
	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

// Cold confirmations stay exact: with a seen cache too small to hold anything for long and
// a Bloom filter that says "maybe" for most new URLs, every URL added long ago (before a
// restart, so in the seen index's runs, and after it, so only in Badger) is reported seen,
// and no URL never added is, with and without the seen index. A partition dropped after
// the runs were built is no longer seen through them.
func TestColdConfirmationsExact(t *testing.T) {
	for _, index := range []string{"none", "mapped", "pread", "mapped-first", "pread-first"} {
		// -first: the index is asked before the Bloom filter (as when most cache misses
		// turn out seen), forced for every call.
		indexFirst := strings.HasSuffix(index, "-first")
		index := strings.TrimSuffix(index, "-first")
		t.Run(fmt.Sprintf("index=%s/first=%v", index, indexFirst), func(t *testing.T) {
			dir := t.TempDir()
			db := openDB(t, dir)
			cfg := Config{DB: db, DefaultDelaySet: true, MaxPagesPerHost: -1, GeneratedBudget: -1,
				ExpectedURLs: 16, BloomFPRate: 0.9, SeenCacheSize: 16,
				// partition = the host's leading digit: "3x.test" is in partition 3
				PartitionOf: func(h string) uint16 { return uint16(h[0] - '0') }}
			if index != "none" {
				cfg.SeenIndexDir = t.TempDir()
			}
			if index == "pread" {
				cfg.SeenIndexMapBytes = -1
			}
			old := func(i int) Candidate { // added before the restart
				return u(fmt.Sprintf("%dold.test", i%8), fmt.Sprintf("/o/%d", i))
			}
			later := func(i int) Candidate { // added after it
				return u(fmt.Sprintf("%dlater.test", i%8), fmt.Sprintf("/l/%d", i))
			}
			never := func(i int) Candidate {
				return u(fmt.Sprintf("%dnew.test", i%8), fmt.Sprintf("/n/%d", i))
			}
			const nOld, nLater, nNew = 6000, 2000, 3000
			f := openF(t, cfg)
			addInBatches(t, f, nOld, old)
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			f = openF(t, cfg) // runs built from the seen keys, cache empty
			addInBatches(t, f, nLater, later)

			// Partition 7 is dropped: its URLs are new again.
			if err := f.DropPartition(7); err != nil {
				t.Fatal(err)
			}
			st0 := f.Stats()
			var batch []Candidate
			wantSeen, wantNew := 0, 0
			check := func() {
				if indexFirst {
					f.seenShare.Store(1 << 15)
				}
				r := mustAdd(t, f, batch...)
				if r.AlreadySeen != wantSeen || r.Added != wantNew {
					t.Fatalf("already seen %d, added %d; want %d, %d (rejected %v)", r.AlreadySeen, r.Added, wantSeen, wantNew, r.Rejected)
				}
				batch, wantSeen, wantNew = batch[:0], 0, 0
			}
			for i := 0; i < max(nOld, nLater, nNew); i++ {
				for _, c := range []struct {
					ok   bool
					cand Candidate
					seen bool
				}{{i < nOld, old(i), true}, {i < nLater, later(i), true}, {i < nNew, never(i), false}} {
					if !c.ok {
						continue
					}
					batch = append(batch, c.cand)
					if c.seen && !strings.HasPrefix(c.cand.URL, "http://7") {
						wantSeen++
					} else {
						wantNew++
					}
				}
				if len(batch) >= 90 {
					check()
				}
			}
			check()
			st := f.Stats()
			if fp := st.BloomFalsePositives - st0.BloomFalsePositives; fp < nNew/2 {
				t.Fatalf("only %d Bloom false positives: the filter is not stressed", fp)
			}
			if hits := st.SeenIndexHits - st0.SeenIndexHits; index != "none" && hits < nOld/2 || index == "none" && hits != 0 {
				t.Fatalf("%d confirmations by the seen index", hits)
			}
		})
	}
}

// Runs are rebuilt as URLs are added (1/idxStale of a run's size, at least idxMin per
// sub-filter), alone while their sub-filters have room (the filters are not rebuilt), and
// a rebuilt run answers for the URLs added since Open.
func TestSeenIndexRebuiltAsURLsAreAdded(t *testing.T) {
	cfg := Config{DB: openDB(t, t.TempDir()), DefaultDelaySet: true, MaxPagesPerHost: -1, GeneratedBudget: -1,
		ExpectedURLs: 1 << 20, SeenCacheSize: -1, SeenIndexDir: t.TempDir(),
		PartitionOf: func(string) uint16 { return 0 }}
	f := openF(t, cfg)
	f.bloomMu.Lock()
	f.bloom.idxMin = 8 // idxMinStale would need 256k URLs
	// The sub-filters are sized for 4,096 URLs each: none grows below.
	var filters [bloomSubs]*bloom.BloomFilter
	for i := range filters {
		filters[i] = f.bloom.subs[i].filter
	}
	f.bloomMu.Unlock()
	url := func(i int) Candidate { return u(fmt.Sprintf("h%d.test", i%50), fmt.Sprintf("/p/%d", i)) }
	const n = 20_000
	addInBatches(t, f, n, url)
	f.bloomWG.Wait() // the rebuild goroutine, when it is running
	f.bloomMu.Lock()
	for i := range filters {
		if f.bloom.subs[i].filter != filters[i] {
			t.Fatalf("sub-filter %d was rebuilt, with room for %d URLs and %d added", i, f.bloom.subs[i].cap, f.bloom.subs[i].n)
		}
	}
	f.bloomMu.Unlock()
	runs := 0
	for i := range bloomSubs {
		runs += f.seenIdx.entries(byte(i))
	}
	if runs < n/2 {
		t.Fatalf("runs hold %d of %d URLs", runs, n)
	}
	st0 := f.Stats()
	var batch []Candidate
	for i := 0; i < n; i += 7 {
		batch = append(batch, url(i))
	}
	for i := 0; i < len(batch); i += 100 {
		r := mustAdd(t, f, batch[i:min(i+100, len(batch))]...)
		if r.Added != 0 {
			t.Fatalf("%+v", r)
		}
	}
	if hits := f.Stats().SeenIndexHits - st0.SeenIndexHits; hits < int64(len(batch))/2 {
		t.Fatalf("%d of %d confirmed by the seen index", hits, len(batch))
	}
}

// TestSeenIndexRuns: a run answers from its mapping, still after its pages were trimmed,
// or, past the index's mapping limit, with pread (nothing mapped, nothing to trim); a
// fault under a mapping or a failed read (here the file cut short; a disk error in a
// crawl) is an error, not a crash.
func TestSeenIndexRuns(t *testing.T) {
	key := func(i int) (k [19]byte, h [16]byte) {
		k[0], k[1], k[2], k[3] = famSeen, 0, 1, 7 // partition 1, sub-filter 7
		binary.BigEndian.PutUint64(k[4:], uint64(i)*3)
		copy(h[:], k[3:])
		return k, h
	}
	const n = 1000 // 5 blocks: 18,040 bytes (4 full ones and 92 entries)
	for _, tc := range []struct {
		name   string
		mapMax int64
		mapped bool
	}{
		{"mapped", DefaultSeenIndexMapBytes, true},
		{"pread-over-limit", 16 << 10, false},
		{"pread-always", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix := newSeenIndex(t.TempDir(), tc.mapMax)
			w, err := ix.writer(7, 4096)
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				k, _ := key(i)
				w.add(k[:])
			}
			run, err := w.finish()
			if err != nil {
				t.Fatal(err)
			}
			if (run.mapping != nil) != tc.mapped || (run.file != nil) == tc.mapped {
				t.Fatalf("run mapped %v, file open %v; want mapped %v", run.mapping != nil, run.file != nil, tc.mapped)
			}
			ix.install(7, run)
			defer ix.close()
			check := func() {
				t.Helper()
				for i := range n {
					_, h := key(i)
					if ok, err := ix.has(1, h); !ok || err != nil {
						t.Fatalf("key %d: found %v, err %v", i, ok, err)
					}
					h[15]++ // between two keys (i*3+1)
					if ok, err := ix.has(1, h); ok || err != nil {
						t.Fatalf("absent key %d: found %v, err %v", i, ok, err)
					}
				}
				if _, h := key(0); true {
					if ok, _ := ix.has(2, h); ok {
						t.Fatal("found under another partition")
					}
				}
			}
			check()
			want := int64(0)
			if tc.mapped {
				want = int64(len(run.mapping))
			}
			if got := ix.trim(); got != want {
				t.Fatalf("trim advised %d bytes, want %d", got, want)
			}
			check()
			if tc.mapped {
				return
			}
			// The file cut short under the open run: a lookup is an error.
			if err := run.file.Truncate(idxBlock); err != nil {
				t.Fatal(err)
			}
			_, h := key(n - 1) // in the last block
			if ok, err := ix.has(1, h); err == nil || ok {
				t.Fatalf("lookup past its file's end: found %v, err %v; want an error", ok, err)
			}
		})
	}

	// A mapping over a file cut short: the fault is an error.
	ix := newSeenIndex(t.TempDir(), DefaultSeenIndexMapBytes)
	defer ix.close()
	f, err := os.CreateTemp(t.TempDir(), "cut-*.idx")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 2*idxBlock)); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, 2*idxBlock, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	r := newRun(2*idxPer, []uint64{0, 0}, 0)
	r.mapping = m
	ix.install(7, r)
	_, h := key(5)
	if ok, err := ix.has(1, h); err == nil || ok {
		t.Fatalf("lookup in a mapping past its file's end: found %v, err %v; want an error", ok, err)
	}
}

// TestSeenIndexMapBudget: runs are mapped while the mappings installed total at most the
// budget, a run replacing a mapped one counts without it, and a run that does not fit is
// read with pread; every run answers either way.
func TestSeenIndexMapBudget(t *testing.T) {
	const blk = idxBlock // a run of k full blocks maps k*blk bytes
	ix := newSeenIndex(t.TempDir(), 3*blk)
	defer ix.close()
	hash := func(sub byte, i int) (h [16]byte) {
		h[0] = sub
		binary.BigEndian.PutUint64(h[1:], uint64(i)*2)
		return h
	}
	build := func(sub byte, nblocks int) *idxRun {
		t.Helper()
		keys := make([][19]byte, nblocks*idxPer)
		for i := range keys {
			h := hash(sub, i)
			keys[i][0], keys[i][1], keys[i][2] = famSeen, 0, 1
			copy(keys[i][3:], h[:])
		}
		r := installRun(t, ix, sub, keys)
		// Every key it holds is found, and a key between two of them is not.
		for _, i := range []int{0, len(keys)/2 + 1, len(keys) - 1} {
			h := hash(sub, i)
			if ok, err := ix.has(1, h); !ok || err != nil {
				t.Fatalf("sub %d key %d: found %v, err %v", sub, i, ok, err)
			}
			h[8]++ // i*2+1
			if ok, err := ix.has(1, h); ok || err != nil {
				t.Fatalf("sub %d absent key %d: found %v, err %v", sub, i, ok, err)
			}
		}
		return r
	}
	want := func(r *idxRun, mapped bool, total int64) {
		t.Helper()
		if (r.mapping != nil) != mapped || (r.file != nil) == mapped {
			t.Fatalf("run mapped %v, file open %v; want mapped %v", r.mapping != nil, r.file != nil, mapped)
		}
		if got := ix.mapped.Load(); got != total {
			t.Fatalf("mapped %d bytes in all, want %d", got, total)
		}
	}
	want(build(1, 2), true, 2*blk)
	want(build(2, 2), false, 2*blk) // 4 blocks would pass the budget
	want(build(1, 3), true, 3*blk)  // replaces its own 2: 3 fit
	want(build(1, 4), false, 0)     // 4 do not fit even alone: its old mapping is gone
	want(build(2, 3), true, 3*blk)  // the room sub 1 gave back
	want(build(3, 1), false, 3*blk) // full
	want(build(2, 1), true, 1*blk)  // smaller
	want(build(3, 2), true, 3*blk)  // and the room it left
	if got := ix.trim(); got != 3*blk {
		t.Fatalf("trim advised %d bytes, want %d", got, 3*blk)
	}
	ix.close()
	if got := ix.mapped.Load(); got != 0 {
		t.Fatalf("mapped %d bytes after close", got)
	}
}

// installRun writes sub-filter sub's run of ix from keys (seen keys in key order),
// installs it and returns it.
func installRun(tb testing.TB, ix *seenIndex, sub byte, keys [][19]byte) *idxRun {
	tb.Helper()
	w, err := ix.writer(sub, 1<<16)
	if err != nil {
		tb.Fatal(err)
	}
	for _, k := range keys {
		w.add(k[:])
	}
	r, err := w.finish()
	if err != nil {
		tb.Fatal(err)
	}
	ix.install(sub, r)
	return r
}

// A run's lookup finds every key it holds and no other, whatever the keys' spread: a few
// partitions of very different sizes (blocks spanning partition boundaries, where the
// lookup's guess from the block's first prefixes is poor) and a cluster of keys sharing
// their 8-byte prefix (blocks whose first prefixes are equal). blockSearch itself must give
// the bisection's answer from every starting guess.
func TestSeenIndexLookupAnySpread(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const h0 = 0x5a // the sub-filter: the hash's first byte
	var keys [][19]byte
	key := func(part uint16) [19]byte {
		var k [19]byte
		k[0], k[1], k[2], k[3] = famSeen, byte(part>>8), byte(part), h0
		for i := 4; i < 19; i++ {
			k[i] = byte(r.Uint32())
		}
		return k
	}
	for part, n := range []int{1, 3000, 5, 700, 2, 0, 1500, 1} {
		for range n {
			keys = append(keys, key(uint16(part)))
		}
	}
	same := key(9)
	for range 600 { // one 8-byte prefix: partition 9, hash bytes 1-6 fixed
		k := same
		for i := 10; i < 19; i++ {
			k[i] = byte(r.Uint32())
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [19]byte) int { return bytes.Compare(a[:], b[:]) })
	keys = slices.Compact(keys)

	// The same run twice: mapped, and read with pread; both must give every answer.
	var run *idxRun
	var ixs []*seenIndex
	for _, mapMax := range []int64{DefaultSeenIndexMapBytes, -1} {
		ix := newSeenIndex(t.TempDir(), mapMax)
		r := installRun(t, ix, h0, keys)
		if mapMax > 0 {
			run = r // for blockSearch below
		}
		defer ix.close()
		ixs = append(ixs, ix)
	}

	has := func(k [19]byte) bool {
		var h [16]byte
		copy(h[:], k[3:])
		var found [2]bool
		for i, ix := range ixs {
			var err error
			if found[i], err = ix.has(uint16(k[1])<<8|uint16(k[2]), h); err != nil {
				t.Fatal(err)
			}
		}
		if found[0] != found[1] {
			t.Fatalf("key %x: mapped run says %v, pread run %v", k, found[0], found[1])
		}
		return found[0]
	}
	held := map[[19]byte]bool{}
	for _, k := range keys {
		held[k] = true
	}
	for _, k := range keys {
		if !has(k) {
			t.Fatalf("key %x of the run not found", k)
		}
		for _, d := range []int{-1, 1} { // its neighbours in the last byte
			n := k
			n[18] = byte(int(n[18]) + d)
			if !held[n] && has(n) {
				t.Fatalf("key %x found, not in the run", n)
			}
		}
	}
	for range 20000 {
		k := key(uint16(r.IntN(12)))
		if !held[k] && has(k) {
			t.Fatalf("key %x found, not in the run", k)
		}
	}

	// Poor guesses (across partition boundaries) made some pread lookups read their whole
	// block: the window's fallback was taken.
	if ixs[1].wideReads.Load() == 0 {
		t.Fatal("no pread lookup read its whole block: the window's fallback went untested")
	}

	// blockSearch from every guess, against a bisection, in a few blocks; and the pread
	// search (a window around the guess, the whole block when it cannot decide) too.
	pr := ixs[1].subs[h0].run
	for _, b := range []int{0, 3, len(run.first) / 2, len(run.first) - 1} {
		cnt := min(idxPer, run.n-b*idxPer)
		blk := run.mapping[b*idxBlock : b*idxBlock+cnt*idxEntry]
		for i := 0; i <= cnt; i += 7 {
			var e [idxEntry]byte
			if i < cnt {
				copy(e[:], blk[i*idxEntry:])
			} else {
				e = [idxEntry]byte{0xff, 0xff}
			}
			for _, d := range []int{0, -1, 1} {
				target := e
				target[17] = byte(int(target[17]) + d)
				want := sort.Search(cnt, func(j int) bool { return bytes.Compare(blk[j*idxEntry:(j+1)*idxEntry], target[:]) >= 0 })
				for g := -2; g <= cnt+2; g++ {
					if got := blockSearch(blk, cnt, g, target[:]); got != want {
						t.Fatalf("block %d, key %x, guess %d: %d, want %d", b, target, g, got, want)
					}
					wantFound := want < cnt && bytes.Equal(blk[want*idxEntry:(want+1)*idxEntry], target[:])
					if got, found, err := ixs[1].search(pr, b, cnt, g, target[:]); err != nil || got != want || found != wantFound {
						t.Fatalf("pread block %d, key %x, guess %d: %d %v (err %v), want %d %v", b, target, g, got, found, err, want, wantFound)
					}
				}
			}
		}
	}
}

// BenchmarkSeenIndexPread: a cold confirmation's lookup in a run read with pread (the
// runs past DefaultSeenIndexMapBytes), its file in the page cache: the window of idxWin
// entries around the guess against the whole 4 KiB block; and in the same run mapped.
//
//	go test -run '^$' -bench SeenIndexPread ./frontier/
func BenchmarkSeenIndexPread(b *testing.B) {
	const n = 1 << 20 // one sub-filter's run at about 270M URLs; 18 MiB
	r := rand.New(rand.NewPCG(3, 4))
	const h0 = 0x21
	keys := make([][19]byte, n)
	for i := range keys {
		k := &keys[i]
		part := uint16(r.IntN(271))
		k[0], k[1], k[2], k[3] = famSeen, byte(part>>8), byte(part), h0
		for j := 4; j < 19; j++ {
			k[j] = byte(r.Uint32())
		}
	}
	slices.SortFunc(keys, func(a, b [19]byte) int { return bytes.Compare(a[:], b[:]) })
	ix := newSeenIndex(b.TempDir(), -1)
	run := installRun(b, ix, h0, keys)
	b.Cleanup(ix.close)
	// The same run mapped (as the share of the index within SeenIndexMapBytes is): its
	// pages resident after the first lookups touched them, a lookup a memory read.
	mix := newSeenIndex(b.TempDir(), DefaultSeenIndexMapBytes)
	if installRun(b, mix, h0, keys).mapping == nil {
		b.Fatal("run not mapped")
	}
	b.Cleanup(mix.close)
	for _, name := range []string{"window", "block", "mapped"} {
		ix := ix
		if name == "mapped" {
			ix = mix
		}
		b.Run(name, func(b *testing.B) {
			ix.noWindow = name == "block"
			wide := ix.wideReads.Load()
			i := 0
			for b.Loop() {
				k := &keys[(i*7919)%n]
				i++
				var h [16]byte
				copy(h[:], k[3:])
				if ok, err := ix.has(uint16(k[1])<<8|uint16(k[2]), h); !ok || err != nil {
					b.Fatal("not found", err)
				}
			}
			b.ReportMetric(float64(ix.wideReads.Load()-wide)/float64(b.N), "wide/op")
		})
	}
	// The floor under a lookup: one pread of a window of the same page again and again (no
	// search, the page hot in the page cache), which is the machine's system call and page
	// cache cost alone. It differs severalfold between VMs (speculative-execution
	// mitigations on kernel entry and return), and with it the checks' rate at scale.
	b.Run("same-page", func(b *testing.B) {
		var buf [idxWin * idxEntry]byte
		for b.Loop() {
			if _, err := run.file.ReadAt(buf[:], 7*idxBlock+100); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The rebuild goroutine takes a sub-filter over its size before runs that are only stale,
// whatever their order: a filter past its size is past its false-positive target. Only
// the grown one gets a new filter.
func TestBloomWorkerGrowsFiltersFirst(t *testing.T) {
	cfg := Config{DB: openDB(t, t.TempDir()), DefaultDelaySet: true, MaxPagesPerHost: -1, GeneratedBudget: -1,
		SeenIndexDir: t.TempDir()}
	f := openF(t, cfg)
	var order []byte
	f.bloomHook = func(stage string, sub byte) {
		if stage == "logging" {
			order = append(order, sub)
		}
	}
	f.bloomMu.Lock()
	stale1, grown, stale2 := &f.bloom.subs[3], &f.bloom.subs[7], &f.bloom.subs[9]
	old := [3]*bloom.BloomFilter{stale1.filter, grown.filter, stale2.filter}
	stale1.due, stale2.due = true, true // only their runs are stale
	grown.due, grown.n = true, grown.cap+1
	f.bloom.running = true
	f.bloomWG.Add(1)
	f.bloomMu.Unlock()
	f.bloomWorker() // returns when none is due
	if !slices.Equal(order, []byte{7, 3, 9}) {
		t.Fatalf("rebuilt in the order %v, want [7 3 9] (the grown filter first)", order)
	}
	f.bloomMu.Lock()
	defer f.bloomMu.Unlock()
	if stale1.filter != old[0] || stale2.filter != old[2] || grown.filter == old[1] {
		t.Fatal("only sub-filter 7 (past its size) should have a new filter")
	}
}

// TestSeenShareFollowsTheMix: the share that picks the order (Add asks the index first
// while it is over indexFirstShare) rises over it once most of the seen cache's misses turn
// out seen, and falls under it again once most are new. That both orders are exact is
// TestColdConfirmationsExact's.
func TestSeenShareFollowsTheMix(t *testing.T) {
	cfg := Config{DB: openDB(t, t.TempDir()), DefaultDelaySet: true, MaxPagesPerHost: -1, GeneratedBudget: -1,
		SeenCacheSize: 16, SeenIndexDir: t.TempDir()}
	f := openF(t, cfg)
	old := func(i int) Candidate { return u(fmt.Sprintf("h%d.test", i%20), fmt.Sprintf("/o/%d", i)) }
	addInBatches(t, f, 4000, old)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = openF(t, cfg) // runs hold every URL; the cache is empty
	if f.seenShare.Load() > indexFirstShare {
		t.Fatal("index first before any Add")
	}
	hits0 := f.Stats().SeenIndexHits
	for i := 0; i < 2000; i += 100 { // 99 seen and 1 new a call
		batch := []Candidate{u("new.test", fmt.Sprintf("/n/%d", i))}
		for j := i; j < i+99; j++ {
			batch = append(batch, old(j))
		}
		if r := mustAdd(t, f, batch...); r.AlreadySeen != 99 || r.Added != 1 {
			t.Fatalf("%+v", r)
		}
	}
	if s := f.seenShare.Load(); s <= indexFirstShare {
		t.Fatalf("seen share %d/%d after mostly-seen calls, want over %d", s, 1<<15, indexFirstShare)
	}
	if hits := f.Stats().SeenIndexHits - hits0; hits < 1900 {
		t.Fatalf("%d confirmations by the index", hits)
	}
	for i := 0; i < 40; i++ { // all new
		var batch []Candidate
		for j := range 50 {
			batch = append(batch, u("fresh.test", fmt.Sprintf("/f/%d/%d", i, j)))
		}
		if r := mustAdd(t, f, batch...); r.Added != 50 {
			t.Fatalf("%+v", r)
		}
	}
	if s := f.seenShare.Load(); s > indexFirstShare {
		t.Fatalf("seen share %d/%d after all-new calls, want at most %d", s, 1<<15, indexFirstShare)
	}
}

// Rebuilds after Open merge each run with the log of keys added since its snapshot (the
// sub-filters growing too, and URLs added inside both windows of each rebuild), and what
// they make is what a scan would: every run holds only committed keys, each once, every
// committed key is in its sub-filter's run or in its log (so in the run after its next
// rebuild), and the Bloom filter has every one. Only the sub-filters whose logs were
// marked lost scan Badger, once each: nothing was dropped.
func TestSeenIndexMergedRebuilds(t *testing.T) {
	for _, mapped := range []bool{true, false} {
		t.Run(fmt.Sprintf("mapped=%v", mapped), func(t *testing.T) {
			cfg := Config{DB: openDB(t, t.TempDir()), DefaultDelaySet: true, MaxPagesPerHost: -1, GeneratedBudget: -1,
				ExpectedURLs: bloomSubs * 8, SeenCacheSize: -1, SeenIndexDir: t.TempDir(),
				// Keys of several partitions in every run, so that a merge interleaves them.
				PartitionOf: func(h string) uint16 { return uint16(h[1]-'0') * 300 }}
			if !mapped {
				cfg.SeenIndexMapBytes = -1
			}
			f := openF(t, cfg)
			f.bloomMu.Lock()
			f.bloom.idxMin = 4 // idxMinStale would need millions of URLs
			// A quarter of the sub-filters scan once (as after a drop): their logs then
			// hold keys their runs hold too (added after the log began, before the
			// snapshot), which the next merge must write once.
			for i := range bloomSubs / 4 {
				f.bloom.subs[i].pendLost = true
			}
			f.bloomMu.Unlock()
			var (
				mu        sync.Mutex
				committed = map[[idxEntry]byte]bool{}
				windowed  atomic.Int64
				next      atomic.Int64
			)
			url := func(i int64) Candidate {
				return u(fmt.Sprintf("h%d.test", i%7), fmt.Sprintf("/p/%d", i))
			}
			record := func(c Candidate) {
				hn, _ := hostOf(c.URL)
				mu.Lock()
				committed[idxKey(f.cfg.PartitionOf(hn), URLHash(c.URL))] = true
				mu.Unlock()
			}
			f.bloomHook = func(stage string, sub byte) {
				if windowed.Load() >= 400 {
					return
				}
				for k := 0; k < 2; {
					c := url(1<<40 + next.Add(1))
					if URLHash(c.URL)[0] != sub {
						continue
					}
					if r := mustAdd(t, f, c); r.Added != 1 {
						t.Errorf("%+v", r)
					}
					record(c)
					windowed.Add(1)
					k++
				}
			}
			const n = 30_000
			var batch []Candidate
			for i := range int64(n) {
				c := url(i)
				batch = append(batch, c)
				if len(batch) == 500 || i == n-1 {
					if r := mustAdd(t, f, batch...); r.Added != len(batch) {
						t.Fatalf("%+v", r)
					}
					for _, c := range batch {
						record(c)
					}
					batch = batch[:0]
				}
			}
			waitBloomSettled(t, f)
			f.bloomWG.Wait()
			if windowed.Load() < 100 {
				t.Fatalf("only %d URLs added inside rebuilds", windowed.Load())
			}
			if m, s := f.seenIdx.merges.Load(), f.seenIdx.scans.Load(); m < bloomSubs || s != bloomSubs/4 {
				t.Fatalf("%d merged rebuilds, %d scans: want at least one merge a sub-filter, one scan for each log lost", m, s)
			}
			mu.Lock()
			defer mu.Unlock()
			inRuns := map[[idxEntry]byte]bool{}
			for i := range bloomSubs {
				r := f.seenIdx.run(byte(i))
				if err := r.each(func(e []byte) error {
					k := [idxEntry]byte(e)
					if !committed[k] || inRuns[k] {
						return fmt.Errorf("run %d holds %x: committed %v, twice %v", i, e, committed[k], inRuns[k])
					}
					if k[2] != byte(i) {
						return fmt.Errorf("run %d holds %x", i, e)
					}
					inRuns[k] = true
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			f.bloomMu.RLock()
			defer f.bloomMu.RUnlock()
			for k := range committed {
				s := &f.bloom.subs[k[2]]
				if !s.filter.Test(k[2:]) {
					t.Fatalf("the Bloom filter misses %x", k)
				}
				if !inRuns[k] && !slices.Contains(s.pend, k) {
					t.Fatalf("%x is in neither its run nor its log", k)
				}
			}
			if len(inRuns) < len(committed)/2 {
				t.Fatalf("runs hold %d of %d keys", len(inRuns), len(committed))
			}
		})
	}
}

// A rebuild scans Badger where a merge cannot be trusted: after a partition was dropped
// (every run then comes from a snapshot taken after the drop, trusted for that partition
// again), after its log outgrew its bound, and after its run could not be written.
func TestSeenIndexRebuildScansWhenMergeUntrusted(t *testing.T) {
	idxDir := t.TempDir()
	cfg := Config{DB: openDB(t, t.TempDir()), DefaultDelaySet: true, MaxPagesPerHost: -1, GeneratedBudget: -1,
		ExpectedURLs: 1 << 20, SeenCacheSize: -1, SeenIndexDir: idxDir,
		PartitionOf: func(h string) uint16 { return uint16(h[1] - '0') }}
	f := openF(t, cfg)
	f.bloomMu.Lock()
	f.bloom.idxMin = 4
	f.bloomMu.Unlock()
	var next int
	addUntilRebuilt := func(what string, want func() bool) {
		t.Helper()
		for range 200 {
			var batch []Candidate
			for range 2000 {
				batch = append(batch, u(fmt.Sprintf("h%d.test", next%5), fmt.Sprintf("/p/%d", next)))
				next++
			}
			mustAdd(t, f, batch...)
			waitBloomSettled(t, f)
			f.bloomWG.Wait()
			if want() {
				return
			}
		}
		t.Fatalf("%s: not after %d URLs", what, next)
	}
	addUntilRebuilt("a merged rebuild of every run", func() bool { return f.seenIdx.merges.Load() >= bloomSubs })
	if s := f.seenIdx.scans.Load(); s != 0 {
		t.Fatalf("%d scans before anything was dropped", s)
	}

	// A drop: every run's next rebuild scans, and its run is trusted for every partition.
	if err := f.DropPartition(3); err != nil {
		t.Fatal(err)
	}
	drops := f.seenIdx.drops.Load()
	addUntilRebuilt("every run rebuilt after the drop", func() bool {
		for i := range bloomSubs {
			if f.seenIdx.run(byte(i)).built != drops {
				return false
			}
		}
		return true
	})
	if s := f.seenIdx.scans.Load(); s < bloomSubs {
		t.Fatalf("%d scans after the drop, want one a run at least", s)
	}

	// A log over its bound is dropped, and its sub-filter's next rebuild scans.
	sb := newSeenBloom(bloomSubs, 0.01)
	for i := range sb.subs {
		sb.subs[i].filter = bloom.NewWithEstimates(8, 0.01)
	}
	sb.idxMin = 4
	var h [16]byte
	for i := range 2*4 + pendSlack + 1 {
		h[1], h[2] = byte(i), byte(i>>8)
		sb.add(1, h)
	}
	if s := &sb.subs[0]; !s.pendLost || s.pend != nil {
		t.Fatalf("a log of %d keys over its bound %d: lost %v", len(s.pend), sb.pendMax(s), s.pendLost)
	}
	f.bloomMu.Lock()
	f.bloom.subs[9].pendLost = true
	f.bloomMu.Unlock()
	scans := f.seenIdx.scans.Load()
	if err := f.growSub(9); err != nil {
		t.Fatal(err)
	}
	if f.seenIdx.scans.Load() != scans+1 {
		t.Fatal("a rebuild with its log lost did not scan")
	}

	// A run that cannot be written (its directory gone) keeps the old one, whether its
	// sub-filter is rebuilt meanwhile (13: made to look full) or not (11); the next
	// rebuild scans.
	if err := os.RemoveAll(idxDir); err != nil {
		t.Fatal(err)
	}
	f.bloomMu.Lock()
	f.bloom.subs[13].cap = 1
	f.bloomMu.Unlock()
	for _, sub := range []byte{11, 13} {
		old := f.seenIdx.run(sub)
		if err := f.growSub(sub); err != nil {
			t.Fatal(err)
		}
		f.bloomMu.RLock()
		lost := f.bloom.subs[sub].pendLost
		f.bloomMu.RUnlock()
		if !lost || f.seenIdx.run(sub) != old {
			t.Fatalf("sub-filter %d: a run not written left its log in place (lost %v) or replaced the run", sub, lost)
		}
	}
	if err := os.MkdirAll(idxDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []byte{11, 13} {
		scans = f.seenIdx.scans.Load()
		if err := f.growSub(sub); err != nil {
			t.Fatal(err)
		}
		if f.seenIdx.scans.Load() != scans+1 {
			t.Fatalf("sub-filter %d: the rebuild after a run not written did not scan", sub)
		}
	}
}

// blockAfter's search tree gives a bisection of first's answer, for any length and with
// runs of equal prefixes (blocks whose keys share their first 8 bytes), at every probe.
func TestSeenIndexBlockAfter(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 2, idxFan - 1, idxFan, idxFan + 1, idxFan * idxFan, idxFan*idxFan + 1, 3*idxFan*idxFan + 5, 1000, 5000} {
		first := make([]uint64, n)
		for i := range first {
			first[i] = uint64(r.IntN(3 * n))
		}
		slices.Sort(first)
		run := newRun(n*idxPer, first, 0)
		for p := uint64(0); p <= uint64(3*n)+1; p++ {
			want := sort.Search(n, func(i int) bool { return first[i] > p })
			if got := run.blockAfter(p); got != want {
				t.Fatalf("n %d, p %d: %d, want %d", n, p, got, want)
			}
		}
	}
}

// BenchmarkSeenIndexRebuild: the CPU a run's rebuild costs a key, merged from the old run
// and its log against scanned from Badger (the log marked lost), on an on-disk Badger
// with the node's options holding 1M URLs over 2,000 hosts, the tables compacted.
//
//	go test -run '^$' -bench SeenIndexRebuild ./frontier/
func BenchmarkSeenIndexRebuild(b *testing.B) {
	dir := b.TempDir()
	db, err := badger.Open(badgermem.Options(dir))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	f := openF(b, Config{DB: db, DefaultDelaySet: true, MaxPagesPerHost: -1, GeneratedBudget: -1,
		SeenIndexDir: b.TempDir(), ExpectedURLs: 1 << 20})
	const n = 1 << 20
	addInBatches(b, f, n, func(i int) Candidate {
		return Candidate{URL: fmt.Sprintf("http://host%d.rebuild.test/section/%d/page-%d.html", i%2000, i%97, i)}
	})
	waitBloomSettled(b, f)
	f.bloomWG.Wait()
	if err := db.Flatten(1); err != nil {
		b.Fatal(err)
	}
	for _, how := range []string{"merge", "scan"} {
		b.Run(how, func(b *testing.B) {
			keys := 0
			cpu0 := cpuTime()
			for i := 0; b.Loop(); i++ {
				sub := byte(i)
				f.bloomMu.Lock()
				f.bloom.subs[sub].pendLost = how == "scan"
				f.bloomMu.Unlock()
				if err := f.growSub(sub); err != nil {
					b.Fatal(err)
				}
				keys += f.seenIdx.entries(sub)
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(keys), "cpu-ns/key")
		})
	}
}
