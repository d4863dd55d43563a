package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/internal/clustertest"
)

// testLogger discards logs unless GOSSIP_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("GOSSIP_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func testConfig(name string) Config {
	return Config{
		Name:     name,
		BindAddr: "127.0.0.1:0",
		Profile:  ProfileTest,
		Meta:     Meta{HTTPAddr: "127.0.0.1:8" + fmt.Sprint(len(name)), State: StateJoining, Version: "v1", DataFormat: 1},
		Logger:   testLogger(),
	}
}

// node is a started Gossip plus a recorder of its event batches.
type node struct {
	*Gossip
	rec *recorder
}

// startNode builds and starts a node; with record, a goroutine consumes its events.
func startNode(t *testing.T, cfg Config, record bool) *node {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("new %s: %v", cfg.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	n := &node{Gossip: g}
	if record {
		n.rec = newRecorder(g.Events())
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		if err := g.Shutdown(sctx); err != nil {
			t.Errorf("shutdown %s: %v", cfg.Name, err)
		}
		cancel()
		if n.rec != nil {
			n.rec.wait()
		}
	})
	return n
}

type recorder struct {
	mu      sync.Mutex
	batches [][]Event
	done    chan struct{}
}

func newRecorder(ch <-chan []Event) *recorder {
	r := &recorder{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for b := range ch {
			r.mu.Lock()
			r.batches = append(r.batches, b)
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *recorder) wait() { <-r.done }

// about returns the events about member name, in order.
func (r *recorder) about(name string) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, b := range r.batches {
		for _, e := range b {
			if e.Member.Name == name {
				out = append(out, e)
			}
		}
	}
	return out
}

// has reports whether an event about name matches pred.
func (r *recorder) has(name string, pred func(Event) bool) bool {
	for _, e := range r.about(name) {
		if pred(e) {
			return true
		}
	}
	return false
}

func find(ms []Member, name string) (Member, bool) {
	for _, m := range ms {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// cluster starts nodes named names, joins them all through the first one and waits until
// every node sees every other alive.
func cluster(t *testing.T, names ...string) []*node {
	t.Helper()
	nodes := make([]*node, len(names))
	for i, name := range names {
		nodes[i] = startNode(t, testConfig(name), true)
	}
	for _, n := range nodes[1:] {
		if _, err := n.Join([]string{nodes[0].AdvertiseAddr()}); err != nil {
			t.Fatal(err)
		}
	}
	waitConverged(t, nodes, names)
	// Let every consumer receive the joins, so later changes are not folded into them.
	for _, n := range nodes {
		for _, p := range nodes {
			clustertest.Eventually(t, 5*time.Second, n.cfg.Name+" join event for "+p.cfg.Name, func() bool {
				return n.rec.has(p.cfg.Name, func(e Event) bool { return e.Kind == EventJoin })
			})
		}
	}
	return nodes
}

func waitConverged(t *testing.T, nodes []*node, names []string) {
	t.Helper()
	clustertest.Eventually(t, 10*time.Second, "convergence", func() bool {
		for _, n := range nodes {
			if len(n.Alive()) != len(names) {
				return false
			}
		}
		return true
	})
}

func TestBoundAddrPortZero(t *testing.T) {
	g, err := New(testConfig("solo"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown(context.Background())
	host, port, err := net.SplitHostPort(g.BoundAddr())
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("BoundAddr %q", g.BoundAddr())
	}
	if g.AdvertiseAddr() != g.BoundAddr() {
		t.Fatalf("advertise %q != bound %q", g.AdvertiseAddr(), g.BoundAddr())
	}
	// The port really is bound for TCP (memberlist binds TCP and UDP on the same port).
	c, err := net.DialTimeout("tcp", g.BoundAddr(), time.Second)
	if err != nil {
		t.Fatalf("dial bound addr: %v", err)
	}
	c.Close()
	if l := g.Local(); l.Name != "solo" || l.Addr != g.AdvertiseAddr() || l.Status != StatusAlive || l.Meta.Started.IsZero() {
		t.Fatalf("local %+v", l)
	}
}

func TestThreeNodesJoinWithMeta(t *testing.T) {
	names := []string{"a", "bb", "ccc"}
	start := time.Now()
	nodes := cluster(t, names...)
	t.Logf("3 nodes converged in %v", time.Since(start))
	for _, n := range nodes {
		ms := n.Members()
		if len(ms) != 3 {
			t.Fatalf("%s sees %d members", n.cfg.Name, len(ms))
		}
		for i, m := range ms { // sorted by name
			peer := nodes[i]
			if m.Name != names[i] || m.Status != StatusAlive || m.Addr != peer.AdvertiseAddr() {
				t.Errorf("%s sees %+v, want %s at %s", n.cfg.Name, m, names[i], peer.AdvertiseAddr())
			}
			if !m.Meta.Equal(peer.Local().Meta) {
				t.Errorf("%s sees %s meta %+v, want %+v", n.cfg.Name, m.Name, m.Meta, peer.Local().Meta)
			}
		}
		// Events: a join for every member, with its metadata.
		for _, p := range nodes {
			want := p.Local().Meta
			clustertest.Eventually(t, 5*time.Second, n.cfg.Name+" join event for "+p.cfg.Name, func() bool {
				return n.rec.has(p.cfg.Name, func(e Event) bool { return e.Kind == EventJoin && e.Member.Meta.Equal(want) })
			})
		}
	}
}

func TestSetMetaPropagates(t *testing.T) {
	nodes := cluster(t, "a", "b")
	a, b := nodes[0], nodes[1]
	want := a.Local().Meta
	want.State, want.RaftAddr = StateActive, "127.0.0.1:8300"
	start := time.Now()
	if err := a.SetMeta(Meta{HTTPAddr: want.HTTPAddr, RaftAddr: want.RaftAddr, State: StateActive, Version: want.Version, DataFormat: want.DataFormat}); err != nil {
		t.Fatal(err)
	}
	if got := a.Local().Meta; !got.Equal(want) { // zero Started kept the old one
		t.Fatalf("local meta %+v, want %+v", got, want)
	}
	took := clustertest.Eventually(t, 5*time.Second, "update event on b", func() bool {
		return b.rec.has("a", func(e Event) bool { return e.Kind == EventUpdate && e.Member.Meta.Equal(want) })
	})
	t.Logf("update seen by peer in %v", time.Since(start))
	_ = took
	if m, _ := find(b.Members(), "a"); !m.Meta.Equal(want) {
		t.Fatalf("b's table has %+v", m.Meta)
	}
	// The local node's own update is an event too.
	clustertest.Eventually(t, 5*time.Second, "own update event", func() bool {
		return a.rec.has("a", func(e Event) bool { return e.Kind == EventUpdate && e.Member.Meta.State == StateActive })
	})
	if err := a.SetMeta(Meta{State: "bogus"}); !errors.Is(err, ErrInvalidMeta) {
		t.Fatalf("bogus state: %v", err)
	}
}

func TestGracefulLeave(t *testing.T) {
	nodes := cluster(t, "a", "b", "c")
	c := nodes[2]
	start := time.Now()
	if err := c.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:2] {
		clustertest.Eventually(t, 5*time.Second, n.cfg.Name+" leave event", func() bool {
			return n.rec.has("c", func(e Event) bool { return e.Kind == EventLeave && e.Member.Status == StatusLeft })
		})
		if n.rec.has("c", func(e Event) bool { return e.Kind == EventFail }) {
			t.Errorf("%s saw a failure for a graceful leave", n.cfg.Name)
		}
		if m, ok := find(n.Members(), "c"); !ok || m.Status != StatusLeft {
			t.Errorf("%s table: %+v", n.cfg.Name, m)
		}
		if _, ok := find(n.Alive(), "c"); ok {
			t.Errorf("%s still lists c alive", n.cfg.Name)
		}
	}
	t.Logf("leave seen by both peers in %v", time.Since(start))
	if l := c.Local(); l.Status != StatusLeft || l.Meta.State != StateLeft {
		t.Errorf("local after leave: %+v", l)
	}
	if err := c.SetMeta(Meta{State: StateActive}); !errors.Is(err, ErrLeft) {
		t.Errorf("SetMeta after leave: %v", err)
	}
	if err := c.Leave(time.Second); err != nil {
		t.Errorf("second leave: %v", err)
	}
}

func TestHardStopIsFailure(t *testing.T) {
	nodes := cluster(t, "a", "b", "c")
	c := nodes[2]
	start := time.Now()
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:2] {
		clustertest.Eventually(t, 5*time.Second, n.cfg.Name+" fail event", func() bool {
			return n.rec.has("c", func(e Event) bool { return e.Kind == EventFail && e.Member.Status == StatusDead })
		})
		if m, _ := find(n.Members(), "c"); m.Status != StatusDead {
			t.Errorf("%s table: %+v", n.cfg.Name, m)
		}
	}
	t.Logf("failure detected by both peers in %v (test profile)", time.Since(start))
	if err := c.SetMeta(c.Local().Meta); !errors.Is(err, ErrShutdown) {
		t.Errorf("SetMeta after shutdown: %v", err)
	}
	if err := c.Leave(time.Second); !errors.Is(err, ErrShutdown) {
		t.Errorf("Leave after shutdown: %v", err)
	}
	if _, ok := <-c.Events(); ok {
		t.Error("events channel still open after shutdown")
	}
}

func TestRestartSameName(t *testing.T) {
	for _, waitDeath := range []bool{true, false} {
		t.Run(fmt.Sprintf("after_failure_detected=%v", waitDeath), func(t *testing.T) {
			nodes := cluster(t, "a", "b")
			a, b := nodes[0], nodes[1]
			if err := b.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if waitDeath {
				clustertest.Eventually(t, 5*time.Second, "fail event", func() bool {
					return a.rec.has("b", func(e Event) bool { return e.Kind == EventFail })
				})
			}
			cfg := testConfig("b") // same name, new port, new start time and version
			cfg.Meta.Version = "v2"
			cfg.Meta.Started = b.Local().Meta.Started.Add(time.Second)
			start := time.Now()
			b2 := startNode(t, cfg, true)
			if _, err := b2.Join([]string{a.AdvertiseAddr()}); err != nil {
				t.Fatal(err)
			}
			want := b2.Local().Meta
			clustertest.Eventually(t, 10*time.Second, "restarted b seen with new meta", func() bool {
				m, ok := find(a.Alive(), "b")
				return ok && m.Addr == b2.AdvertiseAddr() && m.Meta.Equal(want)
			})
			clustertest.Eventually(t, 5*time.Second, "join/update event with new meta", func() bool {
				evs := a.rec.about("b")
				last := evs[len(evs)-1]
				if waitDeath && last.Kind != EventJoin {
					return false
				}
				return (last.Kind == EventJoin || last.Kind == EventUpdate) && last.Member.Meta.Equal(want) && last.Member.Addr == b2.AdvertiseAddr()
			})
			t.Logf("restarted node accepted in %v", time.Since(start))
			clustertest.Eventually(t, 5*time.Second, "restarted b sees a", func() bool { _, ok := find(b2.Alive(), "a"); return ok })
		})
	}
}

func TestMetaSizeEnforced(t *testing.T) {
	cfg := testConfig("big")
	cfg.Meta = metaOfSize(t, MaxMetaSize+1)
	if _, err := New(cfg); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("New with 513-byte meta: %v", err)
	}
	nodes := cluster(t, "a", "b")
	a, b := nodes[0], nodes[1]
	before := a.Local().Meta
	if err := a.SetMeta(metaOfSize(t, MaxMetaSize+1)); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("SetMeta 513 bytes: %v", err)
	}
	if !a.Local().Meta.Equal(before) {
		t.Fatal("refused meta was applied")
	}
	maxMeta := metaOfSize(t, MaxMetaSize)
	if err := a.SetMeta(maxMeta); err != nil {
		t.Fatalf("SetMeta 512 bytes: %v", err)
	}
	clustertest.Eventually(t, 5*time.Second, "512-byte meta on b", func() bool {
		m, _ := find(b.Members(), "a")
		return m.Meta.Version == maxMeta.Version
	})
}

