package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/crawlnode/crawlnode/internal/clustertest"
	"github.com/crawlnode/crawlnode/ring"
)

// table is a fake lease table: partition -> owner and epoch.
type table struct {
	mu     sync.Mutex
	owners [ring.PartitionCount]string
	epochs [ring.PartitionCount]uint64
}

func (t *table) OwnerOf(p uint16) (string, uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if int(p) >= len(t.owners) || t.owners[p] == "" {
		return "", 0, false
	}
	return t.owners[p], t.epochs[p], true
}

// setRing places partitions with ring.New(members); partitions that change owner get epoch.
func (t *table) setRing(members []string, epoch uint64) {
	r := ring.New(members, ring.Config{})
	t.mu.Lock()
	defer t.mu.Unlock()
	for p := range t.owners {
		o := r.Owner(uint16(p))
		if o != t.owners[p] {
			t.owners[p], t.epochs[p] = o, epoch
		}
	}
}

func (t *table) set(p uint16, owner string, epoch uint64) {
	t.mu.Lock()
	t.owners[p], t.epochs[p] = owner, epoch
	t.mu.Unlock()
}

// peers is a fake set of receivers: they commit the partitions they own at the batch's
// epoch (per the table) and refuse the others, like the real node.
type peers struct {
	tab *table
	mu  sync.Mutex
	got map[string]map[string]int // peer -> URL -> deliveries
	// fail, when it returns an error for a peer, fails the whole send.
	fail  func(peer string) error
	calls map[string]int
	t     testing.TB
}

func newPeers(t testing.TB, tab *table) *peers {
	return &peers{tab: tab, got: map[string]map[string]int{}, calls: map[string]int{}, t: t}
}

func (ps *peers) Send(ctx context.Context, peer string, b Batch) error {
	ps.mu.Lock()
	ps.calls[peer]++
	fail := ps.fail
	ps.mu.Unlock()
	if fail != nil {
		if err := fail(peer); err != nil {
			return err
		}
	}
	// What goes on the wire must be what the outbox meant to send.
	if b.enc == nil {
		ps.t.Error("outbox sent a batch without its encoding")
		return errors.New("no encoding")
	}
	dec, err := Decode(b.enc)
	if err != nil {
		ps.t.Errorf("decode sent batch: %v", err)
		return err
	}
	b.enc = nil
	if !reflect.DeepEqual(dec, b) {
		ps.t.Errorf("wire batch differs from the batch")
	}
	var refused []uint16
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range dec.Partitions {
		owner, epoch, ok := ps.tab.OwnerOf(p.Partition)
		if !ok || owner != peer || epoch != p.Epoch {
			refused = append(refused, p.Partition)
			continue
		}
		if ps.got[peer] == nil {
			ps.got[peer] = map[string]int{}
		}
		for _, l := range p.Links {
			if q, _ := PartitionOfURL(l.URL); q != p.Partition {
				ps.t.Errorf("link %s in partition %d, belongs to %d", l.URL, p.Partition, q)
			}
			ps.got[peer][l.URL]++
		}
	}
	if len(refused) > 0 {
		return &RefusedError{Peer: peer, Partitions: refused}
	}
	return nil
}

func (ps *peers) count(peer string) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.got[peer])
}

func (ps *peers) callCount(peer string) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.calls[peer]
}

// localSink records links handed to Local.
type localSink struct {
	mu   sync.Mutex
	got  map[string]int
	fail atomic.Int32 // fail this many calls
}

func (l *localSink) Local(links []Link) error {
	if l.fail.Load() > 0 {
		l.fail.Add(-1)
		return errors.New("frontier busy")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.got == nil {
		l.got = map[string]int{}
	}
	for _, k := range links {
		l.got[k.URL]++
	}
	return nil
}

func (l *localSink) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.got)
}

func newOutbox(t testing.TB, cfg Config) *Outbox {
	t.Helper()
	if cfg.Self == "" {
		cfg.Self = "self"
	}
	if cfg.Logger == nil && !testing.Verbose() {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Local == nil {
		cfg.Local = func([]Link) error { return errors.New("no local sink in this test") }
	}
	o, err := New(TestConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func start(t testing.TB, o *Outbox) {
	t.Helper()
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := o.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	db := memDB(t)
	ok := Config{DB: db, Self: "n", OwnerOf: (&table{}).OwnerOf,
		Send: func(context.Context, string, Batch) error { return nil }, Local: func([]Link) error { return nil }}
	cases := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"no db", func(c *Config) { c.DB = nil }, false},
		{"no self", func(c *Config) { c.Self = "" }, false},
		{"no owner", func(c *Config) { c.OwnerOf = nil }, false},
		{"no send", func(c *Config) { c.Send = nil }, false},
		{"no local", func(c *Config) { c.Local = nil }, false},
		{"negative max queued", func(c *Config) { c.MaxQueued = -1 }, false},
		{"batch too big", func(c *Config) { c.BatchLinks = MaxBatchLinks + 1 }, false},
		{"url bytes too small", func(c *Config) { c.BatchURLBytes = 100 }, false},
		{"backoff inverted", func(c *Config) { c.BackoffBase, c.BackoffMax = time.Second, time.Millisecond }, false},
		{"one batch per peer", func(c *Config) { c.PeerConcurrency = 1 }, true},
		{"negative peer concurrency", func(c *Config) { c.PeerConcurrency = -1 }, false},
		{"peer concurrency too high", func(c *Config) { c.PeerConcurrency = MaxPeerConcurrency + 1 }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := ok
			c.mod(&cfg)
			err := cfg.WithDefaults().Validate()
			if (err == nil) != c.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrConfig) {
				t.Fatalf("not ErrConfig: %v", err)
			}
		})
	}
	d := Config{}.WithDefaults()
	if d.MaxQueued != 5_000_000 || d.BatchLinks != 2000 || d.SendInterval != 200*time.Millisecond || d.RecentCache != 200_000 || d.PeerConcurrency != 4 {
		t.Fatalf("defaults: %+v", d)
	}
}

