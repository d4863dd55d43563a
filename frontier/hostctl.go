package frontier

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Limits are the settings a running crawl may change (the cluster's job configuration);
// they mean what the Config fields of the same names mean, and take effect at once for
// new decisions (a URL already queued stays queued).
type Limits struct {
	DefaultDelay    time.Duration
	PerHost         int
	MaxDepth        int
	MaxDepthSet     bool // MaxDepth as given, 0 included; else 0 leaves the depth limit
	MaxPagesPerHost int
}

// SetLimits replaces the Limits. Invalid values (PerHost < 1, a negative delay) are
// ignored field by field.
func (f *Frontier) SetLimits(l Limits) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l.DefaultDelay >= 0 {
		f.cfg.DefaultDelay = l.DefaultDelay
	}
	if l.MaxPagesPerHost != 0 {
		f.cfg.MaxPagesPerHost = l.MaxPagesPerHost
	}
	if l.MaxDepth != 0 || l.MaxDepthSet {
		lim := *f.limits.Load()
		lim.maxDepth = l.MaxDepth
		f.limits.Store(&lim)
	}
	if l.PerHost >= 1 && l.PerHost != f.cfg.PerHost {
		f.cfg.PerHost = l.PerHost
		for _, h := range f.hosts {
			f.fixLocked(h)
		}
		f.signalLocked()
	}
}

// SetHostDelay sets the host's delay between requests (e.g. robots Crawl-delay; 0 allowed)
// and persists it.
func (f *Frontier) SetHostDelay(host string, d time.Duration) {
	if d < 0 {
		d = 0
	}
	f.mu.Lock()
	h := f.hostLocked(host)
	h.delay, h.delaySet = d, true
	f.mu.Unlock()
	if err := f.persistHosts(host); err != nil {
		f.log.Error("persist host delay", "host", host, "err", err)
	}
}

// DeferHost holds every lease for host until now+d (e.g. robots.txt answered 5xx). Persisted.
func (f *Frontier) DeferHost(host string, d time.Duration) {
	f.mu.Lock()
	h := f.hostLocked(host)
	h.nextAt = deferredUntil(h.nextAt, f.cfg.Now().UnixNano(), d)
	f.fixLocked(h)
	f.mu.Unlock()
	if err := f.persistHosts(host); err != nil {
		f.log.Error("persist host defer", "host", host, "err", err)
	}
}

// HostMeta returns the opaque per-host blob (nil if none).
func (f *Frontier) HostMeta(host string) ([]byte, error) {
	var out []byte
	err := f.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(hMetaKey(f.cfg.PartitionOf(host), host))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		out, err = it.ValueCopy(nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("frontier: host meta: %w", err)
	}
	return out, nil
}

// SetHostMeta stores the opaque per-host blob (the node keeps parsed robots.txt there).
func (f *Frontier) SetHostMeta(host string, b []byte) error {
	err := f.db.Update(func(txn *badger.Txn) error {
		return txn.Set(hMetaKey(f.cfg.PartitionOf(host), host), slices.Clone(b))
	})
	if err != nil {
		return fmt.Errorf("frontier: set host meta: %w", err)
	}
	return nil
}

// ParkHost moves every queued and retry-pending URL of host (not the leased ones, which
// finish through Done) to the dead letters with reason as the error, so a batch crawl can
// end when a host stays unreachable. It returns how many URLs it parked.
func (f *Frontier) ParkHost(host, reason string) (int, error) {
	f.mu.Lock()
	h := f.hosts[host]
	for h != nil && h.loading { // a refill is running; it takes a Badger scan at most
		f.mu.Unlock()
		time.Sleep(time.Millisecond)
		f.mu.Lock()
	}
	if h == nil {
		f.mu.Unlock()
		return 0, nil
	}
	h.loading = true
	for i := range h.prefetch {
		h.prefetch[i] = item{}
	}
	h.prefetch = nil
	h.queueGen++
	leased := slices.Clone(h.leased)
	f.fixLocked(h)
	f.mu.Unlock()

	now := f.cfg.Now()
	nq, nr, err := f.park(h, leased, reason, now)

	f.mu.Lock()
	h.loading = false
	h.prefetch = nil
	h.cursor, h.loadLow = nil, nil
	h.queueGen++
	h.queued -= nq
	f.queued -= nq
	f.retryPending -= nr
	f.dead += nq + nr
	f.fixLocked(h)
	f.signalLocked()
	f.mu.Unlock()
	if err != nil {
		return nq + nr, fmt.Errorf("frontier: park host: %w", err)
	}
	return nq + nr, nil
}

func (f *Frontier) park(h *host, leased [][]byte, reason string, now time.Time) (nq, nr int, err error) {
	deadOps := func(r qrec) []op {
		hash := URLHash(r.URL)
		dl := DeadLetter{URL: r.URL, Host: h.name, Attempts: r.Attempts, LastErr: reason, Status: r.LastStatus, At: now}
		sr := SeenRecord{URL: r.URL, Status: r.LastStatus, State: StateDead, Reason: reason, At: now}
		return []op{{k: hashKey(famDead, h.part, hash), v: dl.encode()}, {k: hashKey(famSeen, h.part, hash), v: sr.encode()}}
	}
	// queued
	type kv struct{ k, v []byte }
	var qs []kv
	err = f.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 100, Prefix: qHostPrefix(h.part, h.name)})
		defer it.Close()
	next:
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if prioOfKey(k) == bandRevisit {
				continue // a fetched URL due again: it stays scheduled
			}
			for _, l := range leased {
				if bytes.Equal(l, k) {
					continue next
				}
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			qs = append(qs, kv{it.Item().KeyCopy(nil), v})
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	b := newBatch(f.db)
	defer b.discard()
	for _, q := range qs {
		r, err := decodeQrec(q.v)
		if err != nil {
			return b.commited, 0, err
		}
		if err := b.group(append(deadOps(r), op{k: q.k, del: true})...); err != nil {
			return b.commited, 0, err
		}
	}
	if err := b.commit(); err != nil {
		return b.commited, 0, err
	}
	nq = len(qs)

	// retry-pending
	f.retryScanMu.Lock()
	defer f.retryScanMu.Unlock()
	var rs []kv
	err = f.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 100, Prefix: famPrefix(famRetry, h.part)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if _, _, seq, _ := parseRKey(it.Item().Key()); seq&revisitBit != 0 {
				continue
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			qk, _, err := decodeR(v)
			if err != nil {
				return err
			}
			if hn, _, ok := parseQKey(qk); ok && hn == h.name {
				rs = append(rs, kv{it.Item().KeyCopy(nil), v})
			}
		}
		return nil
	})
	if err != nil {
		return nq, 0, err
	}
	b2 := newBatch(f.db)
	defer b2.discard()
	for _, r := range rs {
		_, rec, _ := decodeR(r.v)
		if err := b2.group(append(deadOps(rec), op{k: r.k, del: true})...); err != nil {
			return nq, b2.commited, err
		}
	}
	if err := b2.commit(); err != nil {
		return nq, b2.commited, err
	}
	return nq, len(rs), nil
}
