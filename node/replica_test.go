package node

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// fakeSource is a frontier's key space with versions, as ExportPartitionSince sees it.
type fakeSource struct {
	version uint64
	keys    map[string]struct {
		v       []byte
		version uint64
		deleted bool
	}
}

func (f *fakeSource) set(k string, v string) {
	f.version++
	f.keys[k] = struct {
		v       []byte
		version uint64
		deleted bool
	}{[]byte(v), f.version, false}
}

func (f *fakeSource) del(k string) {
	f.version++
	f.keys[k] = struct {
		v       []byte
		version uint64
		deleted bool
	}{nil, f.version, true}
}

func (f *fakeSource) export(p uint16, since uint64, fn func(byte, []byte, []byte, bool) error) (uint64, error) {
	for _, k := range slices.Sorted(maps.Keys(f.keys)) {
		e := f.keys[k]
		if binary.BigEndian.Uint16([]byte(k)[1:3]) != p || e.version <= since || (e.deleted && since == 0) {
			continue
		}
		if err := fn(k[0], []byte(k), e.v, e.deleted); err != nil {
			return 0, err
		}
	}
	return f.version, nil
}

func testReplicator(t testing.TB, self string, src *fakeSource) *replicator {
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r := &replicator{self: self, db: db, parts: map[uint16]*replOut{}}
	if src != nil {
		r.export = src.export
	}
	return r
}

func pkey(fam byte, p uint16, rest string) string {
	return string([]byte{fam, byte(p >> 8), byte(p)}) + rest
}

// copyOf reads the backup's copy of p: frontier key -> value.
func copyOf(t *testing.T, r *replicator, p uint16) map[string]string {
	out := map[string]string{}
	r.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: replicaPrefix(p)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)[3:]
			if k[0] == 0 {
				continue
			}
			v, _ := it.Item().ValueCopy(nil)
			out[string(k)] = string(v)
		}
		return nil
	})
	return out
}

// round encodes the sender's deltas and applies them at the backup, as one request does.
func round(t *testing.T, snd, bak *replicator, parts ...uint16) replicaAnswer {
	t.Helper()
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	got := map[uint16]uint64{}
	if err := snd.encode(w, parts, func(p uint16, v uint64, _ time.Time) { got[p] = v }); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	ans, err := bak.apply(bufio.NewReader(&buf))
	if err != nil {
		t.Fatal(err)
	}
	for p, v := range ans.Applied {
		if got[p] == v {
			snd.parts[p].version = v
		}
	}
	for _, p := range ans.Resync {
		snd.parts[p].version = 0
	}
	return ans
}

func TestReplicaDeltasInOrder(t *testing.T) {
	src := &fakeSource{keys: map[string]struct {
		v       []byte
		version uint64
		deleted bool
	}{}}
	snd := testReplicator(t, "n1", src)
	bak := testReplicator(t, "n2", nil)
	snd.parts[7] = &replOut{backup: "n2"}
	snd.parts[9] = &replOut{backup: "n2"}
	src.set(pkey('q', 7, "a"), "1")
	src.set(pkey('s', 7, "a"), "queued")
	src.set(pkey('q', 9, "b"), "2")
	ans := round(t, snd, bak, 7, 9)
	if len(ans.Applied) != 2 || len(ans.Resync) != 0 {
		t.Fatalf("first round: %+v", ans)
	}
	if c := copyOf(t, bak, 7); len(c) != 2 || c[pkey('q', 7, "a")] != "1" {
		t.Fatalf("copy of 7: %v", c)
	}
	// A delta: a deletion and an update travel; untouched keys stay.
	src.del(pkey('q', 7, "a"))
	src.set(pkey('s', 7, "a"), "fetched")
	round(t, snd, bak, 7, 9)
	if c := copyOf(t, bak, 7); len(c) != 1 || c[pkey('s', 7, "a")] != "fetched" {
		t.Fatalf("copy of 7 after the delta: %v", c)
	}
	if m, _ := bak.meta(7); m.Source != "n1" || m.Version != src.version {
		t.Fatalf("meta %+v, want n1@%d", m, src.version)
	}
	// A delta that does not start where the copy ends is refused and a reset follows.
	snd.parts[7].version = 1
	ans = round(t, snd, bak, 7)
	if !slices.Equal(ans.Resync, []uint16{7}) {
		t.Fatalf("out-of-order delta: %+v", ans)
	}
	src.set(pkey('q', 7, "c"), "3")
	round(t, snd, bak, 7)
	if c := copyOf(t, bak, 7); len(c) != 2 || c[pkey('q', 7, "c")] != "3" || c[pkey('s', 7, "a")] != "fetched" {
		t.Fatalf("copy of 7 after the reset: %v", c)
	}
	// Another source's delta for the same partition is refused too.
	other := testReplicator(t, "n3", src)
	other.parts[7] = &replOut{backup: "n2", version: src.version}
	if ans := round(t, other, bak, 7); !slices.Equal(ans.Resync, []uint16{7}) {
		t.Fatalf("foreign delta: %+v", ans)
	}
	if err := bak.clear(7); err != nil {
		t.Fatal(err)
	}
	if c := copyOf(t, bak, 7); len(c) != 0 {
		t.Fatalf("cleared copy: %v", c)
	}
	if _, ok := bak.meta(7); ok {
		t.Fatal("meta survived clear")
	}
}

// FuzzReplicaApply: any byte stream is applied or refused with an error, never a panic,
// and never writes a key outside the replica prefix of a partition it names.
func FuzzReplicaApply(f *testing.F) {
	src := &fakeSource{keys: map[string]struct {
		v       []byte
		version uint64
		deleted bool
	}{}}
	src.set(pkey('q', 3, "x"), "v")
	src.set(pkey('s', 3, "x"), "w")
	src.del(pkey('q', 3, "y"))
	snd := testReplicator(f, "n1", src)
	snd.parts[3] = &replOut{}
	for _, since := range []uint64{0, 1} {
		snd.parts[3].version = since
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		snd.encode(w, []uint16{3}, func(uint16, uint64, time.Time) {})
		w.Flush()
		f.Add(buf.Bytes())
	}
	f.Add([]byte(replicaMagic))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		bak := testReplicator(t, "n2", nil)
		bak.apply(bufio.NewReader(bytes.NewReader(data)))
		bak.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				k := it.Item().Key()
				if len(k) < 4 || k[0] != famReplica || binary.BigEndian.Uint16(k[1:3]) > outboxSlot {
					t.Fatalf("key %q outside the replica space", k)
				}
			}
			return nil
		})
	})
}
