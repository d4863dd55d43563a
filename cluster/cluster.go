package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/gossip"
	"github.com/crawlnode/crawlnode/internal/peerauth"
	"github.com/crawlnode/crawlnode/ring"
)

// ErrBadConfig is returned by New for a Config that cannot work.
var ErrBadConfig = errors.New("bad configuration")

// Config says how a node finds and joins its peers. The zero value is a cluster of
// one on ephemeral loopback ports.
type Config struct {
	// BindAddr is memberlist's ip:port (TCP and UDP). Default "127.0.0.1:0" (a free port:
	// fine alone, useless for peers, who need a known address).
	BindAddr string
	// AdvertiseAddr is the gossip address peers use, when it differs from BindAddr (NAT,
	// containers). Default: memberlist's choice (a private interface for 0.0.0.0).
	AdvertiseAddr string
	// RaftAddr is Raft's TCP ip:port. Default: BindAddr's host, port+1 (port 0 stays 0).
	RaftAddr string
	// Join lists gossip addresses of members to join at start (any one answering is
	// enough). The addresses of peers seen before (DIR/peers.json) are added.
	Join []string
	// BootstrapExpect is how many members gossip must show before the Raft group
	// bootstraps (the lowest-named of them does it). 0 with no Join: 1 (alone).
	BootstrapExpect int
	// Profile is "lan" (default) or "test" (fast timings for one machine).
	Profile string
	// Grace is how long a member may be gone (restart, crash) before its partitions are
	// given to others. Default 30s. Longer survives slower restarts; shorter recovers a
	// dead node's partitions sooner.
	Grace time.Duration
	// Members only (security.go). ClusterKey, when set, encrypts and authenticates gossip
	// (16, 24 or 32 bytes; --cluster-key-file or CRAWLNODE_CLUSTER_KEY); it seeds the
	// keyring kept in DIR/keyring.json, which a rotation changes and which wins over it
	// once it exists. TLS, when set, runs Raft and every node-to-node HTTP call over
	// mutual TLS (--tls-ca, --tls-cert, --tls-key). InsecureCluster lets a node serve
	// gossip, Raft or the internal endpoints beyond loopback without both
	// (--insecure-cluster); without it such a node refuses to start (CheckExposure).
	ClusterKey      []byte
	TLS             *peerauth.Creds
	InsecureCluster bool

	// ReplicaInterval is how often each held partition's changes are copied to its backup
	// node (package replica). Default 1s; negative: no replicas (a node lost for good
	// loses what it held).
	ReplicaInterval time.Duration
}

// SetDefaults fills the zero fields with their defaults.
func (c *Config) SetDefaults() {
	if c.BindAddr == "" {
		c.BindAddr = "127.0.0.1:0"
	}
	if c.Profile == "" {
		c.Profile = gossip.ProfileLAN
	}
	if c.Grace == 0 {
		c.Grace = 30 * time.Second
	}
	if c.ReplicaInterval == 0 {
		c.ReplicaInterval = time.Second
	}
	if c.BootstrapExpect == 0 && len(c.Join) == 0 {
		c.BootstrapExpect = 1
	}
	if c.RaftAddr == "" {
		host, port, err := net.SplitHostPort(c.BindAddr)
		if err == nil {
			p, _ := strconv.Atoi(port)
			if p != 0 {
				p++
			}
			c.RaftAddr = net.JoinHostPort(host, strconv.Itoa(p))
		}
	}
}

// Validate checks a defaulted Config; its errors wrap ErrBadConfig.
func (c *Config) Validate() error {
	for _, a := range append([]string{c.BindAddr, c.RaftAddr}, c.Join...) {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("%w: address %q: want host:port", ErrBadConfig, a)
		}
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertiseAddr); err != nil {
			return fmt.Errorf("%w: advertise address %q: want host:port", ErrBadConfig, c.AdvertiseAddr)
		}
	}
	switch {
	case c.BootstrapExpect < 0:
		return fmt.Errorf("%w: bootstrap-expect must be >= 0", ErrBadConfig)
	case c.Grace < 0:
		return fmt.Errorf("%w: grace must be >= 0", ErrBadConfig)
	case c.Profile != gossip.ProfileLAN && c.Profile != gossip.ProfileTest:
		return fmt.Errorf("%w: cluster profile %q: want lan or test", ErrBadConfig, c.Profile)
	}
	return nil
}

