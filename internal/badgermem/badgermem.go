// Package badgermem keeps a Badger database's memory bounded: Options gives the node's
// options (bounded memtables and caches), and Trimmer keeps the resident pages of
// Badger's memory-mapped SSTables under a budget.
//
// Duties:
//   - Options: the node's Badger options, with memtables, caches and table sizes bounded
//     so that the live heap grows only slowly with the LSM's depth.
//   - Trimmer (NewTrimmer, StartTrimmer): a periodic pass that drops the resident pages of
//     the levels' tables above a file-backed budget (DefaultFileBudget) and pages out the
//     tables a running compaction has not installed yet.
//   - GoMemoryLimit: the node's soft limit on the Go runtime's memory; ProcStatus reads
//     the process's memory figures for tests and benchmarks.
//
// Badger v4 reads its SSTables through mmap, and writes new tables (flushes, compactions)
// by copying them into a fresh mapping, so every table page a compaction, a scan or a
// lookup touched stays in the process's resident set (RssFile) until the kernel needs the
// memory: at 100M URLs the tables are tens of GB, and RSS as ps shows it follows them.
// Badger has no option to read tables with pread instead. Trimmer drops the process's
// mappings of table pages (madvise MADV_DONTNEED) whenever the file-backed resident set
// passes a budget. For a shared file mapping that only unmaps the pages: they stay in the
// kernel's page cache, clean pages the kernel may reclaim like any file cache, and the next
// touch maps them back with a minor fault (no disk read while the page cache holds them).
//
// The levels hold only the tables a compaction has installed. A compaction writes its new
// tables (each copied into a fresh mapping) as it goes and installs them together at its
// end, so a compaction that rewrites hundreds of tables holds all of them resident, out of
// the levels' reach, until it ends: at 30M URLs in BenchmarkSeenSetScale the file-backed
// resident set reached 1.2 GiB with the levels trimmed every second. For those a pass
// reads /proc/self/maps and advises every mapping of a table file in the DB's directory
// that it did not find in the levels MADV_PAGEOUT: it cannot hold a reference on them, and
// unlike MADV_DONTNEED, MADV_PAGEOUT is only a reclaim hint that never loses data, so it is
// harmless even if the range was unmapped and reused meanwhile. The pages it reclaims
// leave the page cache too (a later read of them is a disk read), which is why the
// levels' tables, which lookups read, are advised MADV_DONTNEED.
//
// Badger exposes no table handles, so Trimmer reaches them by reflection (DB.lc.levels[].
// tables, Badger v4.9.6) and holds a reference on every table while it advises, so a table
// that a compaction retires meanwhile is unmapped only after the call: madvise never
// touches a range that could have been reused. If Badger's layout changes,
// NewTrimmer returns an error (and the test of this package fails) instead of guessing.
package badgermem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"
	"golang.org/x/sys/unix"
)

// Trimmer drops the resident pages of a DB's table mappings when the process's
// file-backed resident set (RssFile) passes Budget.
type Trimmer struct {
	levels []levelRef
	budget int64
	dir    string // the DB's directory, absolute, symlinks resolved, with a trailing "/"

	stop, done chan struct{}
	once       sync.Once
	started    atomic.Bool
	release    sync.WaitGroup // passes' references being dropped

	trims       atomic.Int64 // passes
	tables      atomic.Int64 // table mappings advised, summed over passes
	bytes       atomic.Int64 // mapped bytes advised, summed over passes
	strays      atomic.Int64 // table mappings outside the levels advised MADV_PAGEOUT
	strayBytes  atomic.Int64 // their mapped bytes
	passNanos   atomic.Int64 // time spent in passes, summed
	maxPass     atomic.Int64 // the longest pass, nanoseconds
	levelNanos  atomic.Int64 // of it, advising the levels' tables
	strayNanos  atomic.Int64 // paging out the strays (reading /proc/self/maps included)
	alsoNanos   atomic.Int64 // the Also trims
	lagNanos    atomic.Int64 // from a tick to the loop taking it, summed over passes
	backoffs    atomic.Int64 // passes Start followed with a back-off (a floor)
	floorBreaks atomic.Int64 // back-offs ended early: RssFile rose a step past the floor
	fulls       atomic.Int64 // passes that advised every table of the levels

	idsMu sync.Mutex
	ids   map[uint64]struct{} // the level tables' file IDs the last pass saw

	alsoMu sync.Mutex
	also   []func() int64 // other mappings' trims (Also)
}

