package replica

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/gossip"
	"github.com/crawlnode/crawlnode/ring"
)

// TestStreamBytesFixed: a replica stream's bytes, written out by hand from the format in
// the package doc (the framing is internal/wire's, shared with snapshot/).
func TestStreamBytesFixed(t *testing.T) {
	src := newFakeSource()
	snd := testReplicator(t, "n1", src)
	src.set(pkey('q', 7, "a"), "1")  // version 1
	src.set(pkey('q', 7, "b"), "xy") // version 2
	src.del(pkey('q', 7, "a"))       // version 3
	snd.parts[7] = &replOut{backup: "n2", version: 1}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := snd.encode(w, []uint16{7}, func(uint16, uint64, time.Time) {}); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	want := hex.EncodeToString([]byte("CNREPL1\n")) + "02" + hex.EncodeToString([]byte("n1")) +
		"50" + "07" + "01" + // 'P', partition 7, since 1
		"02" + "04" + "71000761" + // delete q|7|a
		"01" + "04" + "71000762" + "02" + "7879" + // set q|7|b = "xy"
		"00" + "03" + // end of records, complete up to version 3
		"45" // 'E'
	if got := hex.EncodeToString(buf.Bytes()); got != want {
		t.Fatalf("stream:\n got %s\nwant %s", got, want)
	}
}

// TestDecide: what a backup does with a section, from the copy it holds.
func TestDecide(t *testing.T) {
	at := copyMeta{Source: "n1", Version: 5}
	for _, c := range []struct {
		name    string
		source  string
		since   uint64
		slotted bool
		m       copyMeta
		has     bool
		want    verdict
	}{
		{"full copy, none here", "n1", 0, true, copyMeta{}, false, replace},
		{"full copy over a copy", "n1", 0, true, at, true, replace},
		{"full copy from another source", "n3", 0, true, at, true, replace},
		{"delta where the copy ends", "n1", 5, true, at, true, extend},
		{"delta behind the copy", "n1", 4, true, at, true, refuse},
		{"delta ahead of the copy", "n1", 6, true, at, true, refuse},
		{"delta from another source", "n3", 5, true, at, true, refuse},
		{"delta without a copy", "n1", 5, true, copyMeta{}, false, refuse},
		{"delta on an incomplete copy", "n1", 5, true, copyMeta{Source: "n1"}, true, refuse},
		{"outbox full copy without a slot", "n1", 0, false, copyMeta{}, false, refuse},
		{"outbox delta without a slot", "n1", 5, false, at, true, refuse},
	} {
		if got := decide(c.source, c.since, c.slotted, c.m, c.has); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// fakeCluster is a Cluster with a lease table and members set by the test.
type fakeCluster struct {
	mu       sync.Mutex
	owner    map[uint16]string
	alive    map[string]bool
	holds    int
	releases int
}

func (fc *fakeCluster) InContact() bool                  { return true }
func (fc *fakeCluster) Ring() *ring.Ring                 { return nil }
func (fc *fakeCluster) RingOf(names []string) *ring.Ring { return nil }
func (fc *fakeCluster) HoldsLocal(p uint16) bool         { return false }
func (fc *fakeCluster) Registered(name string) bool      { return fc.alive[name] }
func (fc *fakeCluster) InternalURL(string) (string, bool) {
	return "", false
}
func (fc *fakeCluster) Do(*http.Request) (*http.Response, error) { return nil, http.ErrServerClosed }

func (fc *fakeCluster) OwnerOf(p uint16) (string, uint64) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.owner[p], 1
}

func (fc *fakeCluster) Members() []gossip.Member {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var out []gossip.Member
	for name, alive := range fc.alive {
		st := gossip.StatusAlive
		if !alive {
			st = gossip.StatusDead
		}
		out = append(out, gossip.Member{Name: name, Status: st})
	}
	return out
}

func (fc *fakeCluster) Alive() map[string]gossip.Member {
	out := map[string]gossip.Member{}
	for _, m := range fc.Members() {
		if m.Status == gossip.StatusAlive {
			out[m.Name] = m
		}
	}
	return out
}

func (fc *fakeCluster) Hold(context.Context, uint16, time.Duration) error {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.holds++
	return nil
}

func (fc *fakeCluster) Release(uint16) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.releases++
}

