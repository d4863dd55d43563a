package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"github.com/crawlnode/crawlnode/ring"
)

// Errors of the node-side wrapper.
var (
	// ErrNotLeader: the operation must run on the leader. The error is a *NotLeaderError
	// naming the leader (if known) so the caller can forward.
	ErrNotLeader = errors.New("control: not the leader")
	// ErrNotStarted: Start has not run (or failed).
	ErrNotStarted = errors.New("control: not started")
	// ErrClosed: Shutdown has run.
	ErrClosed = errors.New("control: shut down")
	// ErrTooFewPeers: Bootstrap got fewer peers than BootstrapExpect.
	ErrTooFewPeers = errors.New("control: too few peers to bootstrap")
)

// NotLeaderError is returned (wrapped) when a leader-only call runs elsewhere. It matches
// ErrNotLeader with errors.Is; Cause is Raft's error when leadership was lost mid-call
// (raft.ErrLeadershipLost: the command may or may not have been committed).
type NotLeaderError struct {
	Leader     string // leader's member name; "" when no leader is known
	LeaderHTTP string // leader's HTTP address from the registry; "" when unknown
	Cause      error
}

func (e *NotLeaderError) Error() string {
	msg := "control: not the leader"
	if e.Leader != "" {
		msg += fmt.Sprintf(" (leader %s at %q)", e.Leader, e.LeaderHTTP)
	} else {
		msg += " (no known leader)"
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Unwrap returns Cause.
func (e *NotLeaderError) Unwrap() error { return e.Cause }

// Control is a node's handle on the Raft group: it runs Raft over raft-wal and a file
// snapshot store, and answers lease questions from the local FSM.
type Control struct {
	cfg   Config
	log   *slog.Logger
	hlog  hclog.Logger
	now   func() time.Time
	fsm   *FSM
	wal   *raftwal.WAL
	meta  *metadb.BoltMetaDB
	snaps *raft.FileSnapshotStore

	mu     sync.Mutex
	r      *raft.Raft
	trans  raft.Transport
	cancel context.CancelFunc
	closed bool
	wg     sync.WaitGroup

	rp atomic.Pointer[raft.Raft] // r, for lock-free reads on hot paths (Owns)
	// verifiedAt is Now() in UnixNano taken just before the last VerifyLeader that
	// succeeded; the leader counts as in contact for LeaseTimeout after it.
	verifiedAt atomic.Int64
	// contactFloor is Raft's LastContact (UnixNano) when this node last stopped leading:
	// Raft stamps LastContact at step-down, which is no contact with any leader, so
	// values up to the floor do not count.
	contactFloor atomic.Int64
	shutdown     sync.Once
	shutErr      error
}

// New opens the data directory (raft-wal under DataDir/raft, snapshots under
// DataDir/snapshots) and builds the FSM. Nothing runs until Start.
func New(cfg Config) (*Control, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Control{cfg: cfg, now: cfg.Now, fsm: NewFSM(),
		log: cfg.Logger.With("component", "control", "node", cfg.NodeName)}
	c.hlog = newHCLog(cfg.Logger.With("component", "raft", "node", cfg.NodeName), "raft")
	walDir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(walDir, 0o755); err != nil {
		return nil, fmt.Errorf("control: data dir: %w", err)
	}
	// raft-wal's Close does not close the default meta store (a BoltDB holding a file
	// lock), so we own it: reopening the same directory in one process would block.
	c.meta = &metadb.BoltMetaDB{}
	segment := 64 << 20 // raft-wal's default
	if cfg.Profile == ProfileTest {
		segment = 1 << 20
	}
	wal, err := raftwal.Open(walDir, raftwal.WithMetaStore(c.meta),
		raftwal.WithLogger(c.hlog.Named("wal")), raftwal.WithSegmentSize(segment))
	if err != nil {
		_ = c.meta.Close()
		return nil, fmt.Errorf("control: open raft-wal: %w", err)
	}
	c.wal = wal
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotRetain, c.hlog.Named("snapshot"))
	if err != nil {
		_ = c.wal.Close()
		_ = c.meta.Close()
		return nil, fmt.Errorf("control: snapshot store: %w", err)
	}
	c.snaps = snaps
	return c, nil
}

// Start creates the transport (TCP on RaftBindAddr unless Config.Transport is set) and
// Raft, bootstraps a single-node cluster when BootstrapExpect is 1 and the data dir is
// empty, and starts the leader-verification loop. It runs until Shutdown (or ctx ends:
// then only the loop stops; call Shutdown to stop Raft).
func (c *Control) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if c.r != nil {
		return errors.New("control: already started")
	}
	trans := c.cfg.Transport
	if trans == nil {
		var adv net.Addr
		if c.cfg.RaftAdvertise != "" {
			a, err := net.ResolveTCPAddr("tcp", c.cfg.RaftAdvertise)
			if err != nil {
				return fmt.Errorf("%w: raft advertise %q: %v", ErrInvalidConfig, c.cfg.RaftAdvertise, err)
			}
			adv = a
		}
		tcp, err := newTCPStream(c.cfg.RaftBindAddr, adv)
		if err != nil {
			return fmt.Errorf("control: raft transport: %w", err)
		}
		var stream raft.StreamLayer = tcp
		if c.cfg.TLS != nil {
			stream = &tlsStream{tcpStream: tcp, creds: c.cfg.TLS, log: c.log}
		}
		trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: c.hlog.Named("transport")})
	}
	existing, err := raft.HasExistingState(c.wal, c.wal, c.snaps)
	if err != nil {
		closeTransport(trans)
		return fmt.Errorf("control: read raft state: %w", err)
	}
	rc := c.cfg.raftConfig()
	rc.Logger = c.hlog
	r, err := raft.NewRaft(rc, c.fsm, c.wal, c.wal, c.snaps, trans)
	if err != nil {
		closeTransport(trans)
		return fmt.Errorf("control: start raft: %w", err)
	}
	c.r, c.trans = r, trans
	c.rp.Store(r)
	if c.cfg.BootstrapExpect == 1 && !existing {
		conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter,
			ID: raft.ServerID(c.cfg.NodeName), Address: trans.LocalAddr()}}}
		if err := r.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			c.log.Error("bootstrap single node", "err", err)
		} else {
			electNow(r)
		}
	}
	lctx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	c.wg.Add(1)
	go c.loop(lctx, r)
	c.log.Info("started", "raft_addr", trans.LocalAddr(), "existing_state", existing)
	return nil
}

