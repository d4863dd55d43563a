package node

import (
	"net/http"
	"sync"
	"time"

	"github.com/crawlnode/crawlnode/dedup"
	"github.com/crawlnode/crawlnode/fetch"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/replica"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the node's Prometheus metrics, on a registry of its own (two nodes in one
// test process must not share one). Counters the node keeps anyway are read at scrape time
// (CounterFunc/GaugeFunc), so the fetch path pays only for the latency histogram.
type metrics struct {
	reg          *prometheus.Registry
	fetchLatency *prometheus.HistogramVec
}

func newMetrics(n *Node) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		fetchLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "crawlnode",
			Name:      "fetch_duration_seconds",
			Help:      "Time from sending a request to the end of its response (or its failure).",
			Buckets:   []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.fetchLatency,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: "crawlnode"}))

	r := registrar{reg}
	r.crawl(n)
	r.frontier(n)
	r.cluster(n)
	r.replica(n)
	r.outputStore(n)
	r.dedup(n)
	r.payloads(n)
	return m
}

// outputStore registers the uploader's figures (--output-store only).
func (r registrar) outputStore(n *Node) {
	if n.uploader == nil {
		return
	}
	u := n.uploader
	r.gauge("output_store_unshipped_bytes", "Bytes of WARC files and corpus shards not yet in the output store (closed files waiting plus open ones).", func() float64 { return float64(u.Stats().UnshippedBytes) })
	r.gauge("output_store_unshipped_files", "Closed files waiting for upload.", func() float64 { return float64(u.Stats().UnshippedFiles) })
	r.counter("output_store_uploads_total", "Files uploaded and verified (WARC files, CDXJ indexes, corpus shards).", nil, func() float64 { return float64(u.Stats().Uploads) })
	r.counter("output_store_failures_total", "Failed upload attempts (retried with backoff).", nil, func() float64 { return float64(u.Stats().Failures) })
	r.counter("output_store_uploaded_bytes_total", "Bytes uploaded and verified.", nil, func() float64 { return float64(u.Stats().BytesUploaded) })
	r.gauge("output_store_paused", "1 while fetching is paused because too much output waits for the store.", func() float64 {
		if n.storeBehind.Load() {
			return 1
		}
		return 0
	})
}

// dedup registers the cross-node duplicate decisions' counters (package dedup).
func (r registrar) dedup(n *Node) {
	st := func() *dedup.Stats { return n.dedup.Stats() }
	for _, c := range []struct {
		name, help string
		v          func() int64
	}{
		{"dedup_pages_total", "Pages whose duplicate decision the cluster's key owners made.", func() int64 { return st().Pages.Load() }},
		{"dedup_local_ops_total", "Duplicate-key operations this node applied for its own pages (no network hop).", func() int64 { return st().LocalOps.Load() }},
		{"dedup_remote_ops_total", "Duplicate-key operations sent to other nodes that own the keys.", func() int64 { return st().RemoteOps.Load() }},
		{"dedup_requests_total", "Requests to other nodes' /internal/v1/dedup.", func() int64 { return st().Requests.Load() }},
		{"dedup_failures_total", "Decision rounds that failed (an owner unreachable, refused or unknown); the pages are asked again.", func() int64 { return st().Failures.Load() }},
		{"dedup_sent_bytes_total", "Request body bytes sent to duplicate-key owners.", func() int64 { return st().BytesSent.Load() }},
		{"dedup_received_bytes_total", "Answer body bytes received from duplicate-key owners.", func() int64 { return st().BytesReceived.Load() }},
	} {
		r.counter(c.name, c.help, nil, func() float64 { return float64(c.v()) })
	}
	r.counter("dedup_decide_seconds_total", "Wall time spent in duplicate decisions (both rounds, all owners).", nil, func() float64 {
		return float64(st().DecideNanos.Load()) / 1e9
	})
}

