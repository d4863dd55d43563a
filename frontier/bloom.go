package frontier

import (
	"errors"
	"fmt"
	"math"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/dgraph-io/badger/v4"
)

// The seen set's Bloom filter is split by the first byte of the URL hash into bloomSubs
// independent filters. A test or an add touches exactly one of them (the same k probes as
// one big filter), and each grows on its own: when a sub-filter holds more URLs than it was
// sized for, a background goroutine rebuilds it from the Badger seen keys whose hash starts
// with its byte, sized for bloomGrowth times its count. So
//   - memory stays close to what the false-positive rate needs: right after a growth a
//     sub-filter has 1.2 x 1.198 = 1.44 bytes per URL it holds (at 1%), just before the
//     next one 1.198; there is no 2x step;
//   - a rebuild reads 1/256 of the seen keys and holds old and new copies of 1/256 of the
//     filter at once, and holds no lock while it reads Badger (see growSub for why no URL
//     added meanwhile can be missed).
const (
	bloomSubs   = 256
	bloomGrowth = 1.2
)

// seenBloom is the partitioned filter. Every field is guarded by Frontier.bloomMu: tests
// under RLock, adds and the rebuild's bookkeeping under Lock.
type seenBloom struct {
	fp     float64
	minCap uint // per sub-filter: ExpectedURLs / bloomSubs
	subs   [bloomSubs]bloomSub
	// spawn starts the goroutine that grows due sub-filters; add calls it (under bloomMu)
	// when a sub-filter becomes due and none runs. running: one runs; stopped: Close.
	spawn            func()
	running, stopped bool
	// idxMin: with a seen index (a run per sub-filter, rebuilt with it), the least number
	// of URLs added since a run was built that makes its sub-filter due; 0 without one.
	idxMin uint
}

type bloomSub struct {
	bf  *bloom.BloomFilter
	cap uint // URLs it was sized for
	n   uint // URLs added since it was built (dropped partitions' URLs stay counted)
	// rebuilding: a rebuild has started; every hash added meanwhile is logged too, and
	// replayed into the new filter before it replaces bf.
	rebuilding bool
	log        [][16]byte
	due        bool // overdue: waiting for the rebuild goroutine
	// With a seen index: runN is the size of the sub-filter's run, fresh the URLs added
	// since its snapshot (an upper bound).
	runN, fresh uint
}

func newSeenBloom(expected uint, fp float64) *seenBloom {
	return &seenBloom{fp: fp, minCap: max(1, expected/bloomSubs)}
}

// size is the capacity a sub-filter holding n URLs is (re)built for.
func (sb *seenBloom) size(n uint) uint {
	return max(sb.minCap, uint(math.Ceil(float64(n)*bloomGrowth)))
}

func (sb *seenBloom) test(h [16]byte) bool { return sb.subs[h[0]].bf.Test(h[:]) }

// add records a committed seen key. The caller holds bloomMu for writing, and adds only
// hashes whose Badger commit has returned (growSub relies on that order).
func (sb *seenBloom) add(h [16]byte) {
	s := &sb.subs[h[0]]
	s.bf.Add(h[:])
	s.n++
	if s.rebuilding {
		s.log = append(s.log, h)
	}
	s.fresh++
	if !s.due && sb.overdue(s) {
		s.due = true
		sb.wake()
	}
}

// overdue: the sub-filter holds more URLs than it was sized for, or (with a seen index)
// its run misses more than max(1/idxStale of its size, idxMin) of them.
func (sb *seenBloom) overdue(s *bloomSub) bool {
	return s.n > s.cap || sb.idxMin > 0 && s.fresh > max(s.runN/idxStale, sb.idxMin)
}

// wake starts the grow goroutine unless it runs or the frontier is closed. Under bloomMu.
func (sb *seenBloom) wake() {
	if !sb.running && !sb.stopped && sb.spawn != nil {
		sb.running = true
		sb.spawn()
	}
}

// bytes is the memory of the bit arrays; fill the share of bits set.
func (sb *seenBloom) bytes() int {
	n := 0
	for i := range sb.subs {
		n += int(sb.subs[i].bf.Cap() / 8)
	}
	return n
}