func closeTransport(t raft.Transport) {
	if wc, ok := t.(raft.WithClose); ok {
		_ = wc.Close()
	}
}

// loop confirms leadership on a cadence (so Owns can trust it) and keeps the leader's
// own registry entry current.
func (c *Control) loop(ctx context.Context, r *raft.Raft) {
	defer c.wg.Done()
	tick := time.NewTicker(c.cfg.LeaseTimeout / 4)
	defer tick.Stop()
	leaderCh := r.LeaderCh()
	for {
		select {
		case <-ctx.Done():
			return
		case isLeader := <-leaderCh:
			c.log.Info("leadership changed", "leader", isLeader)
			if !isLeader {
				c.contactFloor.Store(r.LastContact().UnixNano())
				continue
			}
		case <-tick.C:
		}
		if r.State() != raft.Leader {
			continue
		}
		start := c.now()
		if err := r.VerifyLeader().Error(); err != nil {
			c.log.Warn("leadership not confirmed", "err", err)
			continue
		}
		c.verifiedAt.Store(start.UnixNano())
		c.registerSelf(r)
	}
}

func (c *Control) registerSelf(r *raft.Raft) {
	cf := r.GetConfiguration()
	if cf.Error() != nil {
		return
	}
	self := c.Self()
	ups := RegistryUpdates(cf.Configuration(), []Peer{self}, c.fsm.State().Members)
	for _, u := range ups {
		if u.Name != self.Name {
			continue
		}
		u.Info.JoinedAt = c.now()
		if _, err := c.Apply(u); err != nil {
			c.log.Warn("register self", "err", err)
		}
	}
}

// Self returns this node as a Peer (its Raft address is the transport's, once started).
func (c *Control) Self() Peer {
	p := Peer{Name: c.cfg.NodeName, HTTPAddr: c.cfg.HTTPAddr}
	c.mu.Lock()
	if c.trans != nil {
		p.RaftAddr = string(c.trans.LocalAddr())
	}
	c.mu.Unlock()
	return p
}

func (c *Control) raft() (*raft.Raft, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.r == nil {
		return nil, ErrNotStarted
	}
	return c.r, nil
}