func urlsOf(links []Link) []string {
	out := make([]string, len(links))
	for i, l := range links {
		out[i] = l.URL
	}
	return out
}

func TestAddDurable(t *testing.T) {
	dir := t.TempDir()
	open := func() *badger.DB {
		db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithSyncWrites(true))
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	tab := &table{}
	tab.setRing([]string{"a"}, 1)
	links := simLinks(1000, 40, 1)

	db := open()
	o := newOutbox(t, Config{DB: db, OwnerOf: tab.OwnerOf, Send: func(context.Context, string, Batch) error {
		return errors.New("never started")
	}, BatchLinks: 64})
	for i := 0; i < len(links); i += 100 {
		if err := o.Add(links[i : i+100]); err != nil {
			t.Fatal(err)
		}
	}
	before := o.Stats()
	if before.Queued != 1000 {
		t.Fatalf("queued %d", before.Queued)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = open()
	defer db.Close()
	ps := newPeers(t, tab)
	o = newOutbox(t, Config{DB: db, OwnerOf: tab.OwnerOf, Send: ps.Send, BatchLinks: 64})
	after := o.Stats()
	if after.Queued != 1000 || !reflect.DeepEqual(after.QueuedByPartition, before.QueuedByPartition) {
		t.Fatalf("after reopen: queued %d, by partition equal %v", after.Queued,
			reflect.DeepEqual(after.QueuedByPartition, before.QueuedByPartition))
	}
	if after.QueuedByPeer["a"] != 1000 {
		t.Fatalf("queued by peer %v", after.QueuedByPeer)
	}
	// Sequence numbers continue after the stored ones: new entries do not overwrite old ones.
	more := simLinks(1100, 40, 1)[1000:]
	if err := o.Add(more); err != nil {
		t.Fatal(err)
	}
	start(t, o)
	clustertest.Eventually(t, 10*time.Second, "outbox drained", func() bool { return o.Queued() == 0 })
	want := urlsOf(append(slices.Clone(links), more...))
	if ps.count("a") != len(want) {
		t.Fatalf("delivered %d distinct, want %d", ps.count("a"), len(want))
	}
	for _, u := range want {
		if n := ps.got["a"][u]; n != 1 {
			t.Fatalf("%s delivered %d times", u, n)
		}
	}
	st := o.Stats()
	if st.SentLinks != int64(len(want)) || st.SentBytes == 0 || st.BytesPerLink <= 0 || st.SentBatches < int64(len(want)/64) {
		t.Fatalf("stats %+v", st)
	}
	// Nothing left under the 'o' family.
	if n := countKeys(t, db, famOutbox); n != 0 {
		t.Fatalf("%d outbox keys left", n)
	}
}

func countKeys(t testing.TB, db *badger.DB, fam byte) int {
	n := 0
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{fam}})
		defer it.Close()
		for it.Seek([]byte{fam}); it.ValidForPrefix([]byte{fam}); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRingChangeExactlyOnce: links are delivered exactly once, each to the owner at the time
