package gossip

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Gossip is one node's membership: a memberlist instance, its metadata, a member table and
// the event loop. Build with New, run with Start, stop with Shutdown.
type Gossip struct {
	cfg       Config
	log       *slog.Logger
	ml        *memberlist.Memberlist
	boundAddr string // bind ip:port as bound
	advAddr   string // advertised ip:port

	// local metadata: setMu serializes SetMeta, metaMu guards the values NodeMeta reads.
	setMu     sync.Mutex
	metaMu    sync.Mutex
	meta      Meta
	metaBytes []byte

	// mu guards the member table, the sequence counter and the overflow slots. Callbacks
	// hold it for a map write and a non-blocking channel send.
	mu       sync.Mutex
	seq      uint64
	table    map[string]tableEntry
	overflow map[string]rawEvent

	raw       chan rawEvent  // callbacks -> loop, buffered (EventBuffer)
	kick      chan struct{}  // cap 1: overflow slots were written
	conflicts chan [2]Member // cap 16: name conflicts, logged by the loop (dropped when full)
	out       chan []Event   // loop -> consumer, unbuffered

	keyring *memberlist.Keyring // nil: gossip in the clear

	joinAttempts atomic.Int64 // memberlist.Join calls made (observability, tests)

	lifeCtx    context.Context // cancelled by Shutdown; bounds Join
	lifeCancel context.CancelFunc
	startOnce  sync.Once
	left       atomic.Bool
	closed     atomic.Bool
	shutOnce   sync.Once
	wg         sync.WaitGroup
}

type tableEntry struct {
	m       Member
	changed time.Time // when it last changed status (for reaping)
}

// New validates cfg, applies defaults, creates the memberlist (which binds its TCP and UDP
// listeners and starts probing: the node is reachable when New returns) and returns the
// Gossip. Events are buffered until Start runs the loop.
func New(cfg Config) (*Gossip, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := cfg.Meta.Validate(); err != nil {
		return nil, err
	}
	g := &Gossip{
		cfg:       cfg,
		log:       cfg.Logger.With("component", "gossip", "node", cfg.Name),
		meta:      cfg.Meta,
		metaBytes: cfg.Meta.Encode(),
		table:     make(map[string]tableEntry),
		overflow:  make(map[string]rawEvent),
		raw:       make(chan rawEvent, cfg.EventBuffer),
		kick:      make(chan struct{}, 1),
		conflicts: make(chan [2]Member, 16),
		out:       make(chan []Event),
	}
	g.lifeCtx, g.lifeCancel = context.WithCancel(context.Background())

	mc := cfg.mlConfig()
	if len(cfg.Keys) > 0 {
		kr, err := memberlist.NewKeyring(cfg.Keys[1:], cfg.Keys[0])
		if err != nil {
			g.lifeCancel()
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		mc.Keyring = kr
		mc.GossipVerifyIncoming = true
		mc.GossipVerifyOutgoing = true
		g.keyring = kr
	}
	mc.Delegate = (*delegate)(g)
	mc.Events = (*events)(g)
	mc.Conflict = (*conflicts)(g)
	mc.Logger = log.New(&logWriter{log: g.log}, "", 0)
	ml, err := memberlist.Create(mc)
	if err != nil {
		g.lifeCancel()
		return nil, fmt.Errorf("%w: create memberlist on %s: %w", ErrInvalidConfig, cfg.BindAddr, err)
	}
	g.ml = ml
	// memberlist wrote the chosen port back into mc during Create; nothing else writes it.
	g.boundAddr = net.JoinHostPort(mc.BindAddr, strconv.Itoa(mc.BindPort))
	// Safe to read now: only UpdateNode (our SetMeta, not yet possible) rewrites it.
	g.advAddr = ml.LocalNode().Address()
	return g, nil
}

// BoundAddr is the ip:port the node listens on (TCP and UDP), with the real port when
// BindAddr had port 0.
func (g *Gossip) BoundAddr() string { return g.boundAddr }

// AdvertiseAddr is the ip:port peers use to reach this node; give it to others' Join.
func (g *Gossip) AdvertiseAddr() string { return g.advAddr }

// Start runs the event loop until ctx is cancelled or Shutdown. Call it once.
func (g *Gossip) Start(ctx context.Context) error {
	if g.closed.Load() {
		return ErrShutdown
	}
	err := ErrStarted
	g.startOnce.Do(func() {
		err = nil
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.run(ctx)
		}()
	})
	return err
}