// Also adds a trim of other file mappings (the frontier's seen index) to the passes where
// the tables' trim leaves RssFile over the budget: fn drops its mappings' resident pages
// and returns the mapped bytes it advised.
func (t *Trimmer) Also(fn func() int64) {
	t.alsoMu.Lock()
	t.also = append(t.also, fn)
	t.alsoMu.Unlock()
}

type levelRef struct {
	mu     *sync.RWMutex
	tables *[]*table.Table
}

// ErrLayout means this Badger version's internals are not the ones Trimmer knows.
var ErrLayout = errors.New("badgermem: unknown Badger layout")

// NewTrimmer finds db's levels. budget is the RssFile (bytes) above which a pass trims.
func NewTrimmer(db *badger.DB, budget int64) (*Trimmer, error) {
	lc := reflect.ValueOf(db).Elem().FieldByName("lc")
	if !lc.IsValid() || lc.Kind() != reflect.Pointer || lc.IsNil() {
		return nil, fmt.Errorf("%w: DB.lc", ErrLayout)
	}
	levels := lc.Elem().FieldByName("levels")
	if !levels.IsValid() || levels.Kind() != reflect.Slice {
		return nil, fmt.Errorf("%w: levelsController.levels", ErrLayout)
	}
	dir, err := filepath.Abs(db.Opts().Dir)
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("badgermem: the DB's directory: %w", err)
	}
	t := &Trimmer{budget: budget, dir: dir + "/", stop: make(chan struct{}), done: make(chan struct{})}
	for i := 0; i < levels.Len(); i++ {
		lh := levels.Index(i)
		if lh.Kind() != reflect.Pointer || lh.IsNil() {
			return nil, fmt.Errorf("%w: levelHandler %d", ErrLayout, i)
		}
		mu := lh.Elem().FieldByName("RWMutex")
		tabs := lh.Elem().FieldByName("tables")
		if !mu.IsValid() || mu.Type() != reflect.TypeOf(sync.RWMutex{}) ||
			!tabs.IsValid() || tabs.Type() != reflect.TypeOf([]*table.Table(nil)) {
			return nil, fmt.Errorf("%w: levelHandler fields", ErrLayout)
		}
		t.levels = append(t.levels, levelRef{
			mu:     (*sync.RWMutex)(unsafe.Pointer(mu.UnsafeAddr())),
			tables: (*[]*table.Table)(unsafe.Pointer(tabs.UnsafeAddr())),
		})
	}
	if len(t.levels) == 0 {
		return nil, fmt.Errorf("%w: no levels", ErrLayout)
	}
	return t, nil
}

// Start checks RssFile every interval and trims when it is over the budget, until Stop.
// A pass advises every level table once a second (fullPassEvery) and, between, only the
// tables installed since the pass before; one of those that frees little is followed by a
// full pass at once.
// A pass that leaves RssFile over the budget having freed little (pages it cannot drop:
// the memtable files, a mapped seen index, the binary) is a floor: the next pass waits a
// second or ten intervals, whichever is longer, unless RssFile rises a step (floorStep)
// above what that pass left, so a floor costs a pass a second, not one per interval, and a
// compaction burst during the wait is trimmed at the next interval. A pass that freed much
// is followed at the next interval even if RssFile is still over: compactions were
// touching pages faster than one pass dropped them. (Backing off after every pass that
// ended over the budget let compaction bursts past 70M URLs in BenchmarkSeenSetScale lift
// RssFile from 356 to 948 MiB within six seconds.)
func (t *Trimmer) Start(interval time.Duration) {
	t.started.Store(true)
	backoff := max(10, int(time.Second/max(interval, time.Millisecond)))
	go func() {
		defer close(t.done)
		tk := time.NewTicker(interval)
		defer tk.Stop()
		skip := 0
		var floor int64 // RssFile after the pass that met a floor
		var lastFull time.Time
		for {
			var tick time.Time
			select {
			case <-t.stop:
				return
			case tick = <-tk.C:
			}
			before := ProcStatus("RssFile")
			if t.budget <= 0 || before <= t.budget {
				skip = 0
				continue
			}
			if skip > 0 {
				skip--
				if before < floor+floorStep(t.budget) {
					continue
				}
				skip = 0
				t.floorBreaks.Add(1)
			}
			t.lagNanos.Add(int64(time.Since(tick)))
			full := time.Since(lastFull) >= fullPassEvery
			if full {
				lastFull = time.Now()
			}
			t.trim(full)
			after := ProcStatus("RssFile")
			if !full && atFloor(before, after, t.budget) {
				// The pages are not the new tables': lookups' or scans' of older ones.
				lastFull = time.Now()
				t.trim(true)
				after = ProcStatus("RssFile")
			}
			if atFloor(before, after, t.budget) {
				skip, floor = backoff-1, after
				t.backoffs.Add(1)
			}
		}
	}()
}