// payloads registers the counters of the cluster's identical-payload decisions (WARC
// revisit records, dedup.Payloads).
func (r registrar) payloads(n *Node) {
	st := func() *dedup.PayloadStats { return n.payloads.Stats() }
	lookups := "Payload lookups before a 200 is archived, by what they gave: revisit (the cluster archived the payload before), original (not yet), or a full record written because the digest's owner did not answer within the bound (timeout) or could not be asked (error)."
	r.counter("payload_lookups_total", lookups, prometheus.Labels{"result": "revisit"}, func() float64 { return float64(st().Found.Load()) })
	r.counter("payload_lookups_total", lookups, prometheus.Labels{"result": "original"}, func() float64 { return float64(st().Missed.Load()) })
	r.counter("payload_lookups_total", lookups, prometheus.Labels{"result": "timeout"}, func() float64 { return float64(st().FallbackTimeout.Load()) })
	r.counter("payload_lookups_total", lookups, prometheus.Labels{"result": "error"}, func() float64 { return float64(st().FallbackError.Load()) })
	regs := "Full response records registered with their payload's owner, by result: registered (the original), lost_race (another copy was registered first: a second full record), failed (never reached the owner)."
	r.counter("payload_registrations_total", regs, prometheus.Labels{"result": "registered"}, func() float64 { return float64(st().Registered.Load()) })
	r.counter("payload_registrations_total", regs, prometheus.Labels{"result": "lost_race"}, func() float64 { return float64(st().LostRace.Load()) })
	r.counter("payload_registrations_total", regs, prometheus.Labels{"result": "failed"}, func() float64 { return float64(st().RegisterFailed.Load()) })
	r.counter("payload_local_lookups_total", "Payload lookups answered in process (this node owns the digest).", nil, func() float64 { return float64(st().LocalLookups.Load()) })
	r.counter("payload_requests_total", "Requests to other nodes' /internal/v1/dedup for payload decisions.", nil, func() float64 { return float64(st().Requests.Load()) })
	r.counter("payload_request_failures_total", "Payload decision requests that failed.", nil, func() float64 { return float64(st().Failures.Load()) })
	r.counter("payload_sent_bytes_total", "Request body bytes sent for payload decisions.", nil, func() float64 { return float64(st().BytesSent.Load()) })
	r.counter("payload_received_bytes_total", "Answer body bytes received for payload decisions.", nil, func() float64 { return float64(st().BytesRecv.Load()) })
	r.counter("payload_lookup_wait_seconds_total", "Wall time fetch slots waited for other nodes' payload answers.", nil, func() float64 {
		return float64(st().WaitNanos.Load()) / 1e9
	})
}

// registrar registers the metrics read at scrape time on the node's registry.
type registrar struct{ reg *prometheus.Registry }

func (r registrar) counter(name, help string, labels prometheus.Labels, f func() float64) {
	r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "crawlnode", Name: name, Help: help, ConstLabels: labels,
	}, f))
}

func (r registrar) gauge(name, help string, f func() float64) {
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "crawlnode", Name: name, Help: help,
	}, f))
}

