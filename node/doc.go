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
//   - Taking part in the cluster: New builds the node's cluster.Cluster over its frontier
//     and Badger DB (cluster_host.go is the node as the cluster sees it); the crawl loop
//     asks it whether a partition may be fetched and routes links through it;
//     cluster_api.go builds the cluster view, routes public reads to a host's owner, and
//     serves the internal listener (cluster.Routes plus replication's route).
//   - Who may call the node-to-node routes (internal_auth.go): authenticated members
//     only, never the operator's token. The caller's name comes from its verified client
//     certificate when mutual TLS is on (Config.Cluster.TLS; tlsPeer, the one place that
//     names it, pointing at peerauth.PeerName; peerauth.Middleware also refuses a request
//     whose X-Crawlnode-Member is not that name), else from an HMAC signature under a
//     secret derived from the cluster key (Config.Cluster.ClusterKey, --cluster-key-file
//     or CRAWLNODE_CLUSTER_KEY, seeding the keyring in DIR/keyring.json, which wins after
//     a rotation; the primary signs, every key of the ring verifies, and the cluster keeps
//     signer and verifier in step with each keyring change), which the cluster's HTTP
//     client puts on every request it sends (links, partition and replica streams,
//     dedup, Raft forwarding, keyring steps, status and routed reads). The name must be a
//     member (the registry, or gossip for a node still joining: 403 otherwise), and each
//     route then holds it against the lease table (package cluster's authz.go, replica,
//     dedup), reading it with clusterauth.PeerFrom. Each route has a bound on handlers in
//     flight (503 busy, Retry-After) and on its body (413 too_large); the internal
//     keyring route gets the same checks.
//   - With no cluster key (development on one machine), the node-to-node routes believe
//     the name a loopback caller gives and refuse every other address; what holds there
//     is only what the lease table checks (a process on the same machine can speak for
//     any member). --insecure-cluster (Config.Cluster.InsecureCluster) extends that
//     belief to every address, for a network the operator trusts; without it, a node
//     refuses to serve gossip, Raft or the internal routes beyond loopback without both
//     key and TLS (cluster.Config.CheckExposure). The node says so in one line at start
//     when it listens beyond loopback insecurely.
//   - With TLS the internal routes always get a listener of their own (InternalAddr,
//     default the API's port + 1) that speaks only mutual TLS; the public API stays plain
//     HTTP for operators. The certificate must name this node (a missing --name defaults
//     to it). keyring.go is the operator's key rotation (/v1/keyring, behind api.Guard:
//     the operator token for changes, which come from loopback clients only, as the
//     request carries the key).
//   - Replication: New builds the node's replica.Replicator over the cluster
//     (replica_wiring.go); package replica's doc has its design.
//   - The HTTP API: package api serves the public /v1 routes (its doc lists them) over
//     the node as an api.Backend (api_backend.go); server.go runs the listeners and mounts
//     the handlers. The job configuration shared through Raft is applied in job.go, and
//     operator state such as pause and blocked domains is kept in ops.go.
//   - Observability and offline tools (metrics.go, offline.go): Prometheus metrics on a
//     registry of the node's own, and the readers `crawlnode export` and the dead-letter
//     listing use on a stopped node.
//   - The cluster export (export_serve.go, export_cluster.go): a member serves its WARC
//     files, their indexes and its corpus shards up to their durable part for
//     `crawlnode export --api`, and ExportMembers merges the copies the client took of
//     every member into one output (every URL once in the text formats; the earliest
//     fetch wins, see export_cluster.go).
//   - The output store (outstore.go, export_store.go), with --output-store: New checks the
//     store before it creates the data directory (a refused start writes nothing), Run
//     runs the uploader beside the crawl, maintain pauses intake while the unshipped bytes
//     pass the bound (the same pausedUntil a full disk uses), and a finished batch crawl
//     closes its last WARC file and waits until everything is in the store before it
//     returns (a signal waits at most 10 s: the rest goes up at the next start). WARC files
//     are deleted after upload (--delete-after-upload) only while the extract backlog is
//     empty, since extract jobs read pages back from them. export --from downloads the
//     files a format needs into a temporary data-directory layout and runs the same
//     export code.
//
// What lives elsewhere: the queues, seen set and politeness arithmetic in frontier/; HTTP
// and DNS in fetch/; WARC in archive/; text extraction and the corpus in corpus/ (the
// extract stage); the fast link scan in linkscan/; canonical URLs in urlnorm/; the outbox
// and its wire format in forward/; partition streams in snapshot/; membership in gossip/;
// placement in ring/; the Raft state machine in control/; membership, leases, fencing,
// handoff, the sweep and completion in cluster/; replication of partitions to backups in
// replica/; the public HTTP API in api/; uploads to object storage in outstore/
// (docs/architecture.md has the map).
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
//	  -> the host's address refused by the fetcher's guard (robots.txt, tdmrep.json or
//	     the page; loopback, private... not in --allow-ips)? nothing was sent: the URL is
//	     a dead letter of class forbidden_address at once, in the recent errors and
//	     crawlnode_fetch_forbidden_address_total, never retried, never archived. robots.txt
//	     is not cached for such a host: each of its URLs asks again (a DNS change may
//	     allow it), which sends nothing while it stays refused
//	  -> revisit unchanged (304, same body)? WARC revisit record, Done (next visit scheduled)
//	  -> a 200's payload archived before anywhere in the cluster? (dedup.Payloads asks the
//	     digest's owner: in process on its own partitions, else batched per owner; at most
//	     Config.PayloadBound, 250 ms, else a full record, counted)
//	  -> WARC record written (response, or revisit referring to the payload's original)
//	  -> redirect target / links / sitemap URLs, HTML page's (or PDF's) extract job: kept by the slot
//	  -> handed to the committers (bounded queue); the slot leases its next URL at once
//	  -> committer (group commit of many leases): frontier.Add of all links, one extract
//	     Enqueue of all jobs, then the batch's full records registered with their
//	     payloads' owners (dedup.Payloads.Register: in process here, queued for peers),
//	     then one frontier.DoneBatch for the leases (each URL leaves its queue only now)
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
// # Identical payloads
//
// Payloads are decided for the cluster (package dedup, "Identical payloads"): the first
// full record of a payload anywhere is the original, a later 200 with the same payload
// anywhere is a revisit record referring to it. A payload is registered only after its
// full record is written (by the committer), so a revisit never refers to a record that
// does not exist; two copies fetched at once are both written in full (counted as
// lost_race). A fetch slot waits at most Config.PayloadBound for another owner's answer and
// writes a full record otherwise (crawlnode_payload_lookups_total{result="timeout|error"}).
// The extract job of a revisit whose original is in this node's WARC reads the original's
// record; one whose original is on another node carries corpus.Job.PayloadOf and becomes
// an exact-duplicate record of that URL without being read back. At exit the node logs
// its "payload decisions" counters.
//
// # A full disk
//
// The free-space check (every second; --min-free-disk, default 256 MiB) and any write that
// failed with ENOSPC or EDQUOT mark the disk short for diskPause (renewed while it stays
// short). Badger's memtable is a memory-mapped file, where running out of space faults
// rather than fails, so the node stops every writer well before the disk is full rather
// than handling the failure: fetching pauses (a WARC write that fails anyway puts its URL
// back, uncounted); the internal routes that write what a peer sends (forwarded links,
// partition imports, replica rounds) answer 503 disk_full with Retry-After before reading
// the body, and their senders keep what they sent (the outbox backs the peer off, a
// handoff or sweep keeps the partition and tries again, a replica source resends from its
// last acknowledged version); POST /v1/crawl/seeds answers 507 disk_full and queues
// nothing; the extract stage's workers wait (corpus.Config.Hold); the group commit retries
// its writes with backoff. The node itself keeps running, serves reads and resumes every
// writer once the check sees space again. Decision: 503 for peers (a temporary state
// their retry loops already handle) and 507 for the operator's seeds (the status HTTP has
// for exactly this, which a person reads as "free some space").
//
// # Durability: what a power cut may lose
//
// A crash of the process loses nothing acknowledged (every write is in the kernel before
// it is acknowledged); a power cut or kernel crash loses what was not fsynced, so the
// node fsyncs before it acknowledges anything, unless --no-fsync (Config.NoSync) says
// otherwise:
//   - Badger runs with SyncWrites: a commit returns only once its log is fsynced, and
//     Badger's write loop syncs once for every commit queued meanwhile (a group commit).
//     So whatever the node acknowledges after a commit is durable: forwarded links (the
//     answer to POST /internal/v1/links, after which the sender deletes them from its
//     outbox), seeds (POST /v1/crawl/seeds), partition imports and replica rounds, the
//     outbox itself. Decision: SyncWrites rather than a db.Sync every interval with the
//     acknowledgements waiting for it, because Badger v4.9.6's Sync covers only the current
//     memtable's log and value log file: a memtable waiting for its flush, or a value log
//     file already rotated, would stay unsynced while newer commits became durable.
//   - WARC before "done": the committer fsyncs the WARC file (groupSync, one fsync for every
//     committer waiting) before it writes anything that points at a batch's records: extract
//     jobs, payload-index entries and the frontier's "done" records. A page is therefore
//     never durable as fetched while its record is not; a record whose page's "done" was
//     lost is harmless (the page is fetched again, a duplicate in the WARC files).
//   - The background fsync of the open WARC file every --sync-interval (default 1s)
//     remains; it bounds how much archived but unrecorded data a cut drops, not what is
//     lost. Corpus shards are fsynced before their jobs are deleted (package corpus), the
//     Raft log by raft-wal, small state files (CRAWLNODE.json, the peer list, the uploader's
//     manifest copy) through internal/durablefile (fsync, rename, fsync the directory).
//
// What a power cut costs, then, is fetches: the pages in flight or waiting in the commit
// queue are fetched again (as after kill -9). The cost on the fetch stage is measured in
// BENCHMARKS.md ("Durability"); TestPowerCut (e2e) holds it on a FUSE file system that
// drops every unsynced write (internal/powercut).
//
// # The cluster layer
//
// Package cluster's doc draws how a node takes part in a crawl with its peers (fence,
// route, handoff, the leader's upkeep) and the handoff protocol, and lists its decisions.
package node
