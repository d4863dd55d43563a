package forward

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/dgraph-io/badger/v4"

	"github.com/crawlnode/crawlnode/internal/keyspace"
	"github.com/crawlnode/crawlnode/ring"
)

const (
	famOutbox    = keyspace.ForwardOutbox
	keyLen       = 1 + 2 + 8
	entryVersion = 2 // 2 added the cash column; entries of version 1 still decode
	// maxBatchesPerDrain bounds how many batches one drain sends to a peer before it hands
	// the turn back to the loop (so that a steady stream of Adds cannot keep it forever).
	maxBatchesPerDrain = 16
)

// Outbox is the durable per-partition queue of links for hosts other nodes own, and the
// sender that ships them. Add may be called before Start and after Shutdown; it is safe for
// concurrent use.
type Outbox struct {
	cfg Config
	db  *badger.DB
	log *slog.Logger

	mu     sync.Mutex
	queued [ring.PartitionCount]int // links stored per partition (and reserved by Adds in progress)
	// head is, per partition, a sequence number no live entry of it is below: one past
	// the last entry deleted after a send. A drain seeks there instead of to the
	// partition's first key: entries go out and are deleted in order, so everything
	// before it is tombstones, which Badger's iterator steps over one by one until
	// compaction drops them (a drain's Seek was 85% of reading a batch, 2.7% of a
	// clustered node's CPU). 0 after New: the first drain steps over them once. A head
	// never passes the first sequence number of an Add that was still writing when the
	// drain read its batch (builtBatch.limit): Add takes its numbers under mu and writes
	// after, so a later Add's entries may be read, sent and deleted before an earlier
	// one's land.
	head     [ring.PartitionCount]uint64
	adding   map[uint64]struct{} // first sequence number of each Add writing its entries
	total    int
	seq      uint64 // last sequence number used
	recent   *recentCache
	claimed  [ring.PartitionCount]bool // partition taken by a drain in flight
	busy     map[string]int            // peer -> drains in flight (at most PeerConcurrency)
	peers    map[string]*peerState     // per-peer backoff
	tickets  uint64                    // sends started (numbers each send; see peerState)
	holds    map[uint16]hold           // refused partitions waiting
	counters counters
	started  bool

	kick   chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// peerState is a peer's backoff after failed sends. It exists from a failure to the next
// success of a send that started after it.
type peerState struct {
	failures int
	until    time.Time
	// failTicket is the last send number issued when the last failure was counted: sends
	// numbered up to it were already in flight then, so their failures are the same
	// outage (no further backoff step) and their successes do not end the backoff.
	failTicket uint64
}

// hold keeps a partition that peer refused at epoch from being sent to that same owner and
// epoch again before until.
type hold struct {
	peer     string
	epoch    uint64
	refusals int
	until    time.Time
}

type counters struct {
	sentBatches, sentLinks, sentBytes int64
	localLinks                        int64
	failures, refused                 int64
	recentHits, invalid, full         int64
	corrupt                           int64
	headResets                        int64
}

// New builds an Outbox over cfg.DB and counts the links already stored there (a restart
// resumes where the last run stopped). It does not start sending: call Start.
func New(cfg Config) (*Outbox, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := &Outbox{
		cfg:    cfg,
		db:     cfg.DB,
		log:    cfg.Logger.With("component", "forward"),
		recent: newRecentCache(cfg.RecentCache),
		busy:   make(map[string]int),
		peers:  make(map[string]*peerState),
		holds:  make(map[uint16]hold),
		adding: make(map[uint64]struct{}),
		kick:   make(chan struct{}, 1),
	}
	if err := o.load(); err != nil {
		return nil, err
	}
	return o, nil
}

// load counts the stored links per partition and finds the last sequence number.
func (o *Outbox) load() error {
	return o.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{famOutbox}, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Seek([]byte{famOutbox}); it.ValidForPrefix([]byte{famOutbox}); it.Next() {
			item := it.Item()
			part, seq, ok := parseKey(item.Key())
			if !ok {
				o.log.Warn("ignoring malformed outbox key", "key", fmt.Sprintf("%x", item.Key()))
				continue
			}
			o.seq = max(o.seq, seq)
			var n int
			if err := item.Value(func(v []byte) error {
				n, ok = entryCount(v)
				return nil
			}); err != nil {
				return fmt.Errorf("forward: load outbox: %w", err)
			}
			if !ok {
				o.log.Warn("corrupt outbox entry; it will be dropped when sent", "partition", part)
				continue
			}
			o.queued[part] += n
			o.total += n
		}
		return nil
	})
}

