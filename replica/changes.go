package replica

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"

	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/internal/keyspace"
	"github.com/crawlnode/crawlnode/ring"
)

// changeLog keeps, per partition (and outboxSlot for the outbox), the keys committed to
// the frontier's exported families and the outbox, with their commit versions, as
// Badger's feed of committed writes (DB.Subscribe) reports them. A replica round reads
// just those keys from its snapshot (frontier.View.ExportKeys) instead of stepping over
// every version Badger holds since the copy's version. Every writer of the DB is in the
// feed (adds, completions, retries, host clocks, imports, deletions, the outbox), so no
// writer has to report its keys; Badger's DropPrefix is the one write the feed does not
// carry, and none of these families uses it (frontier.DropPartition writes tombstones).
//
// What it promises (covers): for a slot whose copy stands at version since, when
// since >= max(base, from[slot]) and every commit up to the snapshot's read version has
// been delivered (cut), the slot's keys with a version in (since, readTs] are exactly
// the keys View.ExportSince would report from that snapshot. Why: Badger hands commits to
// the feed in commit-version order (one write goroutine; commit versions are taken and
// queued under one lock), so once a version v is delivered every commit below it has
// been; base is the first version delivered, after which nothing is missed.
//
// It also keeps each key's newest value as the feed carried it, so a round reads from its
// snapshot only the keys it cannot answer from the log: a key written again after the
// snapshot (the value the snapshot sees is an older one), a deletion (the feed does not
// carry Badger's deletion bit, only UserMeta: a deletion arrives as an empty value, as
// would a value set empty, so an empty value is always read), and values past
// maxChangedValueBytes. A point read of every changed key was 6.5% of a clustered node's
// CPU (docs/bench-log/cluster-scaling.md, f1b28c8).
//
// Bounded: past maxChangedPerSlot keys in one slot, or maxChangedKeys in all, a slot's
// keys are dropped and from[slot] moves to the version at hand; the copies standing
// below it take the full pass (View.ExportPartitionsSince or View.ExportSince) once. Values
// past maxChangedValueBytes in all are not kept (their keys are read).
type changeLog struct {
	db      *badger.DB
	famRank [256]uint8 // 1 + the family's place in frontier.ExportFamilies; 0: not one

	mu     sync.Mutex
	slots  map[uint16]map[string]keyChange // slot -> key -> its commits
	n      int                             // keys held over all slots
	nval   int                             // bytes of the values held over all slots
	from   [outboxSlot + 1]uint64          // commits of a slot with a version above it are held
	base   uint64                          // the first version delivered (0: none yet)
	seen   uint64                          // the highest version delivered
	seenCh chan struct{}                   // closed, and replaced, when seen moves
	live   bool                            // run was called (start)
	dead   bool                            // the feed ended: nothing is covered any more

	overflows atomic.Int64
	skipped   atomic.Int64 // outbox keys set and deleted within a round's span, not sent
}

// keyChange is what the log holds of one key: its newest commit version, the older ones
// still needed (ascending; nil for nearly every key: one commit a round), and the value
// the newest set (nil: read it from the snapshot). val is never changed in place: a round
// may hold it after the log has moved on. Held by value in the slot's map: a round's
// changed walks every key of a slot, and a pointer to chase each (or a slice of versions
// for the newest) made it slower than the point reads the values save.
//
// Of an outbox key the log also keeps born and gone. The outbox writes a key once, with
// a fresh sequence number (a value never empty), and deletes it once sent: a key set in
// the log's span was absent before that set (see forward.KeyPrefix). So an empty value
// there is a deletion for sure (gone: no read), and a key set and deleted within a
// round's span (since < born, gone) was absent at both ends: the round skips it instead
// of reading it and sending its copy a deletion of a key it never had. Most outbox
// entries live less than a round (sent and acknowledged within a second).
type keyChange struct {
	newest uint64
	older  []uint64
	val    []byte
	born   uint64 // outbox keys: the version of the set the log saw (0: none)
	gone   bool   // outbox keys: the newest commit is a deletion
}

const (
	maxChangedPerSlot = 1 << 14
	maxChangedKeys    = 1 << 17
	// maxChangedValueBytes bounds the values the log keeps; past it a key's value is
	// read from the round's snapshot.
	maxChangedValueBytes = 16 << 20
	// cutWait bounds how long a round waits for the feed to deliver its snapshot's
	// commits (a marker write is delivered within milliseconds); past it the round takes
	// the full pass.
	cutWait = time.Second
	// cutRemark is how long cut waits for its marker before writing another.
	cutRemark = 50 * time.Millisecond
)