// crawl registers the fetch loop's, DNS's and the extract stage's figures.
func (r registrar) crawl(n *Node) {
	st := &n.stats
	fetched := "Responses recorded, by status class."
	r.counter("pages_fetched_total", fetched, prometheus.Labels{"class": "2xx"}, func() float64 { return float64(st.ok2xx.Load()) })
	r.counter("pages_fetched_total", fetched, prometheus.Labels{"class": "3xx"}, func() float64 { return float64(st.redirects.Load()) })
	r.counter("pages_fetched_total", fetched, prometheus.Labels{"class": "4xx"}, func() float64 { return float64(st.client4xx.Load()) })
	r.counter("pages_fetched_total", fetched, prometheus.Labels{"class": "5xx"}, func() float64 { return float64(st.server5xx.Load()) })
	r.counter("fetch_errors_total", "Fetches that failed before a response (timeouts, resets, DNS...).", nil, func() float64 { return float64(st.fetchErr.Load()) })
	r.counter("fetch_forbidden_address_total", "URLs not fetched because their host's address is loopback, private, link-local or reserved and not in --allow-ips (dead letters of class forbidden_address; also in fetch_errors_total).", nil, func() float64 { return float64(st.forbidden.Load()) })
	r.counter("robots_requests_total", "robots.txt fetches.", nil, func() float64 { return float64(st.robotsReq.Load()) })
	r.counter("robots_disallowed_total", "URLs dropped because robots.txt disallows them.", nil, func() float64 { return float64(st.robotsDeny.Load()) })
	r.counter("commit_retries_total", "Writes of the group commit (links, extract jobs, outcomes) that failed and were retried.", nil, func() float64 { return float64(st.commitRetries.Load()) })
	r.counter("commit_batches_total", "Group commits: each writes the links of its leases in one frontier.Add and records the leases in one frontier.DoneBatch.", nil, func() float64 { return float64(st.commitBatches.Load()) })
	r.counter("commit_leases_total", "Leases the group commits recorded (over commit_batches_total: leases a commit).", nil, func() float64 { return float64(st.commitLeases.Load()) })
	r.counter("commit_links_total", "Links the group commits queued, local and forwarded (over commit_batches_total: links a frontier.Add).", nil, func() float64 { return float64(st.commitLinks.Load()) })
	r.counter("fetched_bytes_total", "Response body bytes as received.", nil, func() float64 { return float64(st.bytes.Load()) })
	revisits := "Revisits of fetched pages (--recrawl), by what they found."
	r.counter("revisits_total", revisits, prometheus.Labels{"result": "not_modified"}, func() float64 { return float64(st.notModified.Load()) })
	r.counter("revisits_total", revisits, prometheus.Labels{"result": "unchanged"}, func() float64 { return float64(st.unchanged.Load()) })
	r.counter("revisits_total", revisits, prometheus.Labels{"result": "changed"}, func() float64 { return float64(st.changed.Load()) })

	dstats := func() fetch.DNSStats { return n.client.DNSStats() }
	r.counter("dns_lookups_total", "Host names looked up in the DNS cache (one per new connection).", nil, func() float64 { return float64(dstats().Lookups) })
	r.counter("dns_cache_hits_total", "DNS lookups answered from the cache (positive or negative).", nil, func() float64 { return float64(dstats().Hits) })
	r.counter("dns_queries_total", "DNS queries sent to the resolver (cache misses; concurrent ones collapsed).", nil, func() float64 { return float64(dstats().Queries) })
	r.counter("dns_failures_total", "DNS queries that failed (NXDOMAIN, SERVFAIL, timeout).", nil, func() float64 { return float64(dstats().Failures) })
	r.gauge("dns_cache_names", "Names in the DNS cache.", func() float64 { return float64(dstats().Size) })
	r.gauge("fetches_in_flight", "Fetch slots fetching (robots, fetch, archive, parse), not waiting for their links' commit.", func() float64 { return float64(st.slots.Load()) })
	r.gauge("leases_awaiting_commit", "Fetch slots whose fetch is over, waiting for the group commit of their links and extract job.", func() float64 { return float64(st.busy.Load() - st.slots.Load()) })
	r.gauge("extract_backlog", "Pages waiting for text extraction.", func() float64 { return float64(n.stage.Backlog()) })
	r.counter("extract_panics_total", "Pages that panicked the text extractor this run: each got a record rejected extract_panic and is not retried.", nil, func() float64 { return float64(n.stage.Stats().ExtractPanics) })
	r.counter("extract_held_seconds_total", "Time extract workers held a page back, waiting for the machine to leave CPU idle (--extract-defer-idle).", nil, func() float64 { return n.stage.Stats().Held.Seconds() })
	r.gauge("crawl_rate_pages_per_second", "Responses recorded per second over the last minute.", func() float64 { return n.rate.perSecond() })
	r.gauge("fetching_paused", "1 while fetching is paused (low disk space).", func() float64 {
		if n.pausedUntil.Load() > n.cfg.Now().UnixNano() {
			return 1
		}
		return 0
	})
}

