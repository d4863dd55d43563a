package replica

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/klauspost/compress/zstd"

	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/gossip"
	"github.com/crawlnode/crawlnode/internal/keyspace"
	"github.com/crawlnode/crawlnode/ring"
)

// Path is the internal route a backup receives a round's stream on (Replicator.Receive).
const Path = "/internal/v1/replica"

// Keys: every copied key is keyspace.Replica | slot(2) | the frontier (or outbox) key;
// the meta record of a copy is keyspace.Replica | slot(2) | 0x00 (frontier keys start
// with a letter).

const streamMagic = "CNREPL1\n"

// copyMeta is what a backup remembers of one partition's copy.
type copyMeta struct {
	Source  string    `json:"source"`
	Version uint64    `json:"version"` // the source's Badger version the copy is complete up to; 0: incomplete
	At      time.Time `json:"at"`      // when the last delta was applied
}

// outboxSlot is the pseudo-partition number a node's outbox travels under. A backup can
// hold the outboxes of several sources at once (the next member after one that is down
// backs up both its predecessors' outboxes; a source whose backup moved leaves its old
// copy behind until it is stale), so it keeps each source's copy in a slot of its own,
// from outboxSlot up to outboxSlot+maxOutboxCopies-1 (outboxSlotFor):
// one slot for all of them would let each source's full copy replace the other's, and a
// node lost while its outbox's copy was the other one's would lose its unsent links.
const outboxSlot = ring.PartitionCount

// maxOutboxCopies bounds the outbox copies a node keeps (one per source; a source's copy
// goes once the source is gone and its links are queued here, or once it stopped sending
// for replicaStaleAfter).
const maxOutboxCopies = 256

// isOutboxSlot tells a local outbox-copy slot from a partition's.
func isOutboxSlot(p uint16) bool { return p >= outboxSlot && p < outboxSlot+maxOutboxCopies }

func replicaPrefix(p uint16) []byte { return []byte{keyspace.Replica, byte(p >> 8), byte(p)} }

func replicaMetaKey(p uint16) []byte {
	return []byte{keyspace.Replica, byte(p >> 8), byte(p), 0}
}

func replicaKey(p uint16, key []byte) []byte {
	return append(replicaPrefix(p), key...)
}

// replOut is the sender's state of one partition's replication.
type replOut struct {
	backup  string
	version uint64    // acknowledged by backup
	readAt  time.Time // when the acknowledged version was read: the copy is this old
	addedAt time.Time // the copy has every addition (frontier.Completes false) read up to then
}

// Replicator is a node's replication: sending its partitions and keeping copies of others'.
type Replicator struct {
	cluster  Cluster
	log      *slog.Logger
	shipped  Shipped
	now      func() time.Time
	front    *frontier.Frontier
	outbox   Outbox
	interval time.Duration
	self     string
	db       *badger.DB
	// export is frontier.ExportPartitionSince, or exportOutbox for outboxSlot.
	export func(p uint16, since uint64, fn func(family byte, key, value []byte, deleted bool) error) (uint64, error)
	// exportMany is frontier.View.ExportPartitionsSince from the round's snapshot (nil: every
	// partition goes through export).
	exportMany func(parts []uint16, since uint64, fn func(p uint16, family byte, key, value []byte, deleted bool) error) (uint64, error)

	mu    sync.Mutex
	parts map[uint16]*replOut // held partitions, and outboxSlot
	// copies maps each partition copied here to its source (what fence reads), metas to
	// its meta (what apply checks a delta against): loaded from Badger at the first use,
	// then kept in step by apply and clear.
	copies     map[uint16]string
	metas      map[uint16]copyMeta
	copiesInit bool
	// outboxes maps each source whose outbox is copied here to its slot (isOutboxSlot);
	// a slot is reserved here before its first copy's meta is written, so two sources'
	// first copies never take the same one.
	outboxes       map[string]uint16
	lastStaleCheck time.Time // promote's last pass over every copy's meta

	encoder *zstd.Encoder // send's, reused (sends are sequential)

	// snap is the read snapshot a round's exports read, every partition and the outbox
	// of every backup's request alike, and snapAt when it was taken. Set by round for all
	// its sends (or by encode for itself when called alone); only the goroutine running
	// the round's current encode reads it.
	snap   *frontier.View
	snapAt time.Time
	// scan is what the round read ahead for every backup's request and both phases
	// (prefetch); nil outside a round or when there was nothing to share.
	scan *roundScan
	// changes is the log of the keys committed since the copies' versions (nil: every
	// round takes the full pass).
	changes *changeLog
	// stillHeld reports whether p (a partition, or the outbox) is still this node's to
	// copy: its lease is held here, whether or not a handoff holds it for the moment
	// (nil: nothing left out of a round is kept).
	stillHeld func(p uint16) bool

	// kick asks run for a round now (WaitCopied: an acknowledgement waits for it);
	// roundDone is closed, and replaced, when a round ends (under mu).
	kick      chan struct{}
	roundDone chan struct{}

	// Metrics.
	bytesSent, records, rounds, resets, promoted, dropped, failures atomic.Int64
	refetched                                                       atomic.Int64 // fetched URLs queued again by promotions (captures lost)
	keyed                                                           atomic.Int64 // partition exports read from the change log's keys
	cutMisses                                                       atomic.Int64 // rounds whose snapshot the change log did not reach in time (full pass)
	logMisses                                                       atomic.Int64 // partition exports whose copy stood below the log's coverage (full pass)
	fullCopies, fullRecords                                         atomic.Int64 // sections sent whole (no copy yet, a new backup, a reset), and their records
	unscanned                                                       atomic.Int64 // delta sections exported on their own (not read ahead by the round)
	skipped                                                         atomic.Int64 // held partitions a round left out (no contact, backup away), copy kept
	logValues, logReads                                             atomic.Int64 // of their keys: values the log held, keys read from the snapshot
	ackUncopied                                                     atomic.Int64 // forwarded links acknowledged before a copy held them (WaitCopied gave up)
	lagNanos                                                        atomic.Int64 // the oldest held copy's age at the last round
	lagMax                                                          atomic.Int64 // the largest lagNanos seen
}

