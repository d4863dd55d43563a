// Package frontier is one node's crawl frontier, kept in Badger: which URLs are waiting,
// which host may be fetched next, which URLs were ever seen, and what failed for good.
//
// Duties:
//   - Per-host queues in Badger, ordered within a host by priority, then depth (breadth
//     first), then arrival; a heap of ready hosts ordered by the time each may next be
//     fetched, so thousands of hosts are in flight at once while each host gets at most
//     PerHost leases and its delay between requests.
//   - The seen set: a Bloom filter in front of exact Badger keys (URLHash). A Bloom "maybe"
//     is always confirmed against the key, so a false positive costs a lookup, never a URL.
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
//	q|part|host|0x00|priority(1)|depth(2)|seq(8)  queued URL (qrec: url, from, depth, hops, attempts, last error)
//	h|part|host                                    host state (delay, next allowed, admitted, generated)
//	h|part|host|0x00|'m'                           opaque host meta (robots.txt, set by the node)
//	s|part|urlhash(16)                             seen record (state, status, time, url, reason, meta)
//	d|part|urlhash(16)                             dead letter
//	r|part|due(8, unix ns)|seq(8)                  URL waiting for its retry (its q key + qrec)
//
// Memory holds no per-URL state: per host a small struct (counters, politeness, heap slot)
// and, for hosts with queued URLs, a prefetch buffer of up to Prefetch records; per
// partition the earliest retry due time; the Bloom filter (about 1.2 bytes per URL at 1%);
// and a bounded cache of recently seen hashes (SeenCacheSize).
//
// Decisions where the design is silent:
//   - Limits: 0 in Config means "the default", a negative value means "unlimited"
//     (MaxDepth, MaxPagesPerHost, MaxURLLength, MaxRepeatedSegments, MaxQueryParams,
//     GeneratedBudget). A zero DefaultDelay needs DefaultDelaySet.
//   - Politeness: at lease time next-allowed = now + delay (start to start); with PerHost 1,
//     Done also sets next-allowed >= now + delay (the gap after the response finished too).
//     Any Outcome's RetryAfter pushes next-allowed for the whole host.
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
//     rebuilt from the s/ keys at Open and whenever the seen count passes the size it was
//     built for (at twice the count), with Adds paused meanwhile.
//   - The seen-set partition is the partition of the candidate's host; Lookup derives the
//     host from the URL, so Candidate.Host must be the URL's host key when set.
//   - Stats.Queued excludes leased URLs (InFlight) and URLs waiting for a retry
//     (RetryPending).
//   - Done after Close returns ErrClosed; the lease is simply issued again after a restart.
//   - Partitions (partition.go) are the unit of handoff: PausePartition keeps a partition's
//     hosts out of the schedule and its retries where they are; ExportPartition streams its
//     five families from one read snapshot; ImportPartition merges idempotently (seen:
//     union, final beats queued, later final wins; a q/r record only for a URL with no
//     local seen record, re-keyed with local sequence numbers; host state: the more
//     cautious); DropPartition deletes with tombstones, not DropPrefix, because badger's
//     DropPrefix fails every concurrent write in the DB with ErrBlockedWrites.
package frontier
