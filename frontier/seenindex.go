package frontier

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/crawlnode/crawlnode/internal/badgermem"
	"golang.org/x/sys/unix"
)

// seenIndex answers cold confirmations (a Bloom "maybe" the seen cache does not hold)
// without a Badger point read, which costs some 16 us of CPU on on-disk tables (table
// index search, block cache, decompression). Per Bloom sub-filter it keeps one run: the
// seen keys (partition, URL hash: 18 bytes each) of the sub-filter's share, in key order,
// taken from one Badger snapshot, in a file on disk mapped read-only (MADV_RANDOM: no
// read-ahead). Files are in blocks of 4096 bytes (idxPer entries, zero padded); the heap
// holds each block's first key as a uint64 (partition and hash bytes 1-6: the sub-filter
// fixes byte 0), 8 bytes per 227 URLs: 3.5 MB at 100M URLs, and 2-byte marks of where in
// the block each slice of idxSlice entries begins (12 MB at 100M). A lookup is a search of
// that array (idxRun.blockAfter), a scan of its block's marks and a bisection of the one
// slice (288 bytes) they name, from the mapping or read with one pread.
//
// Mapped up to a byte budget, read with pread beyond it. A lookup read with pread costs a
// system call (1-4 us of CPU on this project's machines, the largest part of a cold check);
// a mapped block that the page cache holds costs a memory read, or a minor fault the first
// time. But the pages a lookup touched count in the process's file-backed resident set, and
// cold checks touch a large index all over: at 90M URLs the 1.6 GB of runs became resident
// within seconds and lifted RSS to 3 GB (BENCHMARKS.md, "Seen set at scale"), faster than
// any trimming pass could drop them. So the runs mapped at any time total at most mapMax
// bytes (Config.SeenIndexMapBytes, default DefaultSeenIndexMapBytes): a run is mapped when
// it fits in what the other runs' mappings leave (the run it replaces gives its share
// back), else it keeps its file open and each lookup reads its block with pread: the blocks
// stay in the page cache, which the kernel may reclaim, and out of the process's resident
// set. Once the index outgrows the budget, the budget still serves the share of lookups it
// holds (about mapMax over the index's size): at 10M URLs, 128 of 171 MiB mapped, the
// index's lookups took 40% less CPU than with pread alone (BENCHMARKS.md, "Seen index
// mapped up to its budget"). Runs are built and installed one at a time (at Open, then by
// the one rebuild goroutine), so the choice in finish and the count in install cannot race.
// The pages a mapped run's lookups touched are dropped by trim (MADV_DONTNEED: they stay in
// the page cache), which the node's badgermem.Trimmer calls when its table pass was not
// enough. A disk error under a mapped page would be a SIGBUS: lookups run with
// debug.SetPanicOnFault and turn that fault into an error (Badger then answers, as for a
// failed pread).
//
// Exact: a run holds only keys a committed snapshot held, and the only deleter of seen
// keys is DropPartition, which marks the partition dropped (drop) after its commit; a run
// whose snapshot may predate that mark (built < droppedAt) is not trusted for that
// partition. A hash not in a run is never called new from the run: the caller asks Badger,
// so keys added after the run was built are still found. Runs are rebuilt by growSub: at
// Open for all, with their sub-filter whenever it grows, and alone whenever a 1/idxStale
// of the run's size was added since it was built (at most about 1/65 of a sub-filter's
// keys are missing from its run, plus those added since the last rebuild started), so in
// a long crawl nearly every cold link is answered by the index. A rebuild after Open
// merges the old run with the log of keys added since (bloomSub.pend; bloom.go): a
// sequential read and write of the run, where a scan of Badger's keys cost about a
// microsecond a key.
//
// Files are unlinked right after they are created: a crash leaves nothing behind, and a
// run's disk space (18 bytes a URL: 1.8 GB at 100M URLs) is freed when it is replaced.
type seenIndex struct {
	dir    string
	mapMax int64 // the installed runs' mappings total at most this many bytes
	// mapped: the bytes of the installed runs' mappings (install keeps it).
	mapped atomic.Int64
	drops  atomic.Uint64 // DropPartition commits so far
	// droppedAt: partition -> the drops count right after its last drop's commit.
	// Replaced whole (copy on write) under dropMu; drops are rare.
	dropMu    sync.Mutex
	droppedAt atomic.Pointer[map[uint16]uint64]
	subs      [bloomSubs]idxSub
	// wideReads counts lookups whose block's marks left more than one slice to read
	// (tests, benchmarks).
	wideReads atomic.Int64
	// merges and scans count growSub's rebuilds by where they read the keys (tests,
	// benchmarks).
	merges, scans atomic.Int64
}