// Outbox is where a lost node's copied outbox goes: this node's own outbox
// (forward.Outbox), whose sender delivers the links to their owners.
type Outbox interface {
	Add(links []forward.Link) error
}

// Cluster is what replication needs from membership and leases. Its methods are called
// from the replicator's goroutines and must not block on the replicator.
type Cluster interface {
	// InContact reports whether this node is in contact with the Raft leader: without
	// it the lease table may be stale, and no round goes out and nothing is promoted.
	InContact() bool
	// Ring is the ring over the members that hold partitions now.
	Ring() *ring.Ring
	// RingOf is the ring over names, with every node's ring shape.
	RingOf(names []string) *ring.Ring
	// OwnerOf is the lease holder of p as this node last heard it ("" while no lease
	// table is known).
	OwnerOf(p uint16) (owner string, epoch uint64)
	// HoldsLocal reports whether this node holds p's lease and no handoff or import
	// holds p for the moment.
	HoldsLocal(p uint16) bool
	// Alive is gossip's alive members by name; Members is every member gossip knows,
	// with its status.
	Alive() map[string]gossip.Member
	Members() []gossip.Member
	// Registered reports whether name is in the lease table's members (true while no
	// table is known: nothing is concluded from its absence).
	Registered(name string) bool
	// InternalURL is peer's base URL for node-to-node requests.
	InternalURL(peer string) (string, bool)
	// Do sends a node-to-node request, authorized.
	Do(req *http.Request) (*http.Response, error)
	// Hold holds partition p for an import (no fetching, its links wait in the outbox)
	// once its fetches in flight are back, waiting at most wait; Release ends the hold.
	Hold(ctx context.Context, p uint16, wait time.Duration) error
	Release(p uint16)
}

// Config is a replicator's configuration.
type Config struct {
	// Interval is the time between rounds (ClusterConfig.ReplicaInterval; 1 s by
	// default). Zero or negative: replication is off (Run returns at once, WaitCopied
	// does not wait).
	Interval time.Duration
	// Self is this node's name, as the ring and the lease table know it.
	Self string
	// DB is the node's Badger DB: the frontier's keys, the outbox's and the copies'.
	DB *badger.DB
	// Frontier is this node's frontier (in DB): what is copied, and where a promoted
	// copy is imported.
	Frontier *frontier.Frontier
	// Outbox takes the links of a lost node's copied outbox.
	Outbox Outbox
	// Logger is where the replicator logs, as given (the node passes its cluster's;
	// nil: nothing is logged).
	Logger *slog.Logger
	// Now is the clock the copies' ages are read from (nil: time.Now).
	Now func() time.Time
	// Shipped, with an output store, says what a lost node's WARC files hold in the
	// store, so that a promotion queues again the pages whose captures never reached it
	// (refetch.go). Nil: no output store; nothing fetched is refetched.
	Shipped Shipped
}

