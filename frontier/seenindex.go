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
// holds only each block's first key as a uint64 (partition and hash bytes 1-6: the
// sub-filter fixes byte 0), 8 bytes per 227 URLs: 3.5 MB at 100M URLs. A lookup is a
// binary search of that array and a binary search of one block of the mapping.
//
// Mapped up to a byte budget, read with pread beyond it. A lookup read with pread costs a
// system call (1-4 us of CPU on this project's machines, the largest part of a cold check);
// a mapped block that the page cache holds costs a memory read, or a minor fault the first
// time. But the pages a lookup touched count in the process's file-backed resident set, and
// cold checks touch a large index all over: at 90M URLs the 1.6 GB of runs became resident
// within seconds and lifted RSS to 3 GB (docs/bench-log/seen-set-at-scale.md), faster than
// any trimming pass could drop them. So the runs mapped at any time total at most mapMax
// bytes (Config.SeenIndexMapBytes, default DefaultSeenIndexMapBytes): a run is mapped when
// it fits in what the other runs' mappings leave (the run it replaces gives its share
// back), else it keeps its file open and each lookup reads its block with pread: the blocks
// stay in the page cache, which the kernel may reclaim, and out of the process's resident
// set. Once the index outgrows the budget, the budget still serves the share of lookups it
// holds (about mapMax over the index's size): at 10M URLs, 128 of 171 MiB mapped, the
// index's lookups took 40% less CPU than with pread alone (docs/bench-log/seen-set-at-scale.md, "Seen index
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
	// wideReads counts pread lookups whose window around the guess could not decide and
	// read the whole block (tests).
	wideReads atomic.Int64
	noWindow  bool // pread lookups read whole blocks (benchmarks: the window's gain)
	// merges and scans count growSub's rebuilds by where they read the keys (tests,
	// benchmarks).
	merges, scans atomic.Int64
}

type idxSub struct {
	mu  sync.RWMutex // lookups and trims under RLock (they read the mapping); swaps and Close under Lock
	run *idxRun
}

