package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/cluster"
	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/dedup"
	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/internal/clusterauth"
	"github.com/crawlnode/crawlnode/internal/clustertest"
	"github.com/crawlnode/crawlnode/replica"
	"github.com/crawlnode/crawlnode/ring"
	"github.com/crawlnode/crawlnode/snapshot"
	"github.com/crawlnode/crawlnode/urlnorm"
)

// keyedCluster is a two-node cluster with a cluster key and an operator token, every
// partition leased; it returns the leader first.
func keyedCluster(t *testing.T, key []byte) (*testCluster, *testNode, *testNode) {
	t.Helper()
	tc := newTestCluster(t, 2, noWeb(t), 5*time.Second, func(nc *Config) {
		nc.Cluster.ClusterKey = key
		nc.APIToken = "op-token"
	})
	clustertest.Eventually(t, 60*time.Second, "the lease table settled on both nodes", func() bool {
		tc.round()
		return tc.settled()
	})
	ld := tc.leader()
	other := tc.nodes[0]
	if other == ld {
		other = tc.nodes[1]
	}
	return tc, ld, other
}

// ownedURL is a URL whose host's partition n holds, with the partition and its epoch.
func ownedURL(t *testing.T, n *testNode) (string, uint16, uint64) {
	t.Helper()
	for i := range 10_000 {
		u := fmt.Sprintf("http://forged-%d.sim.test/", i)
		p := ring.PartitionOf(urlnorm.HostKey(u))
		if owner, epoch := n.cluster.OwnerOf(p); owner == n.Name() {
			return u, p, epoch
		}
	}
	t.Fatal("no host of a partition the node holds")
	return "", 0, 0
}

// clusterState is what a forged message must not change.
type clusterState struct {
	config control.JobConfig
	leases [ring.PartitionCount]control.Lease
	seen   int
}

func stateOf(n *testNode) clusterState {
	n.cluster.Refresh()
	leases, _ := n.cluster.Table()
	return clusterState{config: n.cluster.JobConfig(), leases: leases, seen: n.front.Stats().Seen}
}