type idxSub struct {
	mu sync.RWMutex // lookups and trims under RLock (they read the mapping); swaps and Close under Lock
	r  *idxRun
}

type idxRun struct {
	m     []byte   // the file, mapped read-only; nil when empty or read with pread
	f     *os.File // the file, when its blocks are read with pread (m nil)
	n     int      // entries
	first []uint64 // per block: idxPrefix of its first entry
	// marks: per block, idxMarks fractions (marks[b*idxMarks+s-1] for slice s >= 1): where
	// in the block's span of prefixes slice s's first entry falls (frac). last is the
	// prefix of the run's last entry, which bounds the last block's span.
	marks []uint16
	last  uint64
	// lev is first's search tree: lev[0] is first, lev[i+1] holds every idxFan-th prefix of
	// lev[i], up to a level of at most idxFan.
	lev   [][]uint64
	built uint64 // seenIndex.drops read before the run's snapshot was taken
}

// unmap releases the run's mapping or file.
func (r *idxRun) unmap() {
	if r == nil {
		return
	}
	if r.m != nil {
		_ = unix.Munmap(r.m)
		r.m = nil
	}
	if r.f != nil {
		_ = r.f.Close()
		r.f = nil
	}
}

const (
	idxEntry = 18 // partition (2, big endian) + URL hash (16)
	idxBlock = 4096
	idxPer   = idxBlock / idxEntry // 227 entries a block
	// idxMinStale, idxStale: a sub-filter's run is rebuilt once max(its entries/idxStale,
	// idxMinStale) URLs were added to the sub-filter since the run was built. A cold
	// link newer than its run costs a Badger read: at 100M URLs, with 1/8, 4.4% of the
	// confirmations went to Badger and took 18% of the checks' CPU against the seen
	// index's 24% for the other 95.6% (BENCHMARKS.md, "Seen set at scale"). A rebuild
	// merges the run with the keys logged since (a sequential read and write of 18 bytes
	// a key), so a new URL costs idxStale keys merged, and a cold link a Badger read with
	// a chance of about 1/(2 idxStale): with a fifth of the links cold for every new one,
	// 64 costs less than 32 or 128 would, and the logs hold half what they held at 32.
	idxStale    = 64
	idxMinStale = 1024
)

// DefaultSeenIndexMapBytes is Config.SeenIndexMapBytes's default: the seen index is
// mapped whole up to about 7.5M seen URLs (18 bytes each); beyond, runs totalling this
// many bytes are mapped and the rest read with pread.
const DefaultSeenIndexMapBytes = 128 << 20

// newSeenIndex keeps runs in dir, mapped up to mapMax bytes in all (negative: never
// mapped).
func newSeenIndex(dir string, mapMax int64) *seenIndex {
	ix := &seenIndex{dir: dir, mapMax: mapMax}
	m := map[uint16]uint64{}
	ix.droppedAt.Store(&m)
	return ix
}

// idxPrefix orders like the entry e (18 bytes) within one sub-filter, where e[2] (the hash's
// first byte) is fixed: partition, then hash bytes 1-6.
func idxPrefix(e []byte) uint64 {
	return uint64(e[0])<<56 | uint64(e[1])<<48 | uint64(e[3])<<40 | uint64(e[4])<<32 |
		uint64(e[5])<<24 | uint64(e[6])<<16 | uint64(e[7])<<8 | uint64(e[8])
}

// drop marks partition p's seen keys deleted. DropPartition calls it after its commit.
func (ix *seenIndex) drop(p uint16) {
	if ix == nil {
		return
	}
	ix.dropMu.Lock()
	n := ix.drops.Add(1)
	m := maps.Clone(*ix.droppedAt.Load())
	m[p] = n
	ix.droppedAt.Store(&m)
	ix.dropMu.Unlock()
}

