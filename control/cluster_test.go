package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/crawlnode/crawlnode/internal/clustertest"
	"github.com/crawlnode/crawlnode/ring"
)

func testLogger() *slog.Logger {
	if os.Getenv("CONTROL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type testNode struct {
	c     *Control
	dir   string
	trans *raft.InmemTransport // nil for TCP
	cfg   Config
	down  bool
}

type testCluster struct {
	t     *testing.T
	nodes []*testNode
}

// newCluster starts n nodes named n0..n(n-1) with the test profile; inmem selects
// raft.InmemTransport (all connected) instead of TCP on 127.0.0.1.
func newCluster(t *testing.T, n int, inmem bool) *testCluster {
	tc := &testCluster{t: t}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("n%d", i)
		cfg := Config{NodeName: name, DataDir: t.TempDir(), BootstrapExpect: n, Profile: ProfileTest,
			HTTPAddr: fmt.Sprintf("127.0.0.1:%d", 18080+i), Logger: testLogger().With("test_node", name)}
		nd := &testNode{dir: cfg.DataDir}
		if inmem {
			_, nd.trans = raft.NewInmemTransport(raft.ServerAddress(name))
			cfg.Transport = nd.trans
		} else {
			cfg.RaftBindAddr = "127.0.0.1:0"
		}
		nd.cfg = cfg
		tc.nodes = append(tc.nodes, nd)
	}
	if inmem {
		for _, a := range tc.nodes {
			for _, b := range tc.nodes {
				if a != b {
					a.trans.Connect(b.trans.LocalAddr(), b.trans)
				}
			}
		}
	}
	t.Cleanup(tc.shutdownAll)
	for _, nd := range tc.nodes {
		tc.start(nd)
	}
	return tc
}

func (tc *testCluster) start(nd *testNode) {
	tc.t.Helper()
	c, err := New(nd.cfg)
	if err != nil {
		tc.t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		tc.t.Fatal(err)
	}
	nd.c, nd.down = c, false
}

func (tc *testCluster) stop(nd *testNode) {
	tc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := nd.c.Shutdown(ctx); err != nil {
		tc.t.Errorf("shutdown %s: %v", nd.cfg.NodeName, err)
	}
	nd.down = true
}

func (tc *testCluster) shutdownAll() {
	for _, nd := range tc.nodes {
		if nd.c != nil && !nd.down {
			tc.stop(nd)
		}
	}
}

func (tc *testCluster) up() []*testNode {
	var out []*testNode
	for _, nd := range tc.nodes {
		if !nd.down {
			out = append(out, nd)
		}
	}
	return out
}

func (tc *testCluster) peers() []Peer {
	var out []Peer
	for _, nd := range tc.up() {
		out = append(out, nd.c.Self())
	}
	return out
}

// bootstrap runs Bootstrap on every node (as gossip would once it sees them all) and
// checks that exactly the lowest-named one bootstrapped.
func (tc *testCluster) bootstrap() {
	tc.t.Helper()
	ps := tc.peers()
	if did, err := tc.nodes[0].c.Bootstrap(ps[:len(ps)-1]); did || !errors.Is(err, ErrTooFewPeers) {
		tc.t.Fatalf("bootstrap with too few peers: %v %v", did, err)
	}
	for i, nd := range tc.nodes {
		did, err := nd.c.Bootstrap(ps)
		if err != nil {
			tc.t.Fatal(err)
		}
		if did != (i == 0) {
			tc.t.Fatalf("%s bootstrapped = %v", nd.cfg.NodeName, did)
		}
	}
}

// leader waits until exactly one up node leads, every up node agrees, and the leader is
// in contact (has verified its leadership); then it runs Reconcile with the up nodes.
func (tc *testCluster) leader() *testNode {
	tc.t.Helper()
	var ld *testNode
	clustertest.Eventually(tc.t, 10*time.Second, "a leader all nodes agree on", func() bool {
		ld = nil
		for _, nd := range tc.up() {
			if nd.c.IsLeader() {
				if ld != nil {
					return false
				}
				ld = nd
			}
		}
		if ld == nil || !ld.c.InContact() {
			return false
		}
		for _, nd := range tc.up() {
			if name, _ := nd.c.Leader(); name != ld.cfg.NodeName {
				return false
			}
		}
		return true
	})
	if err := ld.c.Reconcile(tc.peers()); err != nil {
		tc.t.Fatalf("reconcile on %s: %v", ld.cfg.NodeName, err)
	}
	return ld
}