// atFloor reports whether a pass that took RssFile from before to after, over budget,
// met a floor: it ended over the budget and freed less than a step.
func atFloor(before, after, budget int64) bool {
	return after > budget && before-after < floorStep(budget)
}

// floorStep is an eighth of the budget, at least 4 MiB: what a pass must free not to be at
// a floor, and how far RssFile must rise past a floor to end the wait after it.
func floorStep(budget int64) int64 { return max(budget/8, 4<<20) }

// Stop ends the loop Start began and waits for it. Call it before closing the DB.
func (t *Trimmer) Stop() {
	t.once.Do(func() { close(t.stop) })
	if t.started.Load() {
		<-t.done
	}
	t.release.Wait()
}

// Trim advises every table mapping MADV_DONTNEED now; then, while RssFile is still over
// the budget (always without a budget), the mappings of table files outside the levels
// MADV_PAGEOUT, then the trims added with Also. It returns how many level tables and
// mapped bytes (theirs, the strays' and Also's) it advised.
func (t *Trimmer) Trim() (tables int, bytes int64) { return t.trim(true) }

// fullPassEvery is how far apart Start's passes advise every table of the levels; the
// passes between advise only the tables installed since the pass before (a file ID the
// pass before did not see: compactions run side by side and install in any order), whose
// pages are the flush's or compaction's writes. Lookups and scans touch older tables'
// pages too, so a full pass still comes once a second. At 100M URLs a full pass walked
// 8,652 tables and took about 250 ms (docs/bench-log/seen-set-at-scale.md), while compactions touched 250-400 MB
// a second.
const fullPassEvery = time.Second

// trim is Trim; with full false, of the levels' tables only those the last pass did not
// see.
func (t *Trimmer) trim(full bool) (tables int, bytes int64) {
	t0 := time.Now()
	defer func() {
		d := int64(time.Since(t0))
		t.passNanos.Add(d)
		for m := t.maxPass.Load(); d > m && !t.maxPass.CompareAndSwap(m, d); m = t.maxPass.Load() {
		}
	}()
	var held []*table.Table
	t.idsMu.Lock()
	prev, cur := t.ids, make(map[uint64]struct{}, len(t.ids))
	known := make(map[uintptr]bool, len(prev))
	for _, l := range t.levels {
		l.mu.RLock()
		for _, tb := range *l.tables {
			// The level's own reference keeps tb mapped while the lock is held. (A table
			// not held below may be unmapped after it and its range reused by a stray,
			// which this pass then leaves alone: a page-out missed, nothing lost.)
			if tb.MmapFile != nil && len(tb.Data) > 0 {
				known[uintptr(unsafe.Pointer(&tb.Data[0]))] = true
			}
			id := tb.ID()
			cur[id] = struct{}{}
			if _, had := prev[id]; full || !had {
				// Ours keeps it mapped until DecrRef below.
				tb.IncrRef()
				held = append(held, tb)
			}
		}
		l.mu.RUnlock()
	}
	t.ids = cur
	t.idsMu.Unlock()
	if full {
		t.fulls.Add(1)
	}
	for _, tb := range held {
		if tb.MmapFile != nil && len(tb.Data) > 0 {
			if Advise(tb.Data, unix.MADV_DONTNEED) == nil {
				tables++
				bytes += int64(len(tb.Data))
			}
		}
	}
	// A table a compaction retired meanwhile is deleted by the last DecrRef (an unmap, a
	// truncate, a discard: tens of milliseconds): not the pass's time. Stop waits for it.
	t.release.Add(1)
	go func() {
		defer t.release.Done()
		for _, tb := range held {
			_ = tb.DecrRef()
		}
	}()
	t1 := time.Now()
	t.levelNanos.Add(int64(t1.Sub(t0)))
	over := func() bool { return t.budget <= 0 || ProcStatus("RssFile") > t.budget }
	if over() {
		bytes += t.pageOutStrays(known)
	}
	t2 := time.Now()
	t.strayNanos.Add(int64(t2.Sub(t1)))
	defer func() { t.alsoNanos.Add(int64(time.Since(t2))) }()
	// The other mappings only when dropping the tables' pages was not enough: the seen
	// index is read at random by every cold link check, and a page dropped from it costs
	// the next lookup there a minor fault; the tables' pages are mostly compaction's,
	// touched once.
	t.alsoMu.Lock()
	also := t.also
	t.alsoMu.Unlock()
	if len(also) > 0 && over() {
		for _, fn := range also {
			bytes += fn()
		}
	}
	t.trims.Add(1)
	t.tables.Add(int64(tables))
	t.bytes.Add(bytes)
	return tables, bytes
}