// has reports whether (part, h) is in its sub-filter's run and the run can be trusted for
// part. false means "not known here": ask Badger. An error is a fault reading the mapping
// (a disk error under it).
func (ix *seenIndex) has(part uint16, h [16]byte) (found bool, err error) {
	s := &ix.subs[h[0]]
	s.mu.RLock()
	defer s.mu.RUnlock()
	r := s.r
	if r == nil || r.n == 0 {
		return false, nil
	}
	if d, ok := (*ix.droppedAt.Load())[part]; ok && d > r.built {
		return false, nil
	}
	var e [idxEntry]byte
	e[0], e[1] = byte(part>>8), byte(part)
	copy(e[2:], h[:])
	p := idxPrefix(e[:])
	if r.m != nil {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if v := recover(); v != nil {
				found, err = false, fmt.Errorf("seen index: fault reading the mapping: %v", v)
			}
		}()
	}
	// Blocks whose first prefix is > p hold only larger keys. The key is in the last block
	// whose first prefix is <= p, or, when that block's first prefix equals p (the first
	// key may still be larger), possibly in the one before it.
	j := r.blockAfter(p)
	for b := j - 1; b >= 0; b-- {
		cnt := min(idxPer, r.n-b*idxPer)
		i, found, err := ix.search(r, b, cnt, p, e[:])
		if found || err != nil {
			return found, err
		}
		if r.first[b] < p || i > 0 {
			break
		}
	}
	return false, nil
}

// idxFan is the width of a run's search tree (idxRun.lev): each level's step reads at most
// idxFan prefixes in a row (64 bytes, one or two cache lines), and the upper levels are a
// small share of the runs' memory (1/7 of first), which the CPU's caches keep. A bisection
// of first read 11 of its prefixes, each in a line of its own, at 100M URLs (3.5 MB of
// first for all runs, which the page cache's copies push out of the CPU's caches): 0.42 s
// of 6.27 s of the mostly-seen checks there, 0.55 us a lookup (BENCHMARKS.md).
const idxFan = 8

// newRun makes a run of n entries in blocks whose first prefixes are first, with the
// blocks' slice marks and the last entry's prefix.
func newRun(n int, first []uint64, marks []uint16, last uint64, built uint64) *idxRun {
	r := &idxRun{n: n, first: first, marks: marks, last: last, built: built, lev: [][]uint64{first}}
	for l := first; len(l) > idxFan; {
		up := make([]uint64, 0, (len(l)+idxFan-1)/idxFan)
		for k := 0; k < len(l); k += idxFan {
			up = append(up, l[k])
		}
		r.lev = append(r.lev, up)
		l = up
	}
	return r
}

// blockAfter returns the index of the first block whose first prefix is > p, or
// len(r.first): from the top of the search tree down, how many prefixes of each level
// are <= p.
func (r *idxRun) blockAfter(p uint64) int {
	top := r.lev[len(r.lev)-1]
	c := 0
	for c < len(top) && top[c] <= p {
		c++
	}
	for i := len(r.lev) - 2; i >= 0 && c > 0; i-- {
		// lev[i+1][c-1] = l[idxFan*(c-1)] <= p, and l[idxFan*c] > p when it exists.
		l := r.lev[i]
		j, end := idxFan*(c-1)+1, min(idxFan*c, len(l))
		for j < end && l[j] <= p {
			j++
		}
		c = j
	}
	return c
}

// idxSlice is the size in entries of a block's slices (288 bytes; a block holds
// ceil(idxPer/idxSlice) = 15 of them, the last of 3), idxMarks the marks a block has: one
// per slice after its first. A lookup reads the one slice that can hold its key, found
// from the marks, which the heap keeps (2 bytes a slice: 0.12 bytes a URL, 12 MB at 100M
// URLs). A guess from the block's first prefixes alone, with a window of 64 entries
// around it (1,152 bytes) to be sure, cost about four times the bytes: the copy of those
// bytes from memory the CPU's caches do not hold was 43% of a pread lookup's CPU at 10M
// URLs (perf, BENCHMARKS.md), the system call's entry and exit under 10%.
const (
	idxSlice = 16
	idxMarks = (idxPer - 1) / idxSlice
)

// frac is where prefix p falls between lo and hi, the prefixes that begin and end a block,
// scaled to 0-65535 (0 at or before lo, 65535 at or past hi). It measures in partitions,
// each one wide whatever its share of hash values: a block's keys are uniform in hash
// within each partition, and a block may span several (a partition's keys fill less than
// a block in a sub-filter's run up to about 60M URLs), where a measure in raw prefixes
// would crowd every slice into the span's two ends. Non-decreasing in p, which is all the
// marks need: a slice whose mark is below p's holds entries below p's, one whose mark is
// above holds entries above.
func frac(p, lo, hi uint64) uint16 {
	if p <= lo {
		return 0
	}
	if p >= hi {
		return 1<<16 - 1
	}
	f := partCoord(p, lo) / partCoord(hi, lo) * (1 << 16)
	if f >= 1<<16-1 {
		return 1<<16 - 1
	}
	return uint16(f)
}