// frontier registers the frontier's figures, from one Stats call per scrape.
func (r registrar) frontier(n *Node) {
	// Frontier gauges come from one Stats call per scrape, not one per gauge.
	var cache struct {
		sync.Mutex
		at time.Time
		fs frontier.Stats
	}
	fstats := func() frontier.Stats {
		cache.Lock()
		defer cache.Unlock()
		if time.Since(cache.at) > 500*time.Millisecond {
			cache.fs, cache.at = n.front.Stats(), time.Now()
		}
		return cache.fs
	}
	r.gauge("frontier_queued_urls", "URLs waiting in the frontier's queues.", func() float64 { return float64(fstats().Queued) })
	r.gauge("frontier_in_flight", "URLs leased and not yet recorded.", func() float64 { return float64(fstats().InFlight) })
	r.gauge("frontier_retry_pending", "URLs waiting for their retry time.", func() float64 { return float64(fstats().RetryPending) })
	r.gauge("frontier_revisits_pending", "Fetched URLs scheduled for another visit (--recrawl), due ones included.", func() float64 {
		fs := fstats()
		return float64(fs.RevisitPending + fs.RevisitQueued)
	})
	r.gauge("frontier_dead_letters", "URLs parked after repeated failures.", func() float64 { return float64(fstats().DeadLetters) })
	r.gauge("frontier_seen_urls", "URLs in the seen set.", func() float64 { return float64(fstats().Seen) })
	r.gauge("frontier_hosts", "Hosts the frontier knows.", func() float64 { return float64(fstats().Hosts) })
	r.gauge("frontier_hosts_ready", "Hosts that may be fetched now.", func() float64 { return float64(fstats().ReadyHosts) })
	r.gauge("frontier_hosts_waiting", "Hosts with queued URLs waiting for their politeness time.", func() float64 { return float64(fstats().WaitingHosts) })
	r.gauge("bloom_filter_bytes", "Memory of the seen set's Bloom filter.", func() float64 { return float64(fstats().BloomBytes) })
	r.gauge("bloom_filter_fill_ratio", "Share of the Bloom filter's bits set.", func() float64 { return fstats().BloomFill })
	r.counter("bloom_confirms_total", "Bloom filter 'maybe seen' answers confirmed against the exact seen keys.", nil, func() float64 { return float64(fstats().BloomChecks) })
	r.counter("bloom_false_positives_total", "Confirms where the exact seen keys said 'new' (a Bloom false positive).", nil, func() float64 { return float64(fstats().BloomFalsePositives) })
}

// cluster registers the outbox's, the partitions' and Raft's figures.
func (r registrar) cluster(n *Node) {
	r.reg.MustRegister(outboxCollector{n})
	r.counter("handoffs_total", "Partitions this node handed off to their new owner.", nil, func() float64 {
		if n.cluster == nil {
			return 0
		}
		return float64(n.cluster.Stats().Handoffs)
	})
	r.counter("forwarded_links_total", "Links another node committed to its frontier.", nil, func() float64 {
		if n.cluster == nil {
			return 0
		}
		return float64(n.cluster.Outbox().Stats().SentLinks)
	})
	r.counter("forwarded_bytes_total", "Wire bytes of forwarded link batches.", nil, func() float64 {
		if n.cluster == nil {
			return 0
		}
		return float64(n.cluster.Outbox().Stats().SentBytes)
	})
	r.counter("outbox_head_resets_total", "Outbox drains that found a partition's links counted below where it reads from (a bug: they would never be sent) and read that partition from its start again.", nil, func() float64 {
		if n.cluster == nil {
			return 0
		}
		return float64(n.cluster.Outbox().Stats().HeadResets)
	})
	r.gauge("partitions_held", "Partitions whose lease this node holds.", func() float64 {
		if n.cluster == nil {
			return 0
		}
		return float64(n.cluster.Held())
	})
	r.gauge("raft_leader", "1 while this node is the Raft leader.", func() float64 {
		if n.cluster != nil && n.cluster.IsLeader() {
			return 1
		}
		return 0
	})
	r.gauge("raft_in_contact", "1 while this node has heard from the Raft leader within the lease time (it may fetch).", func() float64 {
		if n.cluster != nil && n.cluster.InContact() {
			return 1
		}
		return 0
	})
}