// Many updates while the consumer is not reading: bounded events, latest state wins; the
// tiny EventBuffer forces the overflow path.
func TestBurstCoalesced(t *testing.T) {
	acfg := testConfig("a")
	acfg.EventBuffer = 2
	a := startNode(t, acfg, false)
	b := startNode(t, testConfig("b"), true)
	if _, err := b.Join([]string{a.AdvertiseAddr()}); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 5*time.Second, "a sees b", func() bool { return len(a.Alive()) == 2 })
	const updates = 60
	meta := b.Local().Meta
	start := time.Now()
	for i := range updates {
		meta.Version = fmt.Sprintf("v%d", i)
		if err := b.SetMeta(meta); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d SetMeta calls in %v", updates, time.Since(start))
	last := meta.Version
	clustertest.Eventually(t, 5*time.Second, "a's table has the last update", func() bool {
		m, _ := find(a.Members(), "b")
		return m.Meta.Version == last
	})
	// Now read: everything about b folds into few events, ending at the last version.
	var aboutB []Event
	batches := 0
	deadline := time.After(5 * time.Second)
	for len(aboutB) == 0 || aboutB[len(aboutB)-1].Member.Meta.Version != last {
		select {
		case batch := <-a.Events():
			batches++
			for _, e := range batch {
				if e.Member.Name == "b" {
					aboutB = append(aboutB, e)
				}
			}
		case <-deadline:
			t.Fatalf("no event with the last version; got %d events about b", len(aboutB))
		}
	}
	t.Logf("%d updates -> %d events about b in %d batches", updates, len(aboutB), batches)
	if len(aboutB) > 2 {
		t.Fatalf("burst not coalesced: %d events about b", len(aboutB))
	}
	if k := aboutB[len(aboutB)-1].Kind; k != EventJoin && k != EventUpdate {
		t.Fatalf("last event kind %s", k)
	}
}