// Bootstrap bootstraps the cluster when this node is the lowest-named of peers (gossip's
// members, self included or not) and its data dir holds no Raft state. The first
// VoterTarget(len(peers)) peers by name become voters, the rest non-voters. It returns
// whether this node bootstrapped; on the other nodes it is a no-op. Peers need Name and
// RaftAddr; call it once the caller has seen BootstrapExpect members.
func (c *Control) Bootstrap(peers []Peer) (bool, error) {
	r, err := c.raft()
	if err != nil {
		return false, err
	}
	all := append(slices.Clone(peers), c.Self())
	slices.SortFunc(all, func(a, b Peer) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	all = slices.CompactFunc(all, func(a, b Peer) bool { return a.Name == b.Name })
	if n := len(all); n < max(c.cfg.BootstrapExpect, 1) {
		return false, fmt.Errorf("%w: %d of %d", ErrTooFewPeers, n, c.cfg.BootstrapExpect)
	}
	if all[0].Name != c.cfg.NodeName {
		return false, nil
	}
	existing, err := raft.HasExistingState(c.wal, c.wal, c.snaps)
	if err != nil || existing {
		return false, err
	}
	target := c.cfg.VoterTarget(len(all))
	conf := raft.Configuration{}
	for i, p := range all {
		if p.RaftAddr == "" {
			return false, fmt.Errorf("%w: peer %q has no raft address", ErrInvalidConfig, p.Name)
		}
		s := raft.Server{ID: raft.ServerID(p.Name), Address: raft.ServerAddress(p.RaftAddr), Suffrage: raft.Nonvoter}
		if i < target {
			s.Suffrage = raft.Voter
		}
		conf.Servers = append(conf.Servers, s)
	}
	if err := r.BootstrapCluster(conf).Error(); err != nil {
		if errors.Is(err, raft.ErrCantBootstrap) {
			return false, nil
		}
		return false, fmt.Errorf("control: bootstrap: %w", err)
	}
	c.log.Info("bootstrapped", "members", len(all), "voters", target)
	return true, nil
}

func (c *Control) notLeader(r *raft.Raft, cause error) error {
	e := &NotLeaderError{Cause: cause}
	_, id := r.LeaderWithID()
	if id != "" {
		e.Leader = string(id)
		if m, ok := c.fsm.member(e.Leader); ok {
			e.LeaderHTTP = m.HTTPAddr
		}
	}
	return e
}

func (c *Control) leaderRaft() (*raft.Raft, error) {
	r, err := c.raft()
	if err != nil {
		return nil, err
	}
	if r.State() != raft.Leader {
		return nil, c.notLeader(r, nil)
	}
	return r, nil
}

func (c *Control) mapRaftErr(r *raft.Raft, op string, err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		return c.notLeader(r, err)
	}
	if errors.Is(err, raft.ErrRaftShutdown) {
		return fmt.Errorf("control: %s: %w", op, ErrClosed)
	}
	return fmt.Errorf("control: %s: %w", op, err)
}

// Apply commits cmd through Raft on the leader and returns the FSM's Result. It forwards
// nothing: elsewhere it returns a *NotLeaderError (errors.Is ErrNotLeader) naming the
// leader's HTTP address. A command the FSM refused returns its Result and Result.Err.
func (c *Control) Apply(cmd Command) (Result, error) {
	r, err := c.leaderRaft()
	if err != nil {
		return Result{}, err
	}
	b, err := Encode(cmd)
	if err != nil {
		return Result{}, err
	}
	f := r.Apply(b, c.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		return Result{}, c.mapRaftErr(r, "apply", err)
	}
	res, ok := f.Response().(Result)
	if !ok {
		return Result{}, fmt.Errorf("control: apply: unexpected response %T", f.Response())
	}
	return res, res.Err
}

// State returns a deep copy of the local FSM state (as last applied on this node).
func (c *Control) State() State { return c.fsm.State() }

// InContact reports whether this node has heard from a leader within LeaseTimeout.
//
// A follower or candidate goes by Raft's LastContact: the time of the last AppendEntries
// (heartbeats included), InstallSnapshot or granted vote it accepted. Two corrections:
// Raft also stamps LastContact when a leader steps down, so values up to the step-down
// (contactFloor) do not count; and a follower must know a leader other than itself
// (Raft clears the leader before it reports the step-down, which covers the moment
// before the floor is recorded). A candidate keeps its last contact, so nodes keep
// fetching through a short election: no lease can move without a new leader's commit.
//
// A leader goes by the start time of its last successful VerifyLeader, which the loop
// issues every LeaseTimeout/4 and as soon as leadership is gained. VerifyLeader is a
// round of heartbeats a quorum must answer in the current term, so a deposed leader that
// has not noticed yet cannot pass it, and timing from the call's start is conservative.
// Raft's own LeaderLeaseTimeout (step down without quorum contact) is not enough: it is
// not exposed, and the leader only notices at its next check.
func (c *Control) InContact() bool {
	r := c.rp.Load()
	if r == nil {
		return false
	}
	now := c.now()
	switch st := r.State(); st {
	case raft.Leader:
		v := c.verifiedAt.Load()
		return v != 0 && now.Sub(time.Unix(0, v)) < c.cfg.LeaseTimeout
	case raft.Follower, raft.Candidate:
		if st == raft.Follower {
			if _, id := r.LeaderWithID(); id == "" || string(id) == c.cfg.NodeName {
				return false
			}
		}
		lc := r.LastContact()
		return !lc.IsZero() && lc.UnixNano() > c.contactFloor.Load() && now.Sub(lc) < c.cfg.LeaseTimeout
	default:
		return false
	}
}

