package dedup

import (
	"io"
	"slices"
	"testing"

	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/internal/keyspace"
	"github.com/crawlnode/crawlnode/ring"
	"github.com/dgraph-io/badger/v4"
)

func countDB(t *testing.T, n *node) int {
	t.Helper()
	c := 0
	err := n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{keyspace.DedupKeys}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			c++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDecisionsMoveWithPartition: the decisions of a node travel with its partitions as
// frontier state does (export, import, drop: a handoff or a promoted replica), and the new
// owner decides the same. A key the receiver already holds keeps its value (first writer
// wins), so an original decided there is never replaced.
func TestDecisionsMoveWithPartition(t *testing.T) {
	tab, ns := newCluster(t, 2)
	for p := range ring.PartitionCount {
		tab.set(uint16(p), "n0") // everything on n0 first
	}
	fronts := make([]*frontier.Frontier, 2)
	for i, n := range ns {
		f, err := frontier.Open(frontier.Config{DB: n.db, PartitionOf: ring.PartitionOf})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		fronts[i] = f
	}
	const fp = 0xfeed_beef_0000_1111
	orig := page("http://a/1", "moved", fp)
	decide(t, ns[1].dec, orig)
	// n1 already holds, for the exact key of orig, another page (decided there while it
	// owned that partition earlier): it stays the original after the merge.
	other := page("http://z/1", "kept", 7)
	pe := ExactPartition(other.Hash)
	if _, err := ns[1].store.Apply([]Op{{Code: OpExact, Part: pe, Hash: other.Hash, Ref: other.Ref}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ns[0].store.Apply([]Op{{Code: OpExact, Part: pe, Hash: other.Hash, Ref: "http://late/1\t1"}}); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for p := range uint16(ring.PartitionCount) {
		var recs []struct {
			fam  byte
			k, v []byte
		}
		err := fronts[0].ExportPartition(p, func(fam byte, k, v []byte) error {
			recs = append(recs, struct {
				fam  byte
				k, v []byte
			}{fam, slices.Clone(k), slices.Clone(v)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		st, err := fronts[1].ImportPartition(p, func() (byte, []byte, []byte, error) {
			if i == len(recs) {
				return 0, nil, nil, io.EOF
			}
			i++
			return recs[i-1].fam, recs[i-1].k, recs[i-1].v, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		moved += st.DedupNew
		tab.set(p, "n1")
		if err := fronts[0].DropPartition(p); err != nil {
			t.Fatal(err)
		}
	}
	if moved != 5 {
		t.Errorf("%d keys moved, want 5 (orig's exact and near keys)", moved)
	}
	if n := countDB(t, ns[0]); n != 0 {
		t.Errorf("%d keys left on the old owner after the drop", n)
	}
	cases := []struct {
		p    corpus.DedupPage
		want corpus.DedupVerdict
	}{
		{page("http://b/1", "moved", fp), corpus.DedupVerdict{Of: orig.Ref, Kind: corpus.DupExact}},
		{page("http://c/1", "moved!", fp^1<<63), corpus.DedupVerdict{Of: orig.Ref, Kind: corpus.DupNear, Distance: 1}},
		{orig, corpus.DedupVerdict{}},
		{page("http://d/1", "kept", 7), corpus.DedupVerdict{Of: other.Ref, Kind: corpus.DupExact}},
	}
	for _, c := range cases {
		if got := decide(t, ns[0].dec, c.p)[0]; got != c.want {
			t.Errorf("%s after the move: %+v, want %+v", c.p.Ref, got, c.want)
		}
	}
}

// TestMigrate: a node's own indexes from before (corpus 'c' and 'n') become D keys, and
// the decisions they held are found again through the Decider.
func TestMigrate(t *testing.T) {
	_, ns := newCluster(t, 1)
	orig := page("http://a/1", "old", 0x1234_5678_9abc_def0)
	err := ns[0].db.Update(func(txn *badger.Txn) error {
		return txn.Set(append([]byte{keyspace.CorpusExact}, orig.Hash...), []byte(orig.Ref))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := corpus.NewBadgerNearIndex(ns[0].db).Insert(orig.SimHash, orig.Ref); err != nil {
		t.Fatal(err)
	}
	moved, err := Migrate(ns[0].db)
	if err != nil || moved != 5 {
		t.Fatalf("Migrate: %d moved, %v", moved, err)
	}
	if moved, err := Migrate(ns[0].db); err != nil || moved != 0 {
		t.Fatalf("Migrate again: %d moved, %v", moved, err)
	}
	if n := countDB(t, ns[0]); n != 5 {
		t.Fatalf("%d D keys, want 5", n)
	}
	want := []corpus.DedupVerdict{{Of: orig.Ref, Kind: corpus.DupExact}, {Of: orig.Ref, Kind: corpus.DupNear, Distance: 1}}
	got := decide(t, ns[0].dec, page("http://b/1", "old", orig.SimHash), page("http://c/1", "old!", orig.SimHash^1))
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("page %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
