package frontier

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Candidate is a URL offered to the frontier.
type Candidate struct {
	URL      string // canonical absolute URL (see docs/CANONICAL_URLS.md)
	Host     string // host key; if empty it is derived from URL
	Depth    int    // link depth from the seed (seeds 0)
	Hops     int    // off-site hops (carried, not interpreted)
	From     string // the page it was found on
	Priority uint8  // seed class, 0 = highest (at most 3 classes: 0..2 and the rest)
	// Cash is the URL's share of OPIC importance (Abiteboul et al.): a seed starts with 1,
	// a fetched page splits its cash among its links. Cash given to a URL already queued is
	// added to its cash (Config.Importance), which can move it up its host's queue. Queue
	// order is seed class, then importance (cash plus a forecast of the in-links still to
	// come, host.importance; in third-of-an-octave steps), then depth, then arrival, so
	// with no cash it is breadth-first.
	Cash float64
	// ChangeHint is how often the page is said to change (a sitemap's changefreq or
	// lastmod): the first revisit interval when Recrawl is on. 0: none.
	ChangeHint time.Duration
}

// AddResult counts what Add did with its candidates.
type AddResult struct {
	Added       int
	AlreadySeen int            // in the seen set before, or repeated within the call
	Rejected    map[string]int // reason (Reject* constants) -> count
}

// Lease is one URL handed out by Next. It stays in its queue until Done.
type Lease struct {
	URL, Host string
	Depth     int
	Hops      int
	Attempts  int // transient failures so far
	From      string
	Priority  uint8
	// Cash is the URL's OPIC cash when leased: the caller splits it among the links it
	// finds (Candidate.Cash). History is all the cash the URL received so far.
	Cash, History float64
	// Revisit: the URL was fetched before and is due again (Config.Recrawl). Validators
	// holds what the last fetch saw, for a conditional request and the change check.
	Revisit    bool
	Validators Validators

	issuer *Frontier // the frontier whose Next issued it (ErrBadLease otherwise)
	part   uint16
	key    []byte
	rec    qrec
	done   atomic.Bool
	// prevNext and leaseNext are the host's next-allowed time before and right after this
	// lease, so that an outcome that sent no request can give the slot back.
	prevNext, leaseNext int64
	// released: Release gave the host's request slot back (guarded by the frontier's mu).
	released bool
}

// OutcomeKind says what happened to a leased URL.
type OutcomeKind int

// Outcome kinds.
const (
	// Fetched: a final outcome was recorded (2xx, 3xx, 4xx...). The URL leaves its queue.
	Fetched OutcomeKind = iota
	// Retry: a transient failure (timeout, connection error, 5xx, 429). Attempts+1; the URL
	// waits for now+backoff; the MaxAttempts-th failure makes it a dead letter.
	Retry
	// Requeue: not attempted (the slot went to robots.txt, shutdown...). Back in its queue
	// unchanged, no attempt counted.
	Requeue
	// Drop: final, not fetched (robots-disallowed, filtered). Recorded with Err as the reason.
	Drop
)

// Outcome is reported to Done.
type Outcome struct {
	Kind   OutcomeKind
	Status int    // HTTP status, 0 if none
	Err    string // error text (Retry) or drop reason (Drop)
	// RetryAfter is host-wide: no request to the host before now+RetryAfter (any Kind).
	RetryAfter time.Duration
	// Meta is opaque and stored in the URL's seen record (WARC location, etag...).
	Meta []byte
	// Finished is when the host's response ended (the last byte read, or the failure). With
	// PerHost 1 the host's delay runs from here, not from Done, so the time the caller spent
	// archiving and parsing does not stretch the host's schedule. Zero: the time of Done.
	// A Finished in the future (up to maxFinishedAhead) is honoured: a caller that closed a
	// connection the server may still be answering on gives the server that time.
	Finished time.Time
	// Park, with Kind Retry, makes the URL a dead letter now, whatever its attempts (its
	// host was parked, e.g. robots.txt unreachable through its retries).
	Park bool
	// NoRequest says the lease sent nothing to the host (a robots.txt-disallowed URL
	// dropped, a lease given back at shutdown): the host's politeness clock goes back to
	// where it was before the lease, unless something else moved it since.
	NoRequest bool
	// Version, with Kind Fetched and Config.Recrawl on, says what this fetch saw of the
	// page; the frontier schedules the next visit from it (nil: no change seen, no
	// validators). A URL fetched while recrawl is off is not scheduled.
	Version *Version
}

// Stats are the frontier's counters, kept in memory and counted exactly by Open.
type Stats struct {
	Queued       int // URLs waiting in queues (not leased, not waiting for a retry)
	InFlight     int // leased, Done not yet called
	Hosts        int // hosts known (admitted at least one URL, or have state)
	ReadyHosts   int // hosts that could get a lease now
	WaitingHosts int // hosts with queued URLs waiting for their politeness time
	RetryPending int // URLs waiting for their retry time
	// RevisitPending counts fetched URLs scheduled for a later visit (Config.Recrawl);
	// RevisitQueued those whose time came and that wait in their host's queue.
	RevisitPending, RevisitQueued int
	DeadLetters                   int
	Seen                          int // URLs in the seen set
	BloomBytes                    int // memory of the Bloom filter's bit array
	// BloomFill is the share of the filter's bits set (its false-positive rate grows with
	// it; the filter is rebuilt larger when the seen count passes its size).
	BloomFill float64
	// BloomChecks counts "maybe seen" answers confirmed against the exact keys (Badger, or
	// the seen index's copy of them); BloomFalsePositives those Badger answered "new" (a
	// false positive costs a lookup, never a URL).
	BloomChecks, BloomFalsePositives int64
	// SeenIndexHits counts the BloomChecks that the seen index answered without a Badger
	// read (Config.SeenIndexDir).
	SeenIndexHits int64
}