// Owns reports whether this node may fetch partition's hosts: the local lease table names
// this node and InContact holds (self-fencing). epoch is the lease's epoch, to be carried
// by every transfer of the partition.
func (c *Control) Owns(partition uint16) (epoch uint64, ok bool) {
	if int(partition) >= ring.PartitionCount || !c.InContact() {
		return 0, false
	}
	l := c.fsm.lease(partition)
	if l.Owner != c.cfg.NodeName {
		return 0, false
	}
	return l.Epoch, true
}

// Leader returns the leader's name and HTTP address as this node knows them ("" when
// unknown).
func (c *Control) Leader() (name, httpAddr string) {
	r := c.rp.Load()
	if r == nil {
		return "", ""
	}
	_, id := r.LeaderWithID()
	if id == "" {
		return "", ""
	}
	m, _ := c.fsm.member(string(id))
	return string(id), m.HTTPAddr
}

// LastContact is Raft's time of the last contact with a leader (zero on a leader or
// before any contact).
func (c *Control) LastContact() time.Time {
	r := c.rp.Load()
	if r == nil || r.State() == raft.Leader {
		return time.Time{}
	}
	return r.LastContact()
}

// LeaseTimeout is the configured lease time (see InContact).
func (c *Control) LeaseTimeout() time.Duration { return c.cfg.LeaseTimeout }

// AppliedIndex is the index of the last log entry applied to this node's FSM.
func (c *Control) AppliedIndex() uint64 {
	r := c.rp.Load()
	if r == nil {
		return 0
	}
	return r.AppliedIndex()
}

// LeaderIndex, on the leader, waits until every entry committed so far is applied to its
// FSM (a Raft barrier) and returns the applied index: a follower whose FSM has applied
// that index has seen every lease move committed before the call.
func (c *Control) LeaderIndex(timeout time.Duration) (uint64, error) {
	r, err := c.leaderRaft()
	if err != nil {
		return 0, err
	}
	if err := r.Barrier(timeout).Error(); err != nil {
		return 0, c.mapRaftErr(r, "barrier", err)
	}
	return r.AppliedIndex(), nil
}

// IsLeader reports whether this node is the Raft leader.
func (c *Control) IsLeader() bool {
	r := c.rp.Load()
	return r != nil && r.State() == raft.Leader
}

// AddMember adds p to the Raft configuration on the leader, as a voter while there are
// fewer voters than VoterTarget(members), else as a non-voter, and registers it.
func (c *Control) AddMember(p Peer) error {
	r, err := c.leaderRaft()
	if err != nil {
		return err
	}
	if p.Name == "" || p.RaftAddr == "" {
		return fmt.Errorf("%w: member needs a name and a raft address", ErrInvalidCommand)
	}
	cf := r.GetConfiguration()
	if err := cf.Error(); err != nil {
		return c.mapRaftErr(r, "add member", err)
	}
	conf := cf.Configuration()
	voters, n := 0, len(conf.Servers)
	in := false
	for _, s := range conf.Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		if string(s.ID) == p.Name {
			in = string(s.Address) == p.RaftAddr
		}
	}
	if !in {
		n++
		var f raft.IndexFuture
		if voters < c.cfg.VoterTarget(n) {
			f = r.AddVoter(raft.ServerID(p.Name), raft.ServerAddress(p.RaftAddr), 0, c.cfg.ApplyTimeout)
		} else {
			f = r.AddNonvoter(raft.ServerID(p.Name), raft.ServerAddress(p.RaftAddr), 0, c.cfg.ApplyTimeout)
		}
		if err := f.Error(); err != nil {
			return c.mapRaftErr(r, "add member", err)
		}
	}
	return c.syncRegistry(r, []Peer{p})
}