// Join contacts the given gossip addresses (ip:port) until at least one answers, retrying
// with doubling backoff (JoinBackoffMin..JoinBackoffMax) until JoinTimeout or Shutdown. It
// returns how many addresses answered in the successful attempt. Joining an address of this
// node itself counts as a contact, so a seed list that includes the local node still works.
func (g *Gossip) Join(addrs []string) (int, error) {
	ctx, cancel := context.WithTimeout(g.lifeCtx, g.cfg.JoinTimeout)
	defer cancel()
	return g.JoinContext(ctx, addrs)
}

// JoinContext is Join bounded by ctx (and Shutdown) instead of JoinTimeout.
func (g *Gossip) JoinContext(ctx context.Context, addrs []string) (int, error) {
	if len(addrs) == 0 {
		return 0, fmt.Errorf("%w: no addresses", ErrJoin)
	}
	if g.closed.Load() {
		return 0, ErrShutdown
	}
	list := strings.Join(addrs, ", ")
	backoff := g.cfg.JoinBackoffMin
	var lastErr error
	for attempt := 1; ; attempt++ {
		n, err := g.ml.Join(addrs)
		g.joinAttempts.Add(1)
		if n > 0 {
			if attempt > 1 {
				g.log.Info("joined", "contacts", n, "attempts", attempt)
			}
			return n, nil
		}
		lastErr = err
		g.log.Debug("join attempt failed", "addrs", list, "attempt", attempt, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("%w: none of [%s] answered in %d attempts (%v): %v", ErrJoin, list, attempt, ctx.Err(), lastErr)
		case <-g.lifeCtx.Done():
			t.Stop()
			return 0, fmt.Errorf("%w: none of [%s] answered: %w", ErrJoin, list, ErrShutdown)
		case <-t.C:
		}
		backoff = min(2*backoff, g.cfg.JoinBackoffMax)
	}
}

