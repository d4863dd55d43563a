// Package node is one Crawlnode node: it opens the data directory, builds every stage,
// wires them into the crawl loop, takes part in the cluster and serves the HTTP API. It
// is the hub below the binary: it imports every stage, each stage's own logic lives in
// its package, and node/ holds what connects them.
//
// Duties:
//   - Wiring and lifecycle (node.go, datadir.go): New opens and locks the data directory
//     (DataDir), opens the one shared Badger DB and builds the frontier, the fetch client,
//     the WARC writer, the extract stage, the outbox and the cluster; Run starts the API,
//     joins the cluster, queues the seeds, runs the crawl loop until the crawl is done
//     (Config.ExitWhenDone), a decommission ends or its context is cancelled, then lets
//     fetches in flight finish, drains the extract stage and closes every store.
//   - The crawl loop (crawl.go, robots.go, tdmrep.go, scope.go, freshness.go,
//     netwatch.go): fetch slots, robots.txt and TDMRep per host, the scope and
//     include/exclude rules for discovered links, OPIC cash and revisits, and the group
//     commit that records finished leases.
//   - The cluster layer (cluster.go, handoff.go, cluster_api.go): membership from gossip,
//     the ring, leases from the Raft control group, fencing, routing of links, partition
//     handoff, the leftover sweep, decommission and cluster-wide completion.
//   - Replication (replica.go, replica_changes.go; moving to package replica): every held
//     partition and the outbox copied to a backup node; its design is written at the top
//     of replica.go.
//   - The HTTP API: the public /v1 routes (api.go; moving to package api, whose doc lists
//     them), the job configuration shared through Raft (job.go, whose rules are written at
//     its top), operator state such as pause and blocked domains (ops.go), and the
//     node-to-node routes under /internal/ (cluster_api.go).
//   - Observability and offline tools (metrics.go, logs.go, offline.go): Prometheus
//     metrics on a registry of the node's own, the Raft library's log levels, and the
//     readers `crawlnode export` and the dead-letter listing use on a stopped node.
//
// What lives elsewhere: the queues, seen set and politeness arithmetic in frontier/; HTTP
// and DNS in fetch/; WARC in archive/; text extraction and the corpus in corpus/ (the
// extract stage); the fast link scan in linkscan/; canonical URLs in urlnorm/; the outbox
// and its wire format in forward/; partition streams in snapshot/; membership in gossip/;
// placement in ring/; the Raft state machine in control/. Replication and the cluster
// layer are being moved out of node/ into packages of their own (replica/, cluster/), and
// the public API into api/ (docs/architecture.md keeps the current map).
//
// # Data flow
//
// Run wires the stages so (docs/architecture.md, "One URL through a node", has the
// cluster around it):
//
//	seeds, forwarded links ──▶ frontier.Add
//	frontier.Next (a ready host, politeness honoured) ──▶ fetch slot (Config.Concurrency)
//	  ──▶ robots.txt, TDMRep ──▶ fetch ──▶ archive (WARC record, before any parse)
//	  ──▶ linkscan (links, redirect target, sitemap URLs) ──▶ scope rules
//	  ──▶ committers (bounded queue; group commit of many leases):
//	        links: frontier.Add if this node holds the partition, else forward outbox
//	        extract jobs: corpus.Stage.Enqueue (its own workers, may lag)
//	        frontier.DoneBatch (each URL leaves its queue only now)
//
// The crawl loop in detail, one worker per fetch slot:
//
//	frontier.Next (a ready host, politeness honoured)
//	  -> robots.txt known for the host? no: fetch it in this slot, requeue the URL
//	  -> disallowed? record Drop
//	  -> fetch (fasthttp, limits; conditional for a revisit)
//	  -> revisit unchanged (304, same body)? WARC revisit record, Done (next visit scheduled)
//	  -> WARC record written (response, or revisit for a payload seen before)
//	  -> redirect target / links / sitemap URLs, HTML page's extract job: kept by the slot
//	  -> handed to the committers (bounded queue); the slot leases its next URL at once
//	  -> committer (group commit of many leases): frontier.Add of all links, one extract
//	     Enqueue of all jobs and one payload-index write (durable), then one
//	     frontier.DoneBatch for the leases (each URL leaves its queue only now)
//
// # Priority and freshness
//
// Priority: OPIC (Abiteboul, Preda, Cobena, "Adaptive on-line page importance
// computation", WWW 2003). Every seed starts with cash 1; a fetched page's cash is split
// evenly among the links it gives (HTML links, a redirect's target, a sitemap's URLs),
// and the frontier adds cash that reaches an already queued URL to its cash, so a page
// many important pages link to rises in its host's queue, and the ready hosts are taken
// in the order of their best URL. Forwarded links carry their cash to the owner node.
// In breadth-first mode (--priority bfs) no cash is given, and the frontier's order is
// seed class, depth, arrival. Cash given to pages already fetched is dropped: this
// node does not keep a per-URL cash history for revisits (their order comes from the
// change estimate), and the outbox's recent-link cache drops the cash of a link it skips.
//
// Freshness: with --recrawl the frontier schedules every fetched page again. A revisit
// sends If-None-Match / If-Modified-Since with the validators of the last fetch. A 304,
// or a 200 whose body hashes as the last one did, writes a WARC revisit record (profile
// server-not-modified, or identical-payload-digest referring to the URL's own earlier
// capture), queues no corpus record and follows no links (the page did not change); a
// changed page is archived, parsed and sent to the corpus as a new version. Sitemaps'
// changefreq and lastmod give a page's first interval (ChangeHint).
//
// # The cluster layer
//
// How one node takes part in a crawl with its peers:
//
//	memberlist (gossip/) ──alive members, their state──▶ ring (ring/) ──▶ who should own p
//	Raft (control/) ── lease table p -> (owner, epoch), job config, member registry
//	     │
//	     ├─ fence: a partition is fetched only while Owns(p) (lease + recent leader
//	     │  contact) and no handoff holds it; otherwise it is paused in the frontier
//	     ├─ route: a discovered link goes to frontier.Add when this node holds its
//	     │  partition's lease, else to the durable outbox (forward/), which ships it to
//	     │  the lease holder
//	     ├─ handoff: a partition whose ring owner is another live node is paused, drained,
//	     │  streamed (snapshot/) to it, its lease moved (AssignLeases, epoch+1), the rest
//	     │  streamed again, then dropped here
//	     └─ leader: registers members (Reconcile), assigns unowned partitions, forces the
//	        leases of a member dead longer than the grace period onto the ring's owners
//
// Handoff of partition p from A (lease holder at epoch e) to B (its ring owner):
//
//	A: hold p (no fetching, p's links to the outbox), wait for p's fetches in flight
//	A ──snapshot stream (p, e, A->B)──▶ B: accepts because the lease says (A, e); imports
//	A: AssignLeases p: A@e -> B (epoch e+1), through the leader; waits to see it applied
//	A ──snapshot stream (p, e+1)──▶ B: what reached A between the two streams (idempotent merge)
//	A: drop p; release the hold (p stays fenced: A no longer holds its lease)
//
// B fetches p only once its own copy of the lease table names it, after the commit, and A
// stopped before the first stream: no host is fetched by both. A failure before the
// commit releases p on A (B's copy is a harmless duplicate that B's sweep sends back);
// after the commit, whatever A still holds of p is sent by the sweep, which streams every
// partition present here but leased elsewhere to its holder and then drops it.
//
// # Decisions where the design is silent
//
//   - The ring's members are the Raft registry's members minus those that announce
//     draining or left: a node that stops (restart, crash) stays in the ring and keeps its
//     leases until the leader has seen it dead for Grace; then it is removed and its
//     partitions are forced to the ring's next owners (without replicas its queued work is
//     lost with it; replication is a separate feature).
//   - A node that runs alone (no --join, no --bootstrap-expect) is a cluster of one on
//     ephemeral gossip and Raft ports: the same code path, leases and all.
//   - Known peers' gossip addresses are kept in DIR/peers.json, so a restarted node
//     rejoins without --join.
//   - The job's pause flag and blocked domains live in the Raft job configuration; every
//     node copies them into its local operator state as they change.
//   - Done (for --exit-when-done) is decided by each node: every registered member alive
//     and idle (empty frontier, nothing in flight, empty outbox, no handoff, nothing held
//     for another owner) in two consecutive rounds a second apart, with every partition
//     leased and at least one member seeded (given seeds, or holding seen URLs): a
//     cluster started without seeds waits for them rather than calling an empty crawl
//     done. A node that decided keeps answering "done" for a few seconds before it
//     exits, and a node that hears "done" from a peer is done too.
//   - Internal node-to-node calls are plain HTTP on the API address under /internal/
//     (or on Config.InternalAddr when set), carrying the API token when one is set.
//     docs/architecture.md, "Cross-node messages", lists every one.
package node