// changeMarkKey is written when a round needs the feed to pass its snapshot's version
// and no other write comes: a replica pseudo-partition no copy uses (held and clear stop
// at outboxSlot).
var changeMarkKey = []byte{keyspace.Replica, 0xff, 0xff, 'c', 'u', 't'}

func newChangeLog(db *badger.DB) *changeLog {
	cl := &changeLog{db: db, slots: map[uint16]map[string]keyChange{}, seenCh: make(chan struct{})}
	for i, fam := range frontier.ExportFamilies() {
		cl.famRank[fam] = uint8(i + 1)
	}
	return cl
}

// start marks the feed as coming (run is about to be called): rounds may wait for it.
func (cl *changeLog) start() {
	cl.mu.Lock()
	cl.live = true
	cl.mu.Unlock()
}

// run follows the feed until ctx ends (or the DB closes). Call start first.
func (cl *changeLog) run(ctx context.Context) { cl.follow(ctx, cl.note) }

// follow is run with the feed's batches handed to take (note, or a test's wrapper of it).
func (cl *changeLog) follow(ctx context.Context, take func(*badger.KVList) error) {
	matches := []pb.Match{{Prefix: []byte{forward.KeyPrefix}}, {Prefix: changeMarkKey}}
	for _, fam := range frontier.ExportFamilies() {
		matches = append(matches, pb.Match{Prefix: []byte{fam}})
	}
	_ = cl.db.Subscribe(ctx, take, matches)
	cl.mu.Lock()
	cl.dead = true
	cl.mu.Unlock()
}

// slotOf maps a key of the feed to its slot.
func (cl *changeLog) slotOf(k []byte) (uint16, bool) {
	switch {
	case len(k) == 0:
		return 0, false
	case k[0] == forward.KeyPrefix:
		return outboxSlot, true
	case cl.famRank[k[0]] == 0 || len(k) < 3:
		return 0, false
	}
	p := binary.BigEndian.Uint16(k[1:3])
	return p, p < ring.PartitionCount
}

// note takes one batch of the feed. It runs on Badger's publisher path (a slow callback
// holds up every write once the feed's buffers fill): map updates only.
func (cl *changeLog) note(kvs *badger.KVList) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	moved := false
	for _, kv := range kvs.Kv {
		v := kv.Version
		if cl.base == 0 {
			cl.base = v
		}
		if v > cl.seen {
			cl.seen, moved = v, true
		}
		slot, ok := cl.slotOf(kv.Key)
		if !ok || v <= cl.from[slot] {
			continue
		}
		m := cl.slots[slot]
		if m == nil {
			m = map[string]keyChange{}
			cl.slots[slot] = m
		}
		c, ok := m[string(kv.Key)]
		switch {
		case !ok:
			c = keyChange{newest: v}
			cl.keepLocked(&c, kv.Value)
			noteOutbox(&c, slot, v, kv.Value)
			m[string(kv.Key)] = c
			cl.n++
		case c.newest < v:
			c.older = append(c.older, c.newest)
			c.newest = v
			cl.keepLocked(&c, kv.Value)
			noteOutbox(&c, slot, v, kv.Value)
			m[string(kv.Key)] = c
		}
		switch {
		case len(m) > maxChangedPerSlot:
			cl.overflowLocked(slot, v)
		case cl.n > maxChangedKeys:
			big := slot
			for s, sm := range cl.slots {
				if len(sm) > len(cl.slots[big]) {
					big = s
				}
			}
			cl.overflowLocked(big, v)
		}
	}
	if moved {
		close(cl.seenCh)
		cl.seenCh = make(chan struct{})
	}
	return nil
}

// noteOutbox keeps born and gone of an outbox key's commit at version v.
func noteOutbox(c *keyChange, slot uint16, v uint64, val []byte) {
	if slot != outboxSlot {
		return
	}
	c.gone = len(val) == 0
	if !c.gone {
		c.born = v
	}
}

// keepLocked makes val (the feed's copy, which nothing else writes) c's newest value,
// or no value when it is empty (a deletion, or a value set empty: read either) or the
// values held are at their bound.
func (cl *changeLog) keepLocked(c *keyChange, val []byte) {
	cl.nval -= len(c.val)
	c.val = nil
	if len(val) > 0 && cl.nval+len(val) <= maxChangedValueBytes {
		c.val = val
		cl.nval += len(val)
	}
}