// partCoord is prefix p's distance from lo (p >= lo) in partitions: whole partitions
// apart, plus the difference of their 48 bits of hash as a fraction of one partition.
// Exact up to float64's rounding, which keeps it non-decreasing in p.
func partCoord(p, lo uint64) float64 {
	const hashBits = 48
	parts := float64(p>>hashBits - lo>>hashBits)
	hash := float64(int64(p&(1<<hashBits-1))-int64(lo&(1<<hashBits-1))) / (1 << hashBits)
	return parts + hash
}

// end is the prefix that ends block b: the next block's first, or one past the run's last
// entry for the last block.
func (r *idxRun) end(b int) uint64 {
	if b+1 < len(r.first) {
		return r.first[b+1]
	}
	return r.last + min(1, ^r.last)
}

// search returns the index of the first entry >= e (of prefix p) in block b of r (cnt
// entries), and whether that entry is e. It reads from the mapping, or with one pread,
// the slices that can hold e: those from the last whose mark is below p's to the last
// whose mark is not above it. That is one slice, unless marks tie with p's (keys sharing
// their 8-byte prefix, or a span too wide for 16 bits to tell its slices apart, as a block
// across partitions may be).
func (ix *seenIndex) search(r *idxRun, b, cnt int, p uint64, e []byte) (int, bool, error) {
	ns := (cnt + idxSlice - 1) / idxSlice
	fp := frac(p, r.first[b], r.end(b))
	t, u := 0, 0
	for s, m := range r.marks[b*idxMarks : b*idxMarks+ns-1] {
		if m > fp {
			break
		}
		if m < fp {
			t = s + 1
		}
		u = s + 1
	}
	if u > t {
		ix.wideReads.Add(1)
	}
	lo, hi := t*idxSlice, min((u+1)*idxSlice, cnt)
	var blk []byte
	if r.m != nil {
		blk = r.m[b*idxBlock+lo*idxEntry : b*idxBlock+hi*idxEntry]
	} else {
		// Go zeroes a buffer it declares: the whole block's only when more than two
		// slices are read.
		if hi-lo <= 2*idxSlice {
			var buf [2 * idxSlice * idxEntry]byte
			blk = buf[:(hi-lo)*idxEntry]
		} else {
			var buf [idxPer * idxEntry]byte
			blk = buf[:(hi-lo)*idxEntry]
		}
		if _, err := r.f.ReadAt(blk, int64(b*idxBlock+lo*idxEntry)); err != nil {
			return 0, false, fmt.Errorf("seen index: read: %w", err)
		}
	}
	i := sort.Search(hi-lo, func(i int) bool { return bytes.Compare(blk[i*idxEntry:(i+1)*idxEntry], e) >= 0 })
	return lo + i, i < hi-lo && bytes.Equal(blk[i*idxEntry:(i+1)*idxEntry], e), nil
}

// trim drops the process's mapping of every run's pages (they stay in the page cache) and
// returns the mapped bytes it advised.
func (ix *seenIndex) trim() int64 {
	if ix == nil {
		return 0
	}
	var n int64
	for i := range ix.subs {
		s := &ix.subs[i]
		s.mu.RLock()
		if s.r != nil && s.r.m != nil && badgermem.Advise(s.r.m, unix.MADV_DONTNEED) == nil {
			n += int64(len(s.r.m))
		}
		s.mu.RUnlock()
	}
	return n
}

// install makes r sub-filter i's run and closes the one it replaces.
func (ix *seenIndex) install(i byte, r *idxRun) {
	s := &ix.subs[i]
	s.mu.Lock()
	old := s.r
	s.r = r
	s.mu.Unlock()
	ix.mapped.Add(r.mappedBytes() - old.mappedBytes())
	old.unmap() // no lookup holds it: they read under RLock
}

// mappedBytes is the size of r's mapping (0 for none, or a run read with pread).
func (r *idxRun) mappedBytes() int64 {
	if r == nil {
		return 0
	}
	return int64(len(r.m))
}