func (sb *seenBloom) fill() float64 {
	var set, all uint
	for i := range sb.subs {
		set += sb.subs[i].bf.BitSet().Count()
		all += sb.subs[i].bf.Cap()
	}
	return float64(set) / float64(max(1, all))
}

// buildBloom builds the whole filter from the seen keys (Open: nothing runs concurrently),
// each sub-filter sized for its share of seen URLs; one that turns out fuller goes to the
// rebuild goroutine.
func (f *Frontier) buildBloom(seen int) error {
	sb := newSeenBloom(f.cfg.ExpectedURLs, f.cfg.BloomFPRate)
	per := sb.size(uint(seen) / bloomSubs)
	for i := range sb.subs {
		sb.subs[i].bf = bloom.NewWithEstimates(per, sb.fp)
		sb.subs[i].cap = per
	}
	// The seen index's runs come from the same scan (writers before the snapshot).
	var ws []*idxWriter
	if f.idx != nil {
		for i := range bloomSubs {
			w, err := f.idx.writer(byte(i), 8<<10)
			if err != nil {
				for _, w := range ws {
					w.abort()
				}
				return fmt.Errorf("seen index: %w", err)
			}
			ws = append(ws, w)
		}
	}
	err := f.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{famSeen}})
		defer it.Close()
		var h [16]byte
		for it.Rewind(); it.Valid(); it.Next() {
			if k := it.Item().Key(); len(k) == 19 {
				copy(h[:], k[3:])
				sb.add(h)
				if ws != nil {
					ws[k[3]].add(k)
				}
			}
		}
		return nil
	})
	if err != nil {
		for _, w := range ws {
			w.abort()
		}
		return err
	}
	for i, w := range ws {
		run, err := w.finish()
		if err != nil {
			for _, w := range ws[i+1:] {
				w.abort()
			}
			return fmt.Errorf("seen index: %w", err)
		}
		f.idx.install(byte(i), run)
		sb.subs[i].runN = uint(run.n)
	}
	if f.idx != nil {
		sb.idxMin = idxMinStale // from now on: every run holds its sub-filter's URLs
	}
	for i := range sb.subs {
		sb.subs[i].fresh = 0
	}
	f.bloomStop = make(chan struct{})
	sb.spawn = func() {
		f.bloomWG.Add(1)
		go f.bloomWorker()
	}
	f.bloom = sb
	f.bloomMu.Lock()
	for i := range sb.subs {
		if sb.subs[i].due {
			sb.wake()
			break
		}
	}
	f.bloomMu.Unlock()
	return nil
}

// bloomWorker rebuilds the sub-filters that outgrew their size, one at a time, and returns
// when none is due (or the frontier closes). At most one runs (seenBloom.running).
func (f *Frontier) bloomWorker() {
	defer f.bloomWG.Done()
	for {
		f.bloomMu.Lock()
		// A sub-filter over its size first (its false-positive rate is past the target),
		// then runs that are only stale.
		i := -1
		for k := range f.bloom.subs {
			s := &f.bloom.subs[k]
			if f.bloom.stopped || !s.due {
				continue
			}
			if s.n > s.cap {
				i = k
				break
			}
			if i < 0 {
				i = k
			}
		}
		if i < 0 {
			f.bloom.running = false
			f.bloomMu.Unlock()
			return
		}
		f.bloomMu.Unlock()
		if err := f.growSub(byte(i)); err != nil {
			if err != errBloomStopped {
				f.log.Warn("bloom sub-filter not rebuilt (retried at its next add)", "sub", i, "err", err)
			}
			f.bloomMu.Lock()
			f.bloom.subs[i].due = false
			f.bloomMu.Unlock()
		}
	}
}

// stopBloom stops the grow goroutine (a rebuild in progress is abandoned; the old
// sub-filter stays, complete) and waits for it.
func (f *Frontier) stopBloom() {
	f.bloomMu.Lock()
	f.bloom.stopped = true
	f.bloomMu.Unlock()
	close(f.bloomStop)
	f.bloomWG.Wait()
}

var errBloomStopped = errors.New("frontier: bloom rebuild stopped")

