package frontier

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

type prep struct {
	c         *Candidate
	host      string
	part      uint16
	hash      [16]byte
	generated bool // looks machine-generated (GeneratedBudget)
	maybe     bool
	seen      bool
	// cached: the seen cache holds it; indexed: the seen index was asked (before the
	// Bloom filter) and did not hold it.
	cached, indexed bool
	key             []byte
	h               *host
	// cash and links sum the candidate's occurrences in the batch (OPIC).
	cash  float64
	links int
}

// batchDedup finds, within one Add call, the item an earlier candidate with the same URL
// hash became. For up to dedupSmall candidates (a page's links, a forwarded batch) it is
// an open-addressed table on the caller's stack, indexed by hash bytes (uniform) and at
// most half full; beyond that, a map. The map per call was 5% of the CPU of a mostly-seen
// link check.
type batchDedup struct {
	slots [2 * dedupSmall]int32 // index in items + 1; 0 = empty
	mask  uint64
	big   map[[16]byte]int
}

const dedupSmall = 256

func (d *batchDedup) init(n int) {
	if n > dedupSmall {
		d.big = make(map[[16]byte]int, n)
		return
	}
	size := uint64(16)
	for size < 2*uint64(n) {
		size *= 2
	}
	d.mask = size - 1
}

// lookupOrInsert returns the index of the item with hash h and true, or records that the
// item with hash h is about to be appended at len(items) and returns false.
func (d *batchDedup) lookupOrInsert(items []prep, h [16]byte) (int, bool) {
	if d.big != nil {
		if j, ok := d.big[h]; ok {
			return j, true
		}
		d.big[h] = len(items)
		return 0, false
	}
	for i := binary.LittleEndian.Uint64(h[8:]) & d.mask; ; i = (i + 1) & d.mask {
		s := d.slots[i]
		if s == 0 {
			d.slots[i] = int32(len(items) + 1)
			return 0, false
		}
		if items[s-1].hash == h {
			return int(s - 1), true
		}
	}
}

// Add admits candidates: the seen cache, trap defenses, seen check (Bloom, every "maybe"
// confirmed against the seen index or the exact Badger key), per-host caps, then one
// Badger transaction that marks them seen and queues them together (split only between
// URLs when Badger's batch limit is near).
func (f *Frontier) Add(cands []Candidate) (AddResult, error) {
	res := AddResult{Rejected: map[string]int{}}
	if f.isClosed() {
		return res, ErrClosed
	}
	items := f.screen(cands, &res)
	if len(items) == 0 {
		return res, nil
	}
	items, boosts, err := f.precheck(items, &res)
	if err != nil {
		return res, err
	}

	f.addMu.Lock()
	defer f.addMu.Unlock()
	f.passCash(boosts)
	if len(items) == 0 {
		return res, nil
	}
	if items, err = f.recheck(items, &res, boosts[:0]); err != nil || len(items) == 0 {
		return res, err
	}
	for i := range items {
		items[i].generated = f.cfg.GeneratedBudget >= 0 && looksGenerated(items[i].c.URL)
	}

	f.hostRecMu.Lock()
	defer f.hostRecMu.Unlock()
	accepted, hostOps := f.admit(items, &res)
	if len(accepted) == 0 {
		return res, nil
	}
	recs, done, err := f.commitAdd(accepted, hostOps)
	if f.afterAddCommit != nil {
		f.afterAddCommit()
	}
	f.publishAdded(accepted[:done], recs)
	res.Added = done
	if err != nil {
		return res, fmt.Errorf("frontier: add: %w", err)
	}
	return res, nil
}

