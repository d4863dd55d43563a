// Package badgermem keeps a Badger database's memory bounded: Options gives the node's
// options (bounded memtables and caches), and Trimmer keeps the resident pages of
// Badger's memory-mapped SSTables under a budget.
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
// Badger exposes no table handles, so Trimmer reaches them by reflection (DB.lc.levels[].
// tables, Badger v4.9.6) and holds a reference on every table while it advises, so a table
// that a compaction retires meanwhile is unmapped only after the call: madvise never
// touches a range that could have been reused. If Badger's layout changes, Start returns
// an error (and the test of this package fails) instead of guessing.
package badgermem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime/debug"
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

	stop, done chan struct{}
	once       sync.Once
	started    atomic.Bool

	trims  atomic.Int64 // passes that advised every table
	tables atomic.Int64 // table mappings advised, summed over passes
	bytes  atomic.Int64 // mapped bytes advised, summed over passes

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
	t := &Trimmer{budget: budget, stop: make(chan struct{}), done: make(chan struct{})}
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
func (t *Trimmer) Start(interval time.Duration) {
	t.started.Store(true)
	go func() {
		defer close(t.done)
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			select {
			case <-t.stop:
				return
			case <-tk.C:
			}
			if t.budget > 0 && ProcStatus("RssFile") > t.budget {
				t.Trim()
			}
		}
	}()
}

// Stop ends the loop Start began and waits for it. Call it before closing the DB.
func (t *Trimmer) Stop() {
	t.once.Do(func() { close(t.stop) })
	if t.started.Load() {
		<-t.done
	}
}

// Trim advises every table mapping MADV_DONTNEED now, then runs the trims added with Also
// if RssFile is still over the budget (always without a budget); it returns how many
// tables and mapped bytes (tables' and Also's) it advised.
func (t *Trimmer) Trim() (tables int, bytes int64) {
	var held []*table.Table
	for _, l := range t.levels {
		l.mu.RLock()
		for _, tb := range *l.tables {
			// The level's own reference keeps tb mapped while the lock is held; ours
			// keeps it mapped until DecrRef below.
			tb.IncrRef()
			held = append(held, tb)
		}
		l.mu.RUnlock()
	}
	for _, tb := range held {
		if tb.MmapFile != nil && len(tb.Data) > 0 {
			if unix.Madvise(tb.Data, unix.MADV_DONTNEED) == nil {
				tables++
				bytes += int64(len(tb.Data))
			}
		}
		_ = tb.DecrRef()
	}
	// The other mappings only when dropping the tables' pages was not enough: the seen
	// index is read at random by every cold link check, and a page dropped from it costs
	// the next lookup there a minor fault; the tables' pages are mostly compaction's,
	// touched once.
	t.alsoMu.Lock()
	also := t.also
	t.alsoMu.Unlock()
	if len(also) > 0 && (t.budget <= 0 || ProcStatus("RssFile") > t.budget) {
		for _, fn := range also {
			bytes += fn()
		}
	}
	t.trims.Add(1)
	t.tables.Add(int64(tables))
	t.bytes.Add(bytes)
	return tables, bytes
}

// Stats are the passes so far, the table mappings and the mapped bytes they advised.
func (t *Trimmer) Stats() (passes, tables, bytes int64) {
	return t.trims.Load(), t.tables.Load(), t.bytes.Load()
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
// at 50M URLs, 1.2-1.33 GiB from 55M to 90M (BENCHMARKS.md, "Seen set at scale").
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

// TrimInterval is how often a node's Trimmer checks RssFile. Checking every 100 ms instead
// did not lower the peak at 10M URLs (BENCHMARKS.md, "Seen set at scale"); which of the
// resident table pages at the peaks a pass cannot reach, or reaches too late, is not
// settled.
const TrimInterval = time.Second

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