type item struct {
	key []byte
	rec qrec
}

// host is the in-memory state of one host: counters, politeness and a small prefetch buffer.
type host struct {
	name     string
	part     uint16
	queued   int // q keys of this host, leased ones included
	inflight int // leases not yet Done
	// released counts the leases whose request is over (Release) but not yet Done: the
	// host's requests in flight are inflight - released.
	released  int
	leased    [][]byte
	prefetch  []item // the first len(prefetch) non-leased q keys, in key order
	nextAt    int64  // unix ns: no lease before (politeness.go)
	delay     time.Duration
	delaySet  bool
	admitted  int
	generated int
	// fetched counts URLs of the host that left the queue since start (its pages whose
	// links the frontier has, for importance).
	fetched int
	loading bool // a refill or a park is running outside the lock
	// cursor: every non-leased q key of the host that is not in prefetch is >= cursor (nil: the
	// host's first key). Refills seek to it instead of walking the tombstones that Done
	// leaves at the head of the queue. loadLow is the lowest key inserted during a refill.
	cursor, loadLow []byte
	queueGen        uint64 // bumped on every change to the host's non-leased queue
	heapIdx         int    // index in the heap it is in (waiting or ready), -1 if absent
	inReady         bool   // heapIdx is in the ready heap
	// revisits counts the revisit keys (band 0) among queued; revisitCredit is the deficit
	// counter that gives revisits their share of the host's leases.
	revisits      int
	revisitCredit float64
	// paths counts admitted query variants per path (QueryVariantsFree), lazily made.
	paths map[string]uint16
	// children counts hosts admitted one label below this one (MaxSubdomains).
	children int
}

func (h *host) rec() hostRec {
	return hostRec{DelaySet: h.delaySet, Delay: h.delay, Next: h.nextAt, Admitted: h.admitted, Generated: h.generated}
}

// Frontier is the per-node crawl frontier. It is safe for concurrent use.
type Frontier struct {
	cfg        Config
	db         *badger.DB
	limits     atomic.Pointer[trapLimits] // replaced whole by SetLimits
	recrawl    atomic.Pointer[Recrawl]    // replaced whole by SetRecrawl
	historyMu  sync.Mutex
	historyAvg float64 // moving average of the OPIC history of fetched URLs (relativeImportance)
	log        *slog.Logger

	addMu       sync.Mutex // serializes Add's confirm-then-write of the seen set
	hostRecMu   sync.Mutex // serializes build+write of h keys, so the last write is the newest state
	retryScanMu sync.Mutex // serializes r/ scans (mover, ParkHost)

	bloomMu sync.RWMutex // tests under RLock; adds and sub-filter swaps under Lock
	bloom   *seenBloom   // bloom.go
	// bloomStop tells the goroutine that grows sub-filters (bloomWorker, started only
	// while one is due) to stop; bloomWG waits for it.
	bloomStop chan struct{}
	bloomWG   sync.WaitGroup
	// bloomFillMu guards the cached Bloom fill: counting the set bits reads the whole filter
	// (12 MB at 10M URLs), too much for Stats, which done-checks call 5 times a second.
	bloomFillMu sync.Mutex
	bloomFillAt int64 // Now().UnixNano() of the last count
	bloomFill   float64

	seq atomic.Uint64

	mu             sync.Mutex
	hosts          map[string]*host
	waiting        hostHeap // hosts whose next-allowed time is still to come
	ready          hostHeap // hosts whose time has come, by priority
	wake           chan struct{}
	waiters        int
	closed         bool
	queued         int // q keys, leased included
	inflight       int
	retryPending   int
	revisitPending int // r keys with the revisit bit
	revisitQueued  int // q keys in the revisit band
	dead           int
	seen           int
	retryDue       map[uint16]int64 // partition -> earliest due of its r keys (upper bound)
	retryNext      int64            // min of retryDue, 0 = none
	retryFloor     map[uint16]int64 // partition -> no r key is due before this (scans seek here, past tombstones)
	// committing holds q keys written (or being written) to Badger whose in-memory insert
	// has not happened yet; a refill that reads one leaves it to that insert.
	committing map[string]struct{}
	moving     bool

	cache   *seenCache // nil when disabled
	seenIdx *seenIndex // seenindex.go; nil without Config.SeenIndexDir

	afterAddCommit func() // test hook: runs between Add's commit and its in-memory insert
	// bloomHook is a test hook: growSub calls it once its log has started ("logging") and
	// after its Badger scan ("scanned"), with the sub-filter's index.
	bloomHook func(stage string, sub byte)

	// Partition controls (partition.go). A partition is paused while pauseUser says so or
	// pauseOps counts a running import or drop; its hosts stay out of the ready heap and
	// its retries are not moved. partitionOpMu serializes imports and drops.
	pauseUser     map[uint16]bool
	pauseOps      map[uint16]int
	partitionOpMu sync.Mutex

	bloomFalsePos atomic.Int64 // Bloom said "maybe", Badger said "new"
	bloomChecks   atomic.Int64 // cache misses found seen or asked of Badger: Bloom said "maybe", or the index asked first held it
	idxHits       atomic.Int64 // of those, answered by the seen index's runs
	// seenShare: of recent Add calls' seen-cache misses, the share that turned out seen,
	// in 1/1<<15 (indexFirst).
	seenShare atomic.Int64
}