// pageOutStrays advises MADV_PAGEOUT every mapping of a table file (*.sst) in the DB's
// directory whose start is not in known (the levels' tables), and returns their bytes.
func (t *Trimmer) pageOutStrays(known map[uintptr]bool) int64 {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0
	}
	defer f.Close()
	var n, bytes int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "start-end perms offset dev inode path", the path possibly followed by " (deleted)"
		line := sc.Text()
		i := strings.IndexByte(line, '/')
		if i < 0 {
			continue
		}
		path := strings.TrimSuffix(line[i:], " (deleted)")
		if !strings.HasPrefix(path, t.dir) || !strings.HasSuffix(path, ".sst") {
			continue
		}
		rng, _, _ := strings.Cut(line, " ")
		lo, hi, ok := strings.Cut(rng, "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start || known[uintptr(start)] {
			continue
		}
		if adviseRange(uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT) == nil {
			n++
			bytes += int64(end - start)
		}
	}
	t.strays.Add(n)
	t.strayBytes.Add(bytes)
	return bytes
}

// Stats are the passes so far, the table mappings and the mapped bytes they advised.
func (t *Trimmer) Stats() (passes, tables, bytes int64) {
	return t.trims.Load(), t.tables.Load(), t.bytes.Load()
}

// StrayStats are the table mappings outside the levels advised MADV_PAGEOUT so far, and
// their mapped bytes (also counted in Stats' bytes).
func (t *Trimmer) StrayStats() (mappings, bytes int64) {
	return t.strays.Load(), t.strayBytes.Load()
}

// Advise is madvise(2) of b without giving up the goroutine's P: a raw system call. A
// pass makes one call a table, thousands of them; through the runtime's syscall path a
// call that lasts over ~20 us (a range with resident pages) may let the scheduler hand
// the P to another goroutine, and with every P busy (compactions, the collector) the pass
// would wait its turn after the call. A precaution: a micro-experiment (1,300 mapped
// tables, every P busy) showed no difference between the two paths (docs/bench-log/seen-set-at-scale.md). One
// call holds the P for at most the time the kernel takes to unmap one table's pages.
func Advise(b []byte, advice int) error {
	if len(b) == 0 {
		return nil
	}
	return adviseRange(uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), advice)
}

