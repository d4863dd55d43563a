package badgermem

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

// openDB opens a Badger DB in a test directory, closed when the test ends.
func openDB(t *testing.T, o badger.Options) *badger.DB {
	t.Helper()
	db, err := badger.Open(o.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// mapNewFile creates a file of size bytes at path and maps it shared, read-write; the
// mapping ends with the test.
func mapNewFile(t testing.TB, path string, size int) []byte {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(m) })
	return m
}

// Trimmer finds this Badger version's tables, drops their resident pages, and leaves every
// key readable, while lookups and writes go on.
func TestTrimDropsTablePagesAndKeepsData(t *testing.T) {
	db := openDB(t, badger.DefaultOptions(t.TempDir()).WithMemTableSize(2<<20).WithValueThreshold(1<<10).WithCompression(0))
	tr, err := NewTrimmer(db, 1)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40_000
	val := make([]byte, 200)
	key := func(i int) []byte { return binary.BigEndian.AppendUint64([]byte("k"), uint64(i)*2654435761%n) }
	wb := db.NewWriteBatch()
	for i := range n {
		binary.BigEndian.PutUint64(val, uint64(i))
		if err := wb.Set(key(i), append([]byte(nil), val...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	readAll := func() {
		t.Helper()
		err := db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.DefaultIteratorOptions)
			defer it.Close()
			c := 0
			for it.Rewind(); it.Valid(); it.Next() {
				if err := it.Item().Value(func(v []byte) error { c += len(v); return nil }); err != nil {
					return err
				}
			}
			if c != n*len(val) {
				return fmt.Errorf("read %d value bytes, want %d", c, n*len(val))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Wait for the memtables to reach tables.
	deadline := time.Now().Add(20 * time.Second)
	for len(db.Tables()) < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	readAll()
	before := ProcStatus("RssFile")
	tables, mapped := tr.Trim()
	after := ProcStatus("RssFile")
	t.Logf("trimmed %d tables (%d MiB mapped): RssFile %d -> %d MiB", tables, mapped>>20, before>>20, after>>20)
	if tables == 0 || mapped < 4<<20 {
		t.Fatalf("trimmed %d tables, %d bytes", tables, mapped)
	}
	if before-after < mapped/2 {
		t.Fatalf("RssFile fell by %d bytes only; %d bytes of tables were advised", before-after, mapped)
	}
	// Concurrent trims while reading and writing: data stays whole.
	tr2, err := NewTrimmer(db, 1)
	if err != nil {
		t.Fatal(err)
	}
	tr2.Start(time.Millisecond)
	r := rand.New(rand.NewPCG(3, 4))
	for k := 0; k < 2; k++ {
		readAll()
		for j := 0; j < 2000; j++ {
			i := r.IntN(n)
			err := db.View(func(txn *badger.Txn) error {
				it, err := txn.Get(key(i))
				if err != nil {
					return err
				}
				return it.Value(func(v []byte) error {
					if binary.BigEndian.Uint64(v) != uint64(i) {
						return fmt.Errorf("key %d: wrong value", i)
					}
					return nil
				})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	tr2.Stop()
	if p, _, _ := tr2.Stats(); p == 0 {
		t.Fatal("the loop never trimmed")
	}
}

// Also's trims run only when the tables' trim leaves RssFile over the budget.
func TestTrimAlsoOnlyOverBudget(t *testing.T) {
	db := openDB(t, badger.DefaultOptions(t.TempDir()))
	for _, c := range []struct {
		budget int64
		want   int
	}{{1, 1}, {1 << 50, 0}, {0, 1}} { // 0: no budget, Trim called directly
		tr, err := NewTrimmer(db, c.budget)
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		tr.Also(func() int64 { calls++; return 4096 })
		_, b := tr.Trim()
		if calls != c.want || b != int64(4096*c.want) {
			t.Errorf("budget %d (RssFile %d): Also ran %d times, %d bytes; want %d", c.budget, ProcStatus("RssFile"), calls, b, c.want)
		}
	}
}

// A table file mapped outside the levels (as a compaction's new tables are until it ends)
// is paged out by a pass over the budget, and its data stays whole; a mapping of another
// file in the directory is left alone.
func TestTrimPagesOutStrayTables(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, badger.DefaultOptions(dir))
	const size = 16 << 20
	mapFile := func(name string) []byte {
		t.Helper()
		m := mapNewFile(t, filepath.Join(dir, name), size)
		for i := 0; i < size; i += 4096 {
			m[i] = byte(i >> 12)
		}
		if err := unix.Msync(m, unix.MS_SYNC); err != nil {
			t.Fatal(err)
		}
		return m
	}
	resident := func(m []byte) int {
		vec := make([]byte, len(m)/4096)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)),
			uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			t.Fatal(e)
		}
		n := 0
		for _, v := range vec {
			n += int(v & 1)
		}
		return n
	}
	stray := mapFile("999999.sst")
	other := mapFile("notes.dat")
	tr, err := NewTrimmer(db, 1)
	if err != nil {
		t.Fatal(err)
	}
	before := ProcStatus("RssFile")
	tr.Trim()
	after := ProcStatus("RssFile")
	n, b := tr.StrayStats()
	t.Logf("strays: %d mappings, %d MiB; RssFile %d -> %d MiB; resident pages: stray %d, other %d",
		n, b>>20, before>>20, after>>20, resident(stray), resident(other))
	if n != 1 || b != size {
		t.Fatalf("paged out %d stray mappings, %d bytes; want the one of %d", n, b, size)
	}
	if before-after < size/2 {
		t.Fatalf("RssFile fell by %d bytes; the stray mapping held %d", before-after, size)
	}
	if got := resident(other); got != size/4096 {
		t.Fatalf("the other file's mapping has %d of %d pages resident: it was advised", got, size/4096)
	}
	for i := 0; i < size; i += 4096 {
		if stray[i] != byte(i>>12) {
			t.Fatalf("stray table byte %d: %d after the page-out, want %d", i, stray[i], byte(i>>12))
		}
	}
}

// A budget the pages that stay cannot get under (here 1 byte: the binary's own pages) costs
// a pass a second, not one per interval.
func TestTrimBacksOffOverAFloor(t *testing.T) {
	db := openDB(t, badger.DefaultOptions(t.TempDir()))
	tr, err := NewTrimmer(db, 1)
	if err != nil {
		t.Fatal(err)
	}
	tr.Start(time.Millisecond)
	time.Sleep(1500 * time.Millisecond)
	tr.Stop()
	if p, _, _ := tr.Stats(); p < 1 || p > 3 {
		t.Fatalf("%d passes in 1.5 s at a 1 ms interval over a floor; want 1-3 (one a second)", p)
	}
	if pt := tr.PassTimes(); pt.Backoffs < 1 || pt.Longest <= 0 || pt.Total < pt.Longest || pt.Levels+pt.Strays+pt.Also > pt.Total {
		t.Fatalf("pass times: %v", pt)
	}
}

// The wait after a floor ends when RssFile rises a step past what the floor pass left (a
// compaction burst): the next pass comes at once, not a second later.
func TestFloorBackOffEndsWhenRssFileRises(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, badger.DefaultOptions(dir))
	tr, err := NewTrimmer(db, 1)
	if err != nil {
		t.Fatal(err)
	}
	tr.Start(time.Millisecond)
	defer tr.Stop()
	for deadline := time.Now().Add(5 * time.Second); tr.PassTimes().Backoffs < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no back-off over a floor in 5 s")
		}
	}
	passes, _, _ := tr.Stats()
	// 32 MiB of file pages no pass drops (not a table file): RssFile rises past the step.
	const size = 32 << 20
	m := mapNewFile(t, filepath.Join(dir, "burst.dat"), size)
	touched := time.Now()
	for i := 0; i < size; i += 4096 {
		m[i] = 1
	}
	for {
		if p, _, _ := tr.Stats(); p > passes {
			break
		}
		if time.Since(touched) > 700*time.Millisecond {
			t.Fatalf("no pass within 700 ms of RssFile rising %d MiB past a floor (the wait is a second)", size>>20)
		}
		time.Sleep(time.Millisecond)
	}
	if pt := tr.PassTimes(); pt.FloorBreaks < 1 {
		t.Fatalf("pass times: %v; want a back-off ended early", pt)
	}
}

// TestAtFloor: a pass backs off only when it ended over the budget having freed little.
func TestAtFloor(t *testing.T) {
	const mib, budget = 1 << 20, 256 << 20
	for _, c := range []struct {
		before, after int64
		floor         bool
	}{
		{300 * mib, 100 * mib, false}, // under the budget
		{300 * mib, 290 * mib, true},  // 10 MiB freed: the floor (memtables, index, binary)
		{900 * mib, 500 * mib, false}, // 400 MiB freed, still over: compactions outpaced it
		{300 * mib, 300 * mib, true},
		{290 * mib, 295 * mib, true}, // grew meanwhile
	} {
		if got := atFloor(c.before, c.after, budget); got != c.floor {
			t.Errorf("atFloor(%d MiB, %d MiB, 256 MiB) = %v, want %v", c.before/mib, c.after/mib, got, c.floor)
		}
	}
	if !atFloor(3*mib, 2*mib, 1) {
		t.Error("a tiny budget: freeing 1 MiB and staying over is a floor")
	}
}

// A pass that is not full advises only the tables installed since the pass before; a full
// one advises them all.
func TestQuickPassAdvisesNewTablesOnly(t *testing.T) {
	db := openDB(t, badger.DefaultOptions(t.TempDir()).WithMemTableSize(1<<20).WithValueThreshold(1<<10).
		WithCompression(0).WithNumCompactors(0).WithNumLevelZeroTables(100).WithNumLevelZeroTablesStall(200))
	tr, err := NewTrimmer(db, 1)
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	write := func(tables int) {
		t.Helper()
		for len(db.Tables()) < tables {
			wb := db.NewWriteBatch()
			for range 5000 {
				next++
				if err := wb.Set(binary.BigEndian.AppendUint64([]byte("k"), uint64(next)), make([]byte, 200)); err != nil {
					t.Fatal(err)
				}
			}
			if err := wb.Flush(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Until no flush is pending: the count holds for 200 ms.
		for n := -1; n != len(db.Tables()); time.Sleep(200 * time.Millisecond) {
			n = len(db.Tables())
		}
	}
	write(3)
	old := len(db.Tables())
	if n, _ := tr.trim(true); n != old {
		t.Fatalf("a full pass advised %d of %d tables", n, old)
	}
	if n, _ := tr.trim(false); n != 0 {
		t.Fatalf("a quick pass with no new table advised %d", n)
	}
	write(old + 2)
	all := len(db.Tables())
	if n, _ := tr.trim(false); n != all-old {
		t.Fatalf("a quick pass advised %d tables; %d are new of %d", n, all-old, all)
	}
	if n, _ := tr.trim(true); n != all {
		t.Fatalf("a full pass advised %d of %d tables", n, all)
	}
	if pt := tr.PassTimes(); pt.Full != 2 {
		t.Fatalf("%d full passes counted, want 2", pt.Full)
	}
}

// BenchmarkAdviseTable is what one table's madvise costs a trimmer pass, by how many of
// the table's pages are resident: a full pass advises every table of the levels (8,652 at
// 100M URLs), most of them with nothing resident, so whether a call on a cold range is
// cheap decides whether skipping cold tables (mincore first) would shorten passes. One
// 2 MiB mapping of a file (Badger's table size in the node), read-only pages touched by
// reads before each call (not timed); "mincore" is the residency check alone.
//
//	go test -run '^$' -bench AdviseTable -benchtime 2000x ./internal/badgermem/
func BenchmarkAdviseTable(b *testing.B) {
	const size = 2 << 20
	page := os.Getpagesize()
	m := mapNewFile(b, filepath.Join(b.TempDir(), "table.sst"), size)
	for i := range m {
		m[i] = byte(i)
	}
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		b.Fatal(err)
	}
	var sink byte
	touch := func(pages int) {
		for p := 0; p < pages; p++ {
			sink += m[(p*size/pages/page)*page]
		}
	}
	for _, resident := range []int{0, 1, 16, 512} {
		b.Run(fmt.Sprintf("resident=%d-of-512-pages", resident), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if err := Advise(m, unix.MADV_DONTNEED); err != nil {
					b.Fatal(err)
				}
				touch(resident)
				b.StartTimer()
				if err := Advise(m, unix.MADV_DONTNEED); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("mincore", func(b *testing.B) {
		vec := make([]byte, size/page)
		touch(16)
		for i := 0; i < b.N; i++ {
			if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), size, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
				b.Fatal(e)
			}
		}
	})
	_ = sink
}