// mapRoom reports whether a run of size bytes for sub-filter i may be mapped: the other
// runs' mappings and it stay within mapMax (the run now installed for i is replaced).
func (ix *seenIndex) mapRoom(i byte, size int) bool {
	if ix.mapMax < 0 {
		return false
	}
	s := &ix.subs[i]
	s.mu.RLock()
	own := s.r.mappedBytes()
	s.mu.RUnlock()
	return ix.mapped.Load()-own+int64(size) <= ix.mapMax
}

// close drops every run (Frontier.Close, after the rebuild goroutine stopped).
func (ix *seenIndex) close() {
	if ix == nil {
		return
	}
	for i := range ix.subs {
		ix.install(byte(i), nil)
	}
}

// run is sub-filter i's run (nil without one).
func (ix *seenIndex) run(i byte) *idxRun {
	s := &ix.subs[i]
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.r
}

// idxKey is the run entry of the seen key of hash h in partition part.
func idxKey(part uint16, h [16]byte) (e [idxEntry]byte) {
	e[0], e[1] = byte(part>>8), byte(part)
	copy(e[2:], h[:])
	return e
}

// each passes fn the run's entries in order, reading the file in chunks of idxChunk bytes
// (or the mapping), until fn returns an error, which each returns. The run must stay
// installed meanwhile (the rebuild goroutine, the only one that replaces runs, reads it).
// A fault reading the mapping (a disk error under it) is an error.
func (r *idxRun) each(fn func(e []byte) error) (err error) {
	if r.n == 0 {
		return nil
	}
	size := ((r.n-1)/idxPer)*idxBlock + ((r.n-1)%idxPer+1)*idxEntry // the file's end: no pad after its last block
	if r.m != nil {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("seen index: fault reading the mapping: %v", v)
			}
		}()
		return eachEntry(r.m[:size], fn)
	}
	buf := make([]byte, idxChunk)
	for off := 0; off < size; off += idxChunk {
		chunk := buf[:min(idxChunk, size-off)]
		if _, err := r.f.ReadAt(chunk, int64(off)); err != nil {
			return fmt.Errorf("seen index: read: %w", err)
		}
		if err := eachEntry(chunk, fn); err != nil {
			return err
		}
	}
	return nil
}

// idxChunk is how much of a run each reads at a time: 16 blocks.
const idxChunk = 16 * idxBlock

// eachEntry passes fn the entries of whole blocks (the last one may be cut after its last
// entry).
func eachEntry(blks []byte, fn func(e []byte) error) error {
	for b := 0; b < len(blks); b += idxBlock {
		blk := blks[b:min(b+idxPer*idxEntry, len(blks))]
		for i := 0; i+idxEntry <= len(blk); i += idxEntry {
			if err := fn(blk[i : i+idxEntry]); err != nil {
				return err
			}
		}
	}
	return nil
}

// entries is the size of sub-filter i's run (0 without one).
func (ix *seenIndex) entries(i byte) int {
	s := &ix.subs[i]
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.r == nil {
		return 0
	}
	return s.r.n
}

// idxWriter writes one run from seen keys given in key order.
type idxWriter struct {
	ix    *seenIndex
	sub   byte // the sub-filter whose run it writes
	f     *os.File
	w     *bufio.Writer
	n     int
	first []uint64
	marks []uint16
	// slice: the prefixes of the current block's slices' first entries (slice s at s-1),
	// made marks once the block's span is known (the next block's first, or the last
	// entry's prefix at finish).
	slice [idxMarks]uint64
	last  uint64
	built uint64
	// recopy: written through a small buffer, the file is copied at finish.
	recopy bool
}

// idxWriteChunk is the size of a run file's writes. The page cache keeps a file in folios
// as large as the writes that made it (ext4, Linux 6.x), and a pread of a file written in
// 2 MiB writes cost 1.17-1.51 us of CPU where one written in 4 or 64 KiB writes cost
// 1.73-2.09 us (1.7 GB files, 1,152-byte reads at random offsets, this project's VM on
// 2026-12-01): fewer levels of the page cache's tree to walk and fewer folios to touch.
const idxWriteChunk = 2 << 20

// writer starts sub-filter i's run, buffering bufSize bytes; a run written through a
// smaller buffer than idxWriteChunk (Open writes all 256 at once) is copied at finish into
// a file written in idxWriteChunk writes. Call it before the snapshot the run is read from
// is taken.
func (ix *seenIndex) writer(i byte, bufSize int) (*idxWriter, error) {
	built := ix.drops.Load()
	f, err := ix.create()
	if err != nil {
		return nil, err
	}
	return &idxWriter{ix: ix, sub: i, f: f, w: bufio.NewWriterSize(f, bufSize), built: built, recopy: bufSize < idxWriteChunk}, nil
}