func (tc *testCluster) node(name string) *testNode {
	for _, nd := range tc.nodes {
		if nd.cfg.NodeName == name {
			return nd
		}
	}
	tc.t.Fatalf("no node %s", name)
	return nil
}

// assignRing assigns every partition to its ring owner among the cluster's nodes.
func (tc *testCluster) assignRing(ld *testNode) []string {
	tc.t.Helper()
	var names []string
	for _, nd := range tc.nodes {
		names = append(names, nd.cfg.NodeName)
	}
	owners := ring.New(names, ring.Config{}).Assignment()
	moves := make([]LeaseMove, len(owners))
	for p, o := range owners {
		moves[p] = LeaseMove{Partition: uint16(p), To: o}
	}
	if _, err := ld.c.Apply(AssignLeases{Moves: moves, At: time.Now()}); err != nil {
		tc.t.Fatal(err)
	}
	return owners
}

// converged waits until every up node's state equals the leader's up to its index.
func (tc *testCluster) converged(ld *testNode) State {
	tc.t.Helper()
	want := ld.c.State()
	clustertest.Eventually(tc.t, 10*time.Second, "followers to catch up", func() bool {
		for _, nd := range tc.up() {
			if nd.c.State().Index < want.Index {
				return false
			}
		}
		return true
	})
	return want
}