// table is the node's copy of the lease table and job config, refreshed from the local
// Raft FSM; routing reads it without locks.
type table struct {
	leases  [ring.PartitionCount]control.Lease
	members map[string]control.MemberInfo
	config  control.JobConfig
	budget  map[string]control.PageBudget
	index   uint64
}

// cluster is one node's membership in the crawl cluster.
type Cluster struct {
	cfg    Config
	deps   Deps
	front  Frontier
	host   Host
	log    *slog.Logger
	gossip *gossip.Gossip
	ctl    *control.Control
	out    *forward.Outbox
	client *http.Client
	self   string
	now    func() time.Time // the node's clock (Config.Now)

	tab atomic.Pointer[table]

	ringMu  sync.Mutex
	ring    ringCache // Ring's
	altRing ringCache // RingOf's
	repl    Replication

	// routeMu orders local frontier adds (read side: route, forward receive, outbox
	// Local) against the start of a handoff (write side), so that no add decided on the
	// old ownership lands after the partition's final export.
	routeMu  sync.RWMutex
	localSet atomic.Pointer[[ring.PartitionCount]bool] // partitions whose links go to the local frontier

	mu        sync.Mutex
	hold      [ring.PartitionCount]int  // > 0: a handoff or import holds the partition (no fetching)
	received  map[uint16]time.Time      // partitions streamed in before their lease moved here
	fenced    [ring.PartitionCount]bool // we paused the partition in the frontier
	handing   map[uint16]bool           // handoffs running from here
	lastSweep time.Time

	keyMu sync.Mutex // serialises keyring steps and their saves

	// leadMu serialises the leader's rounds (deadSince is theirs); handoffMu the starts
	// of handoffs.
	leadMu    sync.Mutex
	handoffMu sync.Mutex
	deadSince map[string]time.Time // leader: first time a registered member was seen not alive

	// synced: this node's lease table is known to hold every lease move committed before
	// its contact with the leader last (re)started. It goes false whenever contact is
	// lost; while false nothing is fetched. A node back from a
	// network partition may still find itself named owner of partitions others took over
	// meanwhile, until its log catches up: it asks the leader for its applied index
	// (after a barrier) and waits until its own FSM has applied that far.
	synced     atomic.Bool
	syncing    atomic.Bool
	rejoining  atomic.Bool
	lastRejoin time.Time // loop goroutine only
	syncLC     time.Time // LastContact at the previous check (loop goroutine only)

	started    atomic.Bool   // start finished: g, ctl and the loop run
	ctlReady   atomic.Bool   // ctl is set and started: the internal Raft routes may use it
	jobVersion atomic.Uint64 // the job configuration version last applied
	leaving    atomic.Bool   // decommission requested
	left       chan struct{}
	leftOnce   sync.Once
	doneLocal  atomic.Bool // this node decided the cluster is done
	doneSeen   atomic.Bool // a peer said the cluster is done
	// unseededLogged: the "no seeds yet" line of clusterDone was logged.
	unseededLogged atomic.Bool
	ready          chan struct{}
	readyOnce      sync.Once
	state          atomic.Value // gossip.State we announce

	stats struct {
		handoffs, handoffFails, handoffBytes, handoffRecords atomic.Int64
		handoffNanos                                         atomic.Int64
		imports, swept, forced                               atomic.Int64
	}

	wg sync.WaitGroup
}

