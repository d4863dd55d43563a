// Package frontier is one node's crawl frontier, kept in Badger: which URLs are waiting,
// which host may be fetched next, which URLs were ever seen, and what failed for good.
//
// Duties:
//   - Per-host queues in Badger, ordered within a host by priority (revisits due, then seed
//     class, then OPIC cash), then depth (breadth first), then arrival; a heap of hosts
//     waiting for their next allowed time and a heap of ready hosts ordered by the priority
//     of the URL each would lease next (then time), so thousands of hosts are in flight at
//     once, the most important ready URLs go first, and each host gets at most PerHost
//     leases and its delay between requests.
//   - Importance (opic.go): OPIC cash (Abiteboul, Preda, Cobena 2003). Seeds start with 1,
//     the node splits a fetched page's cash among its links, and with Config.Importance
//     cash given to a URL already queued adds to its cash and can move it up its queue;
//     a URL linked from several pages of one Add gets every occurrence's cash. The queue
//     order uses the cash plus a forecast for a site's navigation links (linked from most
//     of its pages seen), which grows with the site's size as far as the frontier knows it
//     (host.importance): a single pass never sees most in-links of a site's navigation
//     pages, which hold much of its PageRank. The ready hosts are ordered by their next
//     URL's importance as it is now (headRank), not as its queue key recorded it.
//   - Recrawl (recrawl.go): with Config.Recrawl every fetched URL is scheduled again, at
//     an interval from its estimated change rate (Cho and Garcia-Molina's estimator over
//     the visits that saw a change), backed off while nothing changes, scaled by
//     importance and held within [Min, Max]. Revisits carry the last ETag, Last-Modified
//     and body hash for a conditional request, use the host's queue and politeness, and
//     get Recrawl.Share of the host's leases while new URLs wait too.
//   - The seen set: a Bloom filter in front of exact Badger keys (URLHash). A Bloom "maybe"
//     is always confirmed against the key, so a false positive costs a lookup, never a URL.
//     Repeated links are answered by a bounded cache of seen URLs (no hash computed for
//     a hit); old ("cold") ones, with Config.SeenIndexDir, by the seen index
//     (seenindex.go): per Bloom sub-filter a sorted file of the seen keys of one Badger
//     snapshot, rebuilt with the sub-filter, read instead of a Badger point read (~16 us
//     of CPU on on-disk tables): through a mapping for the runs that fit in
//     Config.SeenIndexMapBytes, with one pread for the others. Found there means found
//     in Badger; not found there means "ask Badger". When most cache misses of recent
//     calls turned out seen, the index is asked before the Bloom filter
//     (Frontier.indexFirst).
//   - Politeness arithmetic (politeness.go): a host's next allowed time at lease, when a
//     request is over (delay after the response's end, Retry-After), when deferred; the
//     retry backoff with jitter and when a failure parks a URL; Next's wait; the merge of
//     two host states. Pure functions over values (times and randomness passed in),
//     tested from tables to the millisecond; the locked code only calls them.
//   - Leases: a URL leaves its queue only in Done. Transient failures retry with
//     exponential backoff and full jitter; the MaxAttempts-th failure parks the URL as a
//     dead letter with its last error. Retry-After (429/503) holds the whole host.
//   - Trap defenses at Add: max depth, max URL length, repeated path segments, too many
//     query parameters, max pages per host, and a per-host budget for URLs that look
//     generated (calendars and dates in the path, session-id-like segments, facet/sort
//     parameters or 5+ query items).
//
// Key space (family byte, 2-byte big-endian partition, then):
//
//	q|part|host|0x00|priority(1)|depth(2)|seq(8)  queued URL (qrec: url, from, depth, hops, attempts, last error,
//	                                               cash, validators, flags: refetch); priority 0 = a revisit due, else
//	                                               1 + class*60 + cash bucket
//	h|part|host                                    host state (delay, next allowed, admitted, generated)
//	h|part|host|0x00|'m'                           opaque host meta (robots.txt, set by the node)
//	s|part|urlhash(16)                             seen record (state, status, time, url, reason, meta)
//	d|part|urlhash(16)                             dead letter
//	r|part|due(8, unix ns)|seq(8)                  URL waiting for its retry (its q key + qrec); seq's top
//	                                               bit set: a fetched URL scheduled for its next visit
//
// Files, by duty: frontier.go (the public types, the Frontier and host structs, Open,
// Close), add.go (Add: screen, seen check, caps, commit), lease.go (Next, poll, refill),
// done.go (Done, DoneBatch, Release), retry.go (moving due retries and revisits back to
// their queues), hostctl.go (Limits, host delay, defer, meta, ParkHost), hosts.go (host
// views for operators), schedule.go (the host heaps, wake-ups, retry due times),
// politeness.go (the pure politeness and retry arithmetic), batch.go (grouped Badger
// writes), read.go (Stats, Lookup, dead letters), partition.go (partition pause, export,
// drop), import.go (ImportPartition: decode, a pure decide, write; ImportOptions: a
// promotion's refetches), opic.go, recrawl.go,
// traps.go, bloom.go, seencache.go, seenindex.go, keys.go (encodings).
//
// Locks. Every mutex of a Frontier, what it guards, and the order: a goroutine holding one
// takes only mutexes listed after it (TestLockOrder checks the source against this list,
// through the methods each function calls).
//
//  1. partitionOpMu: one ImportPartition or DropPartition at a time.
//  2. addMu: Add's "confirm not seen, then write seen + queued", so two Adds never admit
//     a URL twice; an import chunk and a drop hold it so that no Add confirms or writes
//     meanwhile. OPIC cash passed to queued URLs (boost) runs under it.
//  3. hostRecMu: building and writing h/ records (persistHosts, Add, import, drop), so
//     the last write is the newest state.
//  4. retryScanMu: scans of r/ (moving due retries back, ParkHost's retries, import,
//     drop), so one r/ key is never moved twice.
//  5. mu: the in-memory schedule: the hosts map and every host struct (counters,
//     politeness clock, prefetch buffer, cursor, heap slot), the waiting and ready heaps,
//     the frontier's counters, retryDue, retryFloor and retryNext, committing, moving,
//     the pause maps, wake and waiters, closed, and the Limits fields of cfg. Held for
//     memory updates only, never while Badger reads or commits, except in boost (Config.
//     Importance: two reads and a rewrite per link, documented there); refill and ParkHost
//     set a host's loading flag and scan its queue without it.
//  6. bloomMu (RWMutex): the Bloom filter (seenBloom: sub-filters, counts, logs, the
//     rebuild state). Tests under RLock; adds and sub-filter swaps under Lock. No code
//     holds mu and bloomMu together today; the order allows bloomMu inside mu.
//  7. bloomFillMu: the cached Bloom fill of Stats, taken under bloomMu.RLock.
//  8. Leaves, which take nothing while held: historyMu (the moving average of OPIC
//     history, relativeImportance), the seen cache's shard locks (seencache.go, taken
//     under bloomMu and addMu), the seen index's dropMu and per-run locks (seenindex.go).
//
// Without a lock: limits and recrawl (atomic pointers, replaced whole), seq, the Bloom
// and seen-index counters and seenShare (atomics), Lease.done (atomic). Lease.released
// is guarded by mu.
//
// Memory holds no per-URL state: per host a small struct (counters, politeness, heap slot)
// and, for hosts with queued URLs, a prefetch buffer of up to Prefetch records; per
// partition the earliest retry due time; the Bloom filter (1.2-1.44 bytes per URL at 1%);
// a bounded cache of recently seen URLs (SeenCacheSize); and, with a seen index, the
// first key of each of its 4 KB blocks (8 bytes per 227 URLs, 3.5 MB at 100M URLs; the
// index itself, 18 bytes a URL, is on disk: mapped up to SeenIndexMapBytes in all, 128 MiB
// by default, its touched pages file-backed resident memory that the node's trimmer
// drops; the runs beyond read with pread, so page cache, not the process's resident set),
// and the keys added since each run was built, for its next rebuild (18 bytes each: a run
// is rebuilt once 1/64 of its size was added, so 28 MB at 100M URLs before a rebuild, half
// that on average, and at most twice that, plus 1,024 keys a run, while the rebuild
// goroutine lags).
//
// Decisions where the design is silent:
//   - Logging goes to Config.Logger (default slog.Default()) with component=frontier, and
//     host= where one host is concerned.
//   - Function length: no function of the package is over 120 lines. Open (about 120)
//     loads the five key families in one read transaction and stays in one piece so the
//     counts it takes all come from one snapshot. Some tests and benchmarks are longer:
//     a table of cases (TestPoliteness) or one scenario with its phases in order
//     (BenchmarkSeenSetScale) reads better whole than cut into helpers.
//   - Limits: 0 in Config means "the default", a negative value means "unlimited"
//     (MaxDepth, MaxPagesPerHost, MaxURLLength, MaxRepeatedSegments, MaxQueryParams,
//     GeneratedBudget). A zero DefaultDelay needs DefaultDelaySet, a zero MaxDepth
//     MaxDepthSet (Limits likewise).
//   - MaxDepth 0 is list mode: only depth-0 candidates are admitted, the seeds and where
//     they redirect (a redirect target keeps its source's depth and counts Hops instead,
//     bounded by the caller), as wget -i and curl -L fetch a list; links and sitemaps
//     (depth 1 and more) are rejected.
//   - Politeness: at lease time next-allowed = now + delay (start to start); with PerHost 1,
//     Done also sets next-allowed >= now + delay (the gap after the response finished too).
//     Any Outcome's RetryAfter pushes next-allowed for the whole host. Release does the
//     same when the request is over, before Done: the host's request slot is free then
//     (PerHost counts requests in flight, leases minus released ones), while its URL
//     stays leased until Done records it, so a group commit does not hold the host.
//   - A retry waits in r/, not in its host's queue, so it never blocks the host's other
//     URLs. Due retries are moved back to q/ (with their original key, so they keep their
//     place in the BFS order) by whichever Next call notices they are due.
//   - Add is serialized by a mutex around "confirm not seen, then write seen+queued", so two
//     concurrent Adds never admit the same URL twice; the mostly-seen pre-check (cache,
//     Bloom, Badger Get) runs before that mutex, concurrently. Seen + queued records of a URL
//     are always in the same transaction; a large Add is split between URLs.
//   - Host caps (MaxPagesPerHost, GeneratedBudget) count admitted URLs and are persisted
//     with them; rejected URLs are not marked seen (they would be rejected again).
//   - Persistence of politeness: next-allowed is written when it matters across a restart
//     (SetHostDelay, DeferHost, RetryAfter, and at Close for hosts still waiting), not at
//     every lease. After kill -9 a host may be fetched once sooner than its delay allowed;
//     Retry-After and robots delays are kept.
//   - Counters (Stats) are counted exactly at Open from key-only scans; the Bloom filter is
//     built from the s/ keys at Open; each of its 256 sub-filters is rebuilt by a background
//     goroutine whenever it holds more URLs than it was sized for (at 1.2 times its count),
//     while Adds and checks go on (bloom.go): from its seen-index run merged with the log
//     of keys added since, or, without an index or where that cannot be trusted, from its
//     share of the s/ keys (1/256).
//   - The seen-set partition is the partition of the candidate's host; Lookup derives the
//     host from the URL, so Candidate.Host must be the URL's host key when set.
//   - Stats.Queued excludes leased URLs (InFlight) and URLs waiting for a retry
//     (RetryPending).
//   - Done after Close returns ErrClosed; the lease is simply issued again after a restart.
//   - Revisit schedules live in r/ (revisit bit) and, once due, in q/ (band 0): Badger
//     survives restarts and the partition export carries them; an import keeps a revisit
//     even though the URL's seen record is final. At most Prefetch/2 revisits of a host wait
//     in its queue; more due ones are pushed back at the host's pace (bounded memory, and
//     room for new URLs). ParkHost leaves revisits scheduled. A continuous crawl is never
//     Idle. Cash given to a URL that is leased, loading, retrying or already fetched is
//     dropped: the estimate is approximate by design, never a reason to lose a URL.
//   - Partitions (partition.go) are the unit of handoff: PausePartition keeps a partition's
//     hosts out of the schedule and its retries where they are; ExportPartition streams its
//     five families, and package dedup's D keys, from one read snapshot (the duplicate
//     decisions of a partition travel with it through handoff, sweep and replicas without
//     a second mechanism); ImportPartition merges idempotently (D: first writer wins; seen:
//     union, final beats queued, later final wins; a q/r record only for a URL with no
//     local seen record, re-keyed with local sequence numbers; host state: the more
//     cautious); DropPartition deletes with tombstones, not DropPrefix, because badger's
//     DropPrefix fails every concurrent write in the DB with ErrBlockedWrites.
//   - Exports for replicas (view.go) read from a View, a read snapshot of the DB that
//     hides Badger's transaction: callers outside the frontier never hold a *badger.Txn.
//     Exports of several partitions (and the outbox's keys) from one View are one
//     consistent cut, what a replica round needs.
package frontier
