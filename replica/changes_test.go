package replica

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"

	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/gossip"
	"github.com/crawlnode/crawlnode/internal/wire"
)

// TestReplicaChangedKeysMatchExport: a round that reads only the keys the change log saw
// committed sends byte for byte what the full pass sends from the same snapshot and
// since-version, for every writer of the frontier and the outbox (adds, fetches,
// retries, drops, host clocks, imports, a partition dropped, outbox entries added and
// acknowledged), with writes committed while the round is in flight left to the next
// round, and for the round after that.
func TestReplicaChangedKeysMatchExport(t *testing.T) {
	g := newChangedKeysRig(t)
	snd := g.snd
	g.add(80)
	g.outboxAdd(30)
	// The copies stand at a version the change log covers (its feed delivered a commit
	// before it).
	g.add(1)
	snd.openSnap()
	since := snd.snap.Version()
	if !snd.changes.cut(g.ctx, since) {
		t.Fatal("the change log's feed did not deliver")
	}
	g.liveAt = outboxKeysIn(t, snd.snap) // the outbox keys the copies hold
	snd.closeSnap()
	for b, ps := range g.groups {
		for _, p := range ps {
			snd.parts[p] = &replOut{backup: b, version: since}
		}
	}

	// Every writer, after the copies' version, with the feed held back until the round
	// has its snapshot.
	g.gate.Lock()
	g.everyWriter()

	// The round, with writes of every kind committed while it is in flight; the feed
	// delivers them a little later.
	next, live := g.compare(1, 40, func() {
		g.add(30)
		g.fetch(10)
		g.outboxAdd(5)
		go func() {
			time.Sleep(100 * time.Millisecond)
			g.delivered.Store(true)
			g.gate.Unlock()
		}()
	})

	// The copies took the round: the log drops what they have; the writes made in flight
	// and more go in the next round, while a writer keeps committing beside it.
	acked := map[uint16]uint64{}
	for p, st := range snd.parts {
		st.version = next
		acked[p] = next
	}
	snd.changes.settle(acked)
	g.liveAt = live
	g.ephemeral(30)
	g.fetch(10)
	if err := g.f.DropPartition(2); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			host := fmt.Sprintf("h%d.test", i%10)
			if _, err := g.f.Add([]frontier.Candidate{{URL: fmt.Sprintf("http://%s/w%d", host, i), Host: host}}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	g.compare(2, 30, func() {})
	close(stop)
	<-writer
	if snd.changes.overflows.Load() != 0 {
		t.Fatalf("%d overflows", snd.changes.overflows.Load())
	}
}

// changedKeysRig is TestReplicaChangedKeysMatchExport's sender: a frontier and an
// outbox in one DB, its change log fed through a gate, and the writers the test runs.
type changedKeysRig struct {
	t      *testing.T
	ctx    context.Context
	partOf func(string) uint16
	f      *frontier.Frontier
	db     *badger.DB
	out    *forward.Outbox
	snd    *Replicator
	// gate holds the feed back (gate.Lock): commits are delivered late, as they may be
	// under load, and a round must wait for its snapshot's.
	gate      sync.RWMutex
	delivered atomic.Bool // the gate opened
	groups    map[string][]uint16
	liveAt    map[string]bool // the outbox keys the copies hold
	seq       int
	eph       uint64
}

func newChangedKeysRig(t *testing.T) *changedKeysRig {
	g := &changedKeysRig{t: t, eph: 1 << 40,
		partOf: func(h string) uint16 { return uint16(h[1]-'0') % 6 }, // hN.test -> N mod 6
		groups: map[string][]uint16{"b1": {0, 1, 2, outboxSlot}, "b2": {3, 4, 5}}}
	g.f, g.db = openMemFrontier(t, g.partOf)
	snd := testReplicator(t, "n1", nil)
	g.snd = snd
	snd.db = g.db
	snd.export = snd.exportView
	snd.exportMany = func(parts []uint16, since uint64, fn func(uint16, byte, []byte, []byte, bool) error) (uint64, error) {
		return snd.snap.ExportPartitionsSince(parts, since, fn)
	}
	snd.changes = newChangeLog(g.db)
	ctx, cancel := context.WithCancel(context.Background())
	g.ctx = ctx
	fed := make(chan struct{})
	snd.changes.start()
	go func() {
		defer close(fed)
		snd.changes.follow(ctx, func(kvs *badger.KVList) error {
			g.gate.RLock()
			defer g.gate.RUnlock()
			return snd.changes.note(kvs)
		})
	}()
	t.Cleanup(func() { cancel(); <-fed })
	// The feed's subscription has taken hold (a marker of its own was delivered) before
	// the writes it must cover.
	if !snd.changes.cut(ctx, 0) {
		t.Fatal("the change log's feed did not start")
	}
	out, err := forward.New(forward.Config{DB: g.db, Self: "n1",
		OwnerOf: func(uint16) (string, uint64, bool) { return "n2", 1, true },
		Send:    func(context.Context, string, forward.Batch) error { return nil },
		Local:   func([]forward.Link) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	g.out = out
	return g
}

func (g *changedKeysRig) add(n int) {
	g.t.Helper()
	var cands []frontier.Candidate
	for i := 0; i < n; i++ {
		g.seq++
		host := fmt.Sprintf("h%d.test", g.seq%10)
		cands = append(cands, frontier.Candidate{URL: fmt.Sprintf("http://%s/p%d", host, g.seq), Host: host})
	}
	if _, err := g.f.Add(cands); err != nil {
		g.t.Fatal(err)
	}
}

func (g *changedKeysRig) outboxAdd(n int) {
	g.t.Helper()
	var links []forward.Link
	for i := 0; i < n; i++ {
		g.seq++
		links = append(links, forward.Link{URL: fmt.Sprintf("http://x%d.test/l%d", g.seq%7, g.seq)})
	}
	if err := g.out.Add(links); err != nil {
		g.t.Fatal(err)
	}
}

func (g *changedKeysRig) fetch(n int) {
	g.t.Helper()
	for i := 0; i < n; i++ {
		lctx, lcancel := context.WithTimeout(context.Background(), time.Second)
		l, err := g.f.Next(lctx)
		lcancel()
		if err != nil {
			return
		}
		o := frontier.Outcome{Kind: frontier.Fetched, Status: 200}
		switch i % 5 {
		case 1:
			o = frontier.Outcome{Kind: frontier.Retry, Err: "x"}
		case 2:
			o = frontier.Outcome{Kind: frontier.Drop, Err: "filtered"}
		}
		if err := g.f.Done(l, o); err != nil {
			g.t.Fatal(err)
		}
	}
}

// ephemeral writes outbox entries set and deleted within a round's span, as the outbox
// writes them (a fresh key, set once, deleted once sent): the changed keys leave them
// out, the full pass sends their deletions.
func (g *changedKeysRig) ephemeral(n int) {
	g.t.Helper()
	for i := 0; i < n; i++ {
		g.eph++
		k := make([]byte, 11)
		k[0] = forward.KeyPrefix
		binary.BigEndian.PutUint16(k[1:], uint16(i%5))
		binary.BigEndian.PutUint64(k[3:], g.eph)
		if err := g.db.Update(func(txn *badger.Txn) error { return txn.Set(k, []byte{2, 0}) }); err != nil {
			g.t.Fatal(err)
		}
		if err := g.db.Update(func(txn *badger.Txn) error { return txn.Delete(k) }); err != nil {
			g.t.Fatal(err)
		}
	}
}

// everyWriter runs every writer of the frontier and the outbox once: 40 ephemeral outbox
// entries, adds, fetches, host clocks, an import, a partition dropped, outbox entries
// shipped and acknowledged, then new ones.
func (g *changedKeysRig) everyWriter() {
	t, f := g.t, g.f
	t.Helper()
	g.ephemeral(40)
	g.add(60)
	g.fetch(25)
	if err := f.ExportPartition(1, func(byte, []byte, []byte) error { return nil }); err != nil { // host clocks written
		t.Fatal(err)
	}
	other, _ := openMemFrontier(t, g.partOf)
	var ocands []frontier.Candidate
	for i := 0; i < 12; i++ {
		ocands = append(ocands, frontier.Candidate{URL: fmt.Sprintf("http://h4.test/imp%d", i), Host: "h4.test"})
	}
	if _, err := other.Add(ocands); err != nil {
		t.Fatal(err)
	}
	var recs []rawTestRec
	if err := other.ExportPartition(4, func(fam byte, k, v []byte) error {
		recs = append(recs, rawTestRec{fam, slices.Clone(k), slices.Clone(v)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ImportPartition(4, func() (byte, []byte, []byte, error) {
		if len(recs) == 0 {
			return 0, nil, nil, io.EOF
		}
		r := recs[0]
		recs = recs[1:]
		return r.fam, r.k, r.v, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.DropPartition(5); err != nil { // tombstones for the whole partition
		t.Fatal(err)
	}
	// The outbox: entries shipped and acknowledged (deleted), then new ones.
	octx, ocancel := context.WithCancel(context.Background())
	if err := g.out.Start(octx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); g.out.Queued() > 0; {
		if time.Now().After(deadline) {
			t.Fatal("the outbox did not drain")
		}
		time.Sleep(5 * time.Millisecond)
	}
	ocancel()
	if err := g.out.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.outboxAdd(20)
}

// compare runs a round's read-ahead (inFlight commits after its snapshot) and checks
// that every phase's stream to every backup from the changed keys equals the full
// pass's, less the deletions of the ephemerals outbox entries the copy never had. It
// returns the snapshot's version and the outbox keys it holds.
func (g *changedKeysRig) compare(round int, ephemerals int, inFlight func()) (uint64, map[string]bool) {
	t, snd := g.t, g.snd
	t.Helper()
	snd.openSnap()
	defer snd.closeSnap()
	readTs := snd.snap.Version()
	liveNext := outboxKeysIn(t, snd.snap)
	inFlight() // committed after the snapshot: the next round's
	keyed := snd.keyed.Load()
	vals, reads, skipped := snd.logValues.Load(), snd.logReads.Load(), snd.changes.skipped.Load()
	snd.prefetch(g.ctx, g.groups)
	if n := snd.changes.skipped.Load() - skipped; n != int64(ephemerals) {
		t.Fatalf("round %d: %d outbox entries skipped, want %d", round, n, ephemerals)
	}
	// Most values come from the log; deletions (and in round 1 the keys written in
	// flight) are read from the snapshot.
	if v, r := snd.logValues.Load()-vals, snd.logReads.Load()-reads; v < 50 || r < 20 {
		t.Fatalf("round %d: %d values from the change log, %d keys read from the snapshot", round, v, r)
	}
	if round == 1 && !g.delivered.Load() {
		t.Fatal("the round read the change log before the feed delivered its snapshot's commits")
	}
	if n := snd.keyed.Load() - keyed; n != 7 {
		t.Fatalf("round %d: %d of 7 sections read from the change log", round, n)
	}
	scan := snd.scan
	for _, phase := range []int{phaseAll, phaseAdd, phaseFinish} {
		for _, b := range []string{"b1", "b2"} {
			g.comparePhase(round, phase, b, scan, ephemerals)
		}
	}
	deletions, records := 0, 0
	for _, sp := range scan.parts {
		for _, x := range sp.recs {
			records++
			if x.deleted {
				deletions++
			}
		}
	}
	t.Logf("round %d: %d records, %d deletions", round, records, deletions)
	if records < 100 || deletions < 20 {
		t.Fatalf("round %d: %d records, %d deletions: the test made too few changes", round, records, deletions)
	}
	return readTs, liveNext
}

// comparePhase compares one phase's stream to backup b from the round's read-ahead
// (scan) with the full pass's.
func (g *changedKeysRig) comparePhase(round, phase int, b string, scan *roundScan, ephemerals int) {
	t, snd := g.t, g.snd
	t.Helper()
	encode := func() []byte {
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		if err := snd.encodePhase(w, g.groups[b], phase, func(uint16, uint64, time.Time) {}); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		return buf.Bytes()
	}
	snd.scan = scan
	keyedOut := encode()
	snd.scan = nil
	// The full pass, less its deletions of outbox keys the copy never had.
	full, dropped := filterReplicaStream(t, encode(), func(op byte, k []byte) bool {
		return op == 2 && k[0] == forward.KeyPrefix && !g.liveAt[string(k)]
	})
	if !bytes.Equal(keyedOut, full) {
		t.Fatalf("round %d, phase %d, %s: the changed keys' stream (%d bytes) differs from the full pass's (%d bytes)", round, phase, b, len(keyedOut), len(full))
	}
	if b == "b1" && phase != phaseAdd && dropped != ephemerals {
		t.Fatalf("round %d, phase %d: the full pass sent %d deletions of outbox keys the copy never had, want %d", round, phase, dropped, ephemerals)
	}
}

// outboxKeysIn returns the outbox keys v sees.
func outboxKeysIn(t *testing.T, v *frontier.View) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	if _, err := v.ExportSince(0, func(_ byte, k, _ []byte, _ bool) error {
		keys[string(k)] = true
		return nil
	}, []byte{forward.KeyPrefix}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// filterReplicaStream re-encodes a replica stream without the records drop picks (op 1
// set, 2 delete), and counts them.
func filterReplicaStream(t *testing.T, stream []byte, drop func(op byte, key []byte) bool) ([]byte, int) {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(stream))
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	must := func(err error) {
		if err != nil {
			t.Fatalf("replica stream: %v", err)
		}
	}
	magic := make([]byte, len(streamMagic))
	_, err := io.ReadFull(br, magic)
	must(err)
	w.Write(magic)
	src, err := wire.ReadBytes(br, nil, maxReplicaField)
	must(err)
	wire.WriteBytes(w, src)
	dropped := 0
	for {
		tag, err := br.ReadByte()
		must(err)
		w.WriteByte(tag)
		if tag == 'E' {
			break
		}
		p, err := binary.ReadUvarint(br)
		must(err)
		since, err := binary.ReadUvarint(br)
		must(err)
		wire.WriteUvarint(w, p)
		wire.WriteUvarint(w, since)
		for {
			op, err := br.ReadByte()
			must(err)
			if op == 0 {
				break
			}
			k, err := wire.ReadBytes(br, nil, maxReplicaField)
			must(err)
			var v []byte
			if op == 1 {
				v, err = wire.ReadBytes(br, nil, maxReplicaField)
				must(err)
			}
			if drop(op, k) {
				dropped++
				continue
			}
			w.WriteByte(op)
			wire.WriteBytes(w, k)
			if op == 1 {
				wire.WriteBytes(w, v)
			}
		}
		w.WriteByte(0)
		version, err := binary.ReadUvarint(br)
		must(err)
		wire.WriteUvarint(w, version)
	}
	must(w.Flush())
	return buf.Bytes(), dropped
}

type rawTestRec struct {
	fam  byte
	k, v []byte
}

// BenchmarkReplicaRoundExport: a round's read-ahead of a small delta (200 new URLs) over
// 64 partitions whose memtables hold 100,000 URLs written before the copies' version: the
// one pass per family (which steps over every version in the memtables) against the
// change log's keys.
func BenchmarkReplicaRoundExport(b *testing.B) {
	partOf := func(h string) uint16 {
		n := 0
		for _, c := range h[1:] {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int(c-'0')
		}
		return uint16(n % 64)
	}
	f, db := openMemFrontier(b, partOf)
	snd := testReplicator(b, "n1", nil)
	snd.db = db
	snd.export = snd.exportView
	snd.exportMany = func(parts []uint16, since uint64, fn func(uint16, byte, []byte, []byte, bool) error) (uint64, error) {
		return snd.snap.ExportPartitionsSince(parts, since, fn)
	}
	changes := newChangeLog(db)
	ctx, cancel := context.WithCancel(context.Background())
	fed := make(chan struct{})
	changes.start()
	go func() { defer close(fed); changes.run(ctx) }()
	b.Cleanup(func() { cancel(); <-fed })
	if !changes.cut(ctx, 0) {
		b.Fatal("the change log's feed did not start")
	}
	add := func(n, from int) {
		var cands []frontier.Candidate
		for i := 0; i < n; i++ {
			host := fmt.Sprintf("h%d.test", (from+i)%2000)
			cands = append(cands, frontier.Candidate{URL: fmt.Sprintf("http://%s/p%d", host, from+i), Host: host})
			if len(cands) == 1000 {
				if _, err := f.Add(cands); err != nil {
					b.Fatal(err)
				}
				cands = cands[:0]
			}
		}
		if _, err := f.Add(cands); err != nil {
			b.Fatal(err)
		}
	}
	add(100_000, 0)
	snd.changes = changes
	snd.openSnap()
	since := snd.snap.Version()
	if !changes.cut(ctx, since) {
		b.Fatal("no feed")
	}
	snd.closeSnap()
	groups := map[string][]uint16{"b1": nil}
	for p := range uint16(64) {
		groups["b1"] = append(groups["b1"], p)
		snd.parts[p] = &replOut{backup: "b1", version: since}
	}
	// The copies acknowledged since: the log holds what came after (as in a node, where
	// every round's acknowledgements settle it).
	acked := map[uint16]uint64{}
	for p := range uint16(64) {
		acked[p] = since
	}
	changes.settle(acked)
	add(200, 100_000)
	for _, keyed := range []bool{false, true} {
		name := "one-pass"
		if keyed {
			name = "changed-keys"
		}
		b.Run(name, func(b *testing.B) {
			snd.changes = nil
			if keyed {
				snd.changes = changes
			}
			for b.Loop() {
				snd.openSnap()
				snd.prefetch(ctx, groups)
				if snd.scan == nil || len(snd.scan.parts) != 64 {
					b.Fatal("not read ahead")
				}
				snd.closeSnap()
			}
		})
	}
}

// TestChangeLogValues: the change log hands a round the value the round's snapshot sees
// only when the key's newest commit is at or below the snapshot and set a value; a
// deletion, a key written again after the snapshot, or a value past the log's bound is
// read. The bytes it holds are accounted for as keys come, are rewritten and settle.
func TestChangeLogValues(t *testing.T) {
	cl := newChangeLog(nil)
	cl.start()
	key := func(rest string) []byte { return []byte(pkey('s', 3, rest)) }
	feed := func(v uint64, k []byte, val []byte) {
		t.Helper()
		if err := cl.note(&badger.KVList{Kv: []*pb.KV{{Key: k, Value: val, Version: v}}}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(since, readTs uint64) map[string][]byte {
		t.Helper()
		keys, ok := cl.changed(3, since, readTs)
		if !ok {
			t.Fatalf("changed(%d, %d): not covered", since, readTs)
		}
		out := map[string][]byte{}
		for _, ck := range keys {
			out[string(ck.key)] = ck.val
		}
		return out
	}
	feed(1, changeMarkKey, nil) // the first delivery: the log covers from version 1
	feed(2, key("a"), []byte("a2"))
	feed(3, key("b"), []byte("b3"))
	feed(3, key("e"), []byte("e3"))
	feed(4, key("a"), []byte("a4"))
	feed(5, key("b"), nil) // a deletion
	if got := get(1, 3); got[string(key("a"))] != nil || got[string(key("b"))] != nil || string(got[string(key("e"))]) != "e3" || len(got) != 3 {
		t.Fatalf("snapshot at 3: %q (a and b were written again after it: read; e: e3)", got)
	}
	if got := get(1, 5); string(got[string(key("a"))]) != "a4" || got[string(key("b"))] != nil || len(got) != 3 {
		t.Fatalf("snapshot at 5: %q (a: a4; b deleted: read)", got)
	}
	if got := get(4, 5); len(got) != 1 || got[string(key("b"))] != nil {
		t.Fatalf("since 4: %q (only b)", got)
	}
	if cl.nval != 4 || cl.n != 3 {
		t.Fatalf("%d bytes of values for %d keys, want 4 for 3", cl.nval, cl.n)
	}

	// The bound: a value that would take the log past it is not kept (read instead).
	feed(6, key("c"), make([]byte, maxChangedValueBytes-cl.nval))
	feed(7, key("d"), []byte("d7"))
	if got := get(5, 7); got[string(key("c"))] == nil || got[string(key("d"))] != nil {
		t.Fatal("at the bound: c's value should be held and d's read")
	}
	feed(8, key("c"), nil)
	feed(9, key("d"), []byte("d9"))
	if got := get(7, 9); got[string(key("c"))] != nil || string(got[string(key("d"))]) != "d9" {
		t.Fatalf("after c's deletion: %q (d9 held again)", got)
	}
	if cl.nval != 6 {
		t.Fatalf("%d bytes of values, want 6 (a4, e3, d9)", cl.nval)
	}

	// Settled up to 8: a's, b's, c's and e's commits are all copied, d's newest is not.
	cl.settle(map[uint16]uint64{3: 8})
	if cl.n != 1 || cl.nval != 2 {
		t.Fatalf("after settling to 8: %d keys, %d bytes of values; want 1 and 2", cl.n, cl.nval)
	}
	if got := get(8, 9); len(got) != 1 || string(got[string(key("d"))]) != "d9" {
		t.Fatalf("after settling to 8: %q", got)
	}
	cl.settle(map[uint16]uint64{}) // the slot is no longer held here
	if cl.n != 0 || cl.nval != 0 {
		t.Fatalf("after the slot left: %d keys, %d bytes of values", cl.n, cl.nval)
	}
}

// TestOutboxBackupSpreads: in a steady cluster every member backs up exactly one other's
// outbox (they all went to the backup of partition 0, which then applied the outbox
// traffic of every other node); a member that is down is skipped, and its successor
// takes the outbox instead.
func TestOutboxBackupSpreads(t *testing.T) {
	members := []string{"n3", "n1", "n4", "n2", "n10"}
	all := map[string]gossip.Member{}
	for _, m := range members {
		all[m] = gossip.Member{Name: m}
	}
	others := func(self string) []string {
		return slices.DeleteFunc(slices.Clone(members), func(m string) bool { return m == self })
	}
	held := map[string]string{}
	for _, self := range members {
		b := outboxBackup(self, others(self), all)
		if b == "" || b == self {
			t.Fatalf("%s's outbox goes to %q", self, b)
		}
		if prev, dup := held[b]; dup {
			t.Fatalf("%s backs up the outboxes of %s and %s", b, prev, self)
		}
		held[b] = self
	}
	if got := outboxBackup("n4", others("n4"), all); got != "n1" {
		t.Fatalf("the last member's outbox goes to %q, want the first (n1)", got)
	}
	down := maps.Clone(all)
	delete(down, "n2")
	if got := outboxBackup("n10", others("n10"), down); got != "n3" {
		t.Fatalf("with n2 down, n10's outbox goes to %q, want n3", got)
	}
	if got := outboxBackup("n1", []string{"n2"}, map[string]gossip.Member{}); got != "" {
		t.Fatalf("nobody alive: %q", got)
	}
}