// New builds a node's cluster membership; Start joins the cluster.
func New(cfg Config, d Deps) (*Cluster, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	c := &Cluster{
		cfg: cfg, deps: d, front: d.Frontier, host: d.Host, self: d.Self, now: d.Now,
		log: d.Logger.With("component", "cluster", "node", d.Self),
		// Every node-to-node request goes through c.client, which signs it as this node
		// (links, partition streams, replica rounds, dedup, forwarded Raft commands,
		// reads, keyring steps).
		client:    newClient(cfg, d),
		handing:   map[uint16]bool{},
		received:  map[uint16]time.Time{},
		deadSince: map[string]time.Time{},
		left:      make(chan struct{}),
		ready:     make(chan struct{}),
	}
	c.state.Store(gossip.StateJoining)
	c.tab.Store(&table{})
	c.localSet.Store(&[ring.PartitionCount]bool{})
	out, err := forward.New(forward.Config{
		DB:      d.DB,
		Self:    c.self,
		OwnerOf: c.outboxOwner,
		Send:    forward.HTTPSender(c.client, c.InternalURL),
		Local:   c.localLinks,
		Logger:  d.Logger,
		SendInterval: func() time.Duration {
			if cfg.Profile == gossip.ProfileTest {
				return 100 * time.Millisecond
			}
			return 0
		}(),
		BackoffBase: 200 * time.Millisecond,
		BackoffMax:  5 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	c.out = out
	if d.NewReplication != nil {
		c.repl = d.NewReplication(c, cfg.ReplicaInterval)
	} else {
		c.repl = noReplication{}
	}
	return c, nil
}

// Start joins the cluster: gossip, Raft, the outbox sender and the maintenance loop.
// httpAddr is the API's bound address (peers forward links and streams to it).
func (c *Cluster) Start(ctx context.Context, httpAddr string) error {
	// Nothing is fetched before the lease table says so.
	c.mu.Lock()
	for p := range ring.PartitionCount {
		c.front.PausePartition(uint16(p))
		c.fenced[p] = true
	}
	c.mu.Unlock()

	libLog := slog.New(newQuietLibs(c.deps.Logger.Handler()))
	keys, err := c.loadKeyring()
	if err != nil {
		return err
	}
	if err := c.authKeys(keys); err != nil {
		return err
	}
	g, err := gossip.New(gossip.Config{
		Keys:          keys,
		Name:          c.self,
		BindAddr:      c.cfg.BindAddr,
		AdvertiseAddr: c.cfg.AdvertiseAddr,
		Profile:       c.cfg.Profile,
		Meta:          gossip.Meta{State: gossip.StateJoining, Version: c.deps.Version, DataFormat: c.deps.DataFormat},
		Logger:        libLog,
	})
	if err != nil {
		return err // gossip's errors say "gossip: ..."
	}
	c.gossip = g
	advHost, _, _ := net.SplitHostPort(g.AdvertiseAddr())
	raftBind := c.cfg.RaftAddr
	raftAdv := ""
	if h, p, err := net.SplitHostPort(raftBind); err == nil && isWildcard(h) {
		raftAdv = net.JoinHostPort(advHost, p)
	}
	httpAdv := advertised(httpAddr, advHost)
	ctl, err := control.New(control.Config{
		NodeName:        c.self,
		RaftBindAddr:    raftBind,
		RaftAdvertise:   raftAdv,
		HTTPAddr:        httpAdv,
		DataDir:         filepath.Join(c.deps.DataDir, "control"),
		TLS:             c.cfg.TLS,
		BootstrapExpect: c.cfg.BootstrapExpect,
		Profile:         c.cfg.Profile,
		Logger:          libLog,
	})
	if err != nil {
		g.Shutdown(context.Background())
		return fmt.Errorf("raft: %w", err)
	}
	if err := ctl.Start(ctx); err != nil {
		g.Shutdown(context.Background())
		return fmt.Errorf("raft: %w", err)
	}
	c.ctl = ctl
	c.ctlReady.Store(true)
	raftAddr := ctl.Self().RaftAddr
	if raftAdv == "" && raftAddr == "" {
		raftAddr = raftBind
	}
	if err := g.SetMeta(gossip.Meta{HTTPAddr: httpAdv, RaftAddr: raftAddr, State: gossip.StateJoining, Version: c.deps.Version, DataFormat: c.deps.DataFormat}); err != nil && !errors.Is(err, gossip.ErrUpdateTimeout) {
		return fmt.Errorf("gossip: %w", err)
	}
	c.wg.Add(1)
	go func() { defer c.wg.Done(); _ = g.Start(ctx) }()
	if err := c.out.Start(ctx); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	join := slices.Clone(c.cfg.Join)
	for _, a := range c.loadPeers() {
		if !slices.Contains(join, a) && a != g.AdvertiseAddr() {
			join = append(join, a)
		}
	}
	if len(join) > 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if _, err := g.JoinContext(ctx, join); err != nil && ctx.Err() == nil {
				c.log.Error("join failed; the node keeps trying through gossip and Raft", "addrs", join, "err", err)
			}
		}()
	}
	c.log.Info("cluster started", "gossip", g.AdvertiseAddr(), "raft", raftAddr, "http", httpAdv, "join", join, "bootstrap_expect", c.cfg.BootstrapExpect)
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.loop(ctx) }()
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.repl.Run(ctx) }()
	c.started.Store(true)
	return nil
}