// Open builds a Frontier over cfg.DB: it loads host state and counters, counts queued,
// retry-pending, dead and seen keys, and rebuilds the Bloom filter from the seen keys.
// Leases outstanding when the previous process died are simply queued again.
func Open(cfg Config) (*Frontier, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f := &Frontier{
		cfg:        cfg,
		db:         cfg.DB,
		log:        cfg.Logger.With("component", "frontier"),
		hosts:      make(map[string]*host),
		wake:       make(chan struct{}),
		retryDue:   make(map[uint16]int64),
		retryFloor: make(map[uint16]int64),
		committing: make(map[string]struct{}),
		pauseUser:  make(map[uint16]bool),
		pauseOps:   make(map[uint16]int),
	}
	f.ready.prio = true
	f.SetRecrawl(cfg.Recrawl)
	f.limits.Store(&trapLimits{cfg.MaxDepth, cfg.MaxURLLength, cfg.MaxRepeatedSegments, cfg.MaxQueryParams})
	if cfg.SeenCacheSize > 0 {
		f.cache = newSeenCache(cfg.SeenCacheSize)
	}
	if cfg.SeenIndexDir != "" {
		if err := os.MkdirAll(cfg.SeenIndexDir, 0o755); err != nil {
			return nil, fmt.Errorf("frontier: open: seen index: %w", err)
		}
		mapMax := cfg.SeenIndexMapBytes
		if mapMax == 0 {
			mapMax = DefaultSeenIndexMapBytes
		}
		f.seenIdx = newSeenIndex(cfg.SeenIndexDir, mapMax)
	}
	var maxSeq uint64
	err := f.db.View(func(txn *badger.Txn) error {
		keysOnly := badger.IteratorOptions{PrefetchValues: false}
		// host state
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 100, Prefix: []byte{famHost}})
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) < 4 || bytes.IndexByte(k[3:], 0) >= 0 {
				continue // meta key
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				it.Close()
				return err
			}
			r, err := decodeHost(v)
			if err != nil {
				it.Close()
				return err
			}
			h := f.hostLocked(string(k[3:]))
			h.delay, h.delaySet, h.nextAt, h.admitted, h.generated = r.Delay, r.DelaySet, r.Next, r.Admitted, r.Generated
		}
		it.Close()
		// subdomain counts (MaxSubdomains) follow from the host names
		for name := range f.hosts {
			if p := f.hosts[parentHost(name)]; p != nil {
				p.children++
			}
		}
		// queued keys
		keysOnly.Prefix = []byte{famQueue}
		it = txn.NewIterator(keysOnly)
		for it.Rewind(); it.Valid(); it.Next() {
			name, seq, ok := parseQKey(it.Item().Key())
			if !ok {
				continue
			}
			h := f.hostLocked(name)
			h.queued++
			f.queued++
			if prioOfKey(it.Item().Key()) == bandRevisit {
				h.revisits++
				f.revisitQueued++
			}
			maxSeq = max(maxSeq, seq)
		}
		it.Close()
		// retry keys
		keysOnly.Prefix = []byte{famRetry}
		it = txn.NewIterator(keysOnly)
		for it.Rewind(); it.Valid(); it.Next() {
			part, due, seq, ok := parseRKey(it.Item().Key())
			if !ok {
				continue
			}
			if seq&revisitBit != 0 {
				f.revisitPending++
			} else {
				f.retryPending++
			}
			seq &^= revisitBit
			if cur, ok := f.retryDue[part]; !ok || due < cur {
				f.retryDue[part] = due
			}
			maxSeq = max(maxSeq, seq)
		}
		it.Close()
		f.dead = countPrefix(txn, []byte{famDead})
		f.seen = countPrefix(txn, []byte{famSeen})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("frontier: open: %w", err)
	}
	f.seq.Store(maxSeq)
	f.recomputeRetryNextLocked()
	for _, h := range f.hosts {
		f.fixLocked(h)
	}
	if err := f.buildBloom(f.seen); err != nil {
		return nil, fmt.Errorf("frontier: open: %w", err)
	}
	return f, nil
}

func countPrefix(txn *badger.Txn, prefix []byte) int {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		n++
	}
	return n
}

// hostLocked returns the host, creating its state. Callers hold mu (or are Open).
func (f *Frontier) hostLocked(name string) *host {
	h := f.hosts[name]
	if h == nil {
		h = &host{name: name, part: f.cfg.PartitionOf(name), heapIdx: -1}
		f.hosts[name] = h
	}
	return h
}

func (f *Frontier) delayOf(h *host) time.Duration {
	return hostDelay(h.delay, h.delaySet, f.cfg.DefaultDelay)
}

// fixLocked puts the host into the waiting heap (poll moves it to the ready heap when its
// time comes), moves it, or takes it out of whichever heap it is in.
func (f *Frontier) fixLocked(h *host) {
	want := !h.loading && h.queued-h.inflight > 0 && h.inflight-h.released < f.cfg.PerHost && !f.pausedLocked(h.part)
	switch {
	case h.heapIdx >= 0 && h.inReady:
		heap.Remove(&f.ready, h.heapIdx)
	case want && h.heapIdx >= 0:
		heap.Fix(&f.waiting, h.heapIdx)
		return
	case h.heapIdx >= 0:
		heap.Remove(&f.waiting, h.heapIdx)
	}
	if want {
		heap.Push(&f.waiting, h)
	}
}

// unheapLocked takes the host out of whichever heap it is in.
func (f *Frontier) unheapLocked(h *host) {
	switch {
	case h.heapIdx >= 0 && h.inReady:
		heap.Remove(&f.ready, h.heapIdx)
	case h.heapIdx >= 0:
		heap.Remove(&f.waiting, h.heapIdx)
	}
}

// insertLocked records that key k became a non-leased queued key of h (h.queued already
// counts it) and keeps the buffer a prefix of the host's non-leased queue.
func (f *Frontier) insertLocked(h *host, it item) {
	h.queueGen++
	if h.loading {
		if h.loadLow == nil || bytes.Compare(it.key, h.loadLow) < 0 {
			h.loadLow = it.key
		}
		return
	}
	before := h.queued - h.inflight - 1
	n := len(h.prefetch)
	if n == before || (n > 0 && bytes.Compare(it.key, h.prefetch[n-1].key) < 0) {
		i, found := slices.BinarySearchFunc(h.prefetch, it.key, func(a item, k []byte) int { return bytes.Compare(a.key, k) })
		if found {
			return // cannot happen while committing works; never lease a key twice
		}
		h.prefetch = slices.Insert(h.prefetch, i, it)
		if len(h.prefetch) > f.cfg.Prefetch {
			last := len(h.prefetch) - 1
			lowerCursor(h, h.prefetch[last].key)
			h.prefetch[last] = item{}
			h.prefetch = h.prefetch[:last]
		}
		return
	}
	lowerCursor(h, it.key)
}