// TestInternalRoutesRefuseForgedRequests: a POST (or GET) to each node-to-node route
// without cluster credentials, with the operator's token only, with a peer name but no
// signature, with a signature under another key, or signed for a name that is no
// member, is refused (401, 403), and nothing is applied: the job configuration, the
// lease table and the frontier's seen set stay as they were on both nodes. A member
// signed with the cluster key gets through, but only for what the lease table lets it
// send: not another member's links or partition stream, not a lease it does not hold.
func TestInternalRoutesRefuseForgedRequests(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	_, ld, other := keyedCluster(t, key)
	target := ld // every route on the leader: it applies Raft commands
	base := "http://" + target.peerAddr()
	u, p, epoch := ownedURL(t, target)
	cur := target.cluster.JobConfig()

	// The bodies a real member would send, each of which would change something.
	evil := cur
	evil.DefaultDelay, evil.PerHost = 50*time.Millisecond, 16
	setConfig, err := control.Encode(control.SetConfig{Config: evil, ExpectVersion: cur.Version, At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	steal, err := control.Encode(control.AssignLeases{Moves: []control.LeaseMove{{Partition: p, From: target.Name(), To: other.Name(), Epoch: epoch}}, At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	links := func(from string) []byte {
		b, err := forward.Encode(forward.Batch{From: from, Partitions: []forward.PartitionLinks{{Partition: p, Epoch: epoch, Links: []forward.Link{{URL: u}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	stream := func(from string, epoch uint64) []byte {
		var buf bytes.Buffer
		if _, err := snapshot.Write(&buf, snapshot.Header{Partition: p, Epoch: epoch, From: from, To: target.Name(), Created: time.Now()},
			func(func(byte, []byte, []byte) error) error { return nil }); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	dedupReq, _ := json.Marshal(dedup.Request{From: other.Name(), Parts: []dedup.PartEpoch{{P: p, E: epoch}}})
	routes := []struct {
		method, path string
		body         []byte
	}{
		{"POST", "/internal/v1/raft/apply", setConfig},
		{"POST", "/internal/v1/raft/apply", steal},
		{"POST", forward.LinksPath, links(other.Name())},
		{"POST", fmt.Sprintf("/internal/v1/partitions/%d", p), stream(other.Name(), epoch)},
		{"POST", replica.Path, []byte("CNRP garbage")},
		{"POST", dedup.Path, dedupReq},
		{"GET", "/internal/v1/raft/index", nil},
		{"GET", "/internal/v1/idle", nil},
	}
	wrongKey, _ := clusterauth.NewSigner(other.Name(), bytes.Repeat([]byte{9}, 32), nil)
	stranger, _ := clusterauth.NewSigner("intruder", key, nil)
	creds := []struct {
		name string
		set  func(*http.Request)
		want int
	}{
		{"no credentials", func(*http.Request) {}, http.StatusUnauthorized},
		{"operator token only", func(r *http.Request) { r.Header.Set("Authorization", "Bearer op-token") }, http.StatusUnauthorized},
		{"operator token and a member's name", func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer op-token")
			r.Header.Set(clusterauth.HeaderPeer, other.Name())
		}, http.StatusUnauthorized},
		{"signed under another key", wrongKey.Sign, http.StatusUnauthorized},
		{"signed for a non-member", stranger.Sign, http.StatusForbidden},
	}
	before := []clusterState{stateOf(ld), stateOf(other)}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, c := range creds {
		for _, rt := range routes {
			req, _ := http.NewRequest(rt.method, base+rt.path, bytes.NewReader(rt.body))
			c.set(req)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s %s (%s): %v", rt.method, rt.path, c.name, err)
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s %s with %s: %d %s, want %d", rt.method, rt.path, c.name, resp.StatusCode, bytes.TrimSpace(msg), c.want)
			}
		}
	}

	// A member, properly signed, cannot make the configuration impolite either: the
	// leader's state machine refuses a configuration out of bounds (400 invalid).
	absurd := cur
	absurd.DefaultDelay, absurd.PerHost = time.Nanosecond, 10_000
	absurdCmd, err := control.Encode(control.SetConfig{Config: absurd, ExpectVersion: cur.Version, At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	signedMember, _ := clusterauth.NewSigner(other.Name(), key, nil)
	req, _ := http.NewRequest("POST", base+"/internal/v1/raft/apply", bytes.NewReader(absurdCmd))
	signedMember.Sign(req)
	if resp, err := client.Do(req); err != nil {
		t.Fatal(err)
	} else {
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(msg, []byte(`"code": "invalid"`)) {
			t.Errorf("out-of-bounds configuration from a member: %d %s, want refused as invalid", resp.StatusCode, msg)
		}
	}

	// A member, properly signed, may still send only what the lease table allows. (A
	// stream of a partition the receiver holds, at the receiver's epoch, is the sweep's:
	// any member may send its leftovers, merged as a union.)
	member, _ := clusterauth.NewSigner(other.Name(), key, nil)
	for _, tc := range []struct {
		name, path string
		body       []byte
		want       int
	}{
		{"a lease it does not hold", "/internal/v1/raft/apply", steal, http.StatusForbidden},
		{"links in another member's name", forward.LinksPath, links(target.Name()), http.StatusForbidden},
		{"a partition stream in another member's name", fmt.Sprintf("/internal/v1/partitions/%d", p), stream(target.Name(), epoch), http.StatusConflict},
		{"a partition stream at an epoch the table does not hold", fmt.Sprintf("/internal/v1/partitions/%d", p), stream(other.Name(), epoch+1), http.StatusConflict},
	} {
		req, _ := http.NewRequest("POST", base+tc.path, bytes.NewReader(tc.body))
		member.Sign(req)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("member sends %s: %d %s, want %d", tc.name, resp.StatusCode, bytes.TrimSpace(msg), tc.want)
		}
	}
	after := []clusterState{stateOf(ld), stateOf(other)}
	for i := range before {
		if !reflect.DeepEqual(before[i].config, after[i].config) {
			t.Errorf("node %d: job configuration changed: %+v -> %+v", i, before[i].config, after[i].config)
		}
		if before[i].leases != after[i].leases {
			t.Errorf("node %d: lease table changed", i)
		}
		if before[i].seen != after[i].seen {
			t.Errorf("node %d: frontier seen set %d -> %d", i, before[i].seen, after[i].seen)
		}
	}

	// The control: the same member, signed, is heard, and its own links land.
	req, _ = http.NewRequest("GET", base+"/internal/v1/idle", nil)
	member.Sign(req)
	if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("signed member GET idle: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	req, _ = http.NewRequest("POST", base+forward.LinksPath, bytes.NewReader(links(other.Name())))
	member.Sign(req)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || stateOf(target).seen != before[0].seen+1 {
		t.Errorf("a member's own links: %d, seen %d -> %d", resp.StatusCode, before[0].seen, stateOf(target).seen)
	}
}

// Each internal route takes at most its share of handlers at once (503 busy with
// Retry-After past it) and a bounded body (413 too_large past it, declared or streamed).
func TestInternalRouteBounds(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 64)
	h := limitRoutes(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/internal/v1/raft/index" {
			entered <- struct{}{}
			<-release
			return
		}
		if _, err := io.ReadAll(r.Body); err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", "%v", err)
		}
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	const limit = 8 // the index route's bound
	done := make(chan int, limit)
	for range limit {
		go func() {
			resp, err := http.Get(srv.URL + "/internal/v1/raft/index")
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	for range limit {
		<-entered
	}
	resp, err := http.Get(srv.URL + "/internal/v1/raft/index")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("request %d in flight: %d (Retry-After %q), want 503 with Retry-After", limit+1, resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Another route has its own share.
	resp, err = http.Get(srv.URL + "/internal/v1/idle")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("idle while index is full: %d", resp.StatusCode)
	}
	close(release)
	for range limit {
		if c := <-done; c != http.StatusOK {
			t.Errorf("a request within the bound: %d", c)
		}
	}
	// Bodies: a Raft command over its bound, declared and streamed (no length).
	big := bytes.Repeat([]byte("x"), cluster.MaxCommandBytes+1)
	resp, err = http.Post(srv.URL+"/internal/v1/raft/apply", "application/octet-stream", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("declared oversize command: %d, want 413", resp.StatusCode)
	}
	resp, err = http.Post(srv.URL+"/internal/v1/raft/apply", "application/octet-stream", io.MultiReader(bytes.NewReader(big)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("streamed oversize command: %d, want 413", resp.StatusCode)
	}
}

// TestKeyringRotationKeepsInternalCalls: rotating the cluster key while the cluster runs
// (install a new key, make it the primary, remove the old, each step on every member by
// a signed internal call) moves request signing with the keyring: each step reaches both
// members, afterwards the new key's signature opens the internal routes on both nodes
// and the old key's no longer does, and the members' own traffic (links, leases) goes on.
func TestKeyringRotationKeepsInternalCalls(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte{7}, 32), bytes.Repeat([]byte{8}, 32)
	tc, ld, other := keyedCluster(t, oldKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, step := range []struct {
		op  string
		key []byte
	}{{cluster.KeyInstall, newKey}, {cluster.KeyUse, newKey}, {cluster.KeyRemove, oldKey}} {
		ms, err := ld.cluster.Keyring(ctx, step.op, step.key)
		if err != nil || len(ms) != 2 {
			t.Fatalf("keyring %s: %v (members %+v)", step.op, err, ms)
		}
		for _, m := range ms {
			if m.Error != "" {
				t.Fatalf("keyring %s on %s: %s", step.op, m.Name, m.Error)
			}
		}
	}
	want := []string{cluster.Fingerprint(newKey)}
	for _, n := range []*testNode{ld, other} {
		if got := n.cluster.LocalKeyring(); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s keyring %v, want %v", n.Name(), got, want)
		}
	}
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(target, from *testNode, key []byte) int {
		s, err := clusterauth.NewSigner(from.Name(), key, nil)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("GET", "http://"+target.peerAddr()+"/internal/v1/idle", nil)
		s.Sign(req)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, pair := range [][2]*testNode{{ld, other}, {other, ld}} {
		if code := get(pair[0], pair[1], newKey); code != http.StatusOK {
			t.Errorf("%s signed with the new key to %s: %d, want 200", pair[1].Name(), pair[0].Name(), code)
		}
		if code := get(pair[0], pair[1], oldKey); code != http.StatusUnauthorized {
			t.Errorf("%s signed with the removed key to %s: %d, want 401", pair[1].Name(), pair[0].Name(), code)
		}
	}
	// The members' own calls, signed by their cluster clients: a keyring listing on
	// every member, and a link forwarded from one node to the other's partition.
	if ms, err := other.cluster.Keyring(ctx, "", nil); err != nil || len(ms) != 2 {
		t.Fatalf("keyring list from %s after the rotation: %v %+v", other.Name(), err, ms)
	}
	u, _, _ := ownedURL(t, ld)
	seen := ld.front.Stats().Seen
	if _, _, err := other.cluster.Route(ctx, []frontier.Candidate{{URL: u}}); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 30*time.Second, "the forwarded link landed on its owner", func() bool {
		tc.round()
		return ld.front.Stats().Seen > seen
	})
}
