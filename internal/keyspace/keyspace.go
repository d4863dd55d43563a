// Package keyspace is the registry of the key families in a node's one Badger database.
//
// Every package that writes to the shared database keeps its keys under family bytes of
// its own, and takes those bytes from here, so that two packages can never pick the same
// one without a test failing (TestFamiliesDistinct). A key's first byte is its family;
// what follows is the owning package's business (most start with the partition, two bytes
// big-endian, so a partition can be streamed out or dropped with one prefix).
//
// Duties:
//   - Name each family's byte once, with the package that owns it and what it holds.
//   - List them (Families) for the collision test and for tools that walk the database.
//
// Decisions:
//   - One byte a family. Badger keeps its own keys under "!badger!", so '!' is reserved.
//   - Families are never renumbered: data directories written by older builds must read
//     the same. A retired byte stays listed, marked retired, and is never reused.
package keyspace

// Family bytes, grouped by owner.
const (
	// frontier: per-partition crawl state.
	FrontierQueue = 'q' // q|part|host|0x00|priority|depth|seq -> queued URL record
	FrontierHost  = 'h' // h|part|host -> host politeness state; h|part|host|0x00|'m' -> host meta
	FrontierSeen  = 's' // s|part|urlhash -> seen record (the exact seen set)
	FrontierDead  = 'd' // d|part|urlhash -> dead letter
	FrontierRetry = 'r' // r|part|due|seq -> a URL waiting for its retry or revisit

	// dedup: the cluster's duplicate decisions, partitioned like the frontier's keys and
	// carried with them (frontier.ExportFamilies): D|part|kind|key -> the first page.
	DedupKeys = 'D'

	// forward: links for partitions other nodes own.
	ForwardOutbox = 'o' // o|part|seq -> an outbox entry

	// corpus: the extract stage.
	CorpusJob   = 'x' // x|seq -> a queued extract job (the durable backlog)
	CorpusExact = 'c' // c|sha256 -> the first page with that normalized text
	CorpusNear  = 'n' // n|table|block|simhash -> a page with that near-duplicate fingerprint
	// (c and n: a stage without a Decider only; a node moves them into D at start, dedup.Migrate)
	CorpusState = 'k' // k|name -> the stage's counters and state
	CorpusPage  = 'u' // u|urlhash -> where a page's corpus record is

	// node: job settings and the payload index.
	NodeJob     = 'j' // "jops", "jscope": the node's operator state and crawl scope
	NodePayload = 'p' // p|digest -> the first WARC record with that payload; retired: a
	// node moves them into D at start (dedup.MigratePayloads), where payloads are decided
	// for the cluster

	// replica (package replica): copies of peers' partitions and outboxes, kept apart
	// from the frontier's own keys. R|slot|frontier or outbox key -> a copied key;
	// R|slot|0x00 -> the copy's meta (slot: the partition, or an outbox slot from
	// ring.PartitionCount up); R|0xffff|"cut" -> the change log's marker write.
	Replica = 'R'

	// badgerInternal is Badger's own "!badger!" prefix.
	badgerInternal = '!'
)

// Family describes one key family.
type Family struct {
	Byte  byte   // the key's first byte
	Owner string // the package that writes it
	Holds string // what its keys hold
}

// Families lists every key family in the shared database.
var Families = []Family{
	{FrontierQueue, "frontier", "queued URLs by host"},
	{FrontierHost, "frontier", "host politeness state and meta"},
	{FrontierSeen, "frontier", "the exact seen set"},
	{FrontierDead, "frontier", "dead letters"},
	{FrontierRetry, "frontier", "URLs waiting for a retry or a revisit"},
	{DedupKeys, "dedup", "exact, near and payload duplicate keys, per partition"},
	{ForwardOutbox, "forward", "links waiting for their owner"},
	{CorpusJob, "corpus", "the extract stage's backlog"},
	{CorpusExact, "corpus", "exact-text duplicate index"},
	{CorpusNear, "corpus", "near-duplicate index"},
	{CorpusState, "corpus", "counters and stage state"},
	{CorpusPage, "corpus", "page to corpus record"},
	{NodeJob, "node", "operator state (pause, blocks) and scope"},
	{NodePayload, "node", "payload digest to first WARC record (retired, moved into D)"},
	{Replica, "replica", "partition copies held for peers"},
	{badgerInternal, "badger", "Badger's own keys (!badger!)"},
}