func outboxKey(part uint16, seq uint64) []byte {
	k := make([]byte, keyLen)
	k[0] = famOutbox
	binary.BigEndian.PutUint16(k[1:], part)
	binary.BigEndian.PutUint64(k[3:], seq)
	return k
}

func partitionPrefix(part uint16) []byte {
	return []byte{famOutbox, byte(part >> 8), byte(part)}
}

func parseKey(k []byte) (part uint16, seq uint64, ok bool) {
	if len(k) != keyLen || k[0] != famOutbox {
		return 0, 0, false
	}
	part = binary.BigEndian.Uint16(k[1:])
	if part >= ring.PartitionCount {
		return 0, 0, false
	}
	return part, binary.BigEndian.Uint64(k[3:]), true
}

// encodeEntry encodes a stored entry: a version byte and a link section (see Encode),
// uncompressed (Badger's own block compression applies).
func encodeEntry(links []Link) []byte {
	return appendLinks([]byte{entryVersion}, links, true)
}

// entryCount reads an entry's link count without decoding it.
func entryCount(v []byte) (int, bool) {
	if len(v) < 2 || (v[0] != entryVersion && v[0] != 1) {
		return 0, false
	}
	n, k := binary.Uvarint(v[1:])
	if k <= 0 || n > MaxBatchLinks {
		return 0, false
	}
	return int(n), true
}

// KeyPrefix is the first byte of every outbox key in the node's Badger: a node copies its
// outbox's keys to a backup (package replica), which sends them on if the node is lost.
// The copy relies on how the Outbox writes them: a key is set once, with a sequence
// number no other key of this Outbox had, to a value that is never empty, and is never
// set again, only deleted (once sent).
const KeyPrefix = famOutbox

// EntryLinks decodes a stored outbox entry (the value of a KeyPrefix key).
func EntryLinks(v []byte) ([]Link, error) { return decodeEntry(v) }

func decodeEntry(v []byte) ([]Link, error) {
	if len(v) < 2 || (v[0] != entryVersion && v[0] != 1) {
		return nil, fmt.Errorf("%w: outbox entry header", ErrCorrupt)
	}
	r := reader{b: v[1:]}
	links := r.links(&linkBudget{links: MaxBatchLinks, urlBytes: MaxBatchURLBytes}, v[0] >= 2)
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes in outbox entry")
	}
	return links, r.err
}

type pending struct {
	part   uint16
	hashes []uint64
	links  []Link
}

