package badgermem

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Trimmer finds this Badger version's tables, drops their resident pages, and leaves every
// key readable, while lookups and writes go on.
func TestTrimDropsTablePagesAndKeepsData(t *testing.T) {
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil).WithMemTableSize(2 << 20).WithValueThreshold(1 << 10).
		WithCompression(0))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
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
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
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
