// Package dedup makes the duplicate decisions for the whole cluster, the corpus's (exact
// and near texts) and the WARC's (identical payloads, revisit records): each duplicate key
// has one owner, the lease holder of the key's partition, and that owner decides it.
//
// Duties:
//
//   - Place the keys: an exact hash (SHA-256 of the normalized text) on the partition of
//     its first four bytes (ExactPartition); a near-index bucket, table t of the Manku
//     4-table index with block b of the 64-bit fingerprint, on the partition of the mixed
//     pair (NearPartition). Keys live under keyspace.DedupKeys ('D'), partition first.
//   - Keep them with their partition: the frontier exports, imports, drops and replicates
//     family D with its own (frontier.ExportFamilies), so a handoff, a sweep, a replica
//     and its promotion carry the decisions exactly as they carry the seen set. An import
//     merges "first writer wins": a key already present keeps its value.
//   - Decide atomically on the owner (Store.Apply): one Apply at a time, in one Badger
//     transaction, in order, so "look up, and insert if absent" has no gap and two copies
//     racing from two nodes get one original.
//   - Serve POST /internal/v1/dedup (Handler): a JSON Request with the partitions and the
//     lease epochs the sender saw; refused with 409 and nothing applied unless this node
//     holds every partition at that epoch and no handoff holds it (Leases.WithLeases,
//     which a handoff waits for, so no decision lands after a partition's final export).
//   - Ask the owners (Decider, a corpus.Decider): the corpus stage hands it a batch of up
//     to corpus.Config.DecideBatch pages; their operations are grouped per owner, one
//     request per owner and round, all owners at once; this node's share is applied in
//     process with no network hop (a single node never leaves the process).
//   - Ask the owners about payloads (Payloads): a lookup before a response is archived, a
//     registration once its full record is written; see "Identical payloads" below.
//
// The decision, in two rounds:
//
//  1. For every page: OpExact (look up the hash, insert the page if absent) and, per
//     table, OpNear (the closest fingerprint within distance 3 in the page's bucket;
//     the page's fingerprint enters the bucket only if it found none there). A page whose
//     hash names another page is
//     an exact duplicate of it; else one whose buckets found a fingerprint is a near
//     duplicate of the closest; else it is an original.
//  2. A duplicate takes back what round 1 inserted for it (OpDropExact, OpDropNear:
//     delete if the key still names the page), so that only originals stay in the
//     indexes, as on one node.
//
// Decisions where the design is silent:
//
//   - Which bucket decides a near pair. Two fingerprints within distance 3 share at
//     least one of the four 16-bit blocks; they may share several, on several owners,
//     and two pages racing could each be first on a different one and find each other,
//     leaving no original. So a bucket reports only fingerprints whose lowest shared
//     table with the probe is the bucket's table: for any pair exactly one bucket, on one
//     owner, judges, and whichever of the two reached it first is found by the other. A
//     stored original within distance 3 is still always found (it is in every one of its
//     buckets), so sequential decisions are the single-node ones.
//   - A page enters no bucket where it found a match. With the rule above, the two pages
//     of a pair are never both in their judging bucket, so a round that failed midway
//     (one owner applied its share, another did not answer) and is asked again cannot
//     make each page find the other (TestRetriedRoundKeepsOneOriginal; found by
//     TestClusterCorpus when a partition's owner refused during a lease move).
//   - Exact copies in the near index. A near entry carries the first 8 bytes of its
//     page's hash; a probe ignores entries with its own hash, which the exact key decides.
//     Otherwise two identical pages racing could each be an exact duplicate by the exact
//     key and a near duplicate by a bucket, of each other.
//   - Exact copies share a near entry. Identical texts have one fingerprint, so one key
//     per bucket, and the copy that reached a bucket first may not be the one the exact
//     key makes the original: it takes its entry back in round 2, and the original, which
//     found the entry there and so entered nothing, would be left out of the bucket, and a
//     near copy of it decided afterwards would be a second original (TestRacingCopies,
//     about 1 run in 15; TestExactCopyKeepsOriginalsNearEntry drives that order). So a
//     page that finds its fingerprint's entry held by an exact copy, and no match in the
//     bucket, joins it as a holder (the value lists the holders, the first is the one a
//     probe is told of); a duplicate taking back removes only itself, and the entry goes
//     when its last holder does. The list is bounded by the copies being decided at once:
//     all but the exact key's holder are duplicates and leave in their round 2 (a holder
//     whose asker was lost between the rounds stays, as a lone entry always did).
//   - A page that finds itself (same URL and fetch time: redone after a crash or after a
//     failed round) is not its own duplicate, as on one node; a repeated Decide for the
//     same pages answers the same, so the stage simply asks again after an error.
//   - A page that replaces its own lost capture. A first fetch of a URL (not a revisit:
//     the frontier admits a URL once, so a second first fetch means its earlier capture
//     was forgotten) can find keys naming its URL at another fetch time: a node lost for
//     good had fetched it and its record is gone (its WARC never reached the output
//     store and the promotion queued it again, or it was fetched after the lost node's
//     last replicated round). The page takes the exact key over and removes the near
//     entries of its URL, and becomes the original; later copies point at it. A revisit
//     (Op.Revisit, sent only then) of the same text stays a duplicate of its earlier
//     capture, as on one node. Two first fetches of a URL that both reached the store
//     (a partition's URL fetched again after a handoff, or a lost capture that did reach
//     the store within the replication lag) leave two originals of one URL: export --api
//     keeps one (its one-record-per-URL rule), export --from both.
//   - Failure: any owner that does not answer (transport error, 5xx, 409 after a lease
//     moved, no owner yet, Timeout) fails the whole call; corpus retries it with backoff
//     while the pages' jobs stay queued (its backlog is bounded by MaxBacklog, which
//     pushes back on fetching). Nothing is decided on a guess.
//   - JSON on the wire: a round carries about 5 small operations a page, and the
//     measured cost (BENCHMARKS.md) did not justify a binary format yet.
//
// The race that remains, and its cost: between round 1 and round 2 a duplicate's keys
// are visible. A third page that reads them in that window (a copy of a copy, decided on
// another node within one round trip) is marked a duplicate of the duplicate rather than
// of the original: still a duplicate (precision and recall keep), but its duplicate_of
// names a copy. Likewise a page whose near decision makes it a duplicate takes back its
// exact key, and an exact copy of it that read the key in that window points at it.
//
// # Identical payloads (WARC revisit records)
//
// Payloads (payload.go, payloads.go) are decided for the cluster like texts, as Heritrix
// and Zeno decide them on one machine: the first full response record of a payload
// anywhere is the original, every later 200 with the same WARC payload digest anywhere is
// written as a revisit record (profile identical-payload-digest) whose
// WARC-Refers-To-Target-URI and -Date name the original.
//
//   - Keys: D|part|'p'|digest -> Original (URL, date, node, WARC file, offset, length), on
//     PayloadPartition(digest) (FNV-1a of the digest), so they ride with the partition
//     exactly as the text keys do (handoff, sweep, replica, promotion). A node's old
//     per-node index (family 'p') moves into D at start (MigratePayloads), naming itself.
//   - Two steps, so a revisit never points at a record that was not written: Lookup
//     (OpPayloadGet) before the response is archived only reads; Register (OpPayloadPut)
//     after the full record is written (the node's committer, batched) inserts it if the
//     digest has no original, atomically in the owner's Apply under the partition's lease.
//     Two copies fetched at once on two nodes both miss and are both written in full; the
//     owner keeps the first registration and counts the other (LostRace): two full records,
//     never a dangling revisit. This is the window one node always had (its index was
//     written by the committer too).
//   - Lookups never stall fetching: this node's share is read in process (no lock, no
//     lease check: a stale "none" costs a full record, a stale "found" names a record that
//     was written); another owner's lookups queue per owner, one request in flight
//     per owner (maxSenders), and what queued meanwhile goes in the next request (MaxWireOps
//     each), so 64 fetch slots pay a few requests, not 64 round trips. A slot waits at most Bound
//     (DefaultPayloadBound, 250 ms; node.Config.PayloadBound) and then writes a full
//     record; an owner whose request failed is skipped for Backoff (2 s) without waiting.
//     No owner, a refusal (409 after a lease moved), a full queue: a full record at once.
//     Every such case is counted (PayloadStats, crawlnode_payload_lookups_total).
//   - Registrations are sent in the background, retried (maxRegisterRetries) after a failed
//     request, bounded by MaxQueue per owner; one that never arrives is counted
//     (RegisterFailed) and costs later copies a full record each.
//   - The original's URL archived again (OpPayloadPut with the same URL) replaces the key:
//     the newer record is the one known to exist. This is what repairs the key when the
//     original's node was lost before its WARC file reached the output store: its
//     partitions' new owners fetch the lost pages again (they were never shipped), the
//     original's URL among them, and its new full record becomes the original. Revisits
//     written before the loss keep naming the lost capture (URL and date); replay tools
//     resolve a revisit by URL and payload digest, which the new capture carries, and the
//     payload is unchanged unless the page changed meanwhile. A revisit written on another
//     node whose own file reached the store is never re-fetched, so that window is the
//     risk that remains (RELIABILITY.md).
//   - The corpus: a revisit of a payload archived on this node is extracted from the
//     original's record as before; one archived on another node is not read back (its
//     payload is not here): the extract job carries PayloadOf and its record is an exact
//     duplicate of the original's URL (the same bytes give the same text).
//   - Cost (BENCHMARKS.md): about 1 lookup and, for originals, 1 registration a page, a
//     digest and a small JSON record each; JSON like the text decisions.
package dedup