func TestClusterTCP(t *testing.T) {
	tc := newCluster(t, 3, false)
	tc.bootstrap()
	start := time.Now()
	ld := tc.leader()
	t.Logf("leader %s elected in %v", ld.cfg.NodeName, time.Since(start))

	// Registry: every node registered with its HTTP address.
	st := tc.converged(ld)
	if len(st.Members) != 3 {
		t.Fatalf("members %v", st.Members)
	}
	for _, nd := range tc.nodes {
		if m := st.Members[nd.cfg.NodeName]; m.HTTPAddr != nd.cfg.HTTPAddr || !m.Voter || m.RaftAddr != nd.c.Self().RaftAddr {
			t.Fatalf("member %s = %+v", nd.cfg.NodeName, m)
		}
	}

	// A follower refuses and names the leader.
	var fol *testNode
	for _, nd := range tc.nodes {
		if nd != ld {
			fol = nd
			break
		}
	}
	_, err := fol.c.Apply(Pause{At: time.Now()})
	var nle *NotLeaderError
	if !errors.Is(err, ErrNotLeader) || !errors.As(err, &nle) ||
		nle.Leader != ld.cfg.NodeName || nle.LeaderHTTP != ld.cfg.HTTPAddr {
		t.Fatalf("apply on follower: %v", err)
	}

	// Config change visible everywhere; CAS on the version.
	cfg := JobConfig{UserAgent: "crawlnode-test/1", MaxDepth: 4, Scope: ScopeSeedDomains, DefaultDelay: time.Second}
	res, err := ld.c.Apply(SetConfig{Config: cfg, ExpectVersion: st.Config.Version, At: time.Now()})
	if err != nil || res.ConfigVersion != st.Config.Version+1 {
		t.Fatalf("set config: %+v %v", res, err)
	}
	if _, err := ld.c.Apply(SetConfig{Config: cfg, ExpectVersion: st.Config.Version}); !errors.Is(err, ErrVersionConflict) {
		t.Fatalf("stale set config: %v", err)
	}
	clustertest.Eventually(t, 5*time.Second, "config on all nodes", func() bool {
		for _, nd := range tc.nodes {
			if nd.c.State().Config.UserAgent != "crawlnode-test/1" {
				return false
			}
		}
		return true
	})

	// Leases: ring assignment, then one handoff with CAS.
	owners := tc.assignRing(ld)
	p := uint16(42)
	from := owners[p]
	to := "n0"
	if from == to {
		to = "n1"
	}
	res, err = ld.c.Apply(AssignLeases{Moves: []LeaseMove{{Partition: p, From: from, To: to, Epoch: 1}}, At: time.Now()})
	if err != nil || len(res.Leases) != 1 || res.Leases[0].Epoch != 2 {
		t.Fatalf("move: %+v %v", res, err)
	}
	if _, err := ld.c.Apply(AssignLeases{Moves: []LeaseMove{{Partition: p, From: from, To: to, Epoch: 1}}}); !errors.Is(err, ErrLeaseConflict) {
		t.Fatalf("replayed move: %v", err)
	}
	owners[p] = to
	checkOwns := func(wantEpoch func(p int) uint64) {
		t.Helper()
		clustertest.Eventually(t, 5*time.Second, "Owns to match the ring on every node", func() bool {
			for _, nd := range tc.up() {
				for q := range owners {
					e, ok := nd.c.Owns(uint16(q))
					if ok != (owners[q] == nd.cfg.NodeName) || (ok && e != wantEpoch(q)) {
						return false
					}
				}
			}
			return true
		})
	}
	epochs := func(q int) uint64 {
		if q == int(p) {
			return 2
		}
		return 1
	}
	checkOwns(epochs)

	// Kill the leader: a new one is elected and the state is kept.
	before := tc.converged(ld)
	tc.stop(ld)
	start = time.Now()
	ld2 := tc.leader()
	t.Logf("new leader %s after %v", ld2.cfg.NodeName, time.Since(start))
	if ld2 == ld {
		t.Fatal("dead leader still leads")
	}
	got := ld2.c.State()
	if got.Config.UserAgent != before.Config.UserAgent || got.Leases != before.Leases {
		t.Fatal("state lost across failover")
	}
	// While the old leader is down, enough commands to compact the log (threshold 32,
	// trailing 16), so it catches up from a snapshot.
	for i := 0; i < 60; i++ {
		d := fmt.Sprintf("d%d.test", i)
		if _, err := ld2.c.Apply(BlockDomain{Domain: d, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// Restart the old leader from its data dir on its old address.
	ld.cfg.RaftBindAddr = ld.c.Self().RaftAddr
	tc.start(ld)
	start = time.Now()
	want := tc.converged(ld2)
	t.Logf("restarted %s caught up in %v", ld.cfg.NodeName, time.Since(start))
	if g := ld.c.State(); len(g.Config.BlockedDomains) != 60 || g.Leases != want.Leases {
		t.Fatalf("restarted node has %d blocked domains", len(g.Config.BlockedDomains))
	}
	checkOwns(epochs)
}

// isolate cuts nd off from every other node (both directions); heal undoes it.
func (tc *testCluster) isolate(nd *testNode) {
	for _, o := range tc.nodes {
		if o != nd {
			o.trans.Disconnect(nd.trans.LocalAddr())
		}
	}
	nd.trans.DisconnectAll()
}

func (tc *testCluster) heal(nd *testNode) {
	for _, o := range tc.nodes {
		if o != nd {
			o.trans.Connect(nd.trans.LocalAddr(), nd.trans)
			nd.trans.Connect(o.trans.LocalAddr(), o.trans)
		}
	}
}

func TestSelfFencing(t *testing.T) {
	tc := newCluster(t, 3, true)
	tc.bootstrap()
	ld := tc.leader()
	owners := tc.assignRing(ld)
	tc.converged(ld)
	lease := ld.cfg.WithDefaults().LeaseTimeout
	slack := 400 * time.Millisecond // scheduling under -race on shared cores

	partOf := func(name string) uint16 {
		for p, o := range owners {
			if o == name {
				return uint16(p)
			}
		}
		t.Fatalf("%s owns nothing", name)
		return 0
	}
	var fol *testNode
	for _, nd := range tc.nodes {
		if nd != ld {
			fol = nd
			break
		}
	}
	p := partOf(fol.cfg.NodeName)
	clustertest.Eventually(t, 5*time.Second, "follower owns its partition", func() bool { _, ok := fol.c.Owns(p); return ok })

	// Partition the follower away: it stops owning within LeaseTimeout.
	cut := time.Now()
	tc.isolate(fol)
	took := clustertest.Eventually(t, lease+slack, "isolated follower to fence itself", func() bool { _, ok := fol.c.Owns(p); return !ok })
	t.Logf("follower fenced %v after the cut (lease timeout %v)", took, lease)
	if _, ok := ld.c.Owns(partOf(ld.cfg.NodeName)); !ok {
		t.Fatal("leader with a quorum fenced itself")
	}
	// It stays fenced while cut off (the table still names it).
	time.Sleep(lease / 2)
	if _, ok := fol.c.Owns(p); ok || fol.c.State().Leases[p].Owner != fol.cfg.NodeName {
		t.Fatal("isolated follower owns again")
	}
	tc.heal(fol)
	took = clustertest.Eventually(t, 5*time.Second, "healed follower to own again", func() bool { _, ok := fol.c.Owns(p); return ok })
	t.Logf("follower owns again %v after healing (cut lasted %v)", took, time.Since(cut))

	// Isolate the leader: it loses its quorum and fences itself; the others elect anew.
	lp := partOf(ld.cfg.NodeName)
	tc.isolate(ld)
	took = clustertest.Eventually(t, lease+slack, "isolated leader to fence itself", func() bool { _, ok := ld.c.Owns(lp); return !ok })
	t.Logf("leader fenced %v after the cut", took)
	time.Sleep(lease / 2) // and stays fenced once Raft has deposed it
	if _, ok := ld.c.Owns(lp); ok {
		t.Fatal("deposed leader owns again while cut off")
	}
	ld.down = true // leave it out of the election check
	ld2 := tc.leader()
	ld.down = false
	if ld2 == ld {
		t.Fatal("isolated leader still leads")
	}
	if _, err := ld2.c.Apply(Pause{At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	tc.heal(ld)
	clustertest.Eventually(t, 5*time.Second, "old leader to catch up and own again", func() bool {
		_, ok := ld.c.Owns(lp)
		return ok && ld.c.State().Config.Paused && !ld.c.IsLeader()
	})
}

func TestVoterReplacement(t *testing.T) {
	tc := newCluster(t, 4, true)
	tc.bootstrap()
	ld := tc.leader()
	st := tc.converged(ld)
	var voters, nonvoters []string
	for _, nd := range tc.nodes {
		if st.Members[nd.cfg.NodeName].Voter {
			voters = append(voters, nd.cfg.NodeName)
		} else {
			nonvoters = append(nonvoters, nd.cfg.NodeName)
		}
	}
	if len(voters) != 3 || len(nonvoters) != 1 || nonvoters[0] != "n3" {
		t.Fatalf("voters %v non-voters %v", voters, nonvoters)
	}
	// Kill a voter that is not the leader.
	var victim *testNode
	for _, name := range voters {
		if name != ld.cfg.NodeName {
			victim = tc.node(name)
			break
		}
	}
	tc.stop(victim)
	if err := ld.c.Reconcile(tc.peers()); err != nil {
		t.Fatal(err)
	}
	cf := ld.c.rp.Load().GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatal(err)
	}
	suffrage := map[string]raft.ServerSuffrage{}
	for _, s := range cf.Configuration().Servers {
		suffrage[string(s.ID)] = s.Suffrage
	}
	if suffrage["n3"] != raft.Voter || suffrage[victim.cfg.NodeName] != raft.Nonvoter || len(suffrage) != 4 {
		t.Fatalf("configuration after reconcile: %v", suffrage)
	}
	st = tc.converged(ld)
	if !st.Members["n3"].Voter || st.Members[victim.cfg.NodeName].Voter {
		t.Fatalf("registry after reconcile: %+v", st.Members)
	}
	// The cluster now survives losing one more of the original voters: the leader and
	// n3 are two of the three voters.
	var other *testNode
	for _, name := range voters {
		if name != ld.cfg.NodeName && name != victim.cfg.NodeName {
			other = tc.node(name)
		}
	}
	tc.stop(other)
	if _, err := ld.c.Apply(Pause{At: time.Now()}); err != nil {
		t.Fatalf("commit with 2 of 3 voters (leader, n3) alive: %v", err)
	}
}

func TestSingleNodeBootstrapsItself(t *testing.T) {
	_, trans := raft.NewInmemTransport("solo")
	c, err := New(Config{NodeName: "solo", DataDir: t.TempDir(), BootstrapExpect: 1, Profile: ProfileTest,
		HTTPAddr: "127.0.0.1:1", Transport: trans, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Owns(0); err {
		t.Fatal("owns before start")
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	clustertest.Eventually(t, 5*time.Second, "single node to lead and register itself", func() bool {
		m, ok := c.State().Members["solo"]
		return c.IsLeader() && c.InContact() && ok && m.Voter && m.HTTPAddr == "127.0.0.1:1"
	})
	if did, err := c.Bootstrap(nil); did || err != nil {
		t.Fatalf("second bootstrap over existing state: %v %v", did, err)
	}
	if _, err := c.Apply(AssignLeases{Moves: []LeaseMove{{Partition: 7, To: "solo"}}}); err != nil {
		t.Fatal(err)
	}
	if e, ok := c.Owns(7); !ok || e != 1 {
		t.Fatalf("Owns(7) = %d, %v", e, ok)
	}
	if _, ok := c.Owns(8); ok {
		t.Fatal("owns an unassigned partition")
	}
	if name, http := c.Leader(); name != "solo" || http != "127.0.0.1:1" {
		t.Fatalf("Leader() = %q %q", name, http)
	}
}