// Shutdown stops the outbox, Raft and gossip (without leaving: a restart keeps the leases).
func (c *Cluster) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c.out != nil {
		_ = c.out.Shutdown(ctx)
	}
	if c.ctl != nil {
		if err := c.ctl.Shutdown(ctx); err != nil {
			c.log.Warn("raft shutdown", "err", err)
		}
	}
	if c.gossip != nil {
		if c.leaving.Load() {
			_ = c.gossip.Leave(2 * time.Second)
		}
		_ = c.gossip.Shutdown(ctx)
	}
	c.wg.Wait()
}

func isWildcard(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// advertised replaces a wildcard host in addr with host.
func advertised(addr, host string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || addr == "" {
		return addr
	}
	if isWildcard(h) {
		return net.JoinHostPort(host, p)
	}
	return addr
}

// loop is the cluster's maintenance: refresh the table, fence, lead, hand off, sweep.
func (c *Cluster) loop(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	slow := time.NewTicker(time.Second)
	defer slow.Stop()
	events := c.gossip.Events()
	wasLeader := false
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				events = nil
			}
			c.Refresh()
		case <-tick.C:
			c.Refresh()
			c.checkSync(ctx)
			c.fence()
			// A new leader does its upkeep at once rather than at the next slow tick: a
			// fresh cluster's partitions are unowned until then, and nothing is crawled.
			if leader := c.ctl.IsLeader(); leader != wasLeader {
				wasLeader = leader
				if leader {
					c.lead()
				}
			}
			c.startHandoffs(ctx)
		case <-slow.C:
			c.bootstrap()
			if c.ctl.IsLeader() {
				c.lead()
			}
			c.announce()
			c.SyncJob()
			c.sweep(ctx)
			c.savePeers()
			c.rejoin(ctx)
			c.checkLeft()
		}
	}
}

// Refresh copies the local FSM state into the routing table.
func (c *Cluster) Refresh() {
	st := c.ctl.State()
	if cur := c.tab.Load(); cur != nil && cur.index == st.Index && st.Index != 0 {
		return
	}
	t := &table{leases: st.Leases, members: st.Members, config: st.Config, budget: st.Budget, index: st.Index}
	c.tab.Store(t)
	c.mu.Lock()
	c.recomputeLocalLocked()
	c.mu.Unlock()
	assigned := 0
	for _, l := range t.leases {
		if l.Owner != "" {
			assigned++
		}
	}
	if assigned == ring.PartitionCount {
		c.readyOnce.Do(func() { close(c.ready) })
	}
}

