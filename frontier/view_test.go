package frontier

import (
	"fmt"
	"slices"
	"testing"
)

// TestViewIsOneCut: a View's exports read one snapshot: writes after it opened are not
// in it, ExportKeys reports a key absent from the snapshot as deleted, and
// ExportPartitionsSince reports per partition what ExportPartitionSince does.
func TestViewIsOneCut(t *testing.T) {
	clk := newFakeClock()
	a := openF(t, partCfg(openDB(t, ""), clk))
	mustAdd(t, a, u("p1-a.test", "/x0"), u("p2-a.test", "/x0"))
	first := a.View()
	base := first.Version()
	first.Close()
	first.Close() // idempotent

	for i := 1; i < 6; i++ {
		mustAdd(t, a, u("p1-a.test", fmt.Sprintf("/x%d", i)), u("p2-a.test", fmt.Sprintf("/x%d", i)))
	}
	v := a.View()
	defer v.Close()
	type rec struct {
		p       uint16
		key     string
		deleted bool
	}
	per := map[uint16][]rec{}
	for _, p := range []uint16{1, 2} {
		ts, err := v.ExportPartitionSince(p, base, func(fam byte, k, val []byte, deleted bool) error {
			per[p] = append(per[p], rec{p, string(k), deleted})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if ts != v.Version() {
			t.Fatalf("export read at %d, the view at %d", ts, v.Version())
		}
	}
	if len(per[1]) == 0 || len(per[2]) == 0 {
		t.Fatalf("no changes exported since %d: %d, %d", base, len(per[1]), len(per[2]))
	}

	// Writes after the view opened are not in it.
	mustAdd(t, a, u("p1-a.test", "/late"))
	many := map[uint16][]rec{}
	if _, err := v.ExportPartitionsSince([]uint16{1, 2}, base, func(p uint16, fam byte, k, val []byte, deleted bool) error {
		many[p] = append(many[p], rec{p, string(k), deleted})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []uint16{1, 2} {
		if !slices.Equal(per[p], many[p]) {
			t.Errorf("partition %d: ExportPartitionsSince %v, ExportPartitionSince %v", p, many[p], per[p])
		}
	}
	if _, err := v.ExportPartitionsSince([]uint16{1}, 0, func(uint16, byte, []byte, []byte, bool) error { return nil }); err == nil {
		t.Error("ExportPartitionsSince from 0 accepted")
	}

	// ExportKeys: a key of the view as it holds it, a key it lacks as deleted.
	keys := [][]byte{[]byte(per[1][0].key), []byte("s\x00\x01no such key......")}
	var got []rec
	if err := v.ExportKeys(keys, func(fam byte, k, val []byte, deleted bool) error {
		if fam != k[0] {
			t.Errorf("family %q for key %q", fam, k)
		}
		got = append(got, rec{0, string(k), deleted})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].deleted || !got[1].deleted {
		t.Errorf("ExportKeys: %v", got)
	}
}