// of the send, while the ring changes under the sender (b leaves, d joins, self is a member).
func TestRingChangeExactlyOnce(t *testing.T) {
	tab := &table{}
	tab.setRing([]string{"self", "a", "b", "c"}, 1)
	ps := newPeers(t, tab)
	var sends atomic.Int32
	changed := make(chan struct{})
	var before map[string]int
	var once sync.Once
	ps.fail = func(peer string) error {
		if sends.Add(1) < 12 {
			return nil
		}
		// Snapshot and change the table under ps.mu, where receivers check ownership, so
		// that no commit to b slips in between.
		ps.mu.Lock()
		defer ps.mu.Unlock()
		if len(ps.got["b"]) == 0 {
			return nil
		}
		once.Do(func() {
			before = map[string]int{"a": len(ps.got["a"]), "b": len(ps.got["b"]), "c": len(ps.got["c"])}
			tab.setRing([]string{"self", "a", "c", "d"}, 2)
			close(changed)
		})
		return nil
	}
	local := &localSink{}
	o := newOutbox(t, Config{DB: memDB(t), OwnerOf: tab.OwnerOf, Send: ps.Send, Local: local.Local, BatchLinks: 100})
	links := simLinks(6000, 200, 7)
	if err := o.Add(links[:3000]); err != nil {
		t.Fatal(err)
	}
	start(t, o)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 3000; i < 6000; i += 50 {
			if err := o.Add(links[i : i+50]); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	clustertest.Eventually(t, 10*time.Second, "ring change", func() bool {
		select {
		case <-changed:
			return true
		default:
			return false
		}
	})
	clustertest.Eventually(t, 20*time.Second, "outbox drained", func() bool { return o.Queued() == 0 })

	total := map[string]int{}
	ps.mu.Lock()
	for _, got := range ps.got {
		for u, n := range got {
			total[u] += n
		}
	}
	afterB, gotD := len(ps.got["b"]), len(ps.got["d"])
	ps.mu.Unlock()
	local.mu.Lock()
	for u, n := range local.got {
		total[u] += n
	}
	local.mu.Unlock()
	for _, l := range links {
		if total[l.URL] != 1 {
			t.Fatalf("%s delivered %d times", l.URL, total[l.URL])
		}
	}
	if len(total) != len(links) {
		t.Fatalf("delivered %d distinct URLs, want %d", len(total), len(links))
	}
	if before["b"] == 0 || afterB != before["b"] {
		t.Fatalf("b got %d before leaving and %d in all: it must get some, then none", before["b"], afterB)
	}
	if gotD == 0 || local.count() == 0 {
		t.Fatalf("d got %d, local %d: entries must follow the new owners", gotD, local.count())
	}
	// Each peer's deliveries are of partitions it owns now or owned at epoch 1 (b).
	st := o.Stats()
	if st.Queued != 0 || len(st.QueuedByPartition) != 0 || st.LocalLinks != int64(local.count()) {
		t.Fatalf("stats %+v", st)
	}
}

func TestSendFailureBackoff(t *testing.T) {
	clock := newFakeClock()
	tab := &table{}
	tab.setRing([]string{"a"}, 1)
	ps := newPeers(t, tab)
	var failing atomic.Bool
	failing.Store(true)
	ps.fail = func(string) error {
		if failing.Load() {
			return errors.New("connection refused")
		}
		return nil
	}
	o := newOutbox(t, Config{DB: memDB(t), OwnerOf: tab.OwnerOf, Send: ps.Send, Now: clock.Now,
		BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second})
	links := simLinks(300, 20, 3)
	if err := o.Add(links); err != nil {
		t.Fatal(err)
	}
	start(t, o)
	clustertest.Eventually(t, 5*time.Second, "first attempt", func() bool { return ps.callCount("a") == 1 && o.Stats().Failures == 1 })
	steady := func(want int) {
		t.Helper()
		time.Sleep(60 * time.Millisecond) // 12 send intervals on the real clock
		if got := ps.callCount("a"); got != want {
			t.Fatalf("attempts %d, want %d (the fake clock did not reach the backoff)", got, want)
		}
	}
	steady(1)
	if st := o.Stats(); st.Queued != 300 || st.Failures != 1 || st.BackingOff["a"].IsZero() {
		t.Fatalf("after a failure: %+v", st)
	}
	clock.Advance(90 * time.Millisecond) // backoff 1 is 100..125ms
	steady(1)
	clock.Advance(40 * time.Millisecond)
	clustertest.Eventually(t, 5*time.Second, "second attempt", func() bool { return ps.callCount("a") == 2 && o.Stats().Failures == 2 })
	clock.Advance(190 * time.Millisecond) // backoff 2 is 200..250ms
	steady(2)
	clock.Advance(70 * time.Millisecond)
	clustertest.Eventually(t, 5*time.Second, "third attempt", func() bool { return ps.callCount("a") == 3 && o.Stats().Failures == 3 })
	if o.Queued() != 300 {
		t.Fatalf("entries lost on failure: %d queued", o.Queued())
	}
	failing.Store(false)
	clock.Advance(time.Second + 250*time.Millisecond) // past any backoff
	clustertest.Eventually(t, 5*time.Second, "delivery", func() bool { return o.Queued() == 0 })
	if ps.count("a") != 300 {
		t.Fatalf("delivered %d", ps.count("a"))
	}
	if st := o.Stats(); st.Failures != 3 || len(st.BackingOff) != 0 {
		t.Fatalf("after recovery: failures %d, backing off %v", st.Failures, st.BackingOff)
	}
}

// slowPeer is a receiver that holds each acknowledgement for hold, as a node does until
// its replica round copied the links. It counts the sends in flight at once and fails the
// test if two in flight carry the same partition (a partition's entries must go out in
// order, one batch at a time). With fail set, a send fails after the hold, committing
// nothing.
type slowPeer struct {
	ps   *peers
	hold time.Duration
	fail atomic.Bool

	mu          sync.Mutex
	calls       int
	inFlight    int
	maxInFlight int
	parts       map[uint16]bool
}

func (s *slowPeer) Send(ctx context.Context, peer string, b Batch) error {
	s.mu.Lock()
	s.calls++
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	for _, p := range b.Partitions {
		if s.parts[p.Partition] {
			s.ps.t.Errorf("partition %d is in two batches in flight at once", p.Partition)
		}
		s.parts[p.Partition] = true
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		for _, p := range b.Partitions {
			delete(s.parts, p.Partition)
		}
		s.mu.Unlock()
	}()
	select {
	case <-time.After(s.hold):
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.fail.Load() {
		return errors.New("connection reset by peer")
	}
	return s.ps.Send(ctx, peer, b)
}

// state returns the sends so far and in flight now, and the most in flight at once since
// the last call (then starts counting again from those in flight now).
func (s *slowPeer) state() (calls, inFlight, maxInFlight int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls, inFlight, maxInFlight = s.calls, s.inFlight, s.maxInFlight
	s.maxInFlight = s.inFlight
	return calls, inFlight, maxInFlight
}

// TestPeerConcurrency: a peer that takes 200 ms to acknowledge a batch gets several batches
// at once (at most PeerConcurrency, never one partition in two), each link exactly once; a
// failed send backs the peer off for all its drains by one step, then one probe at a time
// goes out until a send succeeds, and then the batches spread again.
func TestPeerConcurrency(t *testing.T) {
	const limit = 3
	clock := newFakeClock()
	tab := &table{}
	tab.setRing([]string{"a"}, 1)
	sp := &slowPeer{ps: newPeers(t, tab), hold: 200 * time.Millisecond, parts: map[uint16]bool{}}
	o := newOutbox(t, Config{DB: memDB(t), OwnerOf: tab.OwnerOf, Send: sp.Send, Now: clock.Now,
		BatchLinks: 100, PeerConcurrency: limit, BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second})
	links := simLinks(3000, 300, 17) // over most of the 271 partitions
	if err := o.Add(links[:1500]); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	start(t, o)
	clustertest.Eventually(t, 20*time.Second, "first half delivered", func() bool { return o.Queued() == 0 })
	elapsed := time.Since(begin)
	calls, _, most := sp.state()
	t.Logf("1500 links in %d batches in %v, at most %d in flight", calls, elapsed.Round(time.Millisecond), most)
	if most < 2 || most > limit {
		t.Fatalf("at most %d batches in flight at once, want 2..%d", most, limit)
	}

	// The peer fails: every drain stops, and the concurrent failures are one backoff step.
	sp.fail.Store(true)
	if err := o.Add(links[1500:]); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 5*time.Second, "a failed send", func() bool { return o.Stats().Failures > 0 })
	clustertest.Eventually(t, 5*time.Second, "drains stopped", func() bool {
		_, inFlight, _ := sp.state()
		return inFlight == 0 && len(o.Stats().Drains) == 0
	})
	calls, _, most = sp.state()
	st := o.Stats()
	if most > limit || st.Queued != 1500 {
		t.Fatalf("%d sends in flight at once, %d queued (want at most %d, 1500)", most, st.Queued, limit)
	}
	if d := st.BackingOff["a"].Sub(clock.Now()); d < 100*time.Millisecond || d > 125*time.Millisecond {
		t.Fatalf("backoff %v after %d failures in flight together, want one step (100..125ms)", d, st.Failures)
	}
	time.Sleep(100 * time.Millisecond) // 20 send intervals on the real clock; the fake one stands still
	if c, _, _ := sp.state(); c != calls {
		t.Fatalf("%d sends to a peer backing off", c-calls)
	}

	// The backoff ends: one probe, which fails, and the backoff grows by one step.
	failures := st.Failures
	clock.Advance(130 * time.Millisecond)
	clustertest.Eventually(t, 5*time.Second, "the probe", func() bool { return o.Stats().Failures == failures+1 })
	clustertest.Eventually(t, 5*time.Second, "the probe's drain", func() bool { return len(o.Stats().Drains) == 0 })
	time.Sleep(50 * time.Millisecond)
	c, _, most := sp.state()
	if c != calls+1 || most != 1 {
		t.Fatalf("%d sends, at most %d in flight while probing a failing peer, want 1 and 1", c-calls, most)
	}
	st = o.Stats()
	if d := st.BackingOff["a"].Sub(clock.Now()); d < 200*time.Millisecond || d > 250*time.Millisecond {
		t.Fatalf("backoff %v after a failed probe, want the second step (200..250ms)", d)
	}

	// The peer is back: the probe succeeds and the batches spread again.
	sp.fail.Store(false)
	clock.Advance(300 * time.Millisecond)
	clustertest.Eventually(t, 20*time.Second, "second half delivered", func() bool { return o.Queued() == 0 })
	if _, _, most := sp.state(); most < 2 || most > limit {
		t.Fatalf("at most %d batches in flight after recovery, want 2..%d", most, limit)
	}
	sp.ps.mu.Lock()
	got := maps.Clone(sp.ps.got["a"])
	sp.ps.mu.Unlock()
	if len(got) != len(links) {
		t.Fatalf("delivered %d distinct links, want %d", len(got), len(links))
	}
	for _, l := range links {
		if got[l.URL] != 1 {
			t.Fatalf("%s delivered %d times", l.URL, got[l.URL])
		}
	}
	if st := o.Stats(); len(st.BackingOff) != 0 || st.SentLinks != int64(len(links)) {
		t.Fatalf("after recovery: backing off %v, sent %d links", st.BackingOff, st.SentLinks)
	}
}

func TestBackoffBounded(t *testing.T) {
	o := &Outbox{cfg: Config{BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second}}
	cases := []struct {
		n        int
		min, max time.Duration
	}{
		{1, 100 * time.Millisecond, 125 * time.Millisecond},
		{2, 200 * time.Millisecond, 250 * time.Millisecond},
		{4, 800 * time.Millisecond, time.Second},
		{5, time.Second, 1250 * time.Millisecond},
		{40, time.Second, 1250 * time.Millisecond},
		{1000, time.Second, 1250 * time.Millisecond},
	}
	for _, c := range cases {
		for range 50 {
			if d := o.backoff(c.n); d < c.min || d > c.max {
				t.Fatalf("backoff(%d) = %v, want %v..%v", c.n, d, c.min, c.max)
			}
		}
	}
}

// TestDownPeerDoesNotBlockOthers: b hangs, c refuses connections; a still gets everything.
func TestDownPeerDoesNotBlockOthers(t *testing.T) {
	tab := &table{}
	tab.setRing([]string{"a", "b", "c"}, 1)
	ps := newPeers(t, tab)
	hung := make(chan struct{}, 100)
	o := newOutbox(t, Config{DB: memDB(t), OwnerOf: tab.OwnerOf, BatchLinks: 50, SendTimeout: time.Minute,
		Send: func(ctx context.Context, peer string, b Batch) error {
			switch peer {
			case "b":
				hung <- struct{}{}
				<-ctx.Done() // a peer that accepts the connection and never answers
				return ctx.Err()
			case "c":
				return errors.New("connection refused")
			}
			return ps.Send(ctx, peer, b)
		}})
	links := simLinks(3000, 100, 11)
	want := map[string]int{}
	for _, l := range links {
		p, _ := PartitionOfURL(l.URL)
		owner, _, _ := tab.OwnerOf(p)
		want[owner]++
	}
	if want["a"] == 0 || want["b"] == 0 || want["c"] == 0 {
		t.Fatalf("every peer needs links: %v", want)
	}
	if err := o.Add(links); err != nil {
		t.Fatal(err)
	}
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-hung
	clustertest.Eventually(t, 10*time.Second, "a's links", func() bool { return ps.count("a") == want["a"] && o.Stats().QueuedByPeer["a"] == 0 })
	st := o.Stats()
	if st.QueuedByPeer["b"] != want["b"] || st.QueuedByPeer["c"] != want["c"] || st.QueuedByPeer["a"] != 0 {
		t.Fatalf("queued by peer %v, want b=%d c=%d", st.QueuedByPeer, want["b"], want["c"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := o.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if q := o.Queued(); q != want["b"]+want["c"] {
		t.Fatalf("after shutdown %d queued, want %d", q, want["b"]+want["c"])
	}
}

func TestErrFull(t *testing.T) {
	tab := &table{}
	tab.setRing([]string{"a"}, 1)
	ps := newPeers(t, tab)
	o := newOutbox(t, Config{DB: memDB(t), OwnerOf: tab.OwnerOf, Send: ps.Send, MaxQueued: 100})
	links := simLinks(151, 10, 5)
	if err := o.Add(links[:60]); err != nil {
		t.Fatal(err)
	}
	if err := o.Add(links[60:110]); !errors.Is(err, ErrFull) {
		t.Fatalf("Add past MaxQueued: %v, want ErrFull", err)
	}
	if o.Queued() != 60 {
		t.Fatalf("a refused Add queued something: %d", o.Queued())
	}
	if err := o.Add(links[110:150]); err != nil { // exactly 100
		t.Fatal(err)
	}
	if err := o.Add(links[150:]); !errors.Is(err, ErrFull) {
		t.Fatalf("Add of one past a full outbox: %v", err)
	}
	if st := o.Stats(); st.FullRejections != 2 || st.Queued != 100 {
		t.Fatalf("stats %+v", st)
	}
	start(t, o)
	clustertest.Eventually(t, 5*time.Second, "drained", func() bool { return o.Queued() == 0 })
	// The refused links were not remembered as recent: the retry queues them.
	if err := o.Add(links[60:110]); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 5*time.Second, "retry delivered", func() bool { return ps.count("a") == 150 })
}

func TestRecentCache(t *testing.T) {
	tab := &table{}
	tab.setRing([]string{"a"}, 1)
	send := func(context.Context, string, Batch) error { return nil }
	links := simLinks(20, 5, 9)

	o := newOutbox(t, Config{DB: memDB(t), OwnerOf: tab.OwnerOf, Send: send, RecentCache: 8})
	if err := o.Add(links[:4]); err != nil {
		t.Fatal(err)
	}
	if err := o.Add(append(slices.Clone(links[:4]), links[4], links[4])); err != nil {
		t.Fatal(err)
	}
	if st := o.Stats(); st.Queued != 5 || st.RecentHits != 5 {
		t.Fatalf("queued %d hits %d, want 5 and 5", st.Queued, st.RecentHits)
	}
	// 8 entries = two generations of 4: after 10 more URLs links[0] is forgotten.
	if err := o.Add(links[5:15]); err != nil {
		t.Fatal(err)
	}
	if err := o.Add(links[:1]); err != nil {
		t.Fatal(err)
	}
	if st := o.Stats(); st.Queued != 16 || st.RecentHits != 5 || st.RecentCached > 8 {
		t.Fatalf("after eviction: %+v", st)
	}

	off := newOutbox(t, Config{DB: memDB(t), OwnerOf: tab.OwnerOf, Send: send, RecentCache: -1})
	for range 2 {
		if err := off.Add(links[:3]); err != nil {
			t.Fatal(err)
		}
	}
	if st := off.Stats(); st.Queued != 6 || st.RecentHits != 0 {
		t.Fatalf("cache off: %+v", st)
	}
}

func TestInvalidLinks(t *testing.T) {
	tab := &table{}
	o := newOutbox(t, Config{DB: memDB(t), OwnerOf: tab.OwnerOf, Send: func(context.Context, string, Batch) error { return nil }})
	long := "http://h.sim.test/" + string(make([]byte, MaxURLLength))
	if err := o.Add([]Link{{URL: ""}, {URL: "no-scheme"}, {URL: long}, {URL: "http:///x"}, {URL: "http://ok.sim.test/"}}); err != nil {
		t.Fatal(err)
	}
	if st := o.Stats(); st.Invalid != 4 || st.Queued != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestLocal: partitions this node owns now are handed to Local; a Local failure retries.
func TestLocal(t *testing.T) {
	clock := newFakeClock()
	tab := &table{}
	for p := range uint16(ring.PartitionCount) {
		if p%2 == 0 {
			tab.set(p, "self", 3)
		} else {
			tab.set(p, "a", 3)
		}
	}
	ps := newPeers(t, tab)
	local := &localSink{}
	local.fail.Store(1)
	o := newOutbox(t, Config{DB: memDB(t), OwnerOf: tab.OwnerOf, Send: ps.Send, Local: local.Local, Now: clock.Now})
	links := simLinks(2000, 100, 13)
	want := 0
	for _, l := range links {
		if p, _ := PartitionOfURL(l.URL); p%2 == 0 {
			want++
		}
	}
	if err := o.Add(links); err != nil {
		t.Fatal(err)
	}
	start(t, o)
	clustertest.Eventually(t, 5*time.Second, "a's links", func() bool { return ps.count("a") == len(links)-want && o.Queued() == want })
	clustertest.Eventually(t, 5*time.Second, "local failure", func() bool { return o.Stats().Failures == 1 })
	time.Sleep(30 * time.Millisecond) // 6 send intervals on the real clock; the fake one stands still
	if local.count() != 0 || o.Queued() != want {
		t.Fatalf("local got %d before its backoff ended; queued %d", local.count(), o.Queued())
	}
	clock.Advance(time.Second)
	clustertest.Eventually(t, 5*time.Second, "local links", func() bool { return local.count() == want })
	clustertest.Eventually(t, 5*time.Second, "drained", func() bool { return o.Queued() == 0 })
	for u, n := range local.got {
		if n != 1 {
			t.Fatalf("%s handed to Local %d times", u, n)
		}
	}
	if st := o.Stats(); st.LocalLinks != int64(want) || st.SentLinks != int64(len(links)-want) {
		t.Fatalf("stats %+v", st)
	}
}

func TestCorruptEntryDropped(t *testing.T) {
	db := memDB(t)
	tab := &table{}
	tab.setRing([]string{"a"}, 1)
	ps := newPeers(t, tab)
	links := simLinks(10, 3, 21)
	p, _ := PartitionOfURL(links[0].URL)
	if err := db.Update(func(txn *badger.Txn) error {
		return txn.Set(outboxKey(p, 1), []byte{entryVersion, 2, 0xff, 0xff})
	}); err != nil {
		t.Fatal(err)
	}
	o := newOutbox(t, Config{DB: db, OwnerOf: tab.OwnerOf, Send: ps.Send})
	if err := o.Add(links); err != nil {
		t.Fatal(err)
	}
	start(t, o)
	clustertest.Eventually(t, 5*time.Second, "drained", func() bool { return o.Queued() == 0 && o.Stats().SentLinks == 10 })
	if n := countKeys(t, db, famOutbox); n != 0 || ps.count("a") != 10 {
		t.Fatalf("%d keys left, %d links delivered", n, ps.count("a"))
	}
	if st := o.Stats(); st.CorruptDropped != 1 || st.Queued != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStartTwice(t *testing.T) {
	o := newOutbox(t, Config{DB: memDB(t), OwnerOf: (&table{}).OwnerOf, Send: func(context.Context, string, Batch) error { return nil }})
	start(t, o)
	if err := o.Start(context.Background()); err == nil {
		t.Fatal("second Start succeeded")
	}
}

func ExampleEncode() {
	enc, _ := Encode(Batch{From: "n1", Partitions: []PartitionLinks{{Partition: 7, Epoch: 2,
		Links: []Link{{URL: "http://h1.sim.test/b.html", Depth: 2}, {URL: "http://h1.sim.test/a.html", Depth: 1}}}}})
	b, _ := Decode(enc)
	fmt.Println(b.Partitions[0].Links[0].URL, b.Partitions[0].Links[1].URL)
	// Output: http://h1.sim.test/a.html http://h1.sim.test/b.html
}

// linksOfPartition returns n of simLinks' links that fall in one partition, and it.
func linksOfPartition(t *testing.T, n int) ([]Link, uint16) {
	t.Helper()
	by := map[uint16][]Link{}
	for _, l := range simLinks(20000, 1, 5) {
		p, _ := PartitionOfURL(l.URL)
		if by[p] = append(by[p], l); len(by[p]) == n {
			return by[p], p
		}
	}
	t.Fatalf("no partition with %d links", n)
	return nil, 0
}

// An Add takes its sequence numbers before it writes: a later Add's entries can be sent
// and deleted first. The drains' head must not pass the earlier Add's entries, or they
// would never be read (until a restart).
// onePeer is an outbox DB and a table in which peer "a" holds every partition.
func onePeer(t *testing.T) (*badger.DB, *table, *peers) {
	t.Helper()
	tab := &table{}
	tab.setRing([]string{"a"}, 1)
	return memDB(t), tab, newPeers(t, tab)
}

// checkDelivered fails unless peer "a" got want distinct links and no outbox entry is left.
func checkDelivered(t *testing.T, ps *peers, db *badger.DB, want int) {
	t.Helper()
	if n := ps.count("a"); n != want {
		t.Fatalf("%d links delivered, want %d", n, want)
	}
	if n := countKeys(t, db, famOutbox); n != 0 {
		t.Fatalf("%d outbox keys left", n)
	}
}

// reserveAdd does what Add does before it writes, for n links of partition p: it takes a
// sequence number, marks the Add as writing and counts the links. It returns the number.
func reserveAdd(o *Outbox, p uint16, n int) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	o.adding[o.seq] = struct{}{}
	o.queued[p] += n
	o.total += n
	return o.seq
}

func TestHeadWaitsForAddInFlight(t *testing.T) {
	db, tab, ps := onePeer(t)
	links, p := linksOfPartition(t, 20)
	early, late := links[:10], links[10:]
	o := newOutbox(t, Config{DB: db, OwnerOf: tab.OwnerOf, Send: ps.Send})

	first := reserveAdd(o, p, len(early)) // the early Add, not written yet

	if err := o.Add(late); err != nil {
		t.Fatal(err)
	}
	start(t, o)
	clustertest.Eventually(t, 5*time.Second, "the later Add sent", func() bool { return o.Stats().SentLinks == int64(len(late)) })
	o.mu.Lock()
	head := o.head[p]
	o.mu.Unlock()
	if head != first {
		t.Fatalf("head %d after the later Add's entry %d went; want %d, the earlier Add's first", head, first+1, first)
	}

	// The early Add's write lands now, and its number is released with it: under mu, so that
	// no drain takes its read limit between the two (one that did, with the entry still
	// counted as in flight, would send it and keep the head at it, rightly, and this test
	// would fail at random: 1 run in 60 did under -race on a loaded machine).
	o.mu.Lock()
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set(outboxKey(p, first), encodeEntry(early)) }); err != nil {
		o.mu.Unlock()
		t.Fatal(err)
	}
	delete(o.adding, first)
	o.mu.Unlock()
	o.kick <- struct{}{}
	clustertest.Eventually(t, 5*time.Second, "the earlier Add sent", func() bool { return o.Queued() == 0 })
	o.mu.Lock()
	head = o.head[p]
	o.mu.Unlock()
	// Past the earlier Add's entry (the later one's, deleted while the head was held
	// back, is passed with the next deletion beyond it).
	if head != first+1 {
		t.Fatalf("head %d after every entry went; want %d: drains would step over the sent ones again", head, first+1)
	}
	checkDelivered(t, ps, db, len(links))
}

// A refused partition's corrupt entries are deleted with the batch, but its head stays:
// its live entries before them are still to be sent.
func TestHeadStaysForRefused(t *testing.T) {
	o := newOutbox(t, Config{DB: memDB(t), OwnerOf: (&table{}).OwnerOf, Send: func(context.Context, string, Batch) error { return nil }})
	o.mu.Lock()
	defer o.mu.Unlock()
	o.advance([][]byte{outboxKey(3, 7), outboxKey(4, 9), outboxKey(4, 8)}, map[uint16]bool{3: true}, math.MaxUint64)
	if o.head[3] != 0 || o.head[4] != 10 {
		t.Fatalf("heads %d, %d; want 0, 10", o.head[3], o.head[4])
	}
	o.advance([][]byte{outboxKey(4, 15)}, nil, 12)
	if o.head[4] != 12 {
		t.Fatalf("head %d past the read's limit 12", o.head[4])
	}
}

// An Add that was still writing when a drain read its batch, and lands before the batch
// is acknowledged, has its entries below the ones sent: the head must not pass them
// although adding no longer shows the Add by the ack (before builtBatch.limit, the
// head moved past them, the links were never sent and the outbox never emptied: a
// cluster's chaos run hung with a node that never finished).
func TestHeadWaitsForAddLandingDuringSend(t *testing.T) {
	db, tab, ps := onePeer(t)
	links, p := linksOfPartition(t, 20)
	early, late := links[:10], links[10:]

	var first uint64
	var o *Outbox
	var landed atomic.Bool
	send := func(ctx context.Context, peer string, b Batch) error {
		if landed.CompareAndSwap(false, true) {
			// The batch was read with the early Add still writing; it lands now.
			if err := db.Update(func(txn *badger.Txn) error { return txn.Set(outboxKey(p, first), encodeEntry(early)) }); err != nil {
				return err
			}
			o.mu.Lock()
			delete(o.adding, first)
			o.mu.Unlock()
		}
		return ps.Send(ctx, peer, b)
	}
	o = newOutbox(t, Config{DB: db, OwnerOf: tab.OwnerOf, Send: send})

	first = reserveAdd(o, p, len(early)) // the early Add, not written yet

	if err := o.Add(late); err != nil {
		t.Fatal(err)
	}
	start(t, o)
	clustertest.Eventually(t, 5*time.Second, "the later Add sent", func() bool { return o.Stats().SentLinks >= int64(len(late)) })
	o.kick <- struct{}{}
	clustertest.Eventually(t, 5*time.Second, "the earlier Add sent", func() bool { return o.Queued() == 0 })
	checkDelivered(t, ps, db, len(links))
	if r := o.Stats().HeadResets; r != 0 {
		t.Fatalf("%d head resets: the head passed the early Add's entry", r)
	}
}

// A head past live entries (the bug TestHeadWaitsForAddLandingDuringSend pins down, or
// any like it) must not leave them unsent for good: a drain that finds links counted and
// none at or past the head, with no Add writing, reads the partition from its start.
func TestHeadPastLiveEntriesIsReset(t *testing.T) {
	db, tab, ps := onePeer(t)
	links, p := linksOfPartition(t, 10)
	o := newOutbox(t, Config{DB: db, OwnerOf: tab.OwnerOf, Send: ps.Send})
	if err := o.Add(links); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	o.head[p] = o.seq + 5
	o.mu.Unlock()
	start(t, o)
	clustertest.Eventually(t, 5*time.Second, "the links sent", func() bool {
		select {
		case o.kick <- struct{}{}:
		default:
		}
		return o.Queued() == 0
	})
	checkDelivered(t, ps, db, len(links))
	if r := o.Stats().HeadResets; r != 1 {
		t.Fatalf("%d head resets, want 1", r)
	}
}

// Many Adds writing at once into a few partitions while drains read, send (slowly, some
// sends failing) and delete: every link arrives, the outbox empties, and no head ever
// went past a live entry (HeadResets counts the drains that found one). The read-to-ack
// race TestHeadWaitsForAddLandingDuringSend pins down shows here as head resets.
func TestOutboxConcurrentAddsAndDrains(t *testing.T) {
	db := memDB(t)
	tab := &table{}
	tab.setRing([]string{"a", "b"}, 1)
	ps := newPeers(t, tab)
	var sends atomic.Int64
	ps.fail = func(string) error {
		n := sends.Add(1)
		time.Sleep(time.Duration(n%7) * 100 * time.Microsecond)
		if n%19 == 0 {
			return errors.New("connection reset")
		}
		return nil
	}
	o := newOutbox(t, Config{DB: db, OwnerOf: tab.OwnerOf, Send: ps.Send, BatchLinks: 40,
		BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond})
	links := simLinks(12000, 4, 11) // four hosts: a few partitions, every Add contending
	start(t, o)
	const adders = 12
	var wg sync.WaitGroup
	for w := range adders {
		wg.Go(func() {
			for i := w * 3; i < len(links); i += adders * 3 {
				if err := o.Add(links[i:min(i+3, len(links))]); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	clustertest.Eventually(t, 30*time.Second, "the outbox drained", func() bool { return o.Queued() == 0 })
	if got := ps.count("a") + ps.count("b"); got != len(links) {
		t.Fatalf("%d distinct links delivered, want %d", got, len(links))
	}
	if n := countKeys(t, db, famOutbox); n != 0 {
		t.Fatalf("%d outbox keys left", n)
	}
	st := o.Stats()
	if st.HeadResets != 0 {
		t.Fatalf("%d drains found links below a partition's head", st.HeadResets)
	}
	t.Logf("%d sends (%d failed), %d batches", sends.Load(), st.Failures, st.SentBatches)
}
