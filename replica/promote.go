package replica

import (
	"context"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/gossip"
)

// outboxSlotFor returns the slot source's outbox copy is kept in here; with alloc (a
// full copy arrives) a free slot is reserved for a source that has none. ok is false
// when source has no slot (a delta without a copy: the sender is asked for a full one)
// or every slot is taken.
func (r *Replicator) outboxSlotFor(source string, alloc bool) (uint16, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.copiesLocked()
	if s, ok := r.outboxes[source]; ok {
		return s, true
	}
	if !alloc {
		return 0, false
	}
	taken := make(map[uint16]bool, len(r.outboxes))
	for _, s := range r.outboxes {
		taken[s] = true
	}
	for s := uint16(outboxSlot); isOutboxSlot(s); s++ {
		if _, used := r.metas[s]; !used && !taken[s] {
			r.outboxes[source] = s
			return s, true
		}
	}
	return 0, false
}

// releaseOutboxSlot frees an outbox slot whose copy was dropped or promoted.
func (r *Replicator) releaseOutboxSlot(slot uint16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.copiesLocked()
	if _, copied := r.metas[slot]; copied {
		return // a full copy came in meanwhile: the slot is its source's again
	}
	for src, s := range r.outboxes {
		if s == slot {
			delete(r.outboxes, src)
		}
	}
}

// promote imports the copies whose source lost the partition while gone, and drops the
// copies nobody needs.
func (r *Replicator) promote(ctx context.Context) {
	c := r.cluster
	if !c.InContact() {
		return
	}
	states := map[string]gossip.Member{}
	for _, m := range c.Members() {
		states[m.Name] = m
	}
	r.mu.Lock()
	copies := maps.Clone(r.copiesLocked())
	r.mu.Unlock()
	cache := shippedCache{}
	full := r.since(r.lastStaleCheck) >= time.Minute
	if full {
		r.lastStaleCheck = r.now()
	}
	for p, source := range copies {
		if isOutboxSlot(p) {
			r.promoteOutbox(p, states, full)
			continue
		}
		owner, _ := c.OwnerOf(p)
		if owner == source && !full {
			continue // the usual case: nothing to do, and no Badger read
		}
		m, ok := r.meta(p)
		if !ok {
			continue
		}
		src, known := states[m.Source]
		alive := known && src.Status == gossip.StatusAlive
		switch {
		case owner == "":
			continue
		case owner == m.Source:
			if alive && !m.At.IsZero() && r.since(m.At) > replicaStaleAfter {
				r.drop(p, "stale")
			}
			continue
		case alive || (known && src.Status == gossip.StatusLeft):
			// Moved by a handoff (or the source decommissioned): the partition travelled
			// with its lease.
			r.drop(p, "handed off")
			continue
		case m.Version == 0:
			// Incomplete copy: still better than nothing; merge what arrived.
		}
		if err := r.importCopy(ctx, p, m, cache); err != nil {
			if ctx.Err() == nil {
				r.log.Warn("replica: promotion failed; will retry", "partition", p, "source", m.Source, "err", err)
			}
			continue
		}
	}
}

