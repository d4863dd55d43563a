// Package forward ships discovered links whose host another node owns to that node.
//
// Duties:
//   - Outbox: a durable queue in the node's Badger, per partition (Add writes one
//     WriteBatch and returns only once it is written), bounded by MaxQueued links: past it
//     Add returns ErrFull and the caller applies back-pressure.
//   - A recent cache (two generations of 64-bit URL hashes) so that a URL queued recently
//     is not queued again; hits are counted.
//   - Sender: every SendInterval (or at once when a partition fills a batch), the owner
//     of every partition with queued links is resolved again (OwnerOf), partitions are
//     grouped by owner and shipped in batches; entries are deleted only when the owner
//     acknowledged its frontier commit (Send returned nil). Partitions this node now owns
//     go to Local. Each peer has its own drains (up to PeerConcurrency, default 4, batches
//     in flight at once, each drain over its own partitions) and its own bounded
//     exponential backoff, so a peer that is down or hangs does not hold up the others.
//   - Wire format (Encode/Decode): version byte + zstd frame of a body where every
//     partition carries its epoch and its links sorted by URL, front-coded, in columns.
//     Hard limits on links, URL length, URL bytes and decompressed size; malformed input
//     gives ErrCorrupt, never a panic.
//   - Receiver (Handler) and transport (HTTPSender) for POST /internal/v1/links: 200 when
//     every partition committed, 409 with the refused partitions when the receiver does
//     not own some of them at the batch's epoch. HandlerSync also runs a hook after the
//     commits and before the answer (a node waits there until its replicas hold the
//     links: once acknowledged, the links exist nowhere else). "Committed" means durable:
//     a node opens Badger with SyncWrites, so a commit has been fsynced when it returns
//     and a power cut on the receiver after the answer loses none of the links (package
//     node's doc, "Durability").
//
// Key space (family 'o' only; the DB is shared with the frontier and others):
//
//	o|partition(2, BE)|seq(8, BE) -> version(1) + link section (uncompressed)
//
// Decisions where the design is silent:
//   - The receiver authenticates nothing itself: the node serves Handler behind cluster
//     credentials, and the apply function refuses (ErrForbidden, 403) a batch whose From
//     is not the authenticated caller. HTTPSender sends through the client it is given,
//     which must carry those credentials (the cluster's signs every request).
//   - The outbox is keyed by partition, not by peer: the owner of a partition can change
//     while its links wait, so the peer is only decided at send time. Stats report the
//     queue both per partition and per current owner.
//   - Sequence numbers are global and monotonic (recovered at New as the largest stored),
//     so a partition's entries are sent in the order they were added.
//   - An entry holds the links of one partition from one Add (split to at most BatchLinks
//     links / BatchURLBytes), so a batch is whole entries and an entry is deleted whole.
//   - Link.From (the page a link was found on) is not shipped: the owner has no use for it
//     beyond logs, and a second URL per link would about double the bytes on the wire.
//   - Links repeated within a batch's partition are sent once (the best priority, then the
//     lowest depth wins); the receiver must still treat adds as idempotent, because a send
//     whose acknowledgement was lost is sent again.
//   - Several batches in flight per peer: a node acknowledges forwarded links only once its
//     replicas hold them (HandlerSync; a replica round, up to a few seconds), so with one
//     batch at a time links crossed to a peer at one batch per replica round, and a young
//     cluster, where most links are found for other nodes, crawled slowly while they
//     queued. Up to PeerConcurrency drains run per peer; each claims a disjoint set of
//     partitions (a partition is in one drain at a time, so its entries still go out in
//     order and holds work as before). A round gives a peer's unclaimed partitions to as
//     many new drains as there are free slots and batches of queued links, dealing the
//     partitions with the most links first to the drain with the fewest so far; a peer
//     with drains running gets another when new partitions fill. Batches in flight
//     together share the receiver's replica rounds. Bounded: PeerConcurrency (at most
//     MaxPeerConcurrency) batches of BatchLinks links per peer in memory and connections.
//   - A failed send backs the peer off for all its drains: the others send no further
//     batch, and failures of sends already in flight count (Stats.Failures) but take no
//     further backoff step. When the backoff ends, one drain sends one batch (a probe);
//     only its success ends the backoff and lets the next round spread again. So a dead
//     peer sees one attempt per backoff period, as with one drain, not PeerConcurrency. A
//     success of a send that started before the failure does not end the backoff.
//   - Links this node now owns (Self) go to Local through one drain: it is the node's own
//     frontier, with no acknowledgement to wait for.
//   - A 409 is a partial acknowledgement: the other partitions of the batch are deleted.
//     A refused partition is held (not sent to the same owner at the same epoch) for the
//     backoff delay; a new owner or epoch releases it at once. A 5xx or a transport error
//     keeps the whole batch and backs the peer off.
//   - MaxQueued counts links; an Add is all or nothing against it (after dropping repeats),
//     so a caller can retry the same call after back-pressure.
//   - The recent cache is filled when links are queued (not when they are acknowledged):
//     once queued a link is durable and will be delivered, so a repeat is redundant.
//   - Badger's SyncWrites decides whether "durable" survives power loss or only a crash of
//     the process; the node chooses.
//   - The wire body puts the URL column (shared lengths, suffix lengths, suffix bytes) and
//     the number columns apart. On simweb-like links (TestBytesPerLink: 10,000 links over
//     50 hosts, raw URL+fields 49 bytes a link) the wire costs 15.2, 10.4 and 8.5 bytes a
//     link in batches of 100, 500 and 2000 (target: at most 30). zstd SpeedDefault: the
//     better-compression level saved 1% of bytes for 50% more encode time.
//   - The zstd encoder and decoder are package-level values created on first use: both are
//     safe for concurrent EncodeAll/DecodeAll and pool their internal state, and hold no
//     per-caller state, so two outboxes in one process do not interfere.
package forward
