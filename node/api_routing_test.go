package node

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/ring"
	"github.com/crawlnode/crawlnode/simweb"
	"github.com/crawlnode/crawlnode/urlnorm"
)

// TestClusterAPIRoutesReads: a read of a host or page another member holds, asked of any
// member's public API, is answered by the holder (through its internal listener for a
// host or URL, through its public one for a URL hash nobody routes), and says which
// member answered.
func TestClusterAPIRoutesReads(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster")
	}
	cfg := simweb.DefaultConfig()
	cfg.Hosts, cfg.Seed, cfg.MeanPages, cfg.MaxWords = 12, 5, 20, 300
	cfg.CrawlDelayHosts = 0
	w, rule := startSimweb(t, cfg)
	base := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	start := func(name string, seeds, join []string) *Node {
		nc := testNodeConfig(filepath.Join(base, name), name, rule)
		nc.ExitWhenDone, nc.Seeds, nc.InternalAddr = false, seeds, "127.0.0.1:0"
		nc.Cluster = ClusterConfig{BindAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", Join: join,
			BootstrapExpect: 2, Profile: "test", Grace: 5 * time.Second}
		n, err := New(nc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		go func() { errs <- n.Run(ctx) }()
		return n
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 60 s", what)
			}
		}
	}
	n1 := start("n1", w.Seeds(), nil)
	eventually("n1's gossip address", func() bool { return n1.GossipAddr() != "" })
	n2 := start("n2", nil, []string{n1.GossipAddr()})
	defer func() {
		cancel()
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("run: %v", err)
			}
		}
	}()
	nodes := map[string]*Node{"n1": n1, "n2": n2}
	eventually("leases on both members", func() bool {
		return n1.cluster.Started() && n2.cluster.Started() && n1.cluster.Held() > 0 && n2.cluster.Held() > 0
	})

	// get asks node at its public API for path and returns the status, the member that
	// answered (X-Crawlnode-Node, "" when it answered itself) and the body.
	get := func(n *Node, path string) (int, string, []byte) {
		addr, _ := n.httpAddr.Load().(string)
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Crawlnode-Node"), body
	}
	// Each seed's host is held by one member; ask the other one.
	checked := 0
	for _, seed := range w.Seeds() {
		c, err := urlnorm.Canonicalize(seed)
		if err != nil {
			t.Fatal(err)
		}
		host := urlnorm.HostKey(c)
		var holder, other string
		eventually("an owner of "+host, func() bool {
			holder, _ = n1.cluster.OwnerOf(ring.PartitionOf(host))
			return holder != ""
		})
		for name := range nodes {
			if name != holder {
				other = name
			}
		}
		eventually("the host view of "+host+" from "+other, func() bool {
			code, by, _ := get(nodes[other], "/v1/hosts/"+host)
			if owner, _ := n1.cluster.OwnerOf(ring.PartitionOf(host)); owner != holder && nodes[owner] != nil {
				holder, other = owner, map[string]string{"n1": "n2", "n2": "n1"}[owner]
				return false // the lease moved meanwhile: ask again
			}
			return code == http.StatusOK && by == holder
		})
		var page struct {
			URL     string `json:"url"`
			URLHash string `json:"url_hash"`
		}
		code, by, body := get(nodes[other], "/v1/pages?url="+url.QueryEscape(c))
		if err := json.Unmarshal(body, &page); code != http.StatusOK || by != holder || err != nil || page.URL != c {
			t.Errorf("%s from %s: %d by %q, want 200 by %s: %s", c, other, code, by, holder, body)
			continue
		}
		// AskPeers asks the members gossip sees alive: under load a peer can be suspected
		// for a moment, so the read is asked again until the holder answers.
		eventually(c+" by hash from "+other, func() bool {
			code, by, _ := get(nodes[other], "/v1/pages/"+page.URLHash)
			return code == http.StatusOK && by == holder
		})
		if code, by, _ := get(nodes[holder], "/v1/pages/"+page.URLHash); code != http.StatusOK || by != "" {
			t.Errorf("%s by hash from its holder %s: %d by %q, want 200 from itself", c, holder, code, by)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no seed checked")
	}
}