// screen is Add's first pass, with no lock: it answers from the seen cache, rejects by
// the static trap checks, and merges a URL's repeated occurrences in the batch. It
// returns what needs a seen check.
func (f *Frontier) screen(cands []Candidate, res *AddResult) []prep {
	// Room for the links the seen cache does not answer, which in a long crawl are a
	// fifth of a batch or fewer: a prep per candidate was 10 KiB zeroed per 100 links.
	items := make([]prep, 0, min(len(cands), 32))
	var dup batchDedup
	dup.init(len(cands))
	lim := *f.limits.Load()
	var hits [cacheBatch]bool
	for i := range cands {
		c := &cands[i]
		// The seen cache first (exact: it holds only committed seen URLs): most links
		// of a crawl are links met again and again, and a hit needs no hash of the URL,
		// no host parsed and no trap check (the URL was admitted once; met again at a
		// depth past the limit, it counts as seen, not rejected: either way it is not
		// queued). Unless the link brings OPIC cash, which is passed on by the seen key.
		// Looked up cacheBatch at a time, so that their cache misses overlap.
		if i%cacheBatch == 0 {
			f.cache.hasMany(cands[i:min(i+cacheBatch, len(cands))], hits[:])
		}
		cached := hits[i%cacheBatch]
		if cached && !(f.cfg.Importance && c.Cash > 0) {
			res.AlreadySeen++
			continue
		}
		hn := c.Host
		if hn == "" {
			var ok bool
			if hn, ok = hostOf(c.URL); !ok {
				res.Rejected[RejectInvalidURL]++
				continue
			}
		}
		if r := staticCheck(lim, c.URL, c.Depth); r != "" {
			res.Rejected[r]++
			continue
		}
		hash := URLHash(c.URL)
		if j, ok := dup.lookupOrInsert(items, hash); ok {
			// The same URL from several pages of one batch: each occurrence is an
			// in-link and brings its cash.
			res.AlreadySeen++
			items[j].cash += c.Cash
			items[j].links++
			continue
		}
		items = append(items, prep{c: c, host: hn, part: f.cfg.PartitionOf(hn), hash: hash, cash: c.Cash, links: 1, seen: cached, cached: cached})
	}
	return items
}

// precheck is the seen check before addMu, concurrent with other Adds: the seen cache's
// misses pay the Bloom filter's k probes (all k for a "maybe"), each a likely cache miss
// in a filter of many MB, and every "maybe" is confirmed. It returns the URLs still new
// and, with Config.Importance, the seen ones whose cash is to be passed on.
func (f *Frontier) precheck(items []prep, res *AddResult) (fresh, boosts []prep, err error) {
	miss := 0
	for i := range items {
		if !items[i].seen {
			miss++
		}
	}
	if miss > 0 && f.seenIdx != nil && f.seenShare.Load() > indexFirstShare {
		miss = f.indexFirst(items, miss)
	}
	if miss > 0 {
		f.bloomMu.RLock()
		for i := range items {
			if !items[i].seen {
				items[i].maybe = f.bloom.test(items[i].hash)
			}
		}
		f.bloomMu.RUnlock()
	}
	if err := f.confirm(items); err != nil {
		return nil, nil, err
	}
	f.noteSeenShare(items)
	var bp *[]prep
	if f.cfg.Importance {
		bp = &boosts
	}
	return f.dropSeen(items, res, bp), boosts, nil
}

// recheck repeats the seen check under addMu: a concurrent Add may have committed some of
// items since precheck. Every commit adds its hashes to the filter before releasing
// addMu, so "definitely new" is still exact. boosts is a buffer for the cash to pass on.
func (f *Frontier) recheck(items []prep, res *AddResult, boosts []prep) ([]prep, error) {
	f.bloomMu.RLock()
	for i := range items {
		items[i].maybe = f.bloom.test(items[i].hash)
	}
	f.bloomMu.RUnlock()
	if err := f.confirm(items); err != nil {
		return nil, err
	}
	var bp *[]prep
	if f.cfg.Importance {
		bp = &boosts
	}
	items = f.dropSeen(items, res, bp)
	f.passCash(boosts)
	return items, nil
}

// passCash gives the OPIC cash of links to URLs already seen (Config.Importance) and
// logs a failure: the estimate is approximate by design. Called with addMu held.
func (f *Frontier) passCash(boosts []prep) {
	if len(boosts) == 0 {
		return
	}
	if err := f.boost(boosts); err != nil {
		f.log.Warn("opic cash not passed on", "urls", len(boosts), "err", err)
	}
}