func lowerCursor(h *host, k []byte) {
	if h.cursor != nil && bytes.Compare(k, h.cursor) < 0 {
		h.cursor = k
	}
}

// signalLocked wakes every Next waiting for a change.
func (f *Frontier) signalLocked() {
	if f.waiters > 0 {
		close(f.wake)
		f.wake = make(chan struct{})
	}
}

func (f *Frontier) noteRetryLocked(part uint16, due int64) {
	if fl, ok := f.retryFloor[part]; ok && due < fl {
		f.retryFloor[part] = due // the clock went back
	}
	if cur, ok := f.retryDue[part]; !ok || due < cur {
		f.retryDue[part] = due
	}
	if (f.retryNext == 0 || due < f.retryNext) && !f.pausedLocked(part) {
		f.retryNext = due
	}
}

func (f *Frontier) recomputeRetryNextLocked() {
	f.retryNext = 0
	for p, d := range f.retryDue {
		if d != math.MaxInt64 && (f.retryNext == 0 || d < f.retryNext) && !f.pausedLocked(p) {
			f.retryNext = d
		}
	}
}

// ---- writes ----

type op struct {
	k, v []byte
	del  bool
}

// batch writes groups of ops; a group never spans two transactions, so what must be atomic
// (seen + queued, delete + dead letter) is. It commits early when Badger's size limits near.
// A transaction is opened when its first op comes, not after each commit: opening and
// discarding one registers and retires a read mark with Badger's watermark goroutine (a
// channel send that wakes it), and every Add that wrote paid for a second transaction it
// never used.
type batch struct {
	db               *badger.DB
	txn              *badger.Txn
	size, count      int64
	maxSize, maxCnt  int64
	groups, commited int // groups added, groups durably committed
}

func newBatch(db *badger.DB) *batch {
	return &batch{db: db, maxSize: db.MaxBatchSize() / 2, maxCnt: db.MaxBatchCount() / 2}
}

func (b *batch) group(ops ...op) error {
	var sz int64
	for _, o := range ops {
		sz += int64(len(o.k)+len(o.v)) + 32
	}
	if b.count > 0 && (b.count+int64(len(ops)) >= b.maxCnt || b.size+sz >= b.maxSize) {
		if err := b.commit(); err != nil {
			return err
		}
	}
	if b.txn == nil {
		b.txn = b.db.NewTransaction(true)
	}
	for _, o := range ops {
		var err error
		if o.del {
			err = b.txn.Delete(o.k)
		} else {
			err = b.txn.Set(o.k, o.v)
		}
		if err != nil {
			return err
		}
	}
	b.size += sz
	b.count += int64(len(ops))
	b.groups++
	return nil
}

func (b *batch) commit() error {
	var err error
	if b.txn != nil {
		err = b.txn.Commit()
		b.txn = nil
	}
	b.size, b.count = 0, 0
	if err != nil {
		return err
	}
	b.commited = b.groups
	return nil
}

func (b *batch) discard() {
	if b.txn != nil {
		b.txn.Discard()
	}
}

// persistHosts writes the host records of names (their current state).
func (f *Frontier) persistHosts(names ...string) error {
	f.hostRecMu.Lock()
	defer f.hostRecMu.Unlock()
	f.mu.Lock()
	ops := make([]op, 0, len(names))
	for _, n := range names {
		if h := f.hosts[n]; h != nil {
			r := h.rec()
			ops = append(ops, op{k: hKey(h.part, n), v: r.encode()})
		}
	}
	f.mu.Unlock()
	b := newBatch(f.db)
	defer b.discard()
	for _, o := range ops {
		if err := b.group(o); err != nil {
			return err
		}
	}
	return b.commit()
}