// adviseRange is Advise of the n bytes at addr, a range this process may not hold (a
// stray's: only advice that never loses data, such as MADV_PAGEOUT).
func adviseRange(addr, n uintptr, advice int) error {
	if _, _, e := unix.RawSyscall(unix.SYS_MADVISE, addr, n, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}

// PassTimes are the wall times of the passes so far, summed over them.
type PassTimes struct {
	Total, Longest       time.Duration // whole passes; the longest one
	Levels, Strays, Also time.Duration // their parts: the levels' tables, the strays, Also
	Lag                  time.Duration // from a tick to Start's loop taking it (scheduling)
	Backoffs             int64         // passes Start followed with a back-off (a floor)
	FloorBreaks          int64         // back-offs ended early by RssFile rising a step
	Full                 int64         // passes that advised every level table (the others: new ones)
}

// PassTimes reports how long the passes took and where.
func (t *Trimmer) PassTimes() PassTimes {
	return PassTimes{
		Total: time.Duration(t.passNanos.Load()), Longest: time.Duration(t.maxPass.Load()),
		Levels: time.Duration(t.levelNanos.Load()), Strays: time.Duration(t.strayNanos.Load()),
		Also: time.Duration(t.alsoNanos.Load()), Lag: time.Duration(t.lagNanos.Load()),
		Backoffs: t.backoffs.Load(), FloorBreaks: t.floorBreaks.Load(), Full: t.fulls.Load(),
	}
}

func (p PassTimes) String() string {
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return fmt.Sprintf("passes took %s (levels %s, strays %s, also %s), longest %s; %d full; "+
		"tick lag %s; %d back-offs (%d ended early)", r(p.Total), r(p.Levels), r(p.Strays), r(p.Also),
		r(p.Longest), p.Full, r(p.Lag), p.Backoffs, p.FloorBreaks)
}

// ProcStatus reads one kB figure of /proc/self/status (VmRSS, RssAnon, RssFile) in bytes;
// 0 when it cannot.
func ProcStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var kb int64
		if _, err := fmt.Sscanf(sc.Text(), field+": %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	return 0
}

// DefaultFileBudget is the file-backed resident set (bytes) above which a node's Trimmer
// drops Badger's table pages.
const DefaultFileBudget = 256 << 20

// Options are the Badger options of a node's database at dir: bounded memtables (a 16 MiB
// one being written and at most four waiting for their flush), tables of 2 MiB at every
// level below L0, a 64 MiB block cache and 256 MiB value log files. The 32 MiB index cache
// is set but, in Badger v4.9.6, used only for encrypted tables: an unencrypted table's
// index and Bloom filter are read in place from its memory-mapped file, so they are
// file-backed pages, which Trimmer bounds, not heap.
//
// The memtable and table sizes are there for the Go heap. Built without cgo, a table
// builder keeps the whole table it writes, raw blocks and their compressed copies, in Go
// memory until the file is written, and Badger pools up to eight of those builders'
// buffers, each as large as the largest table it built (an L0 table is one memtable).
// Badger's default grows the table size twofold per level, so the live heap grew with the
// depth of the LSM: 1.33 GiB live, above GoMemoryLimit, at 5M URLs in BenchmarkSeenSetScale
// with 32 MiB memtables and the default growth; 0.58 GiB with these two settings, and adds
// 14% faster per CPU-second. The live heap still rose with the LSM, more slowly: 0.97 GiB
// at 50M URLs, 1.2-1.33 GiB from 55M to 90M (docs/bench-log/seen-set-at-scale.md).
func Options(dir string) badger.Options {
	o := badger.DefaultOptions(dir).
		WithLogger(nil).
		WithNumVersionsToKeep(1).
		WithCompactL0OnClose(false).
		WithMemTableSize(16 << 20).
		WithBlockCacheSize(64 << 20).
		WithIndexCacheSize(32 << 20).
		WithValueLogFileSize(256 << 20)
	o.TableSizeMultiplier = 1 // no With method in v4.9.6
	return o
}

// TrimInterval is how often a node's Trimmer checks RssFile (a read of /proc/self/status).
// Compactions touch table pages at some 250 MB/s at 40M URLs in BenchmarkSeenSetScale, so
// the file-backed resident set overshoots the budget by what they touch in one interval:
// with a check a second it reached 864 MiB by 35M URLs against the 256 MiB budget.
const TrimInterval = 100 * time.Millisecond

// StartTrimmer starts a Trimmer for db that checks every TrimInterval against
// DefaultFileBudget.
func StartTrimmer(db *badger.DB) (*Trimmer, error) {
	t, err := NewTrimmer(db, DefaultFileBudget)
	if err != nil {
		return nil, err
	}
	t.Start(TrimInterval)
	return t, nil
}

// GoMemoryLimit is the node's soft limit on the Go runtime's memory (debug.SetMemoryLimit)
// unless GOMEMLIMIT is set: Badger allocates and drops large buffers (table builders,
// decompressed blocks, memtable arenas) on the Go heap, and with only GOGC=100 the heap
// grows to twice what is live before a collection. With the limit, the collector runs
// sooner as the heap nears it; together with DefaultFileBudget it keeps a node's RSS under
// 2 GB (BENCHMARKS.md, "Seen set at scale").
const GoMemoryLimit = 1280 << 20

// SetGoMemoryLimit applies GoMemoryLimit unless the GOMEMLIMIT environment variable is set.
func SetGoMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(GoMemoryLimit)
	}
}