// checkSync clears synced when contact with the leader was lost (not in contact now, or
// a jump in Raft's LastContact of a whole lease time since the last check: contact was
// lost and came back between two checks), and starts a catch-up when in contact and not
// synced. A short election does not count: no lease moves away from a node without its
// own handoff or its removal, which takes the grace period (longer than a lease time).
func (c *Cluster) checkSync(ctx context.Context) {
	lc := c.ctl.LastContact()
	gap := !c.syncLC.IsZero() && !lc.IsZero() && lc.Sub(c.syncLC) >= c.ctl.LeaseTimeout()
	if !c.ctl.InContact() || gap {
		if c.synced.Swap(false) {
			c.log.Info("lease table out of sync with the leader: fetching stops until it catches up", "gap", gap)
		}
	}
	c.syncLC = lc
	if c.synced.Load() || !c.ctl.InContact() || !c.syncing.CompareAndSwap(false, true) {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.syncing.Store(false)
		idx, err := c.leaderIndex(ctx)
		if err != nil {
			c.log.Debug("catch-up: no index from the leader yet", "err", err)
			return
		}
		for deadline := c.now().Add(10 * time.Second); c.ctl.AppliedIndex() < idx; time.Sleep(20 * time.Millisecond) {
			if c.now().After(deadline) || ctx.Err() != nil {
				return
			}
		}
		if c.ctl.InContact() {
			c.Refresh()
			c.synced.Store(true)
		}
	}()
}

