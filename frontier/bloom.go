package frontier

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/dgraph-io/badger/v4"
)

// The seen set's Bloom filter is split by the first byte of the URL hash into bloomSubs
// independent filters. A test or an add touches exactly one of them (the same k probes as
// one big filter), and each grows on its own: when a sub-filter holds more URLs than it was
// sized for, a background goroutine rebuilds it, sized for bloomGrowth times its count. So
//   - memory stays close to what the false-positive rate needs: right after a growth a
//     sub-filter has 1.2 x 1.198 = 1.44 bytes per URL it holds (at 1%), just before the
//     next one 1.198; there is no 2x step;
//   - a rebuild holds old and new copies of 1/256 of the filter at once, and holds no lock
//     while it reads (see growSub for why no URL added meanwhile can be missed).
//
// A rebuild reads the sub-filter's keys from the Badger seen keys whose hash starts with
// its byte (a scan), or, with a seen index, from the sub-filter's run merged with the log
// of the keys added since the run's snapshot (bloomSub.pend): the same keys, read in
// sequence from one file instead of through Badger's merge iterator and 271 seeks. The
// scan is left for what a merge cannot trust: the first build at Open, a log that was
// dropped or a run write that failed, and a partition dropped since the run's snapshot.
const (
	bloomSubs   = 256
	bloomGrowth = 1.2
)

// seenBloom is the partitioned filter. Every field is guarded by Frontier.bloomMu: tests
// under RLock, adds and the rebuild's bookkeeping under Lock.
type seenBloom struct {
	fpRate float64
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
	filter *bloom.BloomFilter
	cap    uint // URLs it was sized for
	n      uint // URLs added since it was built (dropped partitions' URLs stay counted)
	// rebuilding: a rebuild has started; every key added meanwhile is logged in pend, and
	// replayed into the new filter before it replaces filter.
	rebuilding bool
	due        bool // overdue: waiting for the rebuild goroutine
	// With a seen index: runN is the size of the sub-filter's run, fresh the URLs added
	// since its snapshot (an upper bound).
	runN, fresh uint
	// pend logs the keys (partition and hash, as in a run) added since the current run's
	// snapshot began (the log of the rebuild that made it, then every add), for the next
	// rebuild to merge with the run. Without a seen index it logs only during a rebuild.
	// Between rebuilds it holds at most pendMax keys: past that (the rebuild goroutine far
	// behind) it is dropped and pendLost set, and the next rebuild scans Badger. In all
	// 18 bytes for each URL the runs miss: 1/idxStale of the seen set when the runs are
	// due, 28 MB at 100M URLs, half that on average.
	pend     [][idxEntry]byte
	pendLost bool
}

func newSeenBloom(expected uint, fp float64) *seenBloom {
	return &seenBloom{fpRate: fp, minCap: max(1, expected/bloomSubs)}
}

// size is the capacity a sub-filter holding n URLs is (re)built for.
func (sb *seenBloom) size(n uint) uint {
	return max(sb.minCap, uint(math.Ceil(float64(n)*bloomGrowth)))
}

func (sb *seenBloom) test(h [16]byte) bool { return sb.subs[h[0]].filter.Test(h[:]) }

// add records a committed seen key of partition part. The caller holds bloomMu for writing,
// and adds only hashes whose Badger commit has returned (growSub relies on that order).
func (sb *seenBloom) add(part uint16, h [16]byte) {
	s := &sb.subs[h[0]]
	s.filter.Add(h[:])
	s.n++
	if s.rebuilding || sb.idxMin > 0 && !s.pendLost {
		if !s.rebuilding && len(s.pend) >= sb.pendMax(s) {
			s.pend, s.pendLost = nil, true
		} else {
			s.pend = append(s.pend, idxKey(part, h))
		}
	}
	s.fresh++
	if !s.due && sb.overdue(s) {
		s.due = true
		sb.wake()
	}
}

// pendMax bounds a sub-filter's log between rebuilds: twice what makes its run due, and
// pendSlack more (the rebuild goroutine serves 256 sub-filters one at a time, and small
// ones fill their logs in a moment).
func (sb *seenBloom) pendMax(s *bloomSub) int {
	return 2*int(max(s.runN/idxStale, sb.idxMin)) + pendSlack
}