// promoteOutbox queues a lost node's copied outbox (kept in slot) in this node's own,
// once the node is gone past the grace period (the leader removed it from the members)
// or left. The copy of a source that is alive but has sent nothing here for
// replicaStaleAfter (its outbox went to another backup) is dropped, on full passes.
func (r *Replicator) promoteOutbox(slot uint16, states map[string]gossip.Member, full bool) {
	c := r.cluster
	m, ok := r.meta(slot)
	if !ok {
		return
	}
	src, known := states[m.Source]
	if known && src.Status == gossip.StatusAlive {
		if full && !m.At.IsZero() && r.since(m.At) > replicaStaleAfter {
			r.drop(slot, "stale")
		}
		return
	}
	if c.Registered(m.Source) && !(known && src.Status == gossip.StatusLeft) {
		return // within the grace period: it may come back with its outbox
	}
	var links []forward.Link
	err := r.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: replicaPrefix(slot)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) <= 3 || k[3] == 0 {
				continue
			}
			if err := it.Item().Value(func(v []byte) error {
				ls, err := forward.EntryLinks(v)
				if err != nil {
					r.log.Warn("replica: bad outbox entry in a copy; skipped", "source", m.Source, "err", err)
					return nil
				}
				links = append(links, ls...)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		r.log.Warn("replica: reading an outbox copy failed; will retry", "source", m.Source, "err", err)
		return
	}
	for len(links) > 0 {
		n := min(len(links), 1000)
		if err := r.outbox.Add(links[:n]); err != nil {
			r.log.Warn("replica: queueing an outbox copy failed; will retry", "source", m.Source, "err", err)
			return
		}
		links = links[n:]
	}
	if err := r.clear(slot); err != nil {
		return
	}
	r.releaseOutboxSlot(slot)
	r.promoted.Add(1)
	r.log.Warn("replica: a lost node's unsent links are queued here", "source", m.Source)
}

func (r *Replicator) drop(p uint16, why string) {
	if err := r.clear(p); err != nil {
		r.log.Warn("replica: drop failed", "partition", p, "err", err)
		return
	}
	if isOutboxSlot(p) {
		r.releaseOutboxSlot(p)
	}
	r.dropped.Add(1)
	r.log.Debug("replica dropped", "partition", p, "why", why)
}

// importCopy merges p's copy into the local frontier, then deletes it. If this node
// holds p's lease the partition is held (no fetching) during the import; if another node
// does, the sweep ships the merged partition to it.
func (r *Replicator) importCopy(ctx context.Context, p uint16, m copyMeta, cache shippedCache) error {
	c := r.cluster
	opts, err := r.importOptions(ctx, p, m.Source, cache)
	if err != nil {
		return fmt.Errorf("reading what %s shipped to the output store: %w", m.Source, err)
	}
	if owner, _ := c.OwnerOf(p); owner == r.self {
		if err := c.Hold(ctx, p, 15*time.Second); err != nil {
			return err
		}
		defer c.Release(p)
	}
	st, err := r.importWith(r.front, p, opts)
	if err != nil {
		return err
	}
	if err := r.clear(p); err != nil {
		return err
	}
	r.promoted.Add(1)
	r.refetched.Add(int64(st.Refetch))
	r.log.Warn("replica promoted: a lost node's partition goes on from its copy", "partition", p, "source", m.Source,
		"copy_age", r.since(m.At).Round(time.Millisecond).String(), "records", st.Records, "queued", st.Queued+st.Retries, "seen_new", st.SeenNew,
		"refetch", st.Refetch, "not_refetched", st.NotRefetched)
	return nil
}

// importInto merges p's copy into front (ImportPartition); the copy stays.
func (r *Replicator) importInto(front *frontier.Frontier, p uint16) (frontier.ImportStats, error) {
	return r.importWith(front, p, frontier.ImportOptions{})
}

// importWith is importInto with a promotion's options (refetches).
func (r *Replicator) importWith(front *frontier.Frontier, p uint16, opts frontier.ImportOptions) (frontier.ImportStats, error) {
	txn := r.db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: replicaPrefix(p), PrefetchValues: true, PrefetchSize: 256})
	defer it.Close()
	it.Rewind()
	pre := len(replicaPrefix(p))
	return front.ImportPartitionWith(p, func() (byte, []byte, []byte, error) {
		for it.Valid() {
			item := it.Item()
			k := item.KeyCopy(nil) // the item is valid only until Next
			if len(k) <= pre || k[pre] == 0 {
				it.Next()
				continue // the meta record
			}
			v, err := item.ValueCopy(nil)
			it.Next()
			if err != nil {
				return 0, nil, nil, err
			}
			return k[pre], k[pre:], v, nil
		}
		return 0, nil, nil, io.EOF
	}, opts)
}