// Add queues links durably: when it returns nil, the links are in Badger (one WriteBatch,
// as durable as the DB's SyncWrites setting makes it). Links with an empty or over-long URL
// or without a host are skipped (Stats.Invalid); URLs queued recently or repeated within
// the call are skipped (Stats.RecentHits). When the links left would take the outbox past
// MaxQueued, nothing is queued and Add returns ErrFull: the caller slows down and retries.
func (o *Outbox) Add(links []Link) error {
	if len(links) == 0 {
		return nil
	}
	byPart := make(map[uint16]*pending)
	var order []uint16
	invalid := 0
	for _, l := range links {
		if checkLink(l) != nil {
			invalid++
			continue
		}
		p, ok := PartitionOfURL(l.URL)
		if !ok {
			invalid++
			continue
		}
		pd := byPart[p]
		if pd == nil {
			pd = &pending{part: p}
			byPart[p] = pd
			order = append(order, p)
		}
		pd.links = append(pd.links, l)
		pd.hashes = append(pd.hashes, xxhash.Sum64String(l.URL))
	}

	// Reserve: filter repeats, check the limit, take sequence numbers, all under the lock
	// so that two concurrent Adds of one URL queue it once.
	o.mu.Lock()
	o.counters.invalid += int64(invalid)
	hits, n := 0, 0
	inCall := make(map[uint64]struct{}, len(links))
	for _, p := range order {
		pd := byPart[p]
		keep := 0
		for i, h := range pd.hashes {
			_, dup := inCall[h]
			if dup || o.recent.has(h) {
				hits++
				continue
			}
			inCall[h] = struct{}{}
			pd.links[keep], pd.hashes[keep] = pd.links[i], h
			keep++
		}
		pd.links, pd.hashes = pd.links[:keep], pd.hashes[:keep]
		n += keep
	}
	o.counters.recentHits += int64(hits)
	if n == 0 {
		o.mu.Unlock()
		return nil
	}
	if o.total+n > o.cfg.MaxQueued {
		o.counters.full++
		o.mu.Unlock()
		return fmt.Errorf("%w: %d queued + %d new > %d", ErrFull, o.total, n, o.cfg.MaxQueued)
	}
	type entry struct {
		key   []byte
		links []Link
	}
	var entries []entry
	first := o.seq + 1
	o.adding[first] = struct{}{}
	for _, p := range order {
		pd := byPart[p]
		for _, chunk := range o.chunks(pd.links) {
			o.seq++
			entries = append(entries, entry{outboxKey(p, o.seq), chunk})
		}
		o.queued[p] += len(pd.links)
		for _, h := range pd.hashes {
			o.recent.add(h)
		}
	}
	o.total += n
	o.mu.Unlock()

	wb := o.db.NewWriteBatch()
	defer wb.Cancel()
	var err error
	for _, e := range entries {
		if err = wb.Set(e.key, encodeEntry(e.links)); err != nil {
			break
		}
	}
	if err == nil {
		err = wb.Flush()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.adding, first)
	if err != nil {
		// Undo the reservation. Entries of a failed WriteBatch may be partly written;
		// those are counted again at the next New and sent (duplicates are harmless).
		for _, p := range order {
			pd := byPart[p]
			o.queued[p] -= len(pd.links)
			for _, h := range pd.hashes {
				o.recent.remove(h)
			}
		}
		o.total -= n
		return fmt.Errorf("forward: write outbox: %w", err)
	}
	for _, p := range order {
		if o.queued[p] >= o.cfg.BatchLinks {
			select {
			case o.kick <- struct{}{}:
			default:
			}
			break
		}
	}
	return nil
}

// chunks splits the links of one partition into entries of at most BatchLinks links and
// BatchURLBytes URL bytes, so that any entry fits in one batch.
func (o *Outbox) chunks(links []Link) [][]Link {
	var out [][]Link
	start, bytes := 0, 0
	for i, l := range links {
		if i > start && (i-start >= o.cfg.BatchLinks || bytes+len(l.URL) > o.cfg.BatchURLBytes) {
			out = append(out, links[start:i])
			start, bytes = i, 0
		}
		bytes += len(l.URL)
	}
	return append(out, links[start:])
}

// Queued returns the number of links in the outbox.
func (o *Outbox) Queued() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total
}

// Start runs the sender until ctx ends or Shutdown is called.
func (o *Outbox) Start(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.started {
		return fmt.Errorf("%w: already started", ErrConfig)
	}
	o.started = true
	ctx, o.cancel = context.WithCancel(ctx)
	o.wg.Add(1)
	go o.loop(ctx)
	return nil
}