// dropSlotLocked forgets slot's keys and their values.
func (cl *changeLog) dropSlotLocked(slot uint16) {
	for _, c := range cl.slots[slot] {
		cl.nval -= len(c.val)
	}
	cl.n -= len(cl.slots[slot])
	delete(cl.slots, slot)
}

// overflowLocked drops slot's keys: from now on it covers only commits after v.
func (cl *changeLog) overflowLocked(slot uint16, v uint64) {
	cl.dropSlotLocked(slot)
	cl.from[slot] = max(cl.from[slot], v)
	cl.overflows.Add(1)
}

// cut waits until the feed has delivered every commit up to readTs (a snapshot's read
// version), writing a marker if nothing else will pass it, and again every cutRemark
// while nothing has: a feed whose subscription took hold after a marker's commit (start
// marks the feed as coming before Subscribe registers) never sees that one. False: the
// feed is not there (not started, ended, or too slow); the round takes the full pass.
func (cl *changeLog) cut(ctx context.Context, readTs uint64) bool {
	timeout := time.NewTimer(cutWait)
	defer timeout.Stop()
	var remark <-chan time.Time
	for {
		cl.mu.Lock()
		ok, dead, ch := cl.base > 0 && cl.seen >= readTs, cl.dead || !cl.live, cl.seenCh
		cl.mu.Unlock()
		if ok || dead {
			return ok
		}
		if remark == nil {
			// A commit after the snapshot: its delivery is proof of every commit before.
			if err := cl.db.Update(func(txn *badger.Txn) error { return txn.Set(changeMarkKey, nil) }); err != nil {
				return false
			}
			remark = time.After(cutRemark)
			continue
		}
		select {
		case <-ch:
		case <-remark:
			remark = nil
		case <-timeout.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// changedKey is a key changed in (since, readTs] and, when the log holds it, the value
// the snapshot at readTs sees (nil: read the key from the snapshot).
type changedKey struct {
	key, val []byte
	deleted  bool // an outbox key's deletion, known without a read
}

// changed returns the keys of slot with a commit version in (since, readTs], in the
// order View.ExportPartitionSince (or the outbox's View.ExportSince) streams them, with the
// value of those whose newest commit is the one the snapshot sees; false when the log
// does not cover slot from since. Call it after cut(readTs).
func (cl *changeLog) changed(slot uint16, since, readTs uint64) ([]changedKey, bool) {
	cl.mu.Lock()
	if cl.dead || !cl.live || cl.base == 0 || since < max(cl.base, cl.from[slot]) {
		cl.mu.Unlock()
		return nil, false
	}
	var keys []changedKey
	for k, c := range cl.slots[slot] {
		// The last version at or below readTs decides.
		if c.newest <= readTs {
			switch {
			case c.newest <= since:
			case c.gone && c.born > since:
				// An outbox entry set and deleted since the copy's version: absent at
				// both ends.
				cl.skipped.Add(1)
			case c.gone:
				keys = append(keys, changedKey{key: []byte(k), deleted: true})
			default:
				keys = append(keys, changedKey{key: []byte(k), val: c.val})
			}
			continue
		}
		// Written again after the snapshot: the value the snapshot sees is read.
		i, _ := slices.BinarySearch(c.older, readTs+1)
		if i > 0 && c.older[i-1] > since {
			keys = append(keys, changedKey{key: []byte(k)})
		}
	}
	cl.mu.Unlock()
	slices.SortFunc(keys, func(a, b changedKey) int {
		if ra, rb := cl.famRank[a.key[0]], cl.famRank[b.key[0]]; ra != rb {
			return int(ra) - int(rb)
		}
		return slices.Compare(a.key, b.key)
	})
	return keys, true
}

// settle drops what no copy needs any more: of each slot in acked, the versions at or
// below its backup's acknowledged version (0: none acknowledged, nothing dropped; a full
// copy comes first); every other slot's keys (no longer held here: when held again, it
// starts with a full copy read after now).
func (cl *changeLog) settle(acked map[uint16]uint64) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for slot, m := range cl.slots {
		upTo, held := acked[slot]
		if !held {
			cl.dropSlotLocked(slot)
			cl.from[slot] = max(cl.from[slot], cl.seen)
			continue
		}
		if upTo == 0 {
			continue
		}
		for k, c := range m {
			if c.newest <= upTo {
				cl.nval -= len(c.val)
				delete(m, k)
				cl.n--
				continue
			}
			if i, _ := slices.BinarySearch(c.older, upTo+1); i > 0 {
				c.older = c.older[i:] // the newest stays, and its value
				if len(c.older) == 0 {
					c.older = nil
				}
				m[k] = c
			}
		}
	}
}
