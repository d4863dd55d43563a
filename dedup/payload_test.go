package dedup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/internal/clustertest"
	"github.com/crawlnode/crawlnode/internal/keyspace"
	"github.com/dgraph-io/badger/v4"
)

// payloadsOf builds a Payloads for every node, closed at the test's end.
func payloadsOf(t testing.TB, ns []*node, cfg PayloadConfig) []*Payloads {
	t.Helper()
	var out []*Payloads
	for _, n := range ns {
		c := cfg
		c.Store, c.Cluster = n.store, n
		p, err := NewPayloads(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		out = append(out, p)
	}
	return out
}

// digestOwnedBy finds a digest whose partition the named node owns.
func digestOwnedBy(t testing.TB, tab *table, owner string, seed int) string {
	t.Helper()
	for i := seed; i < seed+100000; i++ {
		d := fmt.Sprintf("sha1:TEST%08d", i)
		tab.mu.Lock()
		o := tab.owner[PayloadPartition(d)]
		tab.mu.Unlock()
		if o == owner {
			return d
		}
	}
	t.Fatal("no digest found")
	return ""
}

func orig(url, node string) Original {
	return Original{URL: url, Date: time.Unix(1700000000, 0).UTC(), Node: node, File: "crawl-" + node + ".warc.gz", Offset: 100, Length: 42}
}

// waitRegistered waits until the registrations sent in the background were answered.
func waitRegistered(t *testing.T, p *Payloads, n int64) {
	t.Helper()
	clustertest.Eventually(t, 5*time.Second, "registrations answered", func() bool {
		s := p.Stats()
		return s.Registered.Load()+s.LostRace.Load()+s.RegisterFailed.Load() >= n
	})
}

// TestPayloadOriginalAcrossNodes: a payload registered by one node is the original every
// node's lookup names, wherever the digest's owner is; a second copy registered later
// keeps the first as the original (counted as a lost race); the original's own URL
// archived again replaces it (the newer record is known to exist).
func TestPayloadOriginalAcrossNodes(t *testing.T) {
	tab, ns := newCluster(t, 3)
	ps := payloadsOf(t, ns, PayloadConfig{})
	ctx := context.Background()
	d := digestOwnedBy(t, tab, "n2", 0)

	for i, p := range ps {
		if _, found, err := p.Lookup(ctx, d); err != nil || found {
			t.Fatalf("node %d: lookup before any record: found %v, err %v", i, found, err)
		}
	}
	first := orig("http://a.sim.test/x", "n1")
	ps[1].Register([]PayloadRecord{{Digest: d, Original: first}})
	waitRegistered(t, ps[1], 1)
	if ps[1].Stats().Registered.Load() != 1 {
		t.Fatalf("registration not accepted: %+v", ps[1].Stats().RegisterFailed.Load())
	}
	for i, p := range ps {
		o, found, err := p.Lookup(ctx, d)
		if err != nil || !found || o != first {
			t.Fatalf("node %d: lookup = %+v %v %v, want %+v", i, o, found, err, first)
		}
	}
	if ps[2].Stats().LocalLookups.Load() != 2 || ps[2].Stats().Requests.Load() != 0 {
		t.Errorf("the owner's own lookups went over the network: local %d, requests %d", ps[2].Stats().LocalLookups.Load(), ps[2].Stats().Requests.Load())
	}

	// A second full copy (fetched at the same time elsewhere) registers later: it loses.
	ps[0].Register([]PayloadRecord{{Digest: d, Original: orig("http://b.sim.test/y", "n0")}})
	waitRegistered(t, ps[0], 1)
	if ps[0].Stats().LostRace.Load() != 1 {
		t.Errorf("second copy: lost races %d, want 1", ps[0].Stats().LostRace.Load())
	}
	// The owner registers its own copy in process: it loses too.
	ps[2].Register([]PayloadRecord{{Digest: d, Original: orig("http://c.sim.test/z", "n2")}})
	if ps[2].Stats().LostRace.Load() != 1 || ps[2].Stats().Requests.Load() != 0 {
		t.Errorf("owner's copy: lost races %d, requests %d", ps[2].Stats().LostRace.Load(), ps[2].Stats().Requests.Load())
	}
	if o, _, _ := ps[0].Lookup(ctx, d); o != first {
		t.Errorf("after two later copies the original is %+v, want %+v", o, first)
	}

	// The original's URL archived again (refetched by a partition's new owner after its
	// node was lost): the key names the newer record.
	again := first
	again.Node, again.Date, again.File = "n0", first.Date.Add(time.Hour), "crawl-n0-2.warc.gz"
	ps[0].Register([]PayloadRecord{{Digest: d, Original: again}})
	waitRegistered(t, ps[0], 2)
	if o, _, _ := ps[1].Lookup(ctx, d); o != again {
		t.Errorf("after the original's URL was archived again: %+v, want %+v", o, again)
	}
}

// TestPayloadLookupsBatched: lookups from many fetch slots at once share requests (one in
// flight per owner, what queued meanwhile in the next), and every one is answered.
func TestPayloadLookupsBatched(t *testing.T) {
	tab, ns := newCluster(t, 3)
	ps := payloadsOf(t, ns, PayloadConfig{Bound: 5 * time.Second})
	ctx := context.Background()
	const slots = 200
	digests := make([]string, slots)
	var recs []PayloadRecord
	for i := range digests {
		digests[i] = digestOwnedBy(t, tab, []string{"n1", "n2"}[i%2], i*1000)
		if i%2 == 0 {
			recs = append(recs, PayloadRecord{Digest: digests[i], Original: orig(fmt.Sprintf("http://h%d.sim.test/", i), "n1")})
		}
	}
	ps[1].Register(recs)
	waitRegistered(t, ps[1], int64(len(recs)))
	var wg sync.WaitGroup
	errs := make(chan error, slots)
	for i := range digests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, found, err := ps[0].Lookup(ctx, digests[i])
			if err != nil || found != (i%2 == 0) {
				errs <- fmt.Errorf("slot %d: found %v, err %v", i, found, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := ps[0].Stats()
	t.Logf("%d lookups in %d requests, %d bytes sent, %d received", slots, st.Requests.Load(), st.BytesSent.Load(), st.BytesRecv.Load())
	if st.Requests.Load() >= slots/2 {
		t.Errorf("%d lookups took %d requests: not batched", slots, st.Requests.Load())
	}
}

// TestPayloadLookupFallsBack: an owner that answers too slowly costs a lookup at most the
// bound, one that fails is skipped at once for the backoff; both are counted, and neither
// answer is a guess (found is false: the caller writes a full record).
func TestPayloadLookupFallsBack(t *testing.T) {
	tab, ns := newCluster(t, 2)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "slow", http.StatusServiceUnavailable)
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	const bound = 50 * time.Millisecond
	ps := payloadsOf(t, ns, PayloadConfig{Bound: bound, Timeout: time.Second, Backoff: time.Minute})
	d := digestOwnedBy(t, tab, "n1", 0)
	tab.mu.Lock()
	tab.urls["n1"] = slow.URL
	tab.mu.Unlock()

	start := time.Now()
	_, found, err := ps[0].Lookup(context.Background(), d)
	if took := time.Since(start); !errors.Is(err, ErrPayloadTimeout) || found || took > bound+500*time.Millisecond {
		t.Fatalf("slow owner: found %v, err %v after %s (bound %s)", found, err, took, bound)
	}
	if ps[0].Stats().FallbackTimeout.Load() != 1 {
		t.Errorf("timeouts counted %d, want 1", ps[0].Stats().FallbackTimeout.Load())
	}
	// The request fails after Timeout: the owner is skipped for the backoff.
	clustertest.Eventually(t, 5*time.Second, "the slow request failed", func() bool { return ps[0].Stats().Failures.Load() == 1 })
	start = time.Now()
	_, found, err = ps[0].Lookup(context.Background(), d)
	if !errors.Is(err, ErrPayloadBusy) || found || time.Since(start) > bound/2 {
		t.Errorf("owner backing off: found %v, err %v after %s", found, err, time.Since(start))
	}

	// No owner for the partition: at once, counted.
	tab.mu.Lock()
	tab.owner[PayloadPartition(d)] = ""
	tab.mu.Unlock()
	if _, found, err := ps[0].Lookup(context.Background(), d); err == nil || found {
		t.Errorf("no owner: found %v, err %v", found, err)
	}
	if got := ps[0].Stats().FallbackError.Load(); got != 2 {
		t.Errorf("errors counted %d, want 2", got)
	}
}

// TestPayloadRegisterNeedsLease: the owner registers only under the partition's lease (a
// handoff holding it refuses), and a node that does not own the partition refuses a
// registration sent to it: nothing is written, the registration is counted as failed.
func TestPayloadRegisterNeedsLease(t *testing.T) {
	tab, ns := newCluster(t, 2)
	ps := payloadsOf(t, ns, PayloadConfig{Backoff: 10 * time.Millisecond})
	d := digestOwnedBy(t, tab, "n0", 0)
	tab.mu.Lock()
	tab.held[PayloadPartition(d)] = true
	tab.mu.Unlock()
	ps[0].Register([]PayloadRecord{{Digest: d, Original: orig("http://a.sim.test/", "n0")}})
	if ps[0].Stats().RegisterFailed.Load() != 1 {
		t.Errorf("held partition: failed %d, want 1", ps[0].Stats().RegisterFailed.Load())
	}
	if _, found, _ := ns[0].store.LookupPayload(d); found {
		t.Error("registered while a handoff held the partition")
	}

	// n1 thinks n0 owns a partition n0 no longer holds at that epoch: refused, retried,
	// then given up.
	d2 := digestOwnedBy(t, tab, "n0", 5000)
	owner, epoch := ns[1].OwnerOf(PayloadPartition(d2))
	tab.set(PayloadPartition(d2), owner) // a new epoch n1's request does not carry
	ps[1].cfg.Cluster = staleOwner{node: ns[1], part: PayloadPartition(d2), epoch: epoch}
	ps[1].Register([]PayloadRecord{{Digest: d2, Original: orig("http://b.sim.test/", "n1")}})
	waitRegistered(t, ps[1], 1)
	if ps[1].Stats().RegisterFailed.Load() != 1 || ps[1].Stats().Registered.Load() != 0 {
		t.Errorf("stale epoch: failed %d registered %d", ps[1].Stats().RegisterFailed.Load(), ps[1].Stats().Registered.Load())
	}
	if _, found, _ := ns[0].store.LookupPayload(d2); found {
		t.Error("registered at a stale epoch")
	}
}

// staleOwner answers an old epoch for one partition.
type staleOwner struct {
	*node
	part  uint16
	epoch uint64
}

func (s staleOwner) OwnerOf(p uint16) (string, uint64) {
	o, e := s.node.OwnerOf(p)
	if p == s.part {
		return o, s.epoch
	}
	return o, e
}

// TestPayloadOpsChecked: malformed payload operations are refused before anything is
// applied (the Handler answers 400).
func TestPayloadOpsChecked(t *testing.T) {
	db := memDB(t)
	s := NewStore(db)
	d := "sha1:ABC"
	good := Op{Code: OpPayloadPut, Part: PayloadPartition(d), Hash: []byte(d), Ref: orig("http://a/", "n0").Encode()}
	for name, op := range map[string]Op{
		"wrong partition": {Code: OpPayloadGet, Part: (PayloadPartition(d) + 1) % 271, Hash: []byte(d), Ref: "?"},
		"no digest":       {Code: OpPayloadGet, Part: PayloadPartition(""), Ref: "?"},
		"bad original":    {Code: OpPayloadPut, Part: PayloadPartition(d), Hash: []byte(d), Ref: "{not json"},
		"no url":          {Code: OpPayloadPut, Part: PayloadPartition(d), Hash: []byte(d), Ref: `{"n":"n0"}`},
	} {
		if _, err := s.Apply([]Op{good, op}); !errors.Is(err, ErrBadOp) {
			t.Errorf("%s: err %v, want ErrBadOp", name, err)
		}
	}
	if _, found, _ := s.LookupPayload(d); found {
		t.Error("a request with a bad operation applied its good one")
	}
}

// TestMigratePayloads: a node's old per-node payload index moves into the partitioned
// keys, naming the node as the records' holder; a key already there keeps its value.
func TestMigratePayloads(t *testing.T) {
	db := memDB(t)
	put := func(k, v []byte) {
		if err := db.Update(func(txn *badger.Txn) error { return txn.Set(k, v) }); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := json.Marshal(map[string]any{"u": "http://a.sim.test/", "d": time.Unix(1700000000, 0).UTC(), "l": map[string]any{"File": "f.warc.gz", "Offset": 7, "Length": 9}})
	put(append([]byte{keyspace.NodePayload}, "sha1:OLD"...), old)
	put(append([]byte{keyspace.NodePayload}, "sha1:BAD"...), []byte("garbage"))
	kept := orig("http://first.sim.test/", "n9")
	put(payloadKey(PayloadPartition("sha1:KEEP"), []byte("sha1:KEEP")), []byte(kept.Encode()))
	put(append([]byte{keyspace.NodePayload}, "sha1:KEEP"...), old)
	moved, err := MigratePayloads(db, "n1")
	if err != nil || moved != 3 {
		t.Fatalf("moved %d, err %v", moved, err)
	}
	s := NewStore(db)
	want := Original{URL: "http://a.sim.test/", Date: time.Unix(1700000000, 0).UTC(), Node: "n1", File: "f.warc.gz", Offset: 7, Length: 9}
	if o, found, err := s.LookupPayload("sha1:OLD"); err != nil || !found || !o.Date.Equal(want.Date) || o.URL != want.URL || o.Node != "n1" || o.File != want.File || o.Offset != 7 || o.Length != 9 {
		t.Errorf("migrated %+v %v %v, want %+v", o, found, err, want)
	}
	if o, _, _ := s.LookupPayload("sha1:KEEP"); o != kept {
		t.Errorf("existing key overwritten: %+v", o)
	}
	if _, found, _ := s.LookupPayload("sha1:BAD"); found {
		t.Error("a garbled entry was migrated")
	}
	if n, _ := MigratePayloads(db, "n1"); n != 0 {
		t.Errorf("second run moved %d", n)
	}
}
