package frontier

import (
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Stats returns the counters. ReadyHosts/WaitingHosts walk the heap (O(active hosts)).
func (f *Frontier) Stats() Stats {
	f.mu.Lock()
	now := f.cfg.Now().UnixNano()
	s := Stats{
		Queued: f.queued - f.inflight, InFlight: f.inflight, Hosts: len(f.hosts),
		RetryPending: f.retryPending, DeadLetters: f.dead, Seen: f.seen,
		RevisitPending: f.revisitPending, RevisitQueued: f.revisitQueued,
	}
	for _, hs := range [][]*host{f.ready.hs, f.waiting.hs} {
		for _, h := range hs {
			if h.nextAt <= now {
				s.ReadyHosts++
			} else {
				s.WaitingHosts++
			}
		}
	}
	f.mu.Unlock()
	f.bloomMu.RLock()
	s.BloomBytes = f.bloom.bytes()
	f.bloomFillMu.Lock()
	if f.bloomFillAt == 0 || now-f.bloomFillAt >= int64(bloomFillEvery) || now < f.bloomFillAt {
		f.bloomFill = f.bloom.fill()
		f.bloomFillAt = now
	}
	s.BloomFill = f.bloomFill
	f.bloomFillMu.Unlock()
	f.bloomMu.RUnlock()
	s.BloomChecks, s.BloomFalsePositives = f.bloomChecks.Load(), f.bloomFalsePos.Load()
	s.SeenIndexHits = f.idxHits.Load()
	return s
}

// bloomFillEvery is how often Stats counts the Bloom filter's set bits; in between it
// reports the last count.
const bloomFillEvery = time.Second

// Idle reports that nothing is queued, in flight, waiting for a retry or scheduled for a
// revisit (so a continuous crawl is never idle once it has fetched a page).
func (f *Frontier) Idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queued == 0 && f.inflight == 0 && f.retryPending == 0 && f.revisitPending == 0
}

// DeadLetters calls fn for each dead letter (partition order) until fn returns false.
func (f *Frontier) DeadLetters(fn func(DeadLetter) bool) error {
	return f.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 100, Prefix: []byte{famDead}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var dl DeadLetter
			err := it.Item().Value(func(v []byte) error {
				var err error
				dl, err = decodeDead(v)
				return err
			})
			if err != nil {
				return fmt.Errorf("frontier: dead letters: %w", err)
			}
			if !fn(dl) {
				return nil
			}
		}
		return nil
	})
}

// Lookup returns the seen record of a canonical URL. The partition comes from the host
// derived from the URL, so it finds URLs added with Candidate.Host empty or equal to it.
func (f *Frontier) Lookup(url string) (SeenRecord, bool, error) {
	hn, ok := hostOf(url)
	if !ok {
		return SeenRecord{}, false, nil
	}
	var sr SeenRecord
	found := false
	err := f.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(hashKey(famSeen, f.cfg.PartitionOf(hn), URLHash(url)))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		return it.Value(func(v []byte) error {
			sr, err = decodeSeen(v)
			return err
		})
	})
	if err != nil {
		return SeenRecord{}, false, fmt.Errorf("frontier: lookup: %w", err)
	}
	return sr, found, nil
}

// LookupHash finds the seen record of a URL by its URLHash, without knowing its host: one
// point read per partition (Config.PartitionOf's range, DefaultPartitions). For the pages
// API, where a page is named by its hash.
func (f *Frontier) LookupHash(h [16]byte) (SeenRecord, bool, error) {
	var sr SeenRecord
	found := false
	err := f.db.View(func(txn *badger.Txn) error {
		for p := 0; p < DefaultPartitions; p++ {
			it, err := txn.Get(hashKey(famSeen, uint16(p), h))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			found = true
			return it.Value(func(v []byte) error {
				sr, err = decodeSeen(v)
				return err
			})
		}
		return nil
	})
	if err != nil {
		return SeenRecord{}, false, fmt.Errorf("frontier: lookup: %w", err)
	}
	return sr, found, nil
}
