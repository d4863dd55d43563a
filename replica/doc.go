// Package replica is a node's replication of its partitions to backup nodes: every
// partition a node holds is copied, asynchronously and in order, to one backup, so that
// when the node is lost for good its partitions go on from where replication stood
// instead of from nothing.
//
// Duties:
//   - Rounds (round.go): every Config.Interval, the changes of each held partition and
//     of the node's outbox since the version its backup acknowledged, read from one
//     frontier.View (a consistent cut), sent in two phases (additions, then completions)
//     in one zstd stream per backup (Path).
//   - Reading a round (scan.go, changes.go): the change log follows Badger's feed of
//     committed writes so a round reads only the keys changed since the copy's version;
//     else one shared pass per key family; else partition by partition.
//   - Receiving (receive.go): decode a stream, decide per section against the copy's
//     meta (extend, replace or refuse and ask for a full copy), write it in one batch.
//   - Promotion and outbox copies (promote.go): import a lost node's copies into the
//     frontier, queue its copied outbox, drop copies nobody needs; Blocked lists the
//     partitions whose copy waits to be imported (the node must not fetch them before).
//   - Refetches (refetch.go): with an output store (Config.Shipped), a promotion queues
//     again the pages the lost node fetched whose WARC records never reached the store.
//   - Acknowledgement of forwarded links (WaitCopied): wait until a copy holds them.
//   - Figures (stats.go): Stats for the cluster API, Counters for metrics.
//
// What it needs from the cluster (membership, the ring, leases, node-to-node HTTP) comes
// through the Cluster interface; the node's cluster implements it (node/replica_wiring.go).
//
// Wire format (uvarint and length-prefixed fields from internal/wire):
//
//	stream  = "CNREPL1\n" | bytes(sender) | section* | 'E'
//	section = 'P' | uvarint(partition, or outboxSlot) | uvarint(since; 0: a full copy) |
//	          record* | 0 | uvarint(version the copy is complete up to)
//	record  = 1 | bytes(key) | bytes(value)   (set)
//	        | 2 | bytes(key)                  (delete)
//	bytes(b) = uvarint(len(b)) | b
//
// sent zstd-compressed; the backup answers JSON {"applied": {partition: version},
// "resync": [partition]}.
//
// Decisions where the design is silent:
//   - Who may write a copy here: the stream's source must be its authenticated caller
//     (clusterauth.PeerFrom; else 403 and nothing applied), and a partition's section
//     applies only while the lease table here names the source as the partition's
//     holder; another section is read past and asked again in full (the table here may
//     merely lag: the holder's next round lands). Streams carry no epoch; the source's
//     version chain orders them.
//   - A replica is not crawled, counted or swept: copies live apart from the frontier's
//     keys, under keyspace.Replica.
//   - A backup that does not answer within WaitCopied's bound does not hold links up:
//     they are acknowledged anyway and counted (Counters.AckUncopied).
//   - A copy whose source is alive but has sent nothing for replicaStaleAfter (10 min)
//     is dropped; a handed-off partition's copy is dropped (the partition travelled with
//     its lease).
//   - At most maxOutboxCopies (256) outbox copies are kept; a full copy past that is
//     refused (logged), the partitions still apply.
//
// How it works, in detail:
//
// The backup of partition p is the node that would own p if this node were gone: the
// owner of p in the ring over the other members. When a member is gone past the grace
// period the leader gives its partitions to exactly those owners (the ring without it),
// so the replica is usually already where the lease goes; if membership moved meanwhile,
// the replica still merges in and the sweep ships it on to the owner.
//
// Each round (Config.Interval: the node's ClusterConfig.ReplicaInterval, 1 s by default) the owner exports, per held
// partition, the frontier keys written or deleted since the Badger version its backup
// acknowledged last (frontier.View.ExportPartitionSince), and streams them, zstd-compressed, in
// one request per backup. Every partition and the outbox of a round are read from one
// Badger snapshot: a consistent cut. A page's links (a redirect's target) are committed,
// in other partitions or the outbox, before the page is recorded fetched, so a cut that
// has the page fetched has its links too; reading each partition at its own moment could
// copy the page as fetched and its link as never seen, and the promoted copies would lose
// the link. And as a round reaches its backups one request at a time (a node killed in
// the middle of a round leaves copies from two adjacent rounds), it goes out in two
// phases: the additions (frontier.Completes false) to every backup, then, only if every
// backup took them, the completions (fetched records, deletions). What remains: a full
// copy (new backup, reset) travels whole in the second phase. The backup applies a
// partition's delta only if it starts where its copy ends (same source, same version);
// otherwise it asks for a full copy (a reset).
//
// What a round reads: not a scan of the versions since the copy's. Badger's iterators
// step over every version still in the memtables (up to tens of MiB), whatever SinceTs
// says, so a scan costs the memtable's size, not the round's changes. A change log
// (changeLog, changes.go) follows Badger's feed of committed writes (DB.Subscribe)
// for the frontier's exported families and the outbox, so every writer (adds, completions,
// retries, host clocks, imports, deletions, the outbox) is in it without reporting its
// keys, and keeps per partition the keys committed with their versions. The round waits
// until the feed has delivered every commit up to its snapshot's read version (the feed
// comes in commit order; a marker write after the snapshot passes it when nothing else
// does), then reads, from that same snapshot, just the keys with a version in (the copy's
// version, the snapshot's]: the consistent cut stays, a key absent from the snapshot goes
// as a deletion, and a write committed while the round is in flight waits for the next
// round. The log drops a key's versions once the backup acknowledged a round read at or
// after them, and a partition's keys when it is no longer held. The first round after a
// start, a new backup or a reset (a full copy), a copy older than the log's coverage
// (the feed started after it, or the partition overflowed the log's bound and was
// dropped from it) and a log that is not running take the full pass: one pass per key
// family over the partitions whose copies stand at one version
// (frontier.View.ExportPartitionsSince), else partition by partition.
//
// The backup applies a request's sections in one write batch, flushed at its end, and
// checks each against the copy's meta as it keeps it in memory (in step with Badger's).
//
// Copies live in the node's Badger under their own prefix (keyspace.Replica, R), apart from the frontier's
// own keys: a replica is not crawled, counted or swept.
//
// The node's outbox (links found here for partitions other nodes hold, not yet
// acknowledged by them) is copied the same way, as one more section, to the next alive
// member in name order (outboxBackup): a page whose fetch the copies record as done may
// have links only that outbox still held. That backup keeps each source's outbox copy in
// a slot of its own (outboxSlotFor: it may back up several nodes' outboxes, while a
// member is down or after membership moved, until the stale copy is dropped). When the
// node is gone past the grace period (no longer a registered member), that backup queues
// the copied links in its own outbox; their owners drop the ones they already have.
//
// Promotion: when p's lease has moved away from the replica's source and the source is
// not alive, the backup imports the copy into its frontier with ImportPartition (union
// merge: a URL the new owner knows is kept as it is there, a final state beats a queued
// one) and deletes it. If the source is alive the lease moved by a handoff, which carried
// the partition itself, so the copy is dropped. The pages the lost node fetched after its
// last replicated round are queued again in the copy and fetched again (duplicates,
// counted by the chaos suite), which finds their links again.
//
// Refetches: what the store holds decides what is kept. With an output store a page
// counts as kept only once its WARC record is in the store; the copy records the lost
// node's fetched pages as fetched, so without more they would never be fetched again and
// the store would silently miss them. The durable marker is what already exists: each
// fetched seen record carries its WARC location (file, offset, length; archive.Location,
// the frontier's Meta), and the lost node's manifest in the store lists its shipped WARC
// files with their sizes. A page is refetched when its location is in a file of the lost
// node (archive.FileNode) that the manifest lacks, or lies past the size shipped (a file
// adopted and appended to after a restart is shipped again with its new size). Reading
// the CDXJ of every shipped file would say the same thing at the cost of the whole index;
// the manifest is one small object per lost node, read once per promotion pass
// (shippedCache). The decision is made record by record as the import streams the copy
// (frontier.ImportOptions.Refetch): no per-URL state in memory, whatever the partition's
// size. A revisit's r record precedes its seen record in the stream, so for it the seen
// record is read from the copy (copySeen). A refetched URL is queued as a discovery URL,
// marked Refetch, with no validators (a full GET, so its WARC record is a response, never
// a revisit of the lost capture), and so are the copy's queued URLs (MarkQueued: the lost
// node may have fetched them after its last round). The duplicate decision lets every
// first fetch of a URL (not a revisit; corpus.Job.Refetch) take over keys naming its own
// URL: the lost capture is no original to duplicate (dedup's doc). The store is read before the
// partition is held; if it does not answer the import waits and is retried (the partition
// stays unfetched, Blocked), since importing without knowing would lose the pages for
// good. Captures of other nodes in the copy (pages fetched before the partition moved to
// the lost node) are left alone: their own node ships them. Without an output store
// (Shipped nil) nothing fetched is refetched: the README says what a lost disk loses.
//
// Links a peer forwards are deleted from its outbox once this node acknowledges them, so
// they must be in a copy by then: the acknowledgement waits (Replicator.WaitCopied, through
// forward.HandlerSync) until the backups of the batch's partitions acknowledged a round
// read after the commit, and asks for that round at once (rounds are spaced by at least
// minGap, so concurrent batches share them). Acknowledged at the commit, links that
// arrived after the last round were lost with the node: nobody else had them. A backup
// that does not answer within ackCopyWait does not hold the links up: they are
// acknowledged anyway and counted (replica_ack_unreplicated_total).
//
// Written here, not taken from a library: Badger's own Stream/Backup framework copies a
// whole database with its versions, while a replica is one key range of a live database
// applied on a peer under another prefix; the fields are framed as the snapshot package's
// (internal/wire), without its single-partition header.
package replica
