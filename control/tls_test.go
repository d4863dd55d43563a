package control

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/crawlnode/crawlnode/internal/clustertest"
	"github.com/crawlnode/crawlnode/internal/peerauth"
)

// testPKI makes a CA in a temporary directory and credentials for names.
func testPKI(t *testing.T, names ...string) map[string]*peerauth.Creds {
	t.Helper()
	dir := t.TempDir()
	caCert, caKey, err := peerauth.NewCA(dir, 2, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := peerauth.LoadCA(caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*peerauth.Creds{}
	for _, n := range names {
		cp, kp, err := ca.NewNodeCert(dir, peerauth.NodeCertOptions{Name: n}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if out[n], err = peerauth.Load(caCert, cp, kp); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestRaftTLSRefusesImpostors: a single TLS node leads. An AppendEntries with a far
// higher term, which deposes it if Raft sees it, is sent by a client with a certificate of
// another CA, and by a member of the CA speaking for another server's ID: both are
// refused and the leader's term does not move. The same request from a member under its
// own name reaches Raft (and deposes the leader).
func TestRaftTLSRefusesImpostors(t *testing.T) {
	creds := testPKI(t, "n0", "n9")
	foreign := testPKI(t, "n9")
	cfg := Config{NodeName: "n0", DataDir: t.TempDir(), BootstrapExpect: 1, Profile: ProfileTest,
		RaftBindAddr: "127.0.0.1:0", TLS: creds["n0"], Logger: testLogger()}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown(context.Background())
	clustertest.Eventually(t, 10*time.Second, "n0 leads", c.IsLeader)
	r := c.rp.Load()
	term0 := r.CurrentTerm()
	target := c.trans.LocalAddr()

	vote := func(cr *peerauth.Creds, claimedID string) error {
		tcp, err := newTCPStream("127.0.0.1:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: &tlsStream{tcpStream: tcp, creds: cr, log: testLogger()}, MaxPool: 1, Timeout: 2 * time.Second,
			Logger: c.hlog.Named("impostor")})
		defer tr.Close()
		var resp raft.AppendEntriesResponse
		return tr.AppendEntries(raft.ServerID("n0"), target, &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(claimedID), Addr: []byte(tr.LocalAddr())},
			Term:      term0 + 100,
		}, &resp)
	}
	if err := vote(foreign["n9"], "n9"); err == nil {
		t.Error("a certificate of another CA was answered")
	}
	if err := vote(creds["n9"], "n0"); err == nil {
		t.Error("n9 speaking for server n0 was answered")
	}
	time.Sleep(200 * time.Millisecond)
	if got := r.CurrentTerm(); got != term0 {
		t.Fatalf("term moved from %d to %d: an impostor's request reached Raft", term0, got)
	}
	if !c.IsLeader() {
		t.Fatal("n0 lost its leadership to an impostor")
	}
	// Positive control: the same request under n9's own name is read by Raft.
	if err := vote(creds["n9"], "n9"); err != nil {
		t.Fatalf("n9 as itself: %v", err)
	}
	clustertest.Eventually(t, 5*time.Second, "term raised by a member's request", func() bool { return r.CurrentTerm() > term0 })
}

// TestClusterTLS: three TLS nodes elect a leader and replicate a command.
func TestClusterTLS(t *testing.T) {
	creds := testPKI(t, "n0", "n1", "n2")
	tc := &testCluster{t: t}
	for i, name := range []string{"n0", "n1", "n2"} {
		cfg := Config{NodeName: name, DataDir: t.TempDir(), BootstrapExpect: 3, Profile: ProfileTest,
			RaftBindAddr: "127.0.0.1:0", TLS: creds[name], HTTPAddr: "127.0.0.1:1808" + string(rune('0'+i)),
			Logger: testLogger().With("test_node", name)}
		tc.nodes = append(tc.nodes, &testNode{dir: cfg.DataDir, cfg: cfg})
	}
	t.Cleanup(tc.shutdownAll)
	for _, nd := range tc.nodes {
		tc.start(nd)
	}
	tc.bootstrap()
	ld := tc.leader()
	tc.assignRing(ld)
	tc.converged(ld)
}