// admit applies the per-host caps (MaxSubdomains, MaxPagesPerHost, GeneratedBudget, query
// variants) under mu and reserves what it accepts: the hosts' counters, a queue key per
// URL (noted in committing until its in-memory insert) and the host records to write.
// Called with addMu and hostRecMu held.
func (f *Frontier) admit(items []prep, res *AddResult) (accepted []prep, hostOps []op) {
	f.mu.Lock()
	defer f.mu.Unlock()
	accepted = items[:0]
	touched := make(map[*host]struct{})
	for _, it := range items {
		if f.hosts[it.host] == nil && it.c.Depth > 0 && f.cfg.MaxSubdomains >= 0 {
			if p := f.hosts[parentHost(it.host)]; p != nil {
				if p.children >= f.cfg.MaxSubdomains {
					res.Rejected[RejectSubdomainBudget]++
					continue
				}
				p.children++
			}
		}
		h := f.hostLocked(it.host)
		if !it.generated && f.cfg.GeneratedBudget >= 0 && h.queryVariant(it.c.URL, f.cfg.QueryVariantsFree) {
			it.generated = true
		}
		if f.cfg.MaxPagesPerHost >= 0 && h.admitted >= f.cfg.MaxPagesPerHost {
			res.Rejected[RejectHostPageCap]++
			continue
		}
		if it.generated && h.generated >= f.cfg.GeneratedBudget {
			res.Rejected[RejectGeneratedBudget]++
			continue
		}
		h.admitted++
		if it.generated {
			h.generated++
		}
		it.h = h
		touched[h] = struct{}{}
		accepted = append(accepted, it)
	}
	// Keys once the batch is counted, so that every URL of a host in one Add sees the
	// same size of its site (importance), whatever its place in the batch.
	for i := range accepted {
		it := &accepted[i]
		it.key = qKey(it.part, it.host, queueBand(it.c.Priority, it.h.importance(it.cash, it.links, it.h.pagesAdding())), it.c.Depth, f.seq.Add(1))
		f.committing[string(it.key)] = struct{}{}
	}
	hostOps = make([]op, 0, len(touched))
	for h := range touched {
		r := h.rec()
		hostOps = append(hostOps, op{k: hKey(h.part, h.name), v: r.encode()})
	}
	return accepted, hostOps
}