// A consumer that never reads must not stall memberlist: callbacks return, probes go on and
// detect a failure, metadata still flows both ways. Then the consumer catches up with the
// latest state of everyone.
func TestSlowConsumerDoesNotBlockMemberlist(t *testing.T) {
	acfg := testConfig("a")
	acfg.EventBuffer = 1
	a := startNode(t, acfg, false) // nobody reads a.Events()
	b := startNode(t, testConfig("b"), true)
	c := startNode(t, testConfig("c"), true)
	for _, n := range []*node{b, c} {
		if _, err := n.Join([]string{a.AdvertiseAddr()}); err != nil {
			t.Fatal(err)
		}
	}
	waitConverged(t, []*node{b, c}, []string{"a", "b", "c"})
	meta := b.Local().Meta
	for i := range 60 {
		meta.Version = fmt.Sprintf("v%d", i)
		if err := b.SetMeta(meta); err != nil {
			t.Fatal(err)
		}
	}
	// memberlist's own lock is free (a blocked callback would hold it).
	done := make(chan int, 1)
	go func() { done <- a.ml.NumMembers() }()
	select {
	case n := <-done:
		if n != 3 {
			t.Fatalf("NumMembers %d", n)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("memberlist blocked")
	}
	// a's own updates still go out.
	am := a.Local().Meta
	am.State = StateActive
	if err := a.SetMeta(am); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 5*time.Second, "b sees a active", func() bool {
		return b.rec.has("a", func(e Event) bool { return e.Member.Meta.State == StateActive })
	})
	// Probes continue: a detects c's hard stop while its events sit unread.
	start := time.Now()
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 5*time.Second, "a detects c dead", func() bool {
		m, _ := find(a.Members(), "c")
		return m.Status == StatusDead
	})
	t.Logf("failure detected with a stalled consumer in %v", time.Since(start))
	// Catch up: applying the batches gives the consumer the same view as the table, with b's
	// latest metadata. a's consumer never received c alive, so c's join+failure folds into
	// nothing at all.
	view := map[string]Member{}
	deadline := time.After(5 * time.Second)
	consistent := func() bool {
		alive := a.Alive()
		if len(alive) != len(view) {
			return false
		}
		for _, m := range alive {
			if v, ok := view[m.Name]; !ok || !v.Meta.Equal(m.Meta) {
				return false
			}
		}
		return view["b"].Meta.Version == meta.Version
	}
	var aboutC []Event
	for !consistent() {
		select {
		case batch := <-a.Events():
			for _, e := range batch {
				if e.Member.Name == "c" {
					aboutC = append(aboutC, e)
				}
				switch e.Kind {
				case EventJoin, EventUpdate:
					view[e.Member.Name] = e.Member
				case EventFail, EventLeave:
					delete(view, e.Member.Name)
				}
			}
		case <-deadline:
			t.Fatalf("consumer never caught up: view %+v, table %+v", view, a.Alive())
		}
	}
	if len(aboutC) != 0 {
		t.Fatalf("events about c, which the consumer never saw alive: %+v", aboutC)
	}
}