// Members returns every member this node knows, itself included, sorted by name: alive ones
// and dead or left ones not yet reaped (ReapAfter). It is a snapshot; it reflects memberlist's
// callbacks at once, ahead of the Events stream.
func (g *Gossip) Members() []Member {
	g.mu.Lock()
	out := make([]Member, 0, len(g.table))
	for _, e := range g.table {
		out = append(out, e.m)
	}
	g.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Alive returns the alive members (suspect ones included, see Status), sorted by name.
func (g *Gossip) Alive() []Member {
	all := g.Members()
	return slices.DeleteFunc(all, func(m Member) bool { return m.Status != StatusAlive })
}

// Local returns this node as a member: its advertised address, current metadata, and
// StatusLeft after Leave.
func (g *Gossip) Local() Member {
	g.metaMu.Lock()
	m := g.meta
	g.metaMu.Unlock()
	st := StatusAlive
	if g.left.Load() {
		st = StatusLeft
	}
	return Member{Name: g.cfg.Name, Addr: g.advAddr, Meta: m, Status: st}
}

// SetMeta replaces this node's metadata and announces it, waiting up to UpdateTimeout for
// memberlist to finish the broadcast (immediately when alone; with peers that is about
// RetransmitMult gossip rounds: ~60 ms in the test profile, ~1 s on the LAN profile, so
// SetMeta is for state changes, not a high-rate channel). A zero Started keeps the current
// one. Invalid or oversized metadata (ErrMetaTooLarge) is refused before memberlist sees it.
// After Leave it returns ErrLeft. On ErrUpdateTimeout the new metadata is in effect locally and still spreads by gossip.
func (g *Gossip) SetMeta(m Meta) error {
	g.setMu.Lock()
	defer g.setMu.Unlock()
	if g.closed.Load() {
		return ErrShutdown
	}
	if g.left.Load() { // an update after Leave would make the node alive again
		return ErrLeft
	}
	if m.Started.IsZero() {
		g.metaMu.Lock()
		m.Started = g.meta.Started
		g.metaMu.Unlock()
	}
	if err := m.Validate(); err != nil {
		return err
	}
	b := m.Encode()
	g.metaMu.Lock()
	g.meta, g.metaBytes = m, b
	g.metaMu.Unlock()
	if err := g.ml.UpdateNode(g.cfg.UpdateTimeout); err != nil {
		return fmt.Errorf("%w after %v: %v", ErrUpdateTimeout, g.cfg.UpdateTimeout, err)
	}
	return nil
}

// Events returns the stream of coalesced event batches. One loop delivers them; it never
// blocks memberlist. While the consumer is not receiving, changes keep merging per member
// (latest state wins, see coalescer for how kinds combine), so a slow consumer gets fewer,
// larger batches and never stale ones; nothing is dropped. Batches include events about the
// local node (its own join at New, its SetMeta updates). The channel is closed when the loop
// stops (Start's ctx cancelled, or Shutdown). Use one consumer.
func (g *Gossip) Events() <-chan []Event { return g.out }

// Leave announces a graceful departure and waits up to timeout for it to reach a peer.
// Peers see EventLeave. The node keeps answering gossip until Shutdown. Safe to call more
// than once.
//
// memberlist tells its event delegate nothing about why a node went away (Node.State is not
// filled in for callbacks), so Leave first announces StateLeft in the metadata (half of the
// timeout at most) and then sends memberlist's leave message: peers classify a departure
// whose last metadata says StateLeft as a leave, any other as a failure. A peer that misses
// the metadata update reports a failure instead, which is the safe direction.
func (g *Gossip) Leave(timeout time.Duration) error {
	g.setMu.Lock() // excludes SetMeta and Shutdown (memberlist panics on Leave after Shutdown)
	defer g.setMu.Unlock()
	if g.closed.Load() {
		return ErrShutdown
	}
	if !g.left.Swap(true) {
		g.metaMu.Lock()
		m := g.meta
		m.State = StateLeft
		g.meta, g.metaBytes = m, m.Encode() // "left" is the shortest state: still within the limit
		g.metaMu.Unlock()
		if err := g.ml.UpdateNode(timeout / 2); err != nil {
			g.log.Warn("leave: metadata update not confirmed", "err", err)
		}
	}
	if err := g.ml.Leave(timeout / 2); err != nil {
		return fmt.Errorf("%w after %v: %v", ErrLeave, timeout, err)
	}
	return nil
}

// Shutdown stops memberlist (without Leave: peers detect a failure) and the event loop, and
// waits for the loop, or for ctx. memberlist's own goroutines end on their own within a few
// milliseconds of its Shutdown (they select on its shutdown channel; it offers no wait).
// Safe to call more than once.
func (g *Gossip) Shutdown(ctx context.Context) error {
	var err error
	g.shutOnce.Do(func() {
		g.setMu.Lock()
		g.closed.Store(true)
		g.setMu.Unlock()
		if e := g.ml.Shutdown(); e != nil {
			err = fmt.Errorf("gossip: memberlist shutdown: %w", e)
		}
		g.lifeCancel()
		launched := true
		g.startOnce.Do(func() { launched = false }) // from now on Start cannot launch the loop
		if !launched {
			close(g.out)
		}
	})
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("gossip: shutdown: %w", ctx.Err())
	}
	return err
}

// record is the body of every memberlist callback: copy, number, store, hand off. It never
// blocks: when the channel is full the event goes to the member's overflow slot.
func (g *Gossip) record(n *memberlist.Node, st Status) {
	m := Member{Name: n.Name, Addr: n.Address(), Status: st}
	meta, metaErr := DecodeMeta(n.Meta) // copies; n.Meta is not retained
	if metaErr == nil {
		m.Meta = meta
	}
	now := g.cfg.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	ev := rawEvent{seq: g.seq, member: m, metaErr: metaErr}
	prev, ok := g.table[m.Name]
	changed := now
	if ok && prev.m.Status == st {
		changed = prev.changed
	}
	g.table[m.Name] = tableEntry{m: m, changed: changed}
	select {
	case g.raw <- ev:
	default:
		g.overflow[m.Name] = ev
		select {
		case g.kick <- struct{}{}:
		default:
		}
	}
}