// TestPromote: a backup keeps the copies of a live source's partitions, blocks and then
// imports the copy of a partition whose source is gone and whose lease came here (held
// for the import), and drops the copy of a partition handed off by a live source.
func TestPromote(t *testing.T) {
	const pLost, pMoved = 3, 4
	partOf := func(h string) uint16 {
		if h == "a.test" {
			return pLost
		}
		return pMoved
	}
	lost, lostDB := openMemFrontier(t, partOf)
	var cands []frontier.Candidate
	for _, h := range []string{"a.test", "b.test"} {
		for _, path := range []string{"/1", "/2", "/3"} {
			cands = append(cands, frontier.Candidate{URL: "http://" + h + path, Host: h})
		}
	}
	if _, err := lost.Add(cands); err != nil {
		t.Fatal(err)
	}
	snd := testReplicator(t, "n1", nil)
	snd.db = lostDB
	snd.export = snd.exportView
	snd.parts[pLost] = &replOut{backup: "n2"}
	snd.parts[pMoved] = &replOut{backup: "n2"}

	here, hereDB := openMemFrontier(t, partOf)
	fc := &fakeCluster{owner: map[uint16]string{pLost: "n1", pMoved: "n1"}, alive: map[string]bool{"n1": true, "n2": true}}
	bak := newReplicator(Config{Self: "n2", DB: hereDB, Frontier: here, Interval: time.Second})
	bak.cluster = fc
	if ans := round(t, snd, bak, pLost, pMoved); len(ans.Applied) != 2 {
		t.Fatalf("round: %+v", ans)
	}

	ctx := context.Background()
	bak.promote(ctx)
	if len(bak.Blocked()) != 0 || len(copyOf(t, bak, pLost)) == 0 || len(copyOf(t, bak, pMoved)) == 0 {
		t.Fatalf("source alive and owner: blocked %v, copies must stay", bak.Blocked())
	}
	if st := bak.Stats(); st.Copies != 2 {
		t.Fatalf("stats %+v, want 2 copies", st)
	}

	// pMoved is handed off by its live source; then the source dies and pLost's lease
	// comes here.
	fc.mu.Lock()
	fc.owner[pMoved] = "n3"
	fc.mu.Unlock()
	bak.promote(ctx)
	if len(copyOf(t, bak, pMoved)) != 0 || bak.dropped.Load() != 1 {
		t.Fatalf("a handed-off partition's copy stayed (dropped %d)", bak.dropped.Load())
	}
	fc.mu.Lock()
	fc.alive["n1"] = false
	fc.owner[pLost] = "n2"
	fc.mu.Unlock()
	if b := bak.Blocked(); !b[pLost] || len(b) != 1 {
		t.Fatalf("blocked %v, want only %d", b, pLost)
	}
	if st := here.Stats(); st.Queued != 0 {
		t.Fatalf("%d queued before the promotion", st.Queued)
	}
	bak.promote(ctx)
	if st := here.Stats(); st.Queued != 3 {
		t.Fatalf("%d queued after the promotion, want the lost partition's 3", st.Queued)
	}
	if len(copyOf(t, bak, pLost)) != 0 || len(bak.Blocked()) != 0 || bak.promoted.Load() != 1 {
		t.Fatalf("after the promotion: copy %v, blocked %v, promoted %d", copyOf(t, bak, pLost), bak.Blocked(), bak.promoted.Load())
	}
	if fc.holds != 1 || fc.releases != 1 {
		t.Fatalf("holds %d, releases %d: the import must hold the partition", fc.holds, fc.releases)
	}
}
