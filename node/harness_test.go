package node

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/fetch"
	"github.com/crawlnode/crawlnode/gossip"
	"github.com/crawlnode/crawlnode/internal/clustertest"
	"github.com/crawlnode/crawlnode/ring"
)

// testCluster is real nodes of the test preset in one process, on loopback ports, whose
// cluster upkeep a test runs at once instead of waiting for the nodes' timers: the
// leader's round, the handoffs, the sweep (STYLE.md, "A synchronous test cluster"). The
// nodes' own loops keep running beside it. Every node's clock is the wall clock plus a
// skew the test can advance (a death "past the grace" without waiting for it).
type testCluster struct {
	t     *testing.T
	base  string
	rule  fetch.ResolveRule
	grace time.Duration
	// configure, if set, adjusts each node's config before it is built.
	configure func(*Config)
	skew      atomic.Int64 // nanoseconds the nodes' clock runs ahead
	nodes     []*testNode
}

// testNode is one node of a testCluster, running until stopped or done.
type testNode struct {
	*Node
	// ctx is Run's context and that of the upkeep the test starts (handoffs, sweeps):
	// the node's shutdown waits for those, so they must end with it.
	ctx    context.Context
	cancel context.CancelFunc // stops the upkeep and the node's Run
	errc   chan error         // Run's result
	done   bool               // Run returned (err taken)
}

// newTestCluster starts n nodes crawling through rule that bootstrap a Raft group of n.
// Nodes have no seeds and do not exit when done unless configure says otherwise.
func newTestCluster(t *testing.T, n int, rule fetch.ResolveRule, grace time.Duration, configure func(*Config)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, base: t.TempDir(), rule: rule, grace: grace, configure: configure}
	t.Cleanup(tc.stopAll)
	for i := range n {
		tc.add(n)
		if i == 0 {
			clustertest.Eventually(t, 10*time.Second, "n1's gossip address", func() bool { return tc.nodes[0].GossipAddr() != "" })
		}
	}
	return tc
}

// add starts one more node (named n1, n2...) joining the first; expect is its
// BootstrapExpect (0 for a node joining a formed cluster).
func (tc *testCluster) add(expect int) *testNode {
	tc.t.Helper()
	name := fmt.Sprintf("n%d", len(tc.nodes)+1)
	nc := testNodeConfig(filepath.Join(tc.base, name), name, tc.rule)
	nc.ExitWhenDone = false
	nc.Now = func() time.Time { return time.Now().Add(time.Duration(tc.skew.Load())) }
	var join []string
	if len(tc.nodes) > 0 {
		join = []string{tc.nodes[0].GossipAddr()}
	}
	nc.Cluster = ClusterConfig{BindAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", Join: join,
		BootstrapExpect: expect, Profile: gossip.ProfileTest, Grace: tc.grace}
	if tc.configure != nil {
		tc.configure(&nc)
	}
	n, err := New(nc)
	if err != nil {
		tc.t.Fatalf("%s: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tn := &testNode{Node: n, ctx: ctx, cancel: cancel, errc: make(chan error, 1)}
	go func() { tn.errc <- n.Run(ctx) }()
	tc.nodes = append(tc.nodes, tn)
	clustertest.Eventually(tc.t, 10*time.Second, name+" to start its cluster layer", n.cluster.Started)
	return tn
}

// up returns the nodes still running.
func (tc *testCluster) up() []*testNode {
	var out []*testNode
	for _, n := range tc.nodes {
		if !n.done && n.ctx.Err() == nil {
			out = append(out, n)
		}
	}
	return out
}

// stop stops n the way a crash does for its peers (no leave), and returns Run's error.
func (tc *testCluster) stop(n *testNode) error {
	if n.done {
		return nil
	}
	n.cancel()
	err := <-n.errc
	n.done = true
	return err
}

func (tc *testCluster) stopAll() {
	for _, n := range tc.nodes {
		if err := tc.stop(n); err != nil {
			tc.t.Errorf("%s: run: %v", n.Name(), err)
		}
	}
}

// wait waits up to d for every node to end its run by itself (ExitWhenDone) and reports
// their errors.
func (tc *testCluster) wait(d time.Duration) {
	tc.t.Helper()
	timeout := time.After(d)
	for _, n := range tc.nodes {
		if n.done {
			continue
		}
		select {
		case err := <-n.errc:
			n.done = true
			if err != nil {
				tc.t.Errorf("%s: run: %v", n.Name(), err)
			}
		case <-timeout:
			tc.t.Fatalf("the cluster did not finish within %v", d)
		}
	}
}

// advance moves every node's clock d ahead.
func (tc *testCluster) advance(d time.Duration) { tc.skew.Add(int64(d)) }

// leader waits until a running node leads and returns it.
func (tc *testCluster) leader() *testNode {
	tc.t.Helper()
	var ld *testNode
	clustertest.Eventually(tc.t, 10*time.Second, "a leader", func() bool {
		for _, n := range tc.up() {
			if n.cluster.IsLeader() {
				ld = n
				return true
			}
		}
		return false
	})
	return ld
}

// lead runs the leader's round on the leader now.
func (tc *testCluster) lead() {
	tc.t.Helper()
	tc.leader().cluster.Lead()
}

// handoffs starts every running node's handoffs now and waits until they are over.
func (tc *testCluster) handoffs() {
	tc.t.Helper()
	for _, n := range tc.up() {
		n.cluster.Refresh()
		n.cluster.StartHandoffs(n.ctx)
	}
	clustertest.Eventually(tc.t, time.Minute, "handoffs to end", func() bool {
		for _, n := range tc.up() {
			if n.cluster.Handoffs() > 0 {
				return false
			}
		}
		return true
	})
}

// sweep runs every running node's sweep now, whenever it last ran.
func (tc *testCluster) sweep() {
	for _, n := range tc.up() {
		n.cluster.SweepNow(n.ctx)
	}
}

// round is one pass of the cluster's upkeep: the leader's round, the handoffs, the sweep.
func (tc *testCluster) round() {
	tc.t.Helper()
	tc.lead()
	tc.handoffs()
	tc.sweep()
}

// settled reports whether every running node's lease table gives each partition to its
// owner on that node's ring, and the nodes agree on it.
func (tc *testCluster) settled() bool {
	var first [ring.PartitionCount]string
	for i, n := range tc.up() {
		n.cluster.Refresh()
		leases, _ := n.cluster.Table()
		r := n.cluster.Ring()
		for p, l := range leases {
			if l.Owner == "" || l.Owner != r.Owner(uint16(p)) {
				return false
			}
			if i == 0 {
				first[p] = l.Owner
			} else if first[p] != l.Owner {
				return false
			}
		}
	}
	return true
}

// leaseCounts counts the partitions each member holds in n's lease table.
func leaseCounts(n *testNode) map[string]int {
	out := map[string]int{}
	leases, _ := n.cluster.Table()
	for _, l := range leases {
		out[l.Owner]++
	}
	return out
}
