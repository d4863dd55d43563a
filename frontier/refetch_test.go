package frontier

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/crawlnode/crawlnode/snapshot"
)

// importWith is transfer with import options.
func importWith(t *testing.T, a, b *Frontier, p uint16, o ImportOptions) ImportStats {
	t.Helper()
	var buf bytes.Buffer
	if _, err := snapshot.Write(&buf, snapshot.Header{Partition: p, Epoch: 1}, func(fn func(byte, []byte, []byte) error) error {
		return a.ExportPartition(p, fn)
	}); err != nil {
		t.Fatal(err)
	}
	rd, err := snapshot.Read(&buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	st, err := b.ImportPartitionWith(p, rd.Next, o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestImportRefetch: a promotion's import queues again the fetched URLs whose captures
// Refetch calls lost (a full fetch, marked Refetch, at the deepest admitted depth), keeps
// the others fetched, and with MarkQueued marks the URLs the stream had queued.
func TestImportRefetch(t *testing.T) {
	clk := newFakeClock()
	a := openF(t, partCfg(openDB(t, ""), clk))
	b := openF(t, partCfg(openDB(t, ""), clk))
	var cands []Candidate
	for i := range 10 {
		cands = append(cands, u("p1-a.test", fmt.Sprintf("/x%d", i)))
	}
	mustAdd(t, a, cands...)
	fetched := map[string]bool{}
	for i := range 6 {
		l, _ := tryNext(t, a)
		if l == nil {
			t.Fatalf("lease %d: none", i)
		}
		fetched[l.URL] = true
		mustDone(t, a, l, Outcome{Kind: Fetched, Status: 200, Meta: []byte(fmt.Sprintf("lost=%v", i%2 == 0))})
	}
	asked := 0
	st := importWith(t, a, b, 1, ImportOptions{
		MarkQueued: true,
		Refetch: func(h [16]byte, s *SeenRecord) (bool, error) {
			asked++
			if s == nil || URLHash(s.URL) != h {
				t.Errorf("Refetch asked with %v for %x", s, h)
				return false, nil
			}
			return string(s.Meta) == "lost=true", nil
		},
	})
	if asked != 6 || st.Refetch != 3 || st.NotRefetched != 0 || st.Queued != 7 {
		t.Fatalf("asked %d; import stats %+v", asked, st)
	}
	checkCounters(t, b)
	again, queued := 0, 0
	for {
		l, _ := tryNext(t, b)
		if l == nil {
			break
		}
		switch {
		case fetched[l.URL]:
			again++
			if !l.Refetch || l.Revisit || l.Validators != (Validators{}) || l.Depth != b.cfg.MaxDepth {
				t.Errorf("refetch lease %+v", l)
			}
		default:
			queued++
			if !l.Refetch {
				t.Errorf("queued URL %s not marked a refetch", l.URL)
			}
		}
		mustDone(t, b, l, Outcome{Kind: Fetched, Status: 200})
	}
	if again != 3 || queued != 4 {
		t.Fatalf("leased %d refetches and %d queued URLs, want 3 and 4", again, queued)
	}
	for url := range fetched {
		sr, ok, err := b.Lookup(url)
		if err != nil || !ok || sr.State != StateFetched {
			t.Errorf("%s: %+v %v %v", url, sr, ok, err)
		}
	}
	// Without options nothing is marked.
	c := openF(t, partCfg(openDB(t, ""), clk))
	d := openF(t, partCfg(openDB(t, ""), clk))
	mustAdd(t, c, u("p1-a.test", "/y"))
	transfer(t, c, d, 1)
	for _, l := range leaseAll(t, d) {
		if l.Refetch {
			t.Errorf("%s marked a refetch by a plain import", l.URL)
		}
	}
}