// ---- Add ----

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
	if len(items) == 0 {
		return res, nil
	}
	// Pre-check outside addMu: the seen cache's misses pay the Bloom filter's k probes
	// (all k for a "maybe"), each a likely cache miss in a filter of many MB.
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
		return res, err
	}
	f.noteSeenShare(items)
	var boosts []prep
	var bp *[]prep
	if f.cfg.Importance {
		bp = &boosts
	}
	items = f.dropSeen(items, &res, bp)

	f.addMu.Lock()
	defer f.addMu.Unlock()
	if len(boosts) > 0 {
		if err := f.boost(boosts); err != nil {
			f.log.Warn("opic cash not passed on", "urls", len(boosts), "err", err)
		}
	}
	if len(items) == 0 {
		return res, nil
	}
	// Re-check: a concurrent Add may have committed some of them since. Every commit adds
	// its hashes to the filter before releasing addMu, so "definitely new" is still exact.
	f.bloomMu.RLock()
	for i := range items {
		items[i].maybe = f.bloom.test(items[i].hash)
	}
	f.bloomMu.RUnlock()
	if err := f.confirm(items); err != nil {
		return res, err
	}
	boosts = boosts[:0]
	items = f.dropSeen(items, &res, bp)
	if len(boosts) > 0 {
		if err := f.boost(boosts); err != nil {
			f.log.Warn("opic cash not passed on", "urls", len(boosts), "err", err)
		}
	}
	if len(items) == 0 {
		return res, nil
	}
	for i := range items {
		items[i].generated = f.cfg.GeneratedBudget >= 0 && looksGenerated(items[i].c.URL)
	}

	f.hostRecMu.Lock()
	defer f.hostRecMu.Unlock()
	f.mu.Lock()
	accepted := items[:0]
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
	hops := make([]op, 0, len(touched))
	for h := range touched {
		r := h.rec()
		hops = append(hops, op{k: hKey(h.part, h.name), v: r.encode()})
	}
	f.mu.Unlock()
	if len(accepted) == 0 {
		return res, nil
	}

	now := f.cfg.Now()
	b := newBatch(f.db)
	defer b.discard()
	recs := make([]qrec, len(accepted))
	var err error
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
		for _, o := range hops {
			if err = b.group(o); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = b.commit()
	}
	done := min(b.commited, len(accepted))
	if err != nil {
		// Give back the reservations of what was not written.
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

	if f.afterAddCommit != nil {
		f.afterAddCommit()
	}
	f.bloomMu.Lock()
	for _, it := range accepted[:done] {
		f.bloom.add(it.part, it.hash)
		f.cache.add(it.c.URL)
	}
	f.bloomMu.Unlock()

	f.mu.Lock()
	for i, it := range accepted[:done] {
		delete(f.committing, string(it.key))
		it.h.queued++
		f.queued++
		f.seen++
		f.insertLocked(it.h, item{key: it.key, rec: recs[i]})
		f.fixLocked(it.h)
	}
	f.signalLocked()
	f.mu.Unlock()
	res.Added = done
	if err != nil {
		return res, fmt.Errorf("frontier: add: %w", err)
	}
	return res, nil
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

func (f *Frontier) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// ---- Next ----

// Next blocks until a URL of a ready host can be leased: the host is below PerHost leases,
// its next-allowed time has come and it is not deferred. It returns ctx.Err() when ctx ends
// and ErrClosed after Close. It waits on timers and wake-ups, never spinning.
func (f *Frontier) Next(ctx context.Context) (*Lease, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l, wait, wake, err := f.poll()
		if err != nil || l != nil {
			return l, err
		}
		var timer *time.Timer
		var tc <-chan time.Time
		if wait >= 0 {
			timer = time.NewTimer(wait)
			tc = timer.C
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-tc:
		}
		if timer != nil {
			timer.Stop()
		}
		f.mu.Lock()
		f.waiters--
		f.mu.Unlock()
	}
}

// poll leases a URL if one is ready. Otherwise it returns how long to wait (-1: until woken)
// and the channel that is closed on the next change; the caller then owns one waiter count.
func (f *Frontier) poll() (*Lease, time.Duration, <-chan struct{}, error) {
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return nil, 0, nil, ErrClosed
		}
		now := f.cfg.Now().UnixNano()
		if f.retryNext != 0 && f.retryNext <= now && !f.moving {
			f.moving = true
			f.mu.Unlock()
			if err := f.moveDue(now); err != nil {
				return nil, 0, nil, err
			}
			continue
		}
		for f.waiting.Len() > 0 && f.waiting.hs[0].nextAt <= now {
			heap.Push(&f.ready, heap.Pop(&f.waiting))
		}
		if f.ready.Len() > 0 {
			h := f.ready.hs[0]
			if h.nextAt > now { // its clock moved without a fix; cannot happen, but be safe
				heap.Pop(&f.ready)
				heap.Push(&f.waiting, h)
				f.mu.Unlock()
				continue
			}
			if len(h.prefetch) > 0 {
				l := f.leaseLocked(h, now)
				f.mu.Unlock()
				return l, 0, nil, nil
			}
			if err := f.refill(h); err != nil { // unlocks mu
				return nil, 0, nil, err
			}
			continue
		}
		var hostNext, retryNext int64
		if f.waiting.Len() > 0 {
			hostNext = f.waiting.hs[0].nextAt
		}
		if !f.moving {
			retryNext = f.retryNext
		}
		wait := pollWait(now, hostNext, f.waiting.Len() > 0, retryNext)
		f.waiters++
		wake := f.wake
		f.mu.Unlock()
		return nil, wait, wake, nil
	}
}

func (f *Frontier) leaseLocked(h *host, now int64) *Lease {
	i := f.pickLocked(h)
	it := h.prefetch[i]
	h.prefetch[i] = item{}
	if i == 0 {
		h.prefetch = h.prefetch[1:]
	} else {
		h.prefetch = slices.Delete(h.prefetch, i, i+1)
	}
	if len(h.prefetch) == 0 {
		h.prefetch = nil
	}
	h.inflight++
	f.inflight++
	h.leased = append(h.leased, it.key)
	prev := h.nextAt
	h.nextAt = nextAtLease(now, f.delayOf(h))
	f.fixLocked(h)
	r := it.rec
	return &Lease{
		URL: r.URL, Host: h.name, Depth: r.Depth, Hops: r.Hops, Attempts: r.Attempts, From: r.From, Priority: r.Priority,
		Cash: r.Cash, History: r.History, Revisit: prioOfKey(it.key) == bandRevisit, Validators: r.Val,
		issuer: f, part: h.part, key: it.key, rec: r, prevNext: prev, leaseNext: h.nextAt,
	}
}