// replica registers replication's counters.
func (r registrar) replica(n *Node) {
	repl := func(f func(rc replica.Counters) int64) func() float64 {
		return func() float64 {
			if n.repl == nil {
				return 0
			}
			return float64(f(n.repl.Counters()))
		}
	}
	r.counter("replica_bytes_total", "Wire bytes of partition changes sent to backup nodes.", nil, repl(func(rc replica.Counters) int64 { return rc.Bytes }))
	r.counter("replica_records_total", "Frontier records (set or deleted) sent to backup nodes.", nil, repl(func(rc replica.Counters) int64 { return rc.Records }))
	r.counter("replica_failures_total", "Replication rounds to a backup that failed (retried next round).", nil, repl(func(rc replica.Counters) int64 { return rc.Failures }))
	r.counter("replica_change_log_values_total", "Changed keys a replica round took from the change log without a read (their values, or an outbox deletion).", nil, repl(func(rc replica.Counters) int64 { return rc.LogValues }))
	r.counter("replica_change_log_reads_total", "Changed keys a replica round read from its snapshot (deletions other than the outbox's, keys written again since, values past the log's bound).", nil, repl(func(rc replica.Counters) int64 { return rc.LogReads }))
	r.counter("replica_resets_total", "Partitions a backup asked for in full (its copy did not start where the delta did).", nil, repl(func(rc replica.Counters) int64 { return rc.Resets }))
	r.counter("replica_change_log_cut_misses_total", "Replica rounds whose snapshot the change log had not reached within its wait: every partition took the full pass.", nil, repl(func(rc replica.Counters) int64 { return rc.CutMisses }))
	r.counter("replica_change_log_misses_total", "Partition exports of a round whose copy stood below the change log's coverage (a start, or keys dropped at the log's bound): the full pass.", nil, repl(func(rc replica.Counters) int64 { return rc.LogMisses }))
	r.counter("replica_full_copies_total", "Partition sections sent whole to a backup (no copy there yet, a new backup, a reset).", nil, repl(func(rc replica.Counters) int64 { return rc.FullCopies }))
	r.counter("replica_full_copy_records_total", "Frontier records sent in whole sections (part of replica_records_total).", nil, repl(func(rc replica.Counters) int64 { return rc.FullRecords }))
	r.counter("replica_unscanned_exports_total", "Delta sections a round exported on their own, not from what it read ahead (the change log or the shared pass); counted in each phase of the round.", nil, repl(func(rc replica.Counters) int64 { return rc.Unscanned }))
	r.counter("replica_skipped_partitions_total", "Held partitions a replica round left out (no contact with the leader, the backup not alive to gossip): their copies resume from where they stood.", nil, repl(func(rc replica.Counters) int64 { return rc.Skipped }))
	r.counter("replica_change_log_overflows_total", "Times the change log dropped a partition's keys at its bound (that partition's next export takes the full pass).", nil, repl(func(rc replica.Counters) int64 { return rc.LogOverflows }))
	r.counter("replica_outbox_entries_skipped_total", "Outbox entries replica rounds left out (a retried round counts them again): written and sent on (deleted) since the copy's version, so the copy never had them.", nil, repl(func(rc replica.Counters) int64 { return rc.OutboxSkipped }))
	r.counter("replica_ack_unreplicated_total", "Forwarded link batches acknowledged before this node's backups held them (a backup too slow or down).", nil, repl(func(rc replica.Counters) int64 { return rc.AckUncopied }))
	r.counter("replica_promotions_total", "Copies of a lost node's partitions merged into this node's frontier.", nil, repl(func(rc replica.Counters) int64 { return rc.Promoted }))
	r.gauge("replica_lag_seconds", "Age of the oldest backup copy of a partition this node holds (how much a loss of this node would undo).", func() float64 {
		if n.repl == nil {
			return 0
		}
		return n.repl.Counters().Lag.Seconds()
	})
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// outboxCollector reports the outbox's depth per peer (the partition's lease holder now;
// peer="" while no holder is known) at scrape time.
type outboxCollector struct{ n *Node }

var outboxDesc = prometheus.NewDesc("crawlnode_outbox_links", "Links waiting in the outbox, by the peer that holds their partition now.", []string{"peer"}, nil)

func (c outboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- outboxDesc }

func (c outboxCollector) Collect(ch chan<- prometheus.Metric) {
	if c.n.cluster == nil {
		return
	}
	byPeer := c.n.cluster.Outbox().Stats().QueuedByPeer
	if len(byPeer) == 0 {
		ch <- prometheus.MustNewConstMetric(outboxDesc, prometheus.GaugeValue, 0, "")
		return
	}
	for peer, k := range byPeer {
		ch <- prometheus.MustNewConstMetric(outboxDesc, prometheus.GaugeValue, float64(k), peer)
	}
}