// run is the event loop: it folds raw events into the coalescer, waits CoalesceWindow after
// the first change of a burst, then offers the batch until the consumer takes it, merging
// whatever arrives meanwhile.
func (g *Gossip) run(ctx context.Context) {
	defer close(g.out)
	c := newCoalescer()
	window := time.NewTimer(time.Hour)
	window.Stop()
	windowOpen, ready := false, false
	var batch []Event
	dirty := false
	reapEvery := max(g.cfg.ReapAfter/4, 10*time.Millisecond)
	reap := time.NewTicker(reapEvery)
	defer reap.Stop()
	defer window.Stop()

	added := func() {
		dirty = true
		if !ready && !windowOpen {
			windowOpen = true
			window.Reset(g.cfg.CoalesceWindow)
		}
	}
	for {
		var out chan<- []Event
		if ready && c.len() > 0 {
			if dirty {
				batch, dirty = c.batch(), false
			}
			if len(batch) == 0 { // net effect nothing (join+fail of an unknown member)
				c.commit()
				ready = false
			} else {
				out = g.out
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-g.lifeCtx.Done():
			return
		case ev := <-g.raw:
			g.logMetaErr(ev)
			if c.add(ev) {
				added()
			}
		case <-g.kick:
			g.mu.Lock()
			slots := g.overflow
			g.overflow = make(map[string]rawEvent)
			g.mu.Unlock()
			for _, ev := range slots {
				g.logMetaErr(ev)
				if c.add(ev) {
					added()
				}
			}
		case <-window.C:
			windowOpen, ready = false, true
		case out <- batch:
			c.commit()
			batch, ready = nil, false
		case cf := <-g.conflicts:
			g.log.Error("name conflict: another node uses this name", "peer", cf[0].Name,
				"known_addr", cf[0].Addr, "other_addr", cf[1].Addr)
		case <-reap.C:
			for _, name := range g.reap(g.cfg.Now()) {
				c.forget(name)
			}
		}
	}
}

func (g *Gossip) logMetaErr(ev rawEvent) {
	if ev.metaErr != nil {
		g.log.Warn("undecodable peer metadata", "peer", ev.member.Name, "err", ev.metaErr)
	}
}

// reap forgets dead and left members whose status is older than ReapAfter.
func (g *Gossip) reap(now time.Time) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var gone []string
	for name, e := range g.table {
		if e.m.Status != StatusAlive && name != g.cfg.Name && now.Sub(e.changed) > g.cfg.ReapAfter {
			delete(g.table, name)
			gone = append(gone, name)
		}
	}
	return gone
}

// delegate serves memberlist's Delegate: only NodeMeta matters.
type delegate Gossip

func (d *delegate) NodeMeta(limit int) []byte {
	g := (*Gossip)(d)
	g.metaMu.Lock()
	b := g.metaBytes
	g.metaMu.Unlock()
	if len(b) > limit { // cannot happen (checked on set); never let memberlist panic
		return nil
	}
	return b
}
func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

// events serves memberlist's EventDelegate.
type events Gossip

func (e *events) NotifyJoin(n *memberlist.Node)   { (*Gossip)(e).record(n, StatusAlive) }
func (e *events) NotifyUpdate(n *memberlist.Node) { (*Gossip)(e).record(n, StatusAlive) }
func (e *events) NotifyLeave(n *memberlist.Node) {
	// n.State is never filled in by memberlist (nodeState shadows it); see Leave.
	st := StatusDead
	if m, err := DecodeMeta(n.Meta); err == nil && m.State == StateLeft {
		st = StatusLeft
	}
	(*Gossip)(e).record(n, st)
}

// conflicts serves memberlist's ConflictDelegate: copy and hand to the loop to log.
type conflicts Gossip

func (c *conflicts) NotifyConflict(existing, other *memberlist.Node) {
	g := (*Gossip)(c)
	cf := [2]Member{{Name: existing.Name, Addr: existing.Address()}, {Name: other.Name, Addr: other.Address()}}
	select {
	case g.conflicts <- cf:
	default: // 16 unlogged conflicts already queued: this one adds nothing
	}
}

// logWriter turns memberlist's "[LEVEL] memberlist: msg" lines into slog records.
type logWriter struct{ log *slog.Logger }

func (w *logWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	level := slog.LevelInfo
	for _, l := range []struct {
		tag string
		lv  slog.Level
	}{{"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo}, {"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelError}, {"[ERROR]", slog.LevelError}} {
		if rest, ok := strings.CutPrefix(line, l.tag); ok {
			level, line = l.lv, strings.TrimSpace(rest)
			break
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	if w.log.Enabled(context.Background(), level) {
		w.log.Log(context.Background(), level, line, "source", "memberlist")
	}
	return len(p), nil
}