type idxRun struct {
	mapping []byte   // the file, mapped read-only; nil when empty or read with pread
	file    *os.File // the file, when its blocks are read with pread (mapping nil)
	n       int      // entries
	first   []uint64 // per block: idxPrefix of its first entry
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
	if r.mapping != nil {
		_ = unix.Munmap(r.mapping)
		r.mapping = nil
	}
	if r.file != nil {
		_ = r.file.Close()
		r.file = nil
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
	// index's 24% for the other 95.6% (docs/bench-log/seen-set-at-scale.md). A rebuild
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
	r := s.run
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
	if r.mapping != nil {
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
		i, found, err := ix.search(r, b, cnt, r.guess(b, cnt, p), e[:])
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
// of 6.27 s of the mostly-seen checks there, 0.55 us a lookup (docs/bench-log/seen-set-at-scale.md).
const idxFan = 8

// newRun makes a run of n entries in blocks whose first prefixes are first.
func newRun(n int, first []uint64, built uint64) *idxRun {
	r := &idxRun{n: n, first: first, built: built, lev: [][]uint64{first}}
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

// idxWin is how many entries around its guess a pread lookup reads first (1,152 bytes of
// a 4 KiB block). A key's place in its block strays from the guess by about
// sqrt(idxPer)/2 = 7.5 entries (the spread of uniform hashes), so +-32 nearly always
// holds it; when the window cannot decide (the key sorts before or after all of it, not at
// the block's end), the whole block is read.
const idxWin = 64

// search returns the index of the first entry >= e in block b of r (cnt entries), and
// whether that entry is e, starting at the guess g: from the mapping, or with pread of the
// window around g and, if that cannot decide, of the whole block.
func (ix *seenIndex) search(r *idxRun, b, cnt, g int, e []byte) (int, bool, error) {
	entry := func(blk []byte, i int) []byte { return blk[i*idxEntry : (i+1)*idxEntry] }
	if r.mapping != nil {
		blk := r.mapping[b*idxBlock : b*idxBlock+cnt*idxEntry]
		i := blockSearch(blk, cnt, g, e)
		return i, i < cnt && bytes.Equal(entry(blk, i), e), nil
	}
	if cnt > idxWin && !ix.noWindow {
		s := max(0, min(g-idxWin/2, cnt-idxWin))
		var buf [idxWin * idxEntry]byte
		if _, err := r.file.ReadAt(buf[:], int64(b*idxBlock+s*idxEntry)); err != nil {
			return 0, false, fmt.Errorf("seen index: read: %w", err)
		}
		i := blockSearch(buf[:], idxWin, g-s, e)
		if i < idxWin && bytes.Equal(entry(buf[:], i), e) {
			return s + i, true, nil
		}
		// e sorts between two of the window's entries, or before the block's first or
		// after its last: decided.
		if (i > 0 || s == 0) && (i < idxWin || s+idxWin == cnt) {
			return s + i, false, nil
		}
		ix.wideReads.Add(1)
	}
	var buf [idxBlock]byte
	blk := buf[:cnt*idxEntry]
	if _, err := r.file.ReadAt(blk, int64(b)*idxBlock); err != nil {
		return 0, false, fmt.Errorf("seen index: read: %w", err)
	}
	i := blockSearch(blk, cnt, g, e)
	return i, i < cnt && bytes.Equal(entry(blk, i), e), nil
}

// guess is where in block b (cnt entries) a key of prefix p should be, if the block's
// keys are spread evenly between its first prefix and the next block's: URL hashes are
// uniform, so they are, except across a partition boundary.
func (r *idxRun) guess(b, cnt int, p uint64) int {
	lo := r.first[b]
	if b+1 >= len(r.first) || r.first[b+1] <= lo || p <= lo {
		return 0
	}
	hi := r.first[b+1]
	return min(int(float64(p-lo)/float64(hi-lo)*float64(cnt)), cnt-1)
}

// blockSearch returns the first index in blk (cnt sorted entries) whose entry is >= e,
// or cnt. It starts at g and gallops outwards, then bisects the bracket it found: with a
// good guess it reads the one or two cache lines around g, where a bisection of the whole
// 4 KiB block reads eight (each a likely cache miss: the runs are far larger than the
// CPU's caches).
func blockSearch(blk []byte, cnt, g int, e []byte) int {
	less := func(i int) bool { return bytes.Compare(blk[i*idxEntry:(i+1)*idxEntry], e) < 0 }
	g = max(0, min(g, cnt-1))
	var lo, hi int // the answer is in [lo, hi]
	if less(g) {
		lo, hi = g+1, cnt
		for probe, step := g+1, 1; probe < cnt; probe, step = probe+step, step*2 {
			if !less(probe) {
				hi = probe
				break
			}
			lo = probe + 1
		}
	} else {
		lo, hi = 0, g
		for probe, step := g-1, 1; probe >= 0; probe, step = probe-step, step*2 {
			if less(probe) {
				lo = probe + 1
				break
			}
			hi = probe
		}
	}
	return lo + sort.Search(hi-lo, func(i int) bool { return !less(lo + i) })
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
		if s.run != nil && s.run.mapping != nil && badgermem.Advise(s.run.mapping, unix.MADV_DONTNEED) == nil {
			n += int64(len(s.run.mapping))
		}
		s.mu.RUnlock()
	}
	return n
}

// install makes r sub-filter i's run and closes the one it replaces.
func (ix *seenIndex) install(i byte, r *idxRun) {
	s := &ix.subs[i]
	s.mu.Lock()
	old := s.run
	s.run = r
	s.mu.Unlock()
	ix.mapped.Add(r.mappedBytes() - old.mappedBytes())
	old.unmap() // no lookup holds it: they read under RLock
}

// mappedBytes is the size of r's mapping (0 for none, or a run read with pread).
func (r *idxRun) mappedBytes() int64 {
	if r == nil {
		return 0
	}
	return int64(len(r.mapping))
}

// mapRoom reports whether a run of size bytes for sub-filter i may be mapped: the other
// runs' mappings and it stay within mapMax (the run now installed for i is replaced).
func (ix *seenIndex) mapRoom(i byte, size int) bool {
	if ix.mapMax < 0 {
		return false
	}
	s := &ix.subs[i]
	s.mu.RLock()
	own := s.run.mappedBytes()
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
	return s.run
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
	if r.mapping != nil {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("seen index: fault reading the mapping: %v", v)
			}
		}()
		return eachEntry(r.mapping[:size], fn)
	}
	buf := make([]byte, idxChunk)
	for off := 0; off < size; off += idxChunk {
		chunk := buf[:min(idxChunk, size-off)]
		if _, err := r.file.ReadAt(chunk, int64(off)); err != nil {
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
	if s.run == nil {
		return 0
	}
	return s.run.n
}

// idxWriter writes one run from seen keys given in key order.
type idxWriter struct {
	ix    *seenIndex
	sub   byte // the sub-filter whose run it writes
	file  *os.File
	w     *bufio.Writer
	n     int
	first []uint64
	built uint64
	// recopy: written through a small buffer, the file is copied at finish.
	recopy bool
}

// idxWriteChunk is the size of a run file's writes. The page cache keeps a file in folios
// as large as the writes that made it (ext4, Linux 6.x), and a pread of a file written in
// 2 MiB writes cost 1.17-1.51 us of CPU where one written in 4 or 64 KiB writes cost
// 1.73-2.09 us (a 1.7 GB file, 1,152-byte reads at random offsets;
// docs/bench-log/seen-set-at-scale.md, "Run files written in 2 MiB writes"): fewer levels
// of the page cache's tree to walk and fewer folios to touch.
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
	return &idxWriter{ix: ix, sub: i, file: f, w: bufio.NewWriterSize(f, bufSize), built: built, recopy: bufSize < idxWriteChunk}, nil
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
	if w.n%idxPer == 0 {
		if w.n > 0 {
			_, _ = w.w.Write(idxPad[:])
		}
		w.first = append(w.first, idxPrefix(e))
	}
	_, _ = w.w.Write(e) // bufio keeps the first error; finish returns it
	w.n++
}

// finish makes the run: mapped if it fits in the mapping budget once it replaces its
// sub-filter's run (the file is closed; the mapping keeps it), else the file stays open
// for pread. Install it before the next run is finished.
func (w *idxWriter) finish() (*idxRun, error) {
	if err := w.w.Flush(); err != nil {
		_ = w.file.Close()
		return nil, err
	}
	r := newRun(w.n, w.first, w.built)
	size := (w.n/idxPer)*idxBlock + (w.n%idxPer)*idxEntry
	if w.n == 0 {
		_ = w.file.Close()
		return r, nil
	}
	if w.recopy {
		// The file's true end: no pad after its last block.
		f, err := w.ix.recopyFile(w.file, ((w.n-1)/idxPer)*idxBlock+((w.n-1)%idxPer+1)*idxEntry)
		if err != nil {
			return nil, fmt.Errorf("copy seen index run: %w", err)
		}
		w.file = f
	}
	if !w.ix.mapRoom(w.sub, size) {
		r.file = w.file
		return r, nil
	}
	defer w.file.Close()
	m, err := unix.Mmap(int(w.file.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map seen index run: %w", err)
	}
	_ = unix.Madvise(m, unix.MADV_RANDOM)
	r.mapping = m
	return r, nil
}

func (w *idxWriter) abort() { _ = w.file.Close() }
