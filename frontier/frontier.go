package frontier

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
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
	// Refetch: the URL was queued again when a lost node's partition was promoted
	// (ImportOptions): a capture of it may exist only on the lost disk, so this fetch
	// replaces it (the duplicate decision lets it take over keys naming its own URL).
	Refetch bool

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

func (f *Frontier) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
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