// leaderIndex is the leader's applied index after a barrier (asked over HTTP when the
// leader is another node).
func (c *Cluster) leaderIndex(ctx context.Context) (uint64, error) {
	if c.ctl.IsLeader() {
		return c.ctl.LeaderIndex(5 * time.Second)
	}
	_, addr := c.ctl.Leader()
	if addr == "" {
		return 0, errors.New("no leader known")
	}
	var out struct {
		Index uint64 `json:"index"`
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Get(ctx, c.PeerURL(addr)+"/internal/v1/raft/index", &out); err != nil {
		return 0, err
	}
	return out.Index, nil
}

// owns reports whether this node holds p's lease, is in contact and in sync.
func (c *Cluster) owns(p uint16) bool {
	if !c.synced.Load() {
		return false
	}
	_, ok := c.ctl.Owns(p)
	return ok
}

// MayFetch reports whether this node may fetch partition p now.
func (c *Cluster) MayFetch(p uint16) bool {
	if !c.owns(p) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hold[p] == 0
}

// fence pauses the partitions this node may not fetch and resumes the others.
func (c *Cluster) fence() {
	blocked := c.repl.Blocked()
	for p := range ring.PartitionCount {
		owns := c.owns(uint16(p))
		c.mu.Lock()
		resume, pause := fenceDecision(owns, c.hold[p], blocked[uint16(p)], c.fenced[p])
		if resume {
			c.front.ResumePartition(uint16(p))
			c.fenced[p] = false
		} else if pause {
			c.front.PausePartition(uint16(p))
			c.fenced[p] = true
		}
		c.mu.Unlock()
	}
}

// errBusy: the partition is being handed off or imported already.
var errBusy = errors.New("partition busy")

// Acquire holds partition p: no fetching, links of p go to the outbox, and it waits until
// p's leases in flight are back. For a handoff (exclusive) it refuses while another
// handoff or import holds p; an import refuses only while a handoff runs. Taking routeMu
// for writing makes every local add that decided before the hold finish first.
func (c *Cluster) Acquire(ctx context.Context, p uint16, exclusive bool, wait time.Duration) error {
	c.routeMu.Lock()
	c.mu.Lock()
	if c.handing[p] || (exclusive && c.hold[p] > 0) {
		c.mu.Unlock()
		c.routeMu.Unlock()
		return errBusy
	}
	if exclusive {
		c.handing[p] = true
	}
	c.hold[p]++
	c.recomputeLocalLocked()
	if !c.fenced[p] {
		c.front.PausePartition(p)
		c.fenced[p] = true
	}
	c.mu.Unlock()
	c.routeMu.Unlock()
	deadline := c.now().Add(wait)
	for c.front.InFlight(p) > 0 {
		if c.now().After(deadline) || ctx.Err() != nil {
			c.Release(p, exclusive)
			return fmt.Errorf("partition %d still has %d fetches in flight", p, c.front.InFlight(p))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func (c *Cluster) Release(p uint16, exclusive bool) {
	c.mu.Lock()
	if exclusive {
		delete(c.handing, p)
	}
	c.hold[p]--
	c.recomputeLocalLocked()
	c.mu.Unlock()
}

// OwnerOf is the lease holder of p as this node last heard it.
func (c *Cluster) OwnerOf(p uint16) (string, uint64) {
	l := c.tab.Load().leases[p]
	return l.Owner, l.Epoch
}

// HoldsLocal reports whether links of p go straight into the local frontier: this node
// holds p's lease and no handoff or import holds p. Lock-free; callers that add to the
// frontier on its answer hold routeMu for reading.
func (c *Cluster) HoldsLocal(p uint16) bool { return c.localSet.Load()[p] }

// recomputeLocalLocked rebuilds localSet; callers hold mu.
func (c *Cluster) recomputeLocalLocked() {
	t := c.tab.Load()
	var set [ring.PartitionCount]bool
	for p := range set {
		set[p] = t.leases[p].Owner == c.self && c.hold[p] == 0
	}
	c.localSet.Store(&set)
}

// outboxOwner is the outbox's OwnerOf: the lease holder, except that a partition held
// here for a handoff waits.
func (c *Cluster) outboxOwner(p uint16) (string, uint64, bool) {
	owner, epoch := c.OwnerOf(p)
	if owner == "" {
		return "", 0, false
	}
	if owner == c.self && !c.HoldsLocal(p) {
		return "", 0, false
	}
	return owner, epoch, true
}

// localLinks is the outbox's Local: links of partitions this node holds now. Links of a
// partition a handoff took meanwhile stay in the outbox (an error keeps them) and follow
// the lease.
func (c *Cluster) localLinks(links []forward.Link) error {
	c.routeMu.RLock()
	defer c.routeMu.RUnlock()
	for _, l := range links {
		if p, ok := forward.PartitionOfURL(l.URL); ok && !c.HoldsLocal(p) {
			return fmt.Errorf("partition %d is not held here any more", p)
		}
	}
	_, err := c.front.Add(linksToCandidates(links))
	return err
}

func linksToCandidates(links []forward.Link) []frontier.Candidate {
	cands := make([]frontier.Candidate, len(links))
	for i, l := range links {
		cands[i] = frontier.Candidate{URL: l.URL, Depth: int(l.Depth), Hops: int(l.Hops), Priority: l.Priority, Cash: float64(l.Cash)}
	}
	return cands
}

// InternalURL is the forward sender's peer address book.
func (c *Cluster) InternalURL(peer string) (string, bool) {
	for _, m := range c.gossip.Members() {
		if m.Name == peer && m.Status == gossip.StatusAlive && m.Meta.HTTPAddr != "" {
			return c.PeerURL(m.Meta.HTTPAddr), true
		}
	}
	if mi, ok := c.tab.Load().members[peer]; ok && mi.HTTPAddr != "" {
		return c.PeerURL(mi.HTTPAddr), true
	}
	return "", false
}

// Alive returns gossip's alive members by name.
func (c *Cluster) Alive() map[string]gossip.Member {
	out := map[string]gossip.Member{}
	for _, m := range c.gossip.Alive() {
		out[m.Name] = m
	}
	return out
}

// Ring builds the ring over the registered members that are not draining or gone
// (ringMembers).
func (c *Cluster) Ring() *ring.Ring {
	in := planInput{Self: c.self, Leaving: c.leaving.Load(), Members: c.gossip.Members(), Registry: c.tab.Load().members}
	return c.cachedRing(&c.ring, ringMembers(in))
}

// RingOf builds the ring over names, with every node's ring shape (cached apart from
// Ring's: the ring without this node, for replicas).
func (c *Cluster) RingOf(names []string) *ring.Ring {
	return c.cachedRing(&c.altRing, slices.Clone(names))
}

// ringCache is one ring and the sorted member names it was built over.
type ringCache struct {
	key string
	r   *ring.Ring
}

// cachedRing returns the ring over names (sorted in place), rebuilt only when they change.
func (c *Cluster) cachedRing(rc *ringCache, names []string) *ring.Ring {
	slices.Sort(names)
	key := strings.Join(names, "\x00")
	c.ringMu.Lock()
	defer c.ringMu.Unlock()
	if rc.key != key || rc.r == nil {
		rc.r, rc.key = ring.New(names, ringConfig), key
	}
	return rc.r
}

// ringConfig is every node's ring shape (it must be the same on all of them): 200 virtual
// nodes a member and a load bound of 1.1 hold the busiest member within 3% of the mean
// at 2-4 members and 7% at 10 (the defaults, 20 and 1.25, gave one of three members 41%
// of the partitions), at the cost of a few more partitions moving on a change.
var ringConfig = ring.Config{ReplicationFactor: 200, Load: 1.1}

// lead is the leader's upkeep: members, the dead, unowned partitions. The decisions are
// plan.go's; lead gathers their input and applies them, phase by phase.
func (c *Cluster) lead() {
	c.leadMu.Lock() // a test may run a round while the loop does
	defer c.leadMu.Unlock()
	if err := c.ctl.Reconcile(registerPeers(c.gossip.Members())); err != nil {
		c.log.Warn("reconcile", "err", err)
		return
	}
	c.Refresh()
	in := c.planInput()
	in.DeadSince = c.deadSince
	removals, deadSince := planRemovals(in)
	c.deadSince = deadSince
	removed := false
	for _, r := range removals {
		c.log.Warn("removing member", "peer", r.Name, "gone_for", r.GoneFor.Round(time.Millisecond), "partitions", r.Partitions, "decommissioned", r.Decommissioned)
		if err := c.ctl.RemoveMember(r.Name); err != nil {
			// Not in the Raft configuration any more (it removed itself): the registry
			// entry still goes.
			if _, err2 := c.ctl.Apply(control.RemoveMember{Name: r.Name}); err2 != nil {
				c.log.Warn("remove member", "peer", r.Name, "err", err, "err2", err2)
				continue
			}
		}
		delete(c.deadSince, r.Name)
		removed = true
	}
	if removed {
		c.Refresh()
		in = c.planInput()
	}
	assign, force := planLeases(in)
	c.applyLeases(assign, force, in.Now)
}

// applyLeases commits the leader's lease assignments and forced moves.
func (c *Cluster) applyLeases(assign []control.LeaseMove, force []control.ForcedMove, now time.Time) {
	if len(assign) > 0 {
		res, err := c.ctl.Apply(control.AssignLeases{Moves: assign, At: now})
		if err == nil && res.Err == nil {
			c.log.Info("assigned partitions", "n", len(assign))
		} else {
			c.log.Warn("assign partitions", "err", errors.Join(err, res.Err))
		}
	}
	if len(force) > 0 {
		res, err := c.ctl.Apply(control.ForceLease{Moves: force, At: now})
		if err == nil && res.Err == nil {
			c.stats.forced.Add(int64(len(force)))
			c.log.Warn("took over partitions of removed members", "n", len(force))
		} else {
			c.log.Warn("force leases", "err", errors.Join(err, res.Err))
		}
	}
	if len(assign)+len(force) > 0 {
		c.Refresh()
	}
}

// planInput gathers the cluster's decisions' input from gossip, the lease table and the
// clock; the leader's times of death are lead's to add (under leadMu). The registry is
// the table's own: the plan functions only read it.
func (c *Cluster) planInput() planInput {
	t := c.tab.Load()
	c.mu.Lock()
	handing := make(map[uint16]bool, len(c.handing))
	for p := range c.handing {
		handing[p] = true
	}
	c.mu.Unlock()
	return planInput{
		Self: c.self, Leaving: c.leaving.Load(),
		Members:  c.gossip.Members(),
		Registry: t.members, Leases: t.leases[:],
		Now: c.now(), Grace: c.cfg.Grace,
		Ring: func(names []string) func(uint16) string {
			return c.cachedRing(&c.ring, names).Owner
		},
		Handing: handing,
	}
}

func registered(t *table, name string) bool {
	_, ok := t.members[name]
	return ok
}

// SyncJob copies the Raft job configuration's pause flag and blocked domains into the
// node's operator state.
func (c *Cluster) SyncJob() {
	t := c.tab.Load()
	if t.config.Version == 0 {
		return
	}
	c.host.ApplyJob(t.config.Paused, t.config.BlockedDomains)
	if c.jobVersion.Swap(t.config.Version) != t.config.Version {
		c.host.ApplyJobSettings(t.config)
	}
}

// ApplyJobCommand commits a job configuration change (pause, block...) through the leader.
func (c *Cluster) ApplyJobCommand(cmd control.Command) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Apply(ctx, cmd)
	if err != nil {
		return fmt.Errorf("cluster job configuration: %w", err)
	}
	if res.Code != "" {
		return fmt.Errorf("cluster job configuration: %s", res.Error)
	}
	c.Refresh()
	return nil
}

// --- leader calls from any node ---

// ApplyResult is the internal wire form of a Raft command's outcome.
type ApplyResult struct {
	Code      string                   `json:"code,omitempty"`
	Error     string                   `json:"error,omitempty"`
	Conflicts []control.PartitionLease `json:"conflicts,omitempty"`
	Changed   bool                     `json:"changed"`
	// ConfigVersion is the job configuration's version after the command.
	ConfigVersion uint64 `json:"config_version"`
	// Granted and Budget: a page budget command's grant and the member's share after it.
	Granted int64               `json:"granted,omitempty"`
	Budget  *control.PageBudget `json:"budget,omitempty"`
}

var errLeaseConflict = errors.New("lease conflict")

// Apply runs cmd on the leader: here, or over HTTP on the leader's internal endpoint.
func (c *Cluster) Apply(ctx context.Context, cmd control.Command) (ApplyResult, error) {
	res, err := c.ctl.Apply(cmd)
	if err == nil {
		return toApplyResult(res), nil
	}
	var nle *control.NotLeaderError
	if !errors.As(err, &nle) {
		return ApplyResult{}, err
	}
	if nle.LeaderHTTP == "" {
		return ApplyResult{}, fmt.Errorf("no leader known: %w", err)
	}
	body, err := control.Encode(cmd)
	if err != nil {
		return ApplyResult{}, err
	}
	var out ApplyResult
	if err := c.post(ctx, c.PeerURL(nle.LeaderHTTP)+"/internal/v1/raft/apply", "application/octet-stream", body, &out); err != nil {
		return ApplyResult{}, err
	}
	return out, nil
}

func toApplyResult(res control.Result) ApplyResult {
	out := ApplyResult{Changed: res.Changed, Conflicts: res.Conflicts, ConfigVersion: res.ConfigVersion, Granted: res.Granted, Budget: res.Budget}
	if res.Err != nil {
		out.Error = res.Err.Error()
		switch {
		case errors.Is(res.Err, control.ErrLeaseConflict):
			out.Code = "lease_conflict"
		case errors.Is(res.Err, control.ErrVersionConflict):
			out.Code = "version_conflict"
		case errors.Is(res.Err, control.ErrUnknownMember):
			out.Code = "unknown_member"
		default:
			out.Code = "invalid"
		}
	}
	return out
}

// post sends an internal request and decodes a JSON answer into out (if not nil).
func (c *Cluster) post(ctx context.Context, url, ctype string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytesReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, e.Error)
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}