const pendSlack = 1024

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
		n += int(sb.subs[i].filter.Cap() / 8)
	}
	return n
}

func (sb *seenBloom) fill() float64 {
	var set, all uint
	for i := range sb.subs {
		set += sb.subs[i].filter.BitSet().Count()
		all += sb.subs[i].filter.Cap()
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
		sb.subs[i].filter = bloom.NewWithEstimates(per, sb.fpRate)
		sb.subs[i].cap = per
	}
	// The seen index's runs come from the same scan (writers before the snapshot).
	var ws []*idxWriter
	if f.seenIdx != nil {
		for i := range bloomSubs {
			w, err := f.seenIdx.writer(byte(i), 8<<10)
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
				sb.add(uint16(k[1])<<8|uint16(k[2]), h) // not logged: no run is installed yet
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
		f.seenIdx.install(byte(i), run)
		sb.subs[i].runN = uint(run.n)
	}
	if f.seenIdx != nil {
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

// growSub rebuilds sub-filter i, sized for bloomGrowth times its count, and its seen-index
// run, without holding any lock while it reads; when the filter still has room and only the
// run is stale, the run alone (the filter is not rebuilt, and not touched).
//
// The keys come from the run merged with the log of keys added since the run's snapshot
// (mergeKeys), or from a scan of Badger's seen keys (scanKeys) where a merge cannot be
// trusted: no run, a log dropped or lost to a failed run write, a partition dropped since
// the run's snapshot (the run still holds its keys, which Badger no longer has; a scanned
// run starts trusted again). Either way no URL is lost: a new log starts (under bloomMu)
// before the read begins, and every add reaches the filter only after its Badger commit
// returned. So a seen key either was added before the new log started, and then is in the
// snapshot a scan reads or in the old run or the old log a merge reads, or was added after
// and the new log has it; the new log is replayed into the new filter, under bloomMu,
// before the new filter replaces the old one, and stays as the log of the new run. Tests
// meanwhile use the old filter, which has all. A merged run holds only committed keys, as
// its parts do; it keeps the old run's snapshot mark (built), so a partition dropped since
// is not trusted in it either.
func (f *Frontier) growSub(i byte) (err error) {
	sb := f.bloom
	s := &sb.subs[i]
	f.bloomMu.Lock()
	filter := s.n > s.cap || f.seenIdx == nil
	prev, lost := s.pend, s.pendLost
	s.pend, s.pendLost, s.rebuilding = nil, false, true
	n0 := s.n
	size := sb.size(s.n)
	runN := s.runN
	f.bloomMu.Unlock()
	defer func() {
		if err != nil {
			// The old run stays, and what the old log held is in neither it nor the new
			// log: the next rebuild scans.
			f.bloomMu.Lock()
			s.rebuilding = false
			s.pend, s.pendLost = nil, f.seenIdx != nil
			f.bloomMu.Unlock()
		}
	}()

	if f.bloomHook != nil {
		f.bloomHook("logging", i)
	}
	var nf *bloom.BloomFilter
	if filter {
		nf = bloom.NewWithEstimates(size, sb.fpRate)
	}
	var old *idxRun // only this goroutine installs runs: it stays open while read below
	if f.seenIdx != nil {
		old = f.seenIdx.run(i)
	}
	merge := old != nil && !lost && f.seenIdx.drops.Load() == old.built
	// The sub-filter's seen-index run comes from the same read; its writer is made before
	// a scan's snapshot is taken (seenIndex.writer reads the drop count).
	var w *idxWriter
	if f.seenIdx != nil {
		if w, err = f.seenIdx.writer(i, idxWriteChunk); err != nil {
			f.log.Warn("seen index run not rebuilt", "sub", i, "err", err)
			w, err = nil, nil
			if !filter {
				// Nothing to rebuild: tried again once as many URLs were added again,
				// with a scan (the old log is gone).
				f.bloomMu.Lock()
				s.rebuilding = false
				s.pend, s.pendLost = nil, true
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
	emit := func(e []byte) {
		if nf != nil {
			nf.Add(e[2:])
		}
		if w != nil {
			w.addEntry(e)
		}
	}
	var n uint
	if merge {
		if w != nil {
			w.built = old.built // the merged run is as old as the oldest snapshot in it
		}
		n, err = f.mergeKeys(old, prev, emit)
		f.seenIdx.merges.Add(1)
	} else {
		n, err = f.scanKeys(i, emit)
		if f.seenIdx != nil {
			f.seenIdx.scans.Add(1)
		}
	}
	if err != nil {
		return err
	}
	prev = nil
	if f.bloomHook != nil {
		f.bloomHook("scanned", i)
	}
	runOK := w != nil
	if w != nil {
		run, werr := w.finish()
		w = nil
		if werr != nil {
			f.log.Warn("seen index run not rebuilt", "sub", i, "err", werr)
			runOK = false
		} else {
			f.seenIdx.install(i, run)
			runN = uint(run.n)
		}
	}
	f.installGrown(s, nf, size, n, n0, runN, runOK)
	return nil
}

// installGrown ends a growSub, under bloomMu: the keys logged since the rebuild began go
// into the new filter nf (sized for size; nil: only the run was rebuilt), which replaces
// the old one with n keys read plus those; the sub-filter's run size becomes runN, and
// the log is kept as the new run's, dropped without an index, or marked lost when the
// run was not rebuilt (runOK false). n0 is the sub-filter's count when growSub began.
func (f *Frontier) installGrown(s *bloomSub, nf *bloom.BloomFilter, size, n, n0, runN uint, runOK bool) {
	f.bloomMu.Lock()
	added := s.n - n0 // the URLs added since the rebuild began: all in the new log
	if nf != nil {
		for _, e := range s.pend {
			nf.Add(e[2:])
		}
		// A hash both read and in the log counts twice: n only ever overcounts.
		n += added
		s.filter, s.cap, s.n = nf, size, n
	}
	// A run not rebuilt (write error) keeps its old one and is tried again once as many
	// URLs were added again (no retry loop on a failing disk), with a scan: the old log
	// it missed is gone.
	s.runN, s.fresh = runN, added
	if f.seenIdx == nil {
		s.pend = nil
	} else if !runOK {
		s.pend, s.pendLost = nil, true
	}
	s.rebuilding = false
	s.due = f.bloom.overdue(s) // the worker loops on to it
	f.bloomMu.Unlock()
}

// scanKeys passes emit every seen key of sub-filter i (partition and hash) from one Badger
// snapshot, and returns how many.
func (f *Frontier) scanKeys(i byte, emit func(e []byte)) (uint, error) {
	txn := f.db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{famSeen}})
	defer it.Close()
	var n uint
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
		emit(k[1:])
		n++
		if n%4096 == 0 && f.bloomStopped() {
			return n, errBloomStopped
		}
		it.Next()
	}
	return n, nil
}

// mergeKeys passes emit the union of run's keys and log's (sorted here), in key order,
// each once, and returns how many.
func (f *Frontier) mergeKeys(run *idxRun, log [][idxEntry]byte, emit func(e []byte)) (uint, error) {
	slices.SortFunc(log, func(a, b [idxEntry]byte) int { return bytes.Compare(a[:], b[:]) })
	var n uint
	out := func(e []byte) {
		emit(e)
		n++
	}
	j := 0
	err := run.each(func(e []byte) error {
		for ; j < len(log) && bytes.Compare(log[j][:], e) < 0; j++ {
			if j == 0 || log[j] != log[j-1] {
				out(log[j][:])
			}
		}
		for ; j < len(log) && bytes.Equal(log[j][:], e); j++ {
		}
		out(e)
		if n%4096 == 0 && f.bloomStopped() {
			return errBloomStopped
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	for ; j < len(log); j++ {
		if j == 0 || log[j] != log[j-1] {
			out(log[j][:])
		}
	}
	return n, nil
}

func (f *Frontier) bloomStopped() bool {
	select {
	case <-f.bloomStop:
		return true
	default:
		return false
	}
}
