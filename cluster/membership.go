package cluster

// Membership upkeep: forming the Raft group, announcing this node's state in gossip,
// rejoining members lost to the failure detector, and the peers file.

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/crawlnode/crawlnode/internal/durablefile"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/gossip"
)

// bootstrap forms the Raft group once BootstrapExpect members gossip.
func (c *Cluster) bootstrap() {
	if c.cfg.BootstrapExpect <= 1 {
		return
	}
	if name, _ := c.ctl.Leader(); name != "" {
		return
	}
	alive := c.gossip.Alive()
	if len(alive) < c.cfg.BootstrapExpect {
		return
	}
	peers := make([]control.Peer, 0, len(alive))
	for _, m := range alive {
		if m.Meta.RaftAddr == "" {
			return
		}
		peers = append(peers, control.Peer{Name: m.Name, RaftAddr: m.Meta.RaftAddr, HTTPAddr: m.Meta.HTTPAddr})
	}
	if ok, err := c.ctl.Bootstrap(peers); err != nil {
		c.log.Warn("bootstrap", "err", err)
	} else if ok {
		c.log.Info("bootstrapped the Raft group", "members", len(peers))
	}
}

// announce moves the gossiped state: joining until registered, then active; draining
// while leaving.
func (c *Cluster) announce() {
	want := gossip.StateJoining
	if _, ok := c.tab.Load().members[c.self]; ok {
		want = gossip.StateActive
	}
	if c.leaving.Load() {
		want = gossip.StateDraining
	}
	if c.state.Load().(gossip.State) == want {
		return
	}
	m := c.gossip.Local().Meta
	m.State = want
	if err := c.gossip.SetMeta(m); err != nil && !errors.Is(err, gossip.ErrUpdateTimeout) {
		c.log.Warn("announce state", "state", want, "err", err)
		return
	}
	c.state.Store(want)
	c.log.Info("state", "state", want)
}

// rejoin asks gossip to join again the registered members it lost (dead, not left),
// every few seconds: after a network partition heals, neither side gossips with the
// members it declared dead, so without this the halves would stay apart (the majority
// removes the others from the registry after the grace period, but they still list it).
func (c *Cluster) rejoin(ctx context.Context) {
	now := c.now()
	if now.Sub(c.lastRejoin) < 5*time.Second || c.rejoining.Load() {
		return
	}
	c.lastRejoin = now
	t := c.tab.Load()
	var addrs []string
	for _, m := range c.gossip.Members() {
		if _, reg := t.members[m.Name]; reg && m.Name != c.self && m.Status == gossip.StatusDead && m.Addr != "" {
			addrs = append(addrs, m.Addr)
		}
	}
	if len(addrs) == 0 {
		return
	}
	c.rejoining.Store(true)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.rejoining.Store(false)
		jctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if n, err := c.gossip.JoinContext(jctx, addrs); err == nil && n > 0 {
			c.log.Info("rejoined members lost to the failure detector", "contacts", n, "addrs", addrs)
		}
	}()
}

// --- peers file ---

func (c *Cluster) peersPath() string { return filepath.Join(c.deps.DataDir, "peers.json") }

func (c *Cluster) loadPeers() []string {
	b, err := os.ReadFile(c.peersPath())
	if err != nil {
		return nil
	}
	var addrs []string
	_ = json.Unmarshal(b, &addrs)
	return addrs
}

func (c *Cluster) savePeers() {
	var addrs []string
	for _, m := range c.gossip.Alive() {
		if m.Name != c.self {
			addrs = append(addrs, m.Addr)
		}
	}
	if len(addrs) == 0 {
		return
	}
	slices.Sort(addrs)
	if slices.Equal(addrs, c.loadPeers()) {
		return
	}
	b, _ := json.Marshal(addrs)
	_ = durablefile.WriteFile(c.peersPath(), b, 0o644)
}