func TestJoinErrorsAndRetry(t *testing.T) {
	// A port nobody listens on (bound then released).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	cfg := testConfig("joiner")
	cfg.JoinTimeout = 300 * time.Millisecond
	j := startNode(t, cfg, false)
	start := time.Now()
	n, err := j.Join([]string{dead})
	if n != 0 || !errors.Is(err, ErrJoin) || !strings.Contains(err.Error(), dead) {
		t.Fatalf("join dead addr: n=%d err=%v", n, err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
		t.Fatalf("join gave up after %v, want about JoinTimeout", d)
	}
	if _, err := j.Join(nil); !errors.Is(err, ErrJoin) {
		t.Fatalf("empty join: %v", err)
	}
	// Retry: the seed comes up after the joiner started trying.
	seed := startNode(t, testConfig("seed"), false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err = j.JoinContext(ctx, []string{dead, seed.AdvertiseAddr()})
	if err != nil || n != 1 {
		t.Fatalf("join with one live address: n=%d err=%v", n, err)
	}
}

func TestJoinRetriesUntilSeedAppears(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	j := startNode(t, testConfig("joiner"), false)
	type result struct {
		n   int
		err error
	}
	res := make(chan result, 1)
	go func() { n, err := j.Join([]string{addr}); res <- result{n, err} }()
	clustertest.Eventually(t, 5*time.Second, "two failed join attempts", func() bool { return j.joinAttempts.Load() >= 2 })
	cfg := testConfig("seed")
	cfg.BindAddr = addr
	seed, err := New(cfg)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	defer seed.Shutdown(context.Background())
	r := <-res
	if r.err != nil || r.n != 1 {
		t.Fatalf("join: %+v", r)
	}
	clustertest.Eventually(t, 5*time.Second, "joiner sees seed", func() bool { return len(j.Alive()) == 2 })
}

func TestLifecycle(t *testing.T) {
	g, err := New(testConfig("x"))
	if err != nil {
		t.Fatal(err)
	}
	// Shutdown before Start closes Events and makes Start fail.
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-g.Events(); ok {
		t.Fatal("events open")
	}
	if err := g.Start(context.Background()); !errors.Is(err, ErrShutdown) {
		t.Fatalf("start after shutdown: %v", err)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	// Start twice; cancelling Start's ctx stops the loop and closes Events.
	g2, err := New(testConfig("y"))
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Shutdown(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	if err := g2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g2.Start(ctx); !errors.Is(err, ErrStarted) {
		t.Fatalf("second start: %v", err)
	}
	first := <-g2.Events()
	if len(first) != 1 || first[0].Kind != EventJoin || first[0].Member.Name != "y" {
		t.Fatalf("first batch %+v", first)
	}
	cancel()
	for range g2.Events() {
	}
}

func TestReap(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	g := &Gossip{cfg: Config{Name: "me", ReapAfter: time.Minute}, table: map[string]tableEntry{
		"me":    {m: Member{Name: "me", Status: StatusLeft}, changed: now.Add(-time.Hour)},
		"alive": {m: Member{Name: "alive", Status: StatusAlive}, changed: now.Add(-time.Hour)},
		"old":   {m: Member{Name: "old", Status: StatusDead}, changed: now.Add(-61 * time.Second)},
		"new":   {m: Member{Name: "new", Status: StatusLeft}, changed: now.Add(-59 * time.Second)},
	}}
	gone := g.reap(now)
	if len(gone) != 1 || gone[0] != "old" {
		t.Fatalf("reaped %v", gone)
	}
	if _, ok := g.table["new"]; !ok || len(g.table) != 3 {
		t.Fatalf("table %v", g.table)
	}
}

// With no loop draining the channel at all (not started yet) and a 1-slot buffer, callbacks
// must still return at once (overflow slots), and the latest state must arrive once the loop
// runs.
func TestOverflowWithoutLoop(t *testing.T) {
	acfg := testConfig("a")
	acfg.EventBuffer = 1
	a, err := New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	b := startNode(t, testConfig("b"), true)
	if _, err := b.Join([]string{a.AdvertiseAddr()}); err != nil {
		t.Fatal(err)
	}
	meta := b.Local().Meta
	for i := range 20 {
		meta.Version = fmt.Sprintf("v%d", i)
		if err := b.SetMeta(meta); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.Eventually(t, 5*time.Second, "a's table has b's last update", func() bool {
		m, _ := find(a.Members(), "b")
		return m.Meta.Version == meta.Version
	})
	done := make(chan int, 1)
	go func() { done <- a.ml.NumMembers() }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("memberlist blocked by a callback")
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]Event{}
	for len(got) < 2 || got["b"].Member.Meta.Version != meta.Version {
		select {
		case batch := <-a.Events():
			for _, e := range batch {
				if _, dup := got[e.Member.Name]; dup {
					t.Fatalf("more than one event for %s: %+v", e.Member.Name, batch)
				}
				got[e.Member.Name] = e
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("events: %+v", got)
		}
	}
	if got["a"].Kind != EventJoin || got["b"].Kind != EventJoin {
		t.Fatalf("want one join each with the latest state, got %+v", got)
	}
}