// New builds a replicator; Run starts it.
func New(cfg Config, c Cluster) *Replicator {
	r := newReplicator(cfg)
	r.cluster = c
	r.export = r.exportView
	r.stillHeld = func(p uint16) bool {
		if isOutboxSlot(p) {
			return true
		}
		owner, _ := c.OwnerOf(p)
		return owner == r.self
	}
	r.exportMany = func(parts []uint16, since uint64, fn func(uint16, byte, []byte, []byte, bool) error) (uint64, error) {
		return r.snap.ExportPartitionsSince(parts, since, fn)
	}
	r.changes = newChangeLog(r.db)
	return r
}

// newReplicator is the part of New that needs no cluster: what a backup's apply and
// the tests' rounds run on.
func newReplicator(cfg Config) *Replicator {
	r := &Replicator{interval: cfg.Interval, self: cfg.Self, db: cfg.DB, front: cfg.Frontier, outbox: cfg.Outbox,
		log: cfg.Logger, now: cfg.Now, shipped: cfg.Shipped, parts: map[uint16]*replOut{},
		kick: make(chan struct{}, 1), roundDone: make(chan struct{})}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r
}

// since is the time elapsed since t on the replicator's clock.
func (r *Replicator) since(t time.Time) time.Duration { return r.now().Sub(t) }

// exportView is the export of a node's partitions and of its outbox, from the round's
// snapshot (r.snap).
func (r *Replicator) exportView(p uint16, since uint64, fn func(byte, []byte, []byte, bool) error) (uint64, error) {
	if p == outboxSlot {
		return r.exportOutbox(since, fn)
	}
	return r.snap.ExportPartitionSince(p, since, fn)
}

// Run sends a round every interval and checks the copies held here for promotion.
func (r *Replicator) Run(ctx context.Context) {
	if r.interval <= 0 {
		return
	}
	// Copies are checked for promotion more often than rounds go out (the partition waits
	// unfetched until its copy is in), and on a goroutine of their own: a round can wait
	// seconds on a backup that just died, which must not hold up its partitions' promotion.
	done := make(chan struct{})
	go func() {
		defer close(done)
		check := time.NewTicker(min(r.interval, 200*time.Millisecond))
		defer check.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-check.C:
				r.promote(ctx)
			}
		}
	}()
	defer func() { <-done }()
	if r.changes != nil {
		fed := make(chan struct{})
		r.changes.start()
		go func() {
			defer close(fed)
			r.changes.run(ctx)
		}()
		defer func() { <-fed }()
	}
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	gap := r.minGap()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-r.kick:
		}
		r.round(ctx)
		// Kicked rounds come at most every gap: waiting acknowledgements share them.
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
	}
}

// minGap is the least time between the end of a round and the start of the next.
func (r *Replicator) minGap() time.Duration {
	return max(r.interval/2, 20*time.Millisecond)
}

// endRound wakes WaitCopied's waiters after a round.
func (r *Replicator) endRound() {
	r.mu.Lock()
	close(r.roundDone)
	r.roundDone = make(chan struct{})
	r.mu.Unlock()
}

// WaitCopied waits until the backups of parts acknowledged the additions of a round read
// after committed, asking for a round at once (run spaces them by minGap). It is what a node does before it
// acknowledges links a peer forwarded (their sender then deletes them): if this node were
// lost right after the acknowledgement, a copy from before the links were committed would
// be promoted and the links would exist nowhere. Partitions without a backup (no other
// live member, replicas off) are not waited for. It gives up after ackCopyWait (a backup
// that is down or far behind must not stop the links from coming in), counts it
// (Counters.AckUncopied) and reports false; it reports false too when ctx ends.
func (r *Replicator) WaitCopied(ctx context.Context, parts []uint16, committed time.Time) bool {
	if r.interval <= 0 {
		return true
	}
	timeout := time.NewTimer(ackCopyWait(r.interval))
	defer timeout.Stop()
	for {
		r.mu.Lock()
		ok := true
		for _, p := range parts {
			if st := r.parts[p]; st != nil && !st.addedAt.After(committed) {
				ok = false
				break
			}
		}
		done := r.roundDone
		r.mu.Unlock()
		if ok {
			return true
		}
		select {
		case r.kick <- struct{}{}:
		default:
		}
		select {
		case <-done:
		case <-ctx.Done():
			return false
		case <-timeout.C:
			if ctx.Err() == nil {
				r.ackUncopied.Add(1)
			}
			return false
		}
	}
}

// ackCopyWait bounds WaitCopied: a few rounds, within the forward sender's timeout (10 s).
func ackCopyWait(interval time.Duration) time.Duration {
	return min(max(4*interval, 2*time.Second), 5*time.Second)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// replicaSendTimeout bounds one round's request to one backup.
const replicaSendTimeout = 10 * time.Second

// replicaStaleAfter: a copy whose source still holds the partition but has sent nothing
// for this long went to another backup; it is dropped.
const replicaStaleAfter = 10 * time.Minute