// commitAdd writes the accepted URLs, seen and queued records of each in one group, and
// the host records. It returns the queue records and how many URLs were committed; on an
// error it gives back the reservations (admit) of the URLs not written.
func (f *Frontier) commitAdd(accepted []prep, hostOps []op) (recs []qrec, done int, err error) {
	now := f.cfg.Now()
	b := newBatch(f.db)
	defer b.discard()
	recs = make([]qrec, len(accepted))
	for i := range accepted {
		it := &accepted[i]
		c := it.c
		recs[i] = qrec{URL: c.URL, From: c.From, Depth: c.Depth, Hops: c.Hops, Priority: c.Priority,
			Cash: it.cash, History: it.cash, Links: it.links, Val: Validators{Hint: int64(c.ChangeHint)}}
		sr := SeenRecord{URL: c.URL, State: StateQueued, At: now, QKey: it.key}
		if err = b.group(
			op{k: hashKey(famSeen, it.part, it.hash), v: sr.encode()},
			op{k: it.key, v: recs[i].encode()},
		); err != nil {
			break
		}
	}
	if err == nil {
		for _, o := range hostOps {
			if err = b.group(o); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = b.commit()
	}
	done = min(b.commited, len(accepted))
	if err != nil {
		f.mu.Lock()
		for _, it := range accepted[done:] {
			it.h.admitted--
			if it.generated {
				it.h.generated--
			}
			delete(f.committing, string(it.key))
		}
		f.mu.Unlock()
	}
	return recs, done, err
}

// publishAdded makes committed URLs known: the Bloom filter and the seen cache, then the
// counters, the hosts' queues and the schedule. Called with addMu held, so the filter
// holds them before another Add's recheck.
func (f *Frontier) publishAdded(added []prep, recs []qrec) {
	f.bloomMu.Lock()
	for _, it := range added {
		f.bloom.add(it.part, it.hash)
		f.cache.add(it.c.URL)
	}
	f.bloomMu.Unlock()

	f.mu.Lock()
	for i, it := range added {
		delete(f.committing, string(it.key))
		it.h.queued++
		f.queued++
		f.seen++
		f.insertLocked(it.h, item{key: it.key, rec: recs[i]})
		f.fixLocked(it.h)
	}
	f.signalLocked()
	f.mu.Unlock()
}

// TrimSeenIndex drops the process's mapping of the seen index's pages (they stay in the
// page cache; the next lookup of a page maps it back with a minor fault) and returns the
// mapped bytes it advised. For badgermem.Trimmer.Also.
func (f *Frontier) TrimSeenIndex() int64 { return f.seenIdx.trim() }

// The order of a cache miss's checks. A miss is a new URL or a seen one the cache does
// not hold (a "cold" link). Bloom first costs a new URL one filter test (k probes, each a
// likely CPU cache miss: about 1.2 us in a filter of many MB) and a cold link the test and
// then an index lookup; index first costs a cold link one lookup and a new URL a lookup
// and then the test. So when most misses turn out seen, as in a long crawl, where nearly
// every link was met before, the index goes first: it answers exactly ("seen") for the keys
// its runs hold, and whatever it does not hold takes the Bloom path as before. The share is
// an average over recent Add calls; index first once it exceeds indexFirstShare (2/3: a
// lookup read with pread costs up to about twice a filter test).
const indexFirstShare = 2 * (1 << 15) / 3 // of 1<<15

// noteSeenShare folds the share of this call's cache misses that turned out seen into
// f.seenShare (an average with weight 1/16 per call; racing updates may be lost, which
// only slows the average).
func (f *Frontier) noteSeenShare(items []prep) {
	miss, seen := 0, 0
	for i := range items {
		if items[i].cached {
			continue
		}
		miss++
		if items[i].seen {
			seen++
		}
	}
	if miss == 0 {
		return
	}
	old := f.seenShare.Load()
	f.seenShare.Store(old + (int64(seen<<15/miss)-old)/16)
}

// indexFirst asks the seen index for every item the cache did not answer, before the
// Bloom filter, and returns how many are still unanswered. A read error leaves the rest
// to the Bloom path (which asks the index again, then Badger).
func (f *Frontier) indexFirst(items []prep, miss int) int {
	for i := range items {
		it := &items[i]
		if it.seen {
			continue
		}
		ok, err := f.seenIdx.has(it.part, it.hash)
		if err != nil {
			return miss
		}
		if !ok {
			it.indexed = true
			continue
		}
		f.bloomChecks.Add(1)
		f.idxHits.Add(1)
		it.seen = true
		f.cache.add(it.c.URL)
		miss--
	}
	return miss
}

// confirm looks up the exact seen key of every item the Bloom filter called "maybe".
func (f *Frontier) confirm(items []prep) error {
	need := false
	for i := range items {
		need = need || items[i].maybe
	}
	if !need {
		return nil
	}
	if f.seenIdx != nil {
		// The seen index's runs first: a key found there is a committed seen key (a
		// search of one mapped block); one not found may be newer than its run, so Badger
		// is asked.
		need = false
		for i := range items {
			if !items[i].maybe {
				continue
			}
			if items[i].indexed {
				need = true // asked before the Bloom filter: not in its run
				continue
			}
			ok, err := f.seenIdx.has(items[i].part, items[i].hash)
			if err != nil {
				// A failing disk: Badger answers the rest of this call (one warning a call,
				// not one a link).
				f.log.Warn("seen index read failed (Badger asked)", "err", err)
				need = true
				break
			}
			if ok {
				f.bloomChecks.Add(1)
				f.idxHits.Add(1)
				items[i].seen, items[i].maybe = true, false
				f.cache.add(items[i].c.URL)
				continue
			}
			need = true
		}
		if !need {
			return nil
		}
	}
	return f.db.View(func(txn *badger.Txn) error {
		var k [19]byte
		for i := range items {
			if !items[i].maybe {
				continue
			}
			k[0], k[1], k[2] = famSeen, byte(items[i].part>>8), byte(items[i].part)
			copy(k[3:], items[i].hash[:])
			f.bloomChecks.Add(1)
			_, err := txn.Get(k[:])
			switch {
			case err == nil:
				items[i].seen = true
				f.cache.add(items[i].c.URL)
			case errors.Is(err, badger.ErrKeyNotFound):
				f.bloomFalsePos.Add(1)
			default:
				return fmt.Errorf("frontier: seen lookup: %w", err)
			}
		}
		return nil
	})
}

func (f *Frontier) dropSeen(items []prep, res *AddResult, boost *[]prep) []prep {
	out := items[:0]
	for _, it := range items {
		if it.seen {
			res.AlreadySeen++
			if boost != nil && it.cash > 0 {
				*boost = append(*boost, it)
			}
			continue
		}
		it.maybe = false
		out = append(out, it)
	}
	return out
}