// RemoveMember removes a member from the Raft configuration and the registry (a
// decommission, or a death past the grace period). Its leases are not touched.
func (c *Control) RemoveMember(name string) error {
	r, err := c.leaderRaft()
	if err != nil {
		return err
	}
	if err := r.RemoveServer(raft.ServerID(name), 0, c.cfg.ApplyTimeout).Error(); err != nil {
		return c.mapRaftErr(r, "remove member", err)
	}
	if name == c.cfg.NodeName {
		return nil // we are no longer in the cluster; the next leader cleans the registry
	}
	_, err = c.Apply(RemoveMember{Name: name})
	return err
}

// Reconcile, run by the leader with gossip's alive members, adds missing members, keeps
// VoterTarget voters by promoting alive non-voters when voters die, demotes dead voters
// (after the promotions) and updates the registry. See PlanReconcile.
func (c *Control) Reconcile(alive []Peer) error {
	r, err := c.leaderRaft()
	if err != nil {
		return err
	}
	cf := r.GetConfiguration()
	if err := cf.Error(); err != nil {
		return c.mapRaftErr(r, "reconcile", err)
	}
	conf := cf.Configuration()
	n := 0
	names := map[string]bool{c.cfg.NodeName: true}
	for _, p := range alive {
		names[p.Name] = true
	}
	n = len(names)
	for _, a := range PlanReconcile(conf, alive, c.cfg.NodeName, c.cfg.VoterTarget(n)) {
		id, addr := raft.ServerID(a.Peer.Name), raft.ServerAddress(a.Peer.RaftAddr)
		var f raft.IndexFuture
		switch a.Kind {
		case AddVoter:
			f = r.AddVoter(id, addr, 0, c.cfg.ApplyTimeout)
		case AddNonvoter:
			f = r.AddNonvoter(id, addr, 0, c.cfg.ApplyTimeout)
		case Demote:
			f = r.DemoteVoter(id, 0, c.cfg.ApplyTimeout)
		}
		if err := f.Error(); err != nil {
			return c.mapRaftErr(r, "reconcile", err)
		}
		c.log.Info("membership change", "action", a.Kind, "peer", a.Peer.Name)
	}
	return c.syncRegistry(r, alive)
}

func (c *Control) syncRegistry(r *raft.Raft, alive []Peer) error {
	cf := r.GetConfiguration()
	if err := cf.Error(); err != nil {
		return c.mapRaftErr(r, "registry", err)
	}
	for _, u := range RegistryUpdates(cf.Configuration(), alive, c.fsm.State().Members) {
		u.Info.JoinedAt = c.now()
		if _, err := c.Apply(u); err != nil {
			return err
		}
	}
	return nil
}

// String names an action kind in logs.
func (k ActionKind) String() string {
	switch k {
	case AddVoter:
		return "add-voter"
	case AddNonvoter:
		return "add-nonvoter"
	case Demote:
		return "demote"
	}
	return "unknown"
}

// Shutdown stops the loop and Raft and closes the transport and stores. It does not
// transfer leadership (a crash and a shutdown look the same to the others). It returns
// ctx.Err() if ctx ends first; the close then finishes in the background.
func (c *Control) Shutdown(ctx context.Context) error {
	c.shutdown.Do(func() {
		c.mu.Lock()
		c.closed = true
		r, trans, cancel := c.r, c.trans, c.cancel
		c.mu.Unlock()
		done := make(chan error, 1)
		go func() {
			if cancel != nil {
				cancel()
			}
			var errs []error
			if r != nil {
				errs = append(errs, r.Shutdown().Error()) // also closes the transport
			} else if trans != nil {
				closeTransport(trans)
			}
			if nt, ok := trans.(*raft.NetworkTransport); ok {
				nt.CloseStreams() // pooled outbound connections (Close leaves them open)
			}
			c.wg.Wait()
			errs = append(errs, c.wal.Close(), c.meta.Close())
			done <- errors.Join(errs...)
		}()
		select {
		case err := <-done:
			c.shutErr = err
		case <-ctx.Done():
			c.shutErr = ctx.Err()
		}
		c.log.Info("shut down", "err", c.shutErr)
	})
	return c.shutErr
}

// electNow makes a follower that has never heard from a leader check its heartbeat at once
// instead of after HeartbeatTimeout (1-2 s in the LAN profile), so a freshly bootstrapped
// single node leads, and starts crawling, within milliseconds. raft exposes no call for it;
// lowering the heartbeat timeout through ReloadConfig wakes the follower loop, which finds
// no contact ever and starts the election; the timeout is put back at once. The timeouts in
// force afterwards are the configured ones.
func electNow(r *raft.Raft) {
	orig := r.ReloadableConfig()
	lower := orig
	lower.HeartbeatTimeout -= time.Millisecond
	if r.ReloadConfig(lower) == nil {
		_ = r.ReloadConfig(orig)
	}
}