// Shutdown stops the sender and waits for sends in flight to end (they are canceled; their
// links stay queued), or for ctx.
func (o *Outbox) Shutdown(ctx context.Context) error {
	o.mu.Lock()
	cancel := o.cancel
	o.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	done := make(chan struct{})
	go func() { o.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (o *Outbox) loop(ctx context.Context) {
	defer o.wg.Done()
	t := time.NewTicker(o.cfg.SendInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-o.kick:
		}
		o.round(ctx)
	}
}

// target is a partition with the epoch its owner was resolved at.
type target struct {
	part  uint16
	epoch uint64
}

// round resolves the owner of every partition with queued links and starts drains for
// the owners that are not backing off, up to PeerConcurrency drains per peer (one for
// Self, and one, sending one batch, for a peer whose last send failed). A peer's unclaimed
// partitions are spread over as many new drains as free slots and queued links call for
// (one batch of BatchLinks each); a peer that already has drains running gets more when
// it has free slots and unclaimed partitions holding at least a quarter of a batch. Every
// partition is claimed by one drain at a time, so its entries still go out in order.
func (o *Outbox) round(ctx context.Context) {
	o.mu.Lock()
	var parts []uint16
	for p := range o.queued {
		if o.queued[p] > 0 && !o.claimed[p] {
			parts = append(parts, uint16(p))
		}
	}
	o.mu.Unlock()
	if len(parts) == 0 {
		return
	}
	groups := make(map[string][]target)
	for _, p := range parts {
		peer, epoch, ok := o.cfg.OwnerOf(p)
		if !ok || peer == "" {
			continue
		}
		groups[peer] = append(groups[peer], target{p, epoch})
	}
	now := o.cfg.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, peer := range slices.Sorted(maps.Keys(groups)) {
		limit, probe := o.cfg.PeerConcurrency, false
		if peer == o.cfg.Self {
			limit = 1 // Local is this node's own frontier: nothing to wait for, nothing to overlap
		}
		if st := o.peers[peer]; st != nil {
			if now.Before(st.until) {
				continue
			}
			limit, probe = 1, true
		}
		free := limit - o.busy[peer]
		if free <= 0 {
			continue
		}
		var ts []target
		links := 0
		for _, t := range groups[peer] {
			if h, ok := o.holds[t.part]; ok {
				if h.peer == peer && h.epoch == t.epoch && now.Before(h.until) {
					continue
				}
				if h.peer != peer || h.epoch != t.epoch {
					delete(o.holds, t.part) // the owner changed: try the new one at once
				}
			}
			if o.claimed[t.part] {
				continue
			}
			ts = append(ts, t)
			links += o.queued[t.part]
		}
		if len(ts) == 0 {
			continue
		}
		if o.busy[peer] > 0 && links < o.cfg.BatchLinks/4 {
			// A drain is running: a few links more would go out in a small batch (more
			// bytes a link); they wait for a quarter batch or the running drain's end.
			continue
		}
		for _, g := range o.split(ts, min(free, len(ts), (links+o.cfg.BatchLinks-1)/o.cfg.BatchLinks)) {
			for _, t := range g {
				o.claimed[t.part] = true
			}
			o.busy[peer]++
			o.wg.Add(1)
			go o.drain(ctx, peer, g, probe)
		}
	}
}

// split deals ts over n drains (n >= 1) so that their queued links are about even:
// partitions with the most queued links first, each to the drain with the fewest links so
// far. Each drain's partitions are in partition order. Called with mu held.
func (o *Outbox) split(ts []target, n int) [][]target {
	if n <= 1 {
		return [][]target{ts}
	}
	slices.SortStableFunc(ts, func(a, b target) int { return o.queued[b.part] - o.queued[a.part] })
	out := make([][]target, n)
	load := make([]int, n)
	for _, t := range ts {
		i := 0
		for j := 1; j < n; j++ {
			if load[j] < load[i] {
				i = j
			}
		}
		out[i] = append(out[i], t)
		load[i] += o.queued[t.part]
	}
	for _, g := range out {
		slices.SortFunc(g, func(a, b target) int { return int(a.part) - int(b.part) })
	}
	return out
}

// drain sends batches of the claimed partitions ts to peer (or to Local when peer is
// Self) until they are empty, a send fails, a send of another drain of the peer failed, or
// maxBatchesPerDrain batches went out. A probe (started while the peer has a failed send
// not yet followed by a success) sends one batch only: its success lets the next round
// spread the peer's partitions again, its failure backs the peer off further.
func (o *Outbox) drain(ctx context.Context, peer string, ts []target, probe bool) {
	defer o.wg.Done()
	defer func() {
		o.mu.Lock()
		for _, t := range ts {
			o.claimed[t.part] = false
		}
		if o.busy[peer]--; o.busy[peer] <= 0 {
			delete(o.busy, peer)
		}
		o.mu.Unlock()
	}()
	batches := maxBatchesPerDrain
	if probe {
		batches = 1
	}
	for range batches {
		if ctx.Err() != nil || len(ts) == 0 {
			return
		}
		// Re-resolve at send time: partitions that moved go back to the loop.
		keep := ts[:0]
		for _, t := range ts {
			owner, epoch, ok := o.cfg.OwnerOf(t.part)
			if ok && owner == peer {
				t.epoch = epoch
				keep = append(keep, t)
				continue
			}
			o.mu.Lock()
			o.claimed[t.part] = false
			o.mu.Unlock()
		}
		ts = keep
		if len(ts) == 0 {
			return
		}
		bb, err := o.buildBatch(ts)
		if err != nil {
			o.log.Error("read outbox", "peer", peer, "err", err)
			return
		}
		if len(bb.keys) == 0 {
			return
		}
		// Number the send, unless another drain's send failed meanwhile: then only a probe
		// goes to the peer, after its backoff. Checked with the numbering, under one lock,
		// so every send numbered after a failure is a probe.
		o.mu.Lock()
		if !probe && o.peers[peer] != nil {
			o.mu.Unlock()
			return
		}
		o.tickets++
		ticket := o.tickets
		o.mu.Unlock()
		refused, err := o.deliver(ctx, peer, bb)
		if err != nil {
			if ctx.Err() == nil {
				o.failed(peer, bb, err, ticket)
			}
			return
		}
		o.acked(peer, bb, refused, ticket)
		// Partitions drained by this batch or refused are done for this drain.
		keep = ts[:0]
		for _, t := range ts {
			if bb.drained[t.part] || refused[t.part] {
				o.mu.Lock()
				o.claimed[t.part] = false
				o.mu.Unlock()
				continue
			}
			keep = append(keep, t)
		}
		ts = keep
	}
}

// builtBatch is a batch with the outbox entries it came from.
type builtBatch struct {
	batch         Batch
	keys          [][]byte
	counts        map[uint16]int // stored links per partition (before dedup)
	keyPart       []uint16
	drained       map[uint16]bool // every entry of the partition is in the batch
	links         int
	corrupt       [][]byte // entries that failed to decode: deleted with the batch
	corruptCounts map[uint16]int
	// limit is the first sequence number the read may have missed: the lowest of the Adds
	// writing when it began and of those yet to come. Every entry below it that was ever
	// written was visible to the read, so a head may move up to it and no further (an
	// Add still writing at the read may land before the ack, when adding no longer
	// shows it, with its entries below the ones sent).
	limit uint64
}

// buildBatch reads entries of ts, in order, until BatchLinks or BatchURLBytes would be
// passed (at least one entry). Links repeated within a partition are sent once.
func (o *Outbox) buildBatch(ts []target) (*builtBatch, error) {
	bb := &builtBatch{
		batch:         Batch{From: o.cfg.Self},
		counts:        make(map[uint16]int),
		drained:       make(map[uint16]bool),
		corruptCounts: make(map[uint16]int),
	}
	urlBytes := 0
	full := false
	heads := make([]uint64, len(ts))
	queued := make([]int, len(ts))
	o.mu.Lock()
	for i, t := range ts {
		heads[i], queued[i] = o.head[t.part], o.queued[t.part]
	}
	bb.limit = o.seq + 1
	for first := range o.adding {
		bb.limit = min(bb.limit, first)
	}
	settled := len(o.adding) == 0
	o.mu.Unlock()     // before View takes its snapshot: what finished writing by now is in it
	var lost []uint16 // partitions with links counted and none at or past the head
	err := o.db.View(func(txn *badger.Txn) error {
		for i, t := range ts {
			if full {
				return nil
			}
			prefix := partitionPrefix(t.part)
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 16})
			var links []Link
			drained, found := true, false
			for it.Seek(outboxKey(t.part, heads[i])); it.ValidForPrefix(prefix); it.Next() {
				found = true
				item := it.Item()
				var n, ub int
				var entryLinks []Link
				var derr error
				if err := item.Value(func(v []byte) error {
					entryLinks, derr = decodeEntry(v)
					n, _ = entryCount(v)
					return nil
				}); err != nil {
					it.Close()
					return err
				}
				key := item.KeyCopy(nil)
				if derr != nil {
					o.log.Error("dropping corrupt outbox entry", "partition", t.part, "err", derr)
					bb.corrupt = append(bb.corrupt, key)
					bb.corruptCounts[t.part] += n
					continue
				}
				for _, l := range entryLinks {
					ub += len(l.URL)
				}
				if bb.links > 0 && (bb.links+n > o.cfg.BatchLinks || urlBytes+ub > o.cfg.BatchURLBytes) {
					drained, full = false, true
					break
				}
				bb.keys = append(bb.keys, key)
				bb.keyPart = append(bb.keyPart, t.part)
				bb.counts[t.part] += n
				bb.links += n
				urlBytes += ub
				links = append(links, entryLinks...)
			}
			it.Close()
			if !found && settled && queued[i] > 0 && heads[i] > 0 {
				lost = append(lost, t.part)
			}
			bb.drained[t.part] = drained
			if len(links) > 0 {
				bb.batch.Partitions = append(bb.batch.Partitions,
					PartitionLinks{Partition: t.part, Epoch: t.epoch, Links: dedupLinks(links)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("forward: read outbox: %w", err)
	}
	if len(lost) > 0 {
		// No Add was writing, links were counted, and nothing was at or past the head:
		// a head moved past live entries (a bug; 3e900a6 fixed one). The next drain
		// reads those partitions from their start rather than never again.
		o.mu.Lock()
		for _, p := range lost {
			o.head[p] = 0
		}
		o.counters.headResets += int64(len(lost))
		o.mu.Unlock()
		o.log.Error("outbox: links counted below a partition's head; reading it from its start", "partitions", lost)
	}
	if len(bb.keys) == 0 && len(bb.corrupt) > 0 {
		// Only corrupt entries: delete them now.
		if err := o.deleteEntries(bb.corrupt); err != nil {
			return nil, fmt.Errorf("forward: delete corrupt entries: %w", err)
		}
		o.mu.Lock()
		o.uncount(bb.corruptCounts)
		o.counters.corrupt += int64(len(bb.corrupt))
		o.advance(bb.corrupt, nil, bb.limit)
		o.mu.Unlock()
	}
	return bb, nil
}

// dedupLinks sorts links by URL and keeps one link per URL: the one with the best
// (lowest) priority, then the lowest depth, carrying the sum of their OPIC cash.
func dedupLinks(links []Link) []Link {
	slices.SortStableFunc(links, func(a, b Link) int {
		if c := cmpURL(a, b); c != 0 {
			return c
		}
		if a.Priority != b.Priority {
			return int(a.Priority) - int(b.Priority)
		}
		return int(a.Depth) - int(b.Depth)
	})
	out := links[:0]
	for _, l := range links {
		if n := len(out); n > 0 && out[n-1].URL == l.URL {
			out[n-1].Cash += l.Cash
			continue
		}
		out = append(out, l)
	}
	clear(links[len(out):])
	return out
}

// deliver sends bb to peer, or hands it to Local when peer is Self. It returns the
// partitions the peer refused (nil error) or an error when nothing was committed.
func (o *Outbox) deliver(ctx context.Context, peer string, bb *builtBatch) (map[uint16]bool, error) {
	if peer == o.cfg.Self {
		var all []Link
		for _, p := range bb.batch.Partitions {
			all = append(all, p.Links...)
		}
		if err := o.cfg.Local(all); err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
		return nil, nil
	}
	enc, err := Encode(bb.batch)
	if err != nil {
		return nil, err
	}
	bb.batch.enc = enc
	sctx, cancel := context.WithTimeout(ctx, o.cfg.SendTimeout)
	defer cancel()
	err = o.cfg.Send(sctx, peer, bb.batch)
	if err == nil {
		return nil, nil
	}
	var re *RefusedError
	if !errors.As(err, &re) {
		return nil, err
	}
	refused := make(map[uint16]bool)
	for _, p := range re.Partitions {
		refused[p] = true
	}
	return refused, nil
}

// acked deletes the entries of bb except those of refused partitions, and records the
// refusals as holds. A send numbered ticket that started after the peer's last failure
// ends its backoff.
func (o *Outbox) acked(peer string, bb *builtBatch, refused map[uint16]bool, ticket uint64) {
	var keys [][]byte
	counts := make(map[uint16]int)
	for i, k := range bb.keys {
		p := bb.keyPart[i]
		if refused[p] {
			continue
		}
		keys = append(keys, k)
	}
	for p, n := range bb.counts {
		if !refused[p] {
			counts[p] = n
		}
	}
	for p, n := range bb.corruptCounts {
		counts[p] += n
	}
	keys = append(keys, bb.corrupt...)
	delErr := o.deleteEntries(keys)
	if delErr != nil {
		// The receiver committed them already; sending them again is harmless.
		o.log.Error("delete sent outbox entries; they will be sent again", "peer", peer, "err", delErr)
	}

	now := o.cfg.Now()
	sentLinks := 0
	for _, p := range bb.batch.Partitions {
		if !refused[p.Partition] {
			sentLinks += len(p.Links)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if delErr == nil {
		o.uncount(counts)
		o.counters.corrupt += int64(len(bb.corrupt))
		o.advance(keys, refused, bb.limit)
	}
	if st := o.peers[peer]; st != nil && ticket > st.failTicket {
		delete(o.peers, peer)
	}
	var held []uint16
	if peer == o.cfg.Self {
		o.counters.localLinks += int64(sentLinks)
	} else {
		o.counters.sentBatches++
		o.counters.sentLinks += int64(sentLinks)
		o.counters.sentBytes += int64(len(bb.batch.enc))
	}
	for _, p := range bb.batch.Partitions {
		if !refused[p.Partition] {
			delete(o.holds, p.Partition)
			continue
		}
		o.counters.refused++
		h := o.holds[p.Partition]
		if h.peer != peer || h.epoch != p.Epoch {
			h = hold{peer: peer, epoch: p.Epoch}
		}
		h.refusals++
		h.until = now.Add(o.backoff(h.refusals))
		o.holds[p.Partition] = h
		held = append(held, p.Partition)
	}
	if len(held) > 0 {
		o.log.Info("peer refused partitions; holding them until the owner or epoch changes or the hold ends",
			"peer", peer, "partitions", held)
	}
}

// failed records a failed send: the peer backs off, the entries stay. A send numbered
// ticket that was already in flight when an earlier failure was counted is the same
// outage: it is counted (Stats.Failures) but takes no further backoff step, so the
// concurrent drains of one peer back it off once, not PeerConcurrency times.
func (o *Outbox) failed(peer string, bb *builtBatch, err error, ticket uint64) {
	now := o.cfg.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counters.failures++
	st := o.peers[peer]
	if st != nil && ticket <= st.failTicket {
		o.log.Debug("forward failed while the peer was already backing off", "peer", peer,
			"links", bb.links, "err", err)
		return
	}
	if st == nil {
		st = &peerState{}
		o.peers[peer] = st
	}
	st.failures++
	st.failTicket = o.tickets
	d := o.backoff(st.failures)
	st.until = now.Add(d)
	o.log.Warn("forward failed; backing off", "peer", peer, "links", bb.links,
		"failures", st.failures, "backoff", d, "err", err)
}

// backoff is min(BackoffMax, BackoffBase*2^(n-1)) plus up to 25% jitter. Called with mu held.
func (o *Outbox) backoff(n int) time.Duration {
	d := o.cfg.BackoffMax
	if n < 32 {
		if b := o.cfg.BackoffBase << (n - 1); b > 0 && b < d {
			d = b
		}
	}
	return d + time.Duration(rand.Int64N(int64(d)/4+1))
}

// deleteEntries deletes sent entries from Badger; the caller uncounts them (uncount).
func (o *Outbox) deleteEntries(keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	wb := o.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// advance moves the heads of the partitions past keys, deleted, except of the refused
// partitions (their corrupt entries go, their live ones before those stay), and never to
// or past limit, the first sequence number the read of those keys may have missed
// (builtBatch.limit). A drain's keys of a partition are the first of its live entries
// (buildBatch reads from the head, in order), so nothing live is left below them.
// Called with mu held.
func (o *Outbox) advance(keys [][]byte, refused map[uint16]bool, limit uint64) {
	for _, k := range keys {
		if p, seq, ok := parseKey(k); ok && !refused[p] && seq >= o.head[p] {
			o.head[p] = max(o.head[p], min(seq+1, limit))
		}
	}
}

// uncount subtracts deleted links from the queue counts. Called with mu held.
func (o *Outbox) uncount(counts map[uint16]int) {
	for p, n := range counts {
		o.queued[p] -= n
		o.total -= n
	}
}

// Stats are the outbox's counters.
type Stats struct {
	Queued            int                  // links in the outbox
	QueuedByPartition map[uint16]int       // partitions with queued links only
	QueuedByPeer      map[string]int       // by current owner (OwnerOf now); "" = no owner known
	SentBatches       int64                // batches a peer answered with 200 or 409 (partial)
	SentLinks         int64                // links a peer committed (after dedup within a batch)
	SentBytes         int64                // wire bytes of those batches (refused parts included)
	BytesPerLink      float64              // SentBytes / SentLinks: wire bytes per forwarded link
	LocalLinks        int64                // links handed to Local
	Failures          int64                // failed sends (their links stayed queued)
	Refused           int64                // partitions refused by a peer (409), each time
	RecentHits        int64                // links skipped by Add as recently queued or repeated
	Invalid           int64                // links skipped by Add: no URL, too long, no host
	FullRejections    int64                // Add calls refused with ErrFull
	CorruptDropped    int64                // stored entries that did not decode and were dropped
	HeadResets        int64                // drains that found a partition's links below its head (a bug) and read it from its start
	BackingOff        map[string]time.Time // peer -> no send before
	Drains            map[string]int       // peer -> drains in flight (each sends one batch at a time)
	RecentCached      int                  // URL hashes in the recent cache
}

// Stats returns a snapshot of the counters. QueuedByPeer calls OwnerOf.
func (o *Outbox) Stats() Stats {
	o.mu.Lock()
	s := Stats{
		Queued:            o.total,
		QueuedByPartition: make(map[uint16]int),
		QueuedByPeer:      make(map[string]int),
		SentBatches:       o.counters.sentBatches,
		SentLinks:         o.counters.sentLinks,
		SentBytes:         o.counters.sentBytes,
		LocalLinks:        o.counters.localLinks,
		Failures:          o.counters.failures,
		Refused:           o.counters.refused,
		RecentHits:        o.counters.recentHits,
		Invalid:           o.counters.invalid,
		FullRejections:    o.counters.full,
		CorruptDropped:    o.counters.corrupt,
		HeadResets:        o.counters.headResets,
		BackingOff:        make(map[string]time.Time),
		Drains:            maps.Clone(o.busy),
		RecentCached:      o.recent.len(),
	}
	for p, n := range o.queued {
		if n > 0 {
			s.QueuedByPartition[uint16(p)] = n
		}
	}
	for peer, st := range o.peers {
		s.BackingOff[peer] = st.until
	}
	o.mu.Unlock()
	if s.SentLinks > 0 {
		s.BytesPerLink = float64(s.SentBytes) / float64(s.SentLinks)
	}
	for p, n := range s.QueuedByPartition {
		peer, _, ok := o.cfg.OwnerOf(p)
		if !ok {
			peer = ""
		}
		s.QueuedByPeer[peer] += n
	}
	return s
}
