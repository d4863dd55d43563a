// Package api is a node's public HTTP API (JSON): the routes under /v1/, health and
// readiness, metrics, the dashboard mount and, when asked, the profiling endpoints. It
// parses and validates requests, writes JSON answers and errors with stable codes, and
// guards writes with the operator token and the crawl's data with a read credential
// (Guard). What a node knows and does it reaches
// through Backend; the node implements Backend (node/api_backend.go) and mounts New.
//
// Routes (the public listener; the node-to-node ones under /internal/ are the node's):
//
//	GET  /                        the live dashboard (package dashboard)
//	GET  /healthz                 alive
//	GET  /readyz                  storage writable, the crawl loop running, joined
//	GET  /metrics                 Prometheus metrics (Config.Metrics)
//	GET  /v1/crawl/status         the cluster's figures summed, and each member's (?local=1: this node's)
//	POST /v1/crawl/seeds          {"urls": [...], "priority": "high|normal", "crawl_depth": N}
//	                              -> 202 {"job_id","seeds_queued","already_seen","status","rejected":[...]}
//	GET  /v1/pages/{url_hash}     a page's fetch facts, corpus record and text (hex URL hash)
//	GET  /v1/pages?url=URL        the same by URL (&text=false: without the text)
//	POST /v1/crawl/pause|resume   stop or restart fetching (in-flight fetches finish) -> 204
//	POST|DELETE /v1/domains/{domain}/block   block or unblock a domain and its subdomains -> 204
//	GET  /v1/domains/blocked      the blocked domains
//	GET  /v1/hosts/{host}         a host's queue, delay, robots.txt facts and last errors
//	GET  /v1/hosts?top=N&by=queue|errors     the top hosts
//	GET  /v1/errors/recent?limit=N&host=H    recent fetch errors, newest first
//	GET  /v1/deadletters?limit=N             dead letters
//	GET  /v1/cluster              members, their state and partitions, the leader
//	POST /v1/node/leave           decommission this node -> 202
//	GET  /v1/job                  the shared job configuration in effect on this node
//	PATCH /v1/job                 change it (absent fields stay; see JobPatch) -> 200 as GET
//	GET  /v1/export/files         this node's WARC files, CDXJ indexes and corpus shards with
//	                              their readable sizes (ExportListing), for `export --api`
//	GET  /v1/export/files/{kind}/{name}   one of them (kind warc, cdxj or corpus), streamed,
//	                              Range requests served
//	GET  /debug/pprof/...         with Config.Pprof only
//
// Duties:
//   - One handler per route: parse the request, ask the Backend, write the answer.
//   - Errors: every error is {"error": "...", "code": "..."}; the codes are stable (see
//     Error). Unknown routes get 404 not_found, malformed bodies 400 bad_json, bodies over
//     MaxRequestBody (1 MiB) 413 too_large (seeds) or 400 bad_json. A Backend method
//     that fails with an *Error gets that status and code; any other error is a 500
//     "storage".
//   - Auth (Guard): four kinds of request. Open: GET /healthz, /readyz, /metrics and
//     the dashboard page (GET /), always. Views: the other reads (status, cluster, job,
//     hosts, errors, dead letters, blocked domains), open unless Config.ProtectReads is
//     ProtectAll. Data: GET /v1/pages..., /v1/export/... (pages, their text, the node's
//     whole output), which need a read credential as soon as any token is set. Writes:
//     every other method, and the profiling endpoints although they are GETs (a profile
//     or trace costs the node CPU for as long as it runs).
//     A write needs the operator token (Config.Token, --api-token); a guarded read takes
//     the operator token, the read token (Config.ReadToken, --api-read-token) or an
//     authenticated cluster member (Config.Peer: reads one node routes to the node that
//     holds the page). With no token at all, everything is open. A refusal is 401
//     unauthorized with WWW-Authenticate; tokens are compared in constant time. The
//     operator token opens no node-to-node route (/internal/...): those take cluster
//     credentials only (the node's internal_auth.go): a member's mutual TLS certificate
//     name when TLS is on (internal/peerauth), else its HMAC signature under the cluster
//     key (internal/clusterauth); with no key, loopback callers only, or any caller with
//     --insecure-cluster. The same Guard protects the operator's keyring endpoint
//     (/v1/keyring, the node's): listing is a view, a rotation step a write.
//     Why these defaults: the pages and their text are the crawl's product (and may hold
//     what a site meant for its users only), so once an operator sets a token they are
//     guarded with it; the views are what the dashboard polls, figures and host names
//     an operator needs at a glance, left open so a dashboard or a curl works without a
//     secret in the browser, and guarded with ProtectAll where even those are private.
//     Health, readiness and metrics stay open in every mode: load balancers, container
//     health checks and Prometheus scrapers carry no tokens, and they expose figures, no
//     page or URL. A node whose API listens beyond loopback with no token says so at
//     start (one warning line).
//   - Validation of request bodies and queries: seeds (at least one URL, priority,
//     crawl_depth >= 0, each URL canonicalized, the failures listed as rejected), PATCH
//     /v1/job (each field's range and form, then the resulting configuration as a whole
//     against control.JobConfig.Validate's bounds, the ones the leader's state machine
//     holds every change to, before anything is written), query limits (clamped; a bad
//     number takes the default).
//   - The cluster-wide status: the sum of the members' figures (SumStatus, a pure
//     function); asking the members is the Backend's (PeerStatuses).
//
// Decisions where the design is silent:
//   - Reads of a host or URL another node owns are answered by that node: the handler
//     asks Backend.RouteToOwner first, and a URL hash this node does not know (the hash
//     names no host) goes to Backend.AskPeers. Both write the peer's answer themselves;
//     the routing and the peers' addresses stay with the cluster.
//   - The cluster view's shape belongs to the cluster (Backend.Cluster returns it as a
//     value to encode): it carries replication and transfer figures this package has no
//     business knowing.
//   - PATCH /v1/job builds a change function from the patch and hands it to
//     Backend.UpdateJob, which applies it to the current configuration (again, if the
//     version moved meanwhile) and writes it through Raft; the change function does the
//     validation, so a patch is checked against the configuration it lands on.
//   - The job's vocabulary (scopes, URL patterns, crawl orders) is the node's: validation
//     asks the Backend (CheckScope, CheckPatterns, CheckPriority).
//   - JSON is indented by two spaces. Small answers are maps, so their keys come in
//     alphabetical order; Job declares its fields in that order too, so GET /v1/job reads
//     the same whichever way it is built.
//   - The export files, while the node crawls: what is served is what is durable. Closed
//     WARC files, closed shards and the indexes of closed WARC files whole; the WARC file
//     being written up to its last fsync (archive.Writer.Durable: it ends on a complete
//     record), the shard being written up to its last flush (corpus.Stage.Durable: complete
//     zstd blocks of complete lines, fsynced). A listing's sizes are a floor: a later
//     download of an open file may give more, never a torn record. A .partial shard left by
//     a crash is served whole; readers take it up to its last complete line, as
//     corpus.ReadShards does. The open WARC file has no index yet (it is written at
//     close): a reader indexes that file itself. Files are streamed from disk
//     (http.ServeContent over the readable prefix), never buffered. Names are plain file
//     names of the kind (ValidExportName: no separators, no "..", the kind's suffix),
//     looked up in the node's own WARC or corpus directory only, so no request reaches
//     any other file.
//   - The node-to-node routes (/internal/...) are not here: the node serves them, behind
//     cluster credentials (never this package's tokens), with this package's WriteJSON
//     and WriteError.
package api