// refill loads the first Prefetch non-leased q records of h from Badger. Called with mu
// held; returns with mu released. The host leaves the heap while loading.
func (f *Frontier) refill(h *host) error {
	h.loading = true
	h.loadLow = nil
	f.fixLocked(h)
	gen := h.queueGen
	leased := slices.Clone(h.leased)
	cursor := h.cursor
	want := h.queued - h.inflight
	f.mu.Unlock()

	items, err := f.scanQueue(h, cursor, leased)
	full := cursor == nil
	if err == nil && !full && len(items) < f.cfg.Prefetch && len(items) != want {
		// Fewer keys past the cursor than the count says: rescan from the head rather
		// than trust either the cursor or a count that may have drifted.
		items, err = f.scanQueue(h, nil, leased)
		full = true
	}

	f.mu.Lock()
	h.loading = false
	if err == nil {
		scanned := len(items)
		if len(f.committing) > 0 {
			items = slices.DeleteFunc(items, func(it item) bool {
				_, ok := f.committing[string(it.key)]
				return ok
			})
		}
		h.prefetch = items
		if len(items) > 0 {
			h.cursor = append(slices.Clone(items[len(items)-1].key), 0) // just after the last read
		}
		if h.loadLow != nil && (h.cursor == nil || bytes.Compare(h.loadLow, h.cursor) < 0) {
			h.cursor = h.loadLow
		}
		if gen == h.queueGen && full && scanned < f.cfg.Prefetch && scanned == len(items) {
			// The scan saw the whole non-leased queue: heal the count if it drifted.
			if want := h.inflight + len(items); want != h.queued {
				f.log.Warn("queue count corrected", "host", h.name, "had", h.queued, "want", want)
				f.queued += want - h.queued
				h.queued = want
			}
		}
	}
	h.loadLow = nil
	f.fixLocked(h)
	f.signalLocked()
	f.mu.Unlock()
	if err != nil {
		return fmt.Errorf("frontier: load queue: %w", err)
	}
	return nil
}

// scanQueue reads up to Prefetch non-leased q records of h from key from (nil: the head).
func (f *Frontier) scanQueue(h *host, from []byte, leased [][]byte) ([]item, error) {
	var items []item
	err := f.db.View(func(txn *badger.Txn) error {
		prefix := qHostPrefix(h.part, h.name)
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: f.cfg.Prefetch, Prefix: prefix})
		defer it.Close()
		if from == nil {
			from = prefix
		}
	next:
		for it.Seek(from); it.Valid() && len(items) < f.cfg.Prefetch; it.Next() {
			k := it.Item().Key()
			for _, l := range leased {
				if bytes.Equal(l, k) {
					continue next
				}
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			r, err := decodeQrec(v)
			if err != nil {
				return err
			}
			items = append(items, item{key: it.Item().KeyCopy(nil), rec: r})
		}
		return nil
	})
	return items, err
}

// moveDue moves retry records whose time has come back into their queues.
func (f *Frontier) moveDue(now int64) error {
	f.retryScanMu.Lock()
	defer f.retryScanMu.Unlock()
	f.mu.Lock()
	var parts []uint16
	var floors []int64
	for p, d := range f.retryDue {
		if d <= now && !f.pausedLocked(p) {
			parts = append(parts, p)
			floors = append(floors, f.retryFloor[p])
			f.retryDue[p] = math.MaxInt64 // scanning; concurrent Retry outcomes lower it
		}
	}
	f.mu.Unlock()

	var firstErr error
	for i, p := range parts {
		nextDue, err := f.movePartition(p, now, floors[i])
		if err != nil && firstErr == nil {
			firstErr = err
		}
		f.mu.Lock()
		cur := f.retryDue[p]
		if err == nil {
			// Everything due <= now is moved; keys noted meanwhile are >= cur.
			f.retryFloor[p] = min(now, cur)
		}
		if err != nil {
			cur = now // try again later
		} else if nextDue != 0 && nextDue < cur {
			cur = nextDue
		}
		if cur == math.MaxInt64 {
			delete(f.retryDue, p)
		} else {
			f.retryDue[p] = cur
		}
		f.mu.Unlock()
	}
	f.mu.Lock()
	f.moving = false
	f.recomputeRetryNextLocked()
	f.signalLocked()
	f.mu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("frontier: move retries: %w", firstErr)
	}
	return nil
}

// movePartition moves the due r keys of one partition; it returns the due time of the
// first r key left (0 if none).
func (f *Frontier) movePartition(p uint16, now, floor int64) (int64, error) {
	const chunk = 512
	for {
		type moved struct {
			host string
			it   item
			rev  bool // an r key with the revisit bit
		}
		var ms []moved
		var nextDue int64
		type pushed struct {
			due    int64
			wasRev bool
		}
		var later []pushed
		perHost := map[string]int{} // revisits moved or pushed back in this chunk
		txn := f.db.NewTransaction(true)
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 64, Prefix: famPrefix(famRetry, p)})
		var err error
		for it.Seek(rKey(p, floor, 0)); it.Valid() && len(ms)+len(later) < chunk; it.Next() {
			rk := it.Item().KeyCopy(nil)
			_, due, _, ok := parseRKey(rk)
			if !ok {
				continue
			}
			if due > now {
				nextDue = due
				break
			}
			var v []byte
			if v, err = it.Item().ValueCopy(nil); err != nil {
				break
			}
			qk, r, derr := decodeR(v)
			if derr != nil {
				err = derr
				break
			}
			hn, _, ok := parseQKey(qk)
			if !ok {
				err = fmt.Errorf("%w: retry key", ErrCorrupt)
				break
			}
			if err = txn.Delete(rk); err != nil {
				break
			}
			if prioOfKey(qk) == bandRevisit {
				// Revisits wait in the order they came due (depth 0, a new sequence), not
				// in the order of their depth, so none is starved behind a home page.
				qk = qKey(p, hn, bandRevisit, 0, f.seq.Add(1))
				// At most revisitSlots revisits of a host wait in its queue; the rest are
				// pushed back by the host's pace (one delay per place in the line).
				f.mu.Lock()
				waitingRev := perHost[hn]
				if h := f.hosts[hn]; h != nil {
					waitingRev += h.revisits
				}
				step := int64(max(f.delayOf(f.hostLocked(hn)), 50*time.Millisecond))
				f.mu.Unlock()
				perHost[hn]++
				if waitingRev >= f.revisitSlots() {
					_, _, seq, _ := parseRKey(rk)
					nd := now + step*int64(waitingRev-f.revisitSlots()+1)
					if err = txn.Set(rKey(p, nd, seq), v); err != nil {
						break
					}
					later = append(later, pushed{nd, seq&revisitBit != 0})
					continue
				}
			}
			if err = txn.Set(qk, r.encode()); err != nil {
				break
			}
			_, _, rseq, _ := parseRKey(rk)
			ms = append(ms, moved{hn, item{key: qk, rec: r}, rseq&revisitBit != 0})
		}
		full := len(ms)+len(later) >= chunk
		it.Close()
		if err == nil {
			f.mu.Lock()
			for _, m := range ms {
				f.committing[string(m.it.key)] = struct{}{}
			}
			f.mu.Unlock()
			err = txn.Commit()
		} else {
			txn.Discard()
		}
		f.mu.Lock()
		for _, m := range ms {
			delete(f.committing, string(m.it.key))
		}
		if err != nil {
			f.mu.Unlock()
			return 0, err
		}
		for _, m := range ms {
			h := f.hostLocked(m.host)
			h.queued++
			f.queued++
			if m.rev {
				f.revisitPending--
			} else {
				f.retryPending--
			}
			if prioOfKey(m.it.key) == bandRevisit {
				h.revisits++
				f.revisitQueued++
			}
			f.insertLocked(h, m.it)
			f.fixLocked(h)
		}
		for _, l := range later {
			if l.due < nextDue || nextDue == 0 {
				nextDue = l.due
			}
		}
		f.mu.Unlock()
		if !full {
			return nextDue, nil
		}
	}
}