// growSub rebuilds sub-filter i from the seen keys whose hash starts with byte i, sized for
// bloomGrowth times its count, and its seen-index run from the same scan, without holding
// any lock while it reads Badger; when the filter still has room and only the run is
// stale, the run alone (the filter is not rebuilt, and not touched). No URL is
// lost: logging starts (under bloomMu) before the read snapshot is taken, and every add
// reaches the filter only after its Badger commit returned. So a seen key either was added
// before logging started, its commit is older and the snapshot has it, or it was added
// after and the log has it; the log is replayed into the new filter, under bloomMu, before
// the new filter replaces the old one. Tests meanwhile use the old filter, which has all.
func (f *Frontier) growSub(i byte) (err error) {
	sb := f.bloom
	s := &sb.subs[i]
	f.bloomMu.Lock()
	filter := s.n > s.cap || f.idx == nil
	s.rebuilding, s.log = filter, nil
	n0 := s.n
	size := sb.size(s.n)
	runN := s.runN
	f.bloomMu.Unlock()
	defer func() {
		if err != nil {
			f.bloomMu.Lock()
			s.rebuilding, s.log = false, nil
			f.bloomMu.Unlock()
		}
	}()

	if f.bloomHook != nil {
		f.bloomHook("logging", i)
	}
	var nf *bloom.BloomFilter
	if filter {
		nf = bloom.NewWithEstimates(size, sb.fp)
	}
	var n uint
	// The sub-filter's seen-index run comes from the same scan; its writer is made before
	// the snapshot is taken (seenIndex.writer reads the drop count).
	var w *idxWriter
	if f.idx != nil {
		if w, err = f.idx.writer(i, 64<<10); err != nil {
			f.log.Warn("seen index run not rebuilt", "sub", i, "err", err)
			w, err = nil, nil
			if !filter {
				// Nothing to rebuild: tried again once as many URLs were added again.
				f.bloomMu.Lock()
				s.fresh, s.due = 0, sb.overdue(s)
				f.bloomMu.Unlock()
				return nil
			}
		} else {
			defer func() {
				if w != nil {
					w.abort()
				}
			}()
		}
	}
	txn := f.db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{famSeen}})
	defer it.Close()
	// Skip-scan: within each partition (s key = famSeen, 2-byte partition, 16-byte hash)
	// the keys of sub-filter i are one run; seek to each partition's run in turn.
	seek := []byte{famSeen, 0, 0, i}
scan:
	for it.Seek(seek); it.Valid(); {
		k := it.Item().Key()
		if len(k) != 19 {
			it.Next()
			continue
		}
		switch {
		case k[3] < i:
			seek = append(seek[:0], famSeen, k[1], k[2], i)
			it.Seek(seek)
			continue
		case k[3] > i:
			p := uint16(k[1])<<8 | uint16(k[2])
			if p == math.MaxUint16 {
				break scan
			}
			p++
			seek = append(seek[:0], famSeen, byte(p>>8), byte(p), i)
			it.Seek(seek)
			continue
		}
		if nf != nil {
			nf.Add(k[3:])
		}
		if w != nil {
			w.add(k)
		}
		n++
		if n%4096 == 0 {
			select {
			case <-f.bloomStop:
				return errBloomStopped
			default:
			}
		}
		it.Next()
	}
	if f.bloomHook != nil {
		f.bloomHook("scanned", i)
	}
	if w != nil {
		run, werr := w.finish()
		w = nil
		if werr != nil {
			f.log.Warn("seen index run not rebuilt", "sub", i, "err", werr)
		} else {
			f.idx.install(i, run)
			runN = uint(run.n)
		}
	}
	f.bloomMu.Lock()
	if filter {
		for _, h := range s.log {
			nf.Add(h[:])
		}
		// A hash both in the snapshot and in the log counts twice: n only ever overcounts.
		n += uint(len(s.log))
		s.bf, s.cap, s.n = nf, size, n
		// A run not rebuilt (write error) keeps its old one and is tried again once as
		// many URLs were added again (no retry loop on a failing disk).
		s.runN, s.fresh = runN, uint(len(s.log))
	} else {
		// The URLs added since the rebuild began: an upper bound of those the run misses.
		s.runN, s.fresh = runN, s.n-n0
	}
	s.rebuilding, s.log = false, nil
	s.due = sb.overdue(s) // the worker loops on to it
	f.bloomMu.Unlock()
	return nil
}