// create makes an anonymous run file (unlinked at once: gone at close or at a crash). Its
// reads do not update its access time (O_NOATIME; the owner may set it): touch_atime was 3%
// of a pread lookup's CPU.
func (ix *seenIndex) create() (*os.File, error) {
	f, err := os.CreateTemp(ix.dir, "seen-*.idx")
	if err != nil {
		return nil, err
	}
	_ = os.Remove(f.Name())
	if fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(f.Fd(), unix.F_SETFL, fl|unix.O_NOATIME)
	}
	return f, nil
}

// recopyFile copies the first size bytes of f into a new run file in idxWriteChunk writes
// and closes f.
func (ix *seenIndex) recopyFile(f *os.File, size int) (*os.File, error) {
	defer f.Close()
	nf, err := ix.create()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, idxWriteChunk)
	for off := 0; off < size; off += idxWriteChunk {
		chunk := buf[:min(idxWriteChunk, size-off)]
		if _, err := f.ReadAt(chunk, int64(off)); err != nil {
			nf.Close()
			return nil, err
		}
		if _, err := nf.Write(chunk); err != nil {
			nf.Close()
			return nil, err
		}
	}
	return nf, nil
}

var idxPad [idxBlock - idxPer*idxEntry]byte

// add appends the seen key k (famSeen, partition, hash: 19 bytes).
func (w *idxWriter) add(k []byte) { w.addEntry(k[1:19]) }

// addEntry appends the entry e (partition, hash: idxEntry bytes).
func (w *idxWriter) addEntry(e []byte) {
	p := idxPrefix(e)
	switch i := w.n % idxPer; {
	case i == 0:
		if w.n > 0 {
			_, _ = w.w.Write(idxPad[:])
			w.markBlock(p)
		}
		w.first = append(w.first, p)
	case i%idxSlice == 0:
		w.slice[i/idxSlice-1] = p
	}
	_, _ = w.w.Write(e) // bufio keeps the first error; finish returns it
	w.last = p
	w.n++
}

// markBlock appends the marks of the last block begun, which ends at prefix end: for each
// slice after its first that it holds, frac of the slice's first prefix, else 65535 (no
// such slice: a short last block, whose lookups never read the marks past its slices).
func (w *idxWriter) markBlock(end uint64) {
	lo := w.first[len(w.first)-1]
	k := (w.n - 1) % idxPer / idxSlice // slices after the first that the block holds
	for s := range idxMarks {
		m := uint16(1<<16 - 1)
		if s < k {
			m = frac(w.slice[s], lo, end)
		}
		w.marks = append(w.marks, m)
	}
}

// finish makes the run: mapped if it fits in the mapping budget once it replaces its
// sub-filter's run (the file is closed; the mapping keeps it), else the file stays open
// for pread. Install it before the next run is finished.
func (w *idxWriter) finish() (*idxRun, error) {
	if err := w.w.Flush(); err != nil {
		_ = w.f.Close()
		return nil, err
	}
	if w.n > 0 {
		r := idxRun{first: w.first, last: w.last}
		w.markBlock(r.end(len(w.first) - 1))
	}
	r := newRun(w.n, w.first, w.marks, w.last, w.built)
	size := (w.n/idxPer)*idxBlock + (w.n%idxPer)*idxEntry
	if w.n == 0 {
		_ = w.f.Close()
		return r, nil
	}
	if w.recopy {
		// The file's true end: no pad after its last block.
		f, err := w.ix.recopyFile(w.f, ((w.n-1)/idxPer)*idxBlock+((w.n-1)%idxPer+1)*idxEntry)
		if err != nil {
			return nil, fmt.Errorf("copy seen index run: %w", err)
		}
		w.f = f
	}
	if !w.ix.mapRoom(w.sub, size) {
		r.f = w.f
		return r, nil
	}
	defer w.f.Close()
	m, err := unix.Mmap(int(w.f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map seen index run: %w", err)
	}
	_ = unix.Madvise(m, unix.MADV_RANDOM)
	r.m = m
	return r, nil
}

func (w *idxWriter) abort() { _ = w.f.Close() }