// ---- Done ----

// Done records the outcome of a lease. Only now does the URL leave its queue (Fetched,
// Drop, Retry) or become leasable again (Requeue). Politeness: with PerHost 1 the host's next
// request waits at least its delay after this response, too; RetryAfter pushes it further.
func (f *Frontier) Done(l *Lease, o Outcome) error {
	var err error
	f.DoneBatch([]Completion{{Lease: l, Outcome: o}}, func(_ int, e error) { err = e })
	return err
}

// Completion is one lease's outcome, for DoneBatch.
type Completion struct {
	Lease   *Lease
	Outcome Outcome
}

// donePrep is what DoneBatch decided for one completion before writing it.
type donePrep struct {
	l           *Lease
	o           Outcome
	dead        bool
	revisitNext bool
	due         int64
	group       []op
	ok          bool
}

// DoneBatch records many leases' outcomes, as Done does each, in one Badger transaction
// (split only between leases when Badger's batch limit is near) and one pass over the
// in-memory state: a group commit of completions. onErr, if not nil, is called with the
// index of each completion that was not recorded (its lease stays outstanding and may be
// given to Done again).
func (f *Frontier) DoneBatch(cs []Completion, onErr func(i int, err error)) {
	fail := func(i int, err error) {
		if onErr != nil {
			onErr(i, err)
		}
	}
	if f.isClosed() {
		for i := range cs {
			fail(i, ErrClosed)
		}
		return
	}
	now := f.cfg.Now()
	rc := f.recrawl.Load()
	ps := make([]donePrep, len(cs))
	writes := 0
	for i := range cs {
		l, o := cs[i].Lease, cs[i].Outcome
		if l == nil || l.issuer != f {
			fail(i, ErrBadLease)
			continue
		}
		if o.Kind < Fetched || o.Kind > Drop {
			fail(i, fmt.Errorf("%w: %d", ErrBadOutcome, o.Kind))
			continue
		}
		if !l.done.CompareAndSwap(false, true) {
			fail(i, ErrLeaseDone)
			continue
		}
		p := &ps[i]
		p.l, p.o, p.ok = l, o, true
		f.prepDone(p, now, rc)
		if p.group != nil {
			writes++
		}
	}
	if writes > 0 {
		b := newBatch(f.db)
		var idx []int // completion index of each group, in order
		var err error
		for i := range ps {
			if !ps[i].ok || ps[i].group == nil {
				continue
			}
			if err = b.group(ps[i].group...); err != nil {
				break
			}
			idx = append(idx, i)
		}
		if err == nil {
			err = b.commit()
		}
		b.discard()
		if err != nil {
			// Groups past the last commit were not written: their leases stay outstanding.
			written := map[int]bool{}
			for _, i := range idx[:min(b.commited, len(idx))] {
				written[i] = true
			}
			for i := range ps {
				if ps[i].ok && ps[i].group != nil && !written[i] {
					ps[i].ok = false
					ps[i].l.done.Store(false)
					fail(i, fmt.Errorf("frontier: done: %w", err))
				}
			}
		}
	}

	var persist []string
	f.mu.Lock()
	for i := range ps {
		if ps[i].ok {
			f.applyDoneLocked(&ps[i], now)
			if ps[i].o.RetryAfter > 0 {
				persist = append(persist, ps[i].l.Host)
			}
		}
	}
	f.signalLocked()
	f.mu.Unlock()
	if len(persist) > 0 {
		if err := f.persistHosts(persist...); err != nil {
			for i := range ps {
				if ps[i].ok && ps[i].o.RetryAfter > 0 {
					fail(i, fmt.Errorf("frontier: done: persist host: %w", err))
				}
			}
		}
	}
}

// prepDone builds the Badger writes of one completion.
func (f *Frontier) prepDone(p *donePrep, now time.Time, rc *Recrawl) {
	l, o := p.l, p.o
	hash := URLHash(l.URL)
	rec := l.rec
	switch o.Kind {
	case Fetched, Drop:
		st := StateFetched
		if o.Kind == Drop {
			st = StateDropped
		}
		sr := SeenRecord{URL: l.URL, Status: o.Status, State: st, Reason: o.Err, Meta: o.Meta, At: now}
		p.group = []op{{k: l.key, del: true}, {k: hashKey(famSeen, l.part, hash), v: sr.encode()}}
		if o.Kind == Fetched && rc.Enabled {
			// Schedule the next visit: same host queue, revisit band, a new sequence.
			nr := qrec{URL: rec.URL, From: rec.From, Depth: rec.Depth, Priority: rec.Priority, History: rec.History}
			nr.Val = Observe(rec.Val, o.Version, now)
			iv := NextInterval(*rc, nr.Val, f.relativeImportance(rec.History))
			nr.Val.Interval = int64(iv)
			p.due = now.Add(iv).UnixNano()
			qk := qKey(l.part, l.Host, bandRevisit, rec.Depth, f.seq.Add(1))
			p.group = append(p.group, op{k: rKey(l.part, p.due, f.seq.Add(1)|revisitBit), v: encodeR(qk, &nr)})
			p.revisitNext = true
		}
	case Retry:
		rec.Attempts++
		rec.LastErr, rec.LastStatus = o.Err, o.Status
		if parkAsDead(rec.Attempts, f.cfg.MaxAttempts, o.Park) {
			p.dead = true
			dl := DeadLetter{URL: l.URL, Host: l.Host, Attempts: rec.Attempts, LastErr: o.Err, Status: o.Status, At: now}
			sr := SeenRecord{URL: l.URL, Status: o.Status, State: StateDead, Reason: o.Err, Meta: o.Meta, At: now}
			p.group = []op{{k: l.key, del: true}, {k: hashKey(famDead, l.part, hash), v: dl.encode()}, {k: hashKey(famSeen, l.part, hash), v: sr.encode()}}
		} else {
			p.due = now.Add(f.backoff(rec.Attempts)).UnixNano()
			rk := rKey(l.part, p.due, f.seq.Add(1))
			p.group = []op{{k: l.key, del: true}, {k: rk, v: encodeR(l.key, &rec)}}
		}
	}
}

// applyDoneLocked updates the in-memory state for a recorded completion.
func (f *Frontier) applyDoneLocked(p *donePrep, now time.Time) {
	l, o := p.l, p.o
	h := f.hostLocked(l.Host)
	if i := slices.IndexFunc(h.leased, func(k []byte) bool { return bytes.Equal(k, l.key) }); i >= 0 {
		h.leased = slices.Delete(h.leased, i, i+1)
	}
	h.inflight--
	f.inflight--
	if l.released {
		h.released = max(0, h.released-1)
	}
	switch {
	case o.Kind == Requeue:
		f.insertLocked(h, item{key: l.key, rec: l.rec})
	default:
		h.queued--
		f.queued--
		h.fetched++
		if prioOfKey(l.key) == bandRevisit {
			h.revisits--
			f.revisitQueued--
		}
		switch {
		case p.dead:
			f.dead++
		case o.Kind == Retry:
			f.retryPending++
			f.noteRetryLocked(l.part, p.due)
		case p.revisitNext:
			f.revisitPending++
			f.noteRetryLocked(l.part, p.due)
		}
	}
	if !l.released {
		f.politeLocked(h, l, o, now.UnixNano())
	}
	f.fixLocked(h)
}

// politeLocked moves the host's politeness clock when a lease's request is over: back to
// where it was if no request was sent, else (PerHost 1) at least the delay past the
// response's end; RetryAfter pushes it further.
func (f *Frontier) politeLocked(h *host, l *Lease, o Outcome, nowNs int64) {
	h.nextAt = nextAfterRequest(h.nextAt, requestOver{
		now: nowNs, prevNext: l.prevNext, leaseNext: l.leaseNext, delay: f.delayOf(h), perHost: f.cfg.PerHost,
		noRequest: o.NoRequest, finished: o.Finished, retryAfter: o.RetryAfter,
	})
}

// Release says that a lease's request is over (o as Done will get it; its politeness
// fields, Finished, NoRequest and RetryAfter, count now): the host's politeness clock
// moves as Done would move it, and the host may be leased again after its delay, while
// this URL stays leased, and in its queue, until Done records it. So the time a caller
// spends making the page's links and archive record durable (a group commit) does not
// hold the host: a host gets its turns at the pace of its delay, as long as the frontier
// has its other URLs. Release after Done, a second Release, or a lease the host no longer
// holds (its partition was handed off) are no-ops. Optional: Done alone does both.
func (f *Frontier) Release(l *Lease, o Outcome) {
	if l == nil || l.issuer != f || l.done.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hosts[l.Host]
	if l.released || l.done.Load() || h == nil ||
		!slices.ContainsFunc(h.leased, func(k []byte) bool { return bytes.Equal(k, l.key) }) {
		return
	}
	l.released = true
	h.released++
	f.politeLocked(h, l, o, f.cfg.Now().UnixNano())
	f.fixLocked(h)
	f.signalLocked()
}

// backoff is full jitter over min(BackoffMax, BackoffBase * 2^(attempt-1)) (retryBackoff).
func (f *Frontier) backoff(attempt int) time.Duration {
	return retryBackoff(attempt, f.cfg.BackoffBase, f.cfg.BackoffMax, f.cfg.Rand())
}

// ---- host controls ----

// Limits are the settings a running crawl may change (the cluster's job configuration);
// they mean what the Config fields of the same names mean, and take effect at once for
// new decisions (a URL already queued stays queued).
type Limits struct {
	DefaultDelay    time.Duration
	PerHost         int
	MaxDepth        int
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
	if l.MaxDepth != 0 {
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

// ---- reading ----

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

// Close stops the frontier: waiting Next calls return ErrClosed; the politeness state of
// hosts still inside their delay is persisted. It does not close the DB.
func (f *Frontier) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	if f.waiters > 0 {
		close(f.wake)
		f.wake = make(chan struct{})
	}
	now := f.cfg.Now().UnixNano()
	var names []string
	for n, h := range f.hosts {
		if h.nextAt > now {
			names = append(names, n)
		}
	}
	f.mu.Unlock()
	f.stopBloom()
	f.seenIdx.close()
	if len(names) > 0 {
		if err := f.persistHosts(names...); err != nil {
			return fmt.Errorf("frontier: close: %w", err)
		}
	}
	return nil
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
