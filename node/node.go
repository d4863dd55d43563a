package node

import (
	"context"
	"fmt"
	"github.com/crawlnode/crawlnode/cluster"
	"github.com/crawlnode/crawlnode/replica"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/dedup"
	"github.com/crawlnode/crawlnode/fetch"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/internal/badgermem"
	"github.com/crawlnode/crawlnode/internal/clusterauth"
	"github.com/crawlnode/crawlnode/outstore"
	"github.com/crawlnode/crawlnode/ring"
	"github.com/crawlnode/crawlnode/urlnorm"
)

// Config is one node's configuration. Zero values take the documented defaults.
type Config struct {
	// DataDir holds Badger, WARC files and corpus shards. Default "./crawl-data".
	DataDir string
	// Name is the node's stable name; default: the name recorded in DataDir, else random.
	Name string
	// Seeds are queued at start (absolute http(s) URLs; canonicalized here).
	Seeds []string
	// ExitWhenDone makes Run return once the frontier is empty and nothing is in flight
	// (or MaxPages is reached) and the extract stage has drained.
	ExitWhenDone bool
	// MaxPages stops fetching after this many fetches were recorded in the whole cluster
	// (0 = no limit): it seeds the job configuration's limit (see budget.go). The run
	// ends there only with ExitWhenDone.
	MaxPages int64
	// MaxDepth bounds link hops from a seed. Default 16; MaxDepthSet must be true for an
	// explicit 0 (the seeds only, and where they redirect: list mode).
	MaxDepth    int
	MaxDepthSet bool
	// MaxPagesPerHost bounds the URLs admitted per host. Default 100,000.
	MaxPagesPerHost int
	// Delay is the per-host delay between requests when robots.txt gives no Crawl-delay.
	// Default 1s; DelaySet must be true for an explicit 0.
	Delay    time.Duration
	DelaySet bool
	// PerHost is the number of requests in flight per host. Default 1.
	PerHost int
	// Concurrency is the number of fetches in flight on this node. Default 64.
	Concurrency int
	// UserAgent sent with every request; its product token selects the robots.txt group.
	UserAgent string
	// Resolve overrides where connections for matching hosts go. Their addresses are
	// always allowed (the operator named them).
	Resolve []fetch.ResolveRule
	// AllowIPs are address ranges the fetcher may connect to although the address guard
	// refuses them (loopback, private, link-local...): an intranet to crawl (--allow-ips).
	// Empty: only public addresses; a URL whose host is refused is a dead letter of class
	// forbidden_address.
	AllowIPs []netip.Prefix
	// DNSServers ("ip" or "ip:port") are asked directly for host addresses, with the
	// answers' TTLs honoured by the fetch layer's cache (--dns). Empty: the system resolver,
	// whose answers carry no TTL and are cached DNSCacheTTL.
	DNSServers []string
	// DNSCacheTTL caps how long a DNS answer is cached (and is the TTL of the system
	// resolver's answers). Default 5m.
	DNSCacheTTL time.Duration
	// FetchTimeout bounds one request, body included. Default 30s.
	FetchTimeout time.Duration
	// MaxBodySize cuts bodies (recorded as truncated). Default 10 MiB.
	MaxBodySize int
	// MaxRedirects bounds redirect hops followed as new URLs. Default 5.
	MaxRedirects int
	// RobotsRetryBase is the first wait after a 5xx or unreachable robots.txt; it doubles
	// each try and the host is parked after RobotsMaxTries. Default 10s and 5.
	RobotsRetryBase time.Duration
	RobotsMaxTries  int
	// RetryBase is the first backoff of a transiently failed URL. Default 2s.
	RetryBase time.Duration
	// Recrawl turns on continuous crawling: every fetched page is visited again, at an
	// interval from its estimated change rate within [RecrawlMin, RecrawlMax] (defaults 1h
	// and 30 days), with a conditional GET; RevisitShare (default 0.5) is the share of a
	// host's requests revisits get while it also has new URLs. A continuous crawl never
	// ends by itself (ExitWhenDone waits for ever; use MaxPages with ExitWhenDone, or a signal).
	Recrawl                bool
	RecrawlMin, RecrawlMax time.Duration
	RevisitShare           float64
	// PayloadBound is how long a fetch slot waits for another node's answer on whether a
	// payload was archived before (a WARC revisit record) before it writes a full response
	// record instead. Default dedup.DefaultPayloadBound (250 ms).
	PayloadBound time.Duration
	// Priority is the crawl order: PriorityBFS (default: breadth-first) or PriorityOPIC
	// (important pages first by OPIC cash, breadth-first as the tie-break). On simweb's
	// graph breadth-first fetches more PageRank early (BENCHMARKS.md, "Importance-first against breadth-first"), so it stays the
	// default.
	Priority string
	// Scope says which links are followed (default ScopeAll); Include and Exclude are
	// regular expressions matched against canonical URLs: a link is followed only if it
	// matches no Exclude and, when Include is given, at least one Include. Seeds are
	// always crawled.
	Scope            Scope
	Include, Exclude []string
	// ExtractWorkers is the extract stage's worker count. Default: number of CPUs.
	ExtractWorkers int
	// ExtractNice, when 1..19, runs the extract workers on OS threads at that nice value,
	// 20 (corpus.IdleNice) in SCHED_IDLE (corpus.Config.Nice): the kernel serves the fetch
	// stage first and extraction lags instead. The binary also raises GOMAXPROCS by
	// ExtractWorkers then. Default 0 (the binary's default is 20).
	ExtractNice int
	// ExtractDeferIdle, with ExtractNice > 0, holds the extract workers back between pages
	// while the machine has fewer than this many cores idle besides their own use
	// (corpus.Config.DeferBelowIdle). 0: the default, 0.5; negative: never.
	ExtractDeferIdle float64
	// NoExtract runs the fetch stage alone: pages are archived as WARC and their links
	// followed, but no page is queued for text extraction, so no text corpus is built
	// (an archiving crawl, and the fetch-stage benchmark). A backlog left by an earlier
	// run is still extracted. Default false.
	NoExtract bool
	// NoMarkdown leaves the corpus records without Markdown (corpus.Config.NoMarkdown), to
	// save its share of the extract stage's CPU. Default false.
	NoMarkdown bool
	// PDF bounds PDF extraction (corpus.PDFConfig: Disabled, MaxBytes, MaxPages, Timeout,
	// MaxMemory, CacheDir). Zero values take corpus's defaults; CacheDir defaults to the
	// user's cache directory (crawlnode-pdfium under os.UserCacheDir, shared by the nodes
	// of a machine), else the data directory's pdfium-cache, so that a restarted node
	// does not compile the engine again.
	PDF corpus.PDFConfig
	// BoundedMemory keeps the node's resident set bounded for very large frontiers: a
	// soft Go memory limit (badgermem.GoMemoryLimit, unless GOMEMLIMIT is set; applied by
	// the binary) and the trimmer that drops Badger's memory-mapped table pages from the
	// resident set when they pass badgermem.DefaultFileBudget. Off by default: the
	// trimmer's cost on seen-set lookups at tens of millions of URLs is not measured
	// apart yet (BENCHMARKS.md, "Seen set at scale"), and the memory limit makes the
	// collector work hard when thousands of fetches in flight hold more than it.
	BoundedMemory bool
	// Filters are the corpus quality filters.
	Filters corpus.Filters
	// WARCMaxFileSize rotates WARC files. Default 1 GiB.
	WARCMaxFileSize int64
	// WARCGzipLevel is the gzip level of each WARC record (archive.Config.CompressionLevel):
	// 1 (default) is the fastest LZ77 level; -2 is Huffman-only: the same gzip format, any
	// WARC tool reads it, about 4x less CPU than level 1 and the fetch stage's largest cost
	// gone, for files ~40% larger on text pages (more on markup-heavy HTML); 2..9 compress
	// more for more CPU.
	WARCGzipLevel int
	// RotateEvery closes a WARC file or corpus shard once it is this old, so that what an
	// output store has not received yet stays small (archive.Config.MaxFileAge,
	// corpus.Config.ShardMaxAge). 0: DefaultRotateEvery with an output store, else size only.
	RotateEvery time.Duration
	// OutputStore ships outputs to object storage; its zero value keeps them local only.
	OutputStore OutputStoreConfig
	// MinFreeDisk pauses fetching while the data directory's file system has less free
	// space than this (bytes), and resumes by itself above it. Badger writes through mmap,
	// where running out of space is a crash rather than an error, so the node stops well
	// before that. Default 256 MiB; negative: no check.
	MinFreeDisk int64
	// NoSync turns off what makes acknowledged work survive a power cut (--no-fsync):
	// Badger commits are no longer fsynced before they return, and a page is recorded as
	// fetched without waiting for its WARC record's fsync. A crash of the process still loses
	// nothing; a power cut or kernel crash may then lose acknowledged links, seeds and pages
	// recorded as fetched whose WARC record never reached the disk. Default false: see the
	// package doc, "Durability".
	NoSync bool
	// SyncInterval is how often the open WARC file is fsynced in the background
	// (archive.Config.SyncInterval, --sync-interval). It bounds how long an archived record
	// may stay unsynced before its page is recorded; the commit path fsyncs before it
	// records anyway, so this costs nothing to correctness. Default 1s; range 10ms..1m.
	SyncInterval time.Duration
	// freeDisk, when set (tests only), stands in for statfs of the data directory: the
	// free bytes the free-space check sees.
	freeDisk func() (int64, error)
	// HTTPAddr is where the API listens ("host:port"; port 0 picks one, recorded in the
	// data directory's http.addr). Empty: no API.
	HTTPAddr string
	// InternalAddr, when set, is a separate listener ("host:port") for the node-to-node
	// endpoints (link forwarding, partition streams, forwarded Raft commands), so they can
	// sit on a private network while the API faces operators. Default: they share HTTPAddr.
	InternalAddr string
	// APIToken, the operator's token, when set, is required as "Authorization: Bearer
	// <token>" on every mutating API request and on the profiling endpoints (Pprof), and
	// opens every read. It opens no node-to-node route: members authenticate by their mutual TLS
	// certificate, else by a signature under the cluster key (Cluster.ClusterKey, the
	// keyring), else, with no key, from loopback only (or anywhere with
	// Cluster.InsecureCluster).
	APIToken string
	// APIReadToken, when set, opens reads (never writes): dashboards and readers of the
	// corpus that must not change the crawl. Default "".
	APIReadToken string
	// APIProtectReads says which reads need a token once one is set: "data" (default,
	// ""): pages, their text and the export files; "all": every read but health,
	// readiness, metrics and the dashboard page (api.ProtectData, api.ProtectAll).
	APIProtectReads string
	// Pprof serves Go's profiling endpoints (net/http/pprof) under /debug/pprof/ on the
	// API: a CPU profile of a running node over a stretch of its choosing (a whole-run
	// profile of a crawl is mostly its start). Off by default: a profile costs the node
	// CPU while it runs, and the endpoints are for operators, not the public (with an
	// APIToken they need it, GET or not).
	Pprof bool
	// Cluster says how the node joins its peers; the zero value is a cluster of one.
	Cluster ClusterConfig
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time

	// dialFault is fetch.Config.DialFault, for this package's tests.
	dialFault func(addr string) error
	// resolver is fetch.Config.Resolver, for this package's tests (nil: --dns or the
	// system resolver).
	resolver fetch.Resolver
}

func (c *Config) setDefaults() {
	if c.DataDir == "" {
		c.DataDir = "./crawl-data"
	}
	if !c.MaxDepthSet && c.MaxDepth == 0 {
		c.MaxDepth = 16
	}
	if c.MaxPagesPerHost == 0 {
		c.MaxPagesPerHost = 100_000
	}
	if !c.DelaySet && c.Delay == 0 {
		c.Delay = time.Second
	}
	if c.PerHost == 0 {
		c.PerHost = 1
	}
	if c.Concurrency == 0 {
		c.Concurrency = 64
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	if c.FetchTimeout == 0 {
		c.FetchTimeout = 30 * time.Second
	}
	if c.MaxBodySize == 0 {
		c.MaxBodySize = 10 << 20
	}
	if c.MaxRedirects == 0 {
		c.MaxRedirects = 5
	}
	if c.RobotsRetryBase == 0 {
		c.RobotsRetryBase = 10 * time.Second
	}
	if c.RobotsMaxTries == 0 {
		c.RobotsMaxTries = 5
	}
	if c.RetryBase == 0 {
		c.RetryBase = 2 * time.Second
	}
	if c.RecrawlMin == 0 {
		c.RecrawlMin = time.Hour
	}
	if c.RecrawlMax == 0 {
		c.RecrawlMax = max(30*24*time.Hour, c.RecrawlMin)
	}
	if c.RevisitShare == 0 {
		c.RevisitShare = 0.5
	}
	if c.Priority == "" {
		c.Priority = PriorityBFS
	}
	if c.ExtractWorkers == 0 {
		c.ExtractWorkers = runtime.NumCPU()
	}
	if c.WARCMaxFileSize == 0 {
		c.WARCMaxFileSize = 1 << 30
	}
	if c.Scope == "" {
		c.Scope = ScopeAll
	}
	if c.MinFreeDisk == 0 {
		c.MinFreeDisk = 256 << 20
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// DefaultUserAgent is sent when no user agent is configured. Its product token,
// "crawlnode", is what robots.txt groups match.
const DefaultUserAgent = "crawlnode/0.1 (+https://github.com/crawlnode/crawlnode)"

// Validate checks the configuration without touching the disk or the network.
func (c *Config) Validate() error {
	switch {
	case c.MaxDepth < 0:
		return fmt.Errorf("%w: max-depth must be >= 0", ErrBadConfig)
	case c.MaxPages < 0:
		return fmt.Errorf("%w: max-pages must be >= 0", ErrBadConfig)
	case c.MaxPagesPerHost < 0:
		return fmt.Errorf("%w: max-pages-per-host must be >= 0", ErrBadConfig)
	case c.Delay < 0:
		return fmt.Errorf("%w: delay must be >= 0", ErrBadConfig)
	case c.PerHost < 1:
		return fmt.Errorf("%w: per-host must be >= 1", ErrBadConfig)
	case c.Concurrency < 1:
		return fmt.Errorf("%w: concurrency must be >= 1", ErrBadConfig)
	case c.MaxBodySize < 1024:
		return fmt.Errorf("%w: max body size must be >= 1 KiB", ErrBadConfig)
	case c.RecrawlMin < 0 || c.RecrawlMax < c.RecrawlMin:
		return fmt.Errorf("%w: need 0 < recrawl-min <= recrawl-max", ErrBadConfig)
	case c.RevisitShare < 0 || c.RevisitShare > 1:
		return fmt.Errorf("%w: revisit-share must be in (0,1]", ErrBadConfig)
	case c.SyncInterval != 0 && (c.SyncInterval < 10*time.Millisecond || c.SyncInterval > time.Minute):
		return fmt.Errorf("%w: sync-interval %s: want 10ms..1m", ErrBadConfig, c.SyncInterval)
	case c.Priority != PriorityOPIC && c.Priority != PriorityBFS:
		return fmt.Errorf("%w: priority %q: want opic or bfs", ErrBadConfig, c.Priority)
	}
	if _, err := ParseScope(string(c.Scope)); err != nil {
		return err
	}
	if _, err := compilePatterns(c.Include); err != nil {
		return err
	}
	if _, err := compilePatterns(c.Exclude); err != nil {
		return err
	}
	for _, s := range c.Seeds {
		if _, err := urlnorm.Canonicalize(s); err != nil {
			return fmt.Errorf("%w: seed %q: %v", ErrBadConfig, s, err)
		}
	}
	if err := api.ValidProtectReads(c.APIProtectReads); err != nil {
		return fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if c.APIReadToken != "" && c.APIToken == "" {
		// Reads guarded and writes open, or no write possible: neither is what was meant.
		return fmt.Errorf("%w: an API read token needs an API token (--api-token) for the writes", ErrBadConfig)
	}
	if c.APIReadToken != "" && c.APIReadToken == c.APIToken {
		return fmt.Errorf("%w: the API read token must differ from the API token", ErrBadConfig)
	}
	cc := c.Cluster
	cc.SetDefaults()
	if (len(cc.Join) > 0 || cc.BootstrapExpect > 1) && c.HTTPAddr == "" && c.InternalAddr == "" {
		return fmt.Errorf("%w: a cluster member needs an HTTP address (--http or --internal-http) for its peers", ErrBadConfig)
	}
	if err := cc.Validate(); err != nil {
		return err
	}
	internal := c.internalListenAddr()
	if internal == "" {
		internal = c.HTTPAddr
	}
	return cc.CheckExposure(internal)
}

// internalListenAddr is where the node-to-node endpoints get a listener of their own:
// InternalAddr; with TLS and no InternalAddr, the HTTP address's host with port + 1
// (port 0 stays 0), since those endpoints then need mutual TLS and the operators' API
// does not; "" when they share the API's listener.
func (c *Config) internalListenAddr() string {
	if c.InternalAddr != "" || c.Cluster.TLS == nil || c.HTTPAddr == "" {
		return c.InternalAddr
	}
	host, port, err := net.SplitHostPort(c.HTTPAddr)
	if err != nil {
		return ""
	}
	p, _ := strconv.Atoi(port)
	if p != 0 {
		p++
	}
	return net.JoinHostPort(host, strconv.Itoa(p))
}

// ErrBadConfig marks configuration errors (the cluster's among them).
var ErrBadConfig = cluster.ErrBadConfig

// Node is one crawler node: frontier, fetcher, WARC writer and extract stage wired into a
// crawl loop. Build with New, run with Run, which returns when the crawl is done (with
// ExitWhenDone) or its context is cancelled.
type Node struct {
	cfg         Config
	log         *slog.Logger
	dir         *DataDir
	db          *badger.DB
	trim        *badgermem.Trimmer // nil if Badger's layout is unknown
	front       *frontier.Frontier
	client      *fetch.Client
	warc        *archive.Writer
	warcSync    *groupSync  // fsyncs n.warc for the committers (group commit)
	budget      *pageBudget // this node's share of the cluster's page limit
	limitOnce   sync.Once   // the limit is logged once
	stage       *corpus.Stage
	dedupStore  *dedup.Store    // the duplicate keys this node owns (package dedup)
	dedup       *dedup.Decider  // the stage's duplicate decisions, asked of each key's owner
	payloads    *dedup.Payloads // identical payloads (WARC revisit records), asked of each digest's owner
	ops         ops
	scope       scope
	robots      *hostCache[*fetch.Robots]
	tdmPolicies *hostCache[*tdmPolicy]
	metrics     *metrics
	cluster     *cluster.Cluster
	verifier    *clusterauth.Verifier  // who calls the node-to-node routes
	repl        *replica.Replicator    // the node's replication, run by cl
	agent       atomic.Pointer[string] // the user agent now (the job configuration may change it)
	delay       atomic.Int64           // the default per-host delay now (ns), likewise
	bfs         atomic.Bool            // breadth-first order: no OPIC cash (Config.Priority, job)
	net         netWatch               // this node's own network down: failures not the hosts'

	started      time.Time
	stats        counters
	running      atomic.Int32 // 1 while Run's crawl loop runs
	httpAddr     atomic.Value // string: the API's bound address
	internalAddr atomic.Value // string: the internal listener's bound address, if any
	// pausedUntil (unix ns): no new leases before it (the disk filled up).
	pausedUntil atomic.Int64
	// diskUntil (unix ns): the disk is short until then (pauseForDisk); unlike pausedUntil,
	// which the output store's bound also sets, it stops every writer (diskShort).
	diskUntil atomic.Int64
	// unrecorded holds a token for each finished lease handed to the committers and not
	// yet recorded (capacity commitQueue): see commitQueue.
	unrecorded chan struct{}
	// commitHook, when set (tests only), is asked before each committer write ("links",
	// "jobs", "done"); an error it returns fails that write.
	commitHook func(point string) error
	lowDisk    atomic.Bool
	// uploader ships outputs to the output store; nil without one. storeBehind: fetching
	// is paused because too much output waits for it.
	uploader    *outstore.Uploader
	outStore    *outstore.Store // the output store the uploader ships to (nil: none)
	storeBehind atomic.Bool
	rate        rateMeter

	shutdownOnce sync.Once
}

// New opens the data directory and every store; nothing is fetched until Run.
func New(cfg Config) (*Node, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.OutputStore.URL != "" && cfg.RotateEvery == 0 {
		cfg.RotateEvery = DefaultRotateEvery
	}
	// The output store is checked before the data directory is created or opened.
	store, err := dialOutputStore(cfg.OutputStore)
	if err != nil {
		return nil, err
	}
	name := cfg.Name
	if name == "" && cfg.Cluster.TLS != nil {
		name = cfg.Cluster.TLS.Name() // the certificate names the node
	}
	dir, err := OpenDataDir(cfg.DataDir, name)
	if err != nil {
		return nil, err
	}
	if t := cfg.Cluster.TLS; t != nil && t.Name() != dir.Node {
		return nil, fmt.Errorf("%w: the TLS certificate names node %q, this node is %q (crawlnode tls cert create --node %s)", ErrBadConfig, t.Name(), dir.Node, dir.Node)
	}
	cfg.InternalAddr = cfg.internalListenAddr()
	n := &Node{cfg: cfg, dir: dir, log: cfg.Logger.With("component", "node", "node", dir.Node)}
	n.budget = newPageBudget(n)
	n.net.log = n.log
	n.httpAddr.Store("")
	ok := false
	defer func() {
		if !ok {
			n.closeStores()
		}
	}()
	n.bfs.Store(cfg.Priority == PriorityBFS)
	n.db, err = openBadger(dir.BadgerDir(), !cfg.NoSync)
	if err != nil {
		return nil, err
	}
	// Keep Badger's mmapped table pages out of the resident set (badgermem).
	if cfg.BoundedMemory {
		if n.trim, err = badgermem.StartTrimmer(n.db); err != nil {
			n.log.Warn("badger table pages will not be trimmed", "err", err)
		}
	}
	if err := n.openStages(); err != nil {
		return nil, err
	}
	if err := n.openUploader(store); err != nil {
		return nil, err
	}
	if err := n.loadOps(); err != nil {
		return nil, err
	}
	rules := &scopeRules{mode: cfg.Scope}
	rules.include, _ = compilePatterns(cfg.Include)
	rules.exclude, _ = compilePatterns(cfg.Exclude)
	n.scope.rules.Store(rules)
	n.agent.Store(&cfg.UserAgent)
	n.delay.Store(int64(cfg.Delay))
	if err := n.loadScope(); err != nil {
		return nil, err
	}
	n.robots = newHostCache[*fetch.Robots](100_000)
	n.tdmPolicies = newHostCache[*tdmPolicy](100_000)
	signer, verifier, err := newClusterAuth(cfg, n.dir.Node)
	if err != nil {
		return nil, fmt.Errorf("%w: cluster key: %v", ErrBadConfig, err)
	}
	verifier.TLSPeer = n.tlsPeer()
	n.verifier = verifier
	n.cluster, err = cluster.New(cfg.Cluster, cluster.Deps{
		Self: n.dir.Node, DataDir: n.dir.Path, DB: n.db, Frontier: n.front, Host: clusterHost{n},
		NewReplication: func(c *cluster.Cluster, interval time.Duration) cluster.Replication {
			n.repl = n.newReplicator(c, interval, cfg.Logger)
			return n.repl
		},
		Logger: cfg.Logger, Now: cfg.Now, Signer: signer, Verifier: verifier, Version: Version, DataFormat: dataFormat,
	})
	if err != nil {
		return nil, err
	}
	n.metrics = newMetrics(n)
	ok = true
	return n, nil
}

// openStages builds the stages over the open Badger DB: the frontier, the fetch client,
// the WARC writer and the extract stage.
func (n *Node) openStages() error {
	var err error
	n.front, err = frontier.Open(frontier.Config{
		DB:              n.db,
		SeenIndexDir:    n.dir.SeenIndexDir(),
		Now:             n.cfg.Now,
		PartitionOf:     ring.PartitionOf,
		PerHost:         n.cfg.PerHost,
		DefaultDelay:    n.cfg.Delay,
		DefaultDelaySet: true,
		MaxDepth:        n.cfg.MaxDepth,
		MaxDepthSet:     true,
		MaxPagesPerHost: n.cfg.MaxPagesPerHost,
		BackoffBase:     n.cfg.RetryBase,
		Recrawl:         frontier.Recrawl{Enabled: n.cfg.Recrawl, Min: n.cfg.RecrawlMin, Max: n.cfg.RecrawlMax, Share: n.cfg.RevisitShare},
		Importance:      true, // cash is zero in breadth-first mode, so nothing accumulates
	})
	if err != nil {
		return fmt.Errorf("open frontier: %w", err)
	}
	if n.trim != nil {
		n.trim.Also(n.front.TrimSeenIndex) // the seen index's mapped pages, with the tables'
	}
	n.client, err = fetch.New(fetch.Config{
		UserAgent:   n.cfg.UserAgent,
		Timeout:     n.cfg.FetchTimeout,
		MaxBodySize: n.cfg.MaxBodySize,
		Resolve:     n.cfg.Resolve,
		AllowIPs:    n.cfg.AllowIPs,
		DNSServers:  n.cfg.DNSServers,
		DNSCacheTTL: n.cfg.DNSCacheTTL,
		// One connection per allowed request in flight: a host sees no more sockets
		// than requests, and keep-alive reuses them.
		MaxConnsPerHost: n.cfg.PerHost,
		Now:             n.cfg.Now,
		DialFault:       n.cfg.dialFault,
		Resolver:        n.cfg.resolver,
	})
	if err != nil {
		return fmt.Errorf("fetch client: %w", err)
	}
	n.warc, err = archive.Open(archive.Config{
		Dir:              n.dir.WARCDir(),
		NodeName:         n.dir.Node,
		MaxFileSize:      n.cfg.WARCMaxFileSize,
		MaxFileAge:       n.cfg.RotateEvery,
		SyncInterval:     n.cfg.SyncInterval,
		CompressionLevel: n.cfg.WARCGzipLevel,
		Software:         "crawlnode/0.1",
		Now:              n.cfg.Now,
	})
	if err != nil {
		return fmt.Errorf("open WARC writer: %w", err)
	}
	n.warcSync = newGroupSync(n.warc.Sync)
	pdf := n.cfg.PDF
	if pdf.CacheDir == "" {
		pdf.CacheDir = n.dir.PDFCacheDir()
	}
	if moved, err := dedup.Migrate(n.db); err != nil {
		return err
	} else if moved > 0 {
		n.log.Info("duplicate indexes moved to the cluster's partitioned keys", "keys", moved)
	}
	if moved, err := dedup.MigratePayloads(n.db, n.dir.Node); err != nil {
		return err
	} else if moved > 0 {
		n.log.Info("payload index moved to the cluster's partitioned keys", "keys", moved)
	}
	n.dedupStore = dedup.NewStore(n.db)
	n.dedup, err = dedup.New(dedup.Config{Store: n.dedupStore, Cluster: dedupCluster{n}, Logger: n.cfg.Logger})
	if err != nil {
		return err
	}
	n.payloads, err = dedup.NewPayloads(dedup.PayloadConfig{Store: n.dedupStore, Cluster: dedupCluster{n}, Bound: n.cfg.PayloadBound, Logger: n.cfg.Logger})
	if err != nil {
		return err
	}
	n.stage, err = corpus.New(corpus.Config{
		Decider:        n.dedup,
		DB:             n.db,
		OutDir:         n.dir.CorpusDir(),
		NodeName:       n.dir.Node,
		Workers:        n.cfg.ExtractWorkers,
		Nice:           n.cfg.ExtractNice,
		DeferBelowIdle: n.cfg.ExtractDeferIdle,
		Load:           n.loadPage,
		Filters:        n.cfg.Filters,
		NoMarkdown:     n.cfg.NoMarkdown,
		PDF:            pdf,
		ShardMaxAge:    n.cfg.RotateEvery,
		Now:            n.cfg.Now,
		Logger:         n.cfg.Logger,
		Hold:           n.diskShort,
	})
	if err != nil {
		return fmt.Errorf("open extract stage: %w", err)
	}
	return nil
}

// Name is the node's stable name.
func (n *Node) Name() string { return n.dir.Node }

// DataDir is the node's data directory.
func (n *Node) DataDir() *DataDir { return n.dir }

// openBadger opens the node's database. With sync, every commit is fsynced before it
// returns (Badger's SyncWrites: its write loop syncs once per batch of concurrent commits,
// a group commit). Periodic db.Sync calls would not do: Badger v4.9.6's Sync covers only
// the current memtable's log and value log file, not a memtable waiting for its flush nor
// a value log file already rotated, so a power cut could lose older commits while newer
// ones survive.
func openBadger(path string, sync bool) (*badger.DB, error) {
	db, err := badger.Open(badgermem.Options(path).WithSyncWrites(sync))
	if err != nil {
		return nil, fmt.Errorf("open badger at %s: %w", path, err)
	}
	return db, nil
}

// Run crawls until ctx is cancelled or, with ExitWhenDone, until the crawl is done. On
// cancellation it stops taking new URLs, lets fetches in flight finish for a short grace
// and records them, so nothing is lost. Run closes the node's stores before it returns.
//
// Run is where the stages are wired: fetch slots (worker) feed the committers, which
// route links to the frontier or the outbox, queue extract jobs and record the leases;
// the package doc's "Data flow" draws it.
func (n *Node) Run(ctx context.Context) error {
	defer n.closeStores()
	n.started = n.cfg.Now()
	stopAPI, err := n.startAPI()
	if err != nil {
		return err
	}
	defer stopAPI()
	clusterCtx, stopCluster := context.WithCancel(context.Background())
	defer stopCluster()
	if err := n.cluster.Start(clusterCtx, n.peerAddr()); err != nil {
		n.cluster.Shutdown()
		return fmt.Errorf("cluster: %w", err)
	}
	defer n.cluster.Shutdown()
	defer stopCluster()
	// Seeds are routed by the lease table: wait (a little) for it, so that a node alone
	// queues them in its frontier at once; otherwise they wait in the outbox.
	select {
	case <-n.cluster.Ready():
	case <-time.After(15 * time.Second):
		n.log.Warn("no lease table yet; seeds wait in the outbox until the cluster forms")
	case <-ctx.Done():
	}
	if err := n.addSeeds(n.cfg.Seeds); err != nil {
		return err
	}
	n.running.Store(1)
	defer n.running.Store(0)
	stageCtx, stopStage := context.WithCancel(context.Background())
	defer stopStage()
	if err := n.stage.Start(stageCtx); err != nil {
		return fmt.Errorf("start extract stage: %w", err)
	}
	stopUploader := n.runUploader()
	defer stopUploader()

	graceful, left := n.crawl(ctx)
	if graceful && (n.cfg.ExitWhenDone || left) {
		// A batch crawl's output is complete only when the extract stage caught up.
		if err := n.stage.Drain(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("drain extract stage: %w", err)
		}
		if !left {
			// Peers' duplicate decisions may need the keys this node owns.
			_ = n.cluster.WaitExtracted(ctx)
		}
	}
	shCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.stage.Shutdown(shCtx); err != nil {
		n.log.Warn("extract stage shutdown", "err", err)
	}
	stopUploader() // Flush ships the rest alone
	n.flushOutputs(ctx, graceful && (n.cfg.ExitWhenDone || left) && ctx.Err() == nil)
	return nil
}

// crawl runs the fetch slots, the committers and the background loops until ctx ends,
// the crawl is done (ExitWhenDone, MaxPages) or a decommission handed everything off,
// then lets fetches in flight finish for a short grace. graceful: the crawl ended of its
// own (done, MaxPages or left); left: a decommission ended it.
func (n *Node) crawl(ctx context.Context) (graceful, left bool) {
	// leaseCtx stops new leases; fetchCtx aborts fetches still running after the grace.
	leaseCtx, stopLeasing := context.WithCancel(ctx)
	defer stopLeasing()
	fetchCtx, abortFetches := context.WithCancel(context.Background())
	defer abortFetches()

	// Fetch slots hand each finished lease with its discovered links and extract job to the
	// committers and go on fetching; the committers write many pages' links and jobs in one
	// commit each and then record the leases (a group commit). A slot waits only while the
	// hand-off queue is full: a slow disk still slows the slots (back-pressure).
	commits := make(chan pendingDone, commitQueue(n.cfg.Concurrency))
	n.unrecorded = make(chan struct{}, commitQueue(n.cfg.Concurrency))
	var cwg sync.WaitGroup
	for i := 0; i < committers; i++ {
		cwg.Add(1)
		go func() { defer cwg.Done(); n.committer(fetchCtx, commits) }()
	}
	var wg sync.WaitGroup
	for i := 0; i < n.cfg.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.worker(leaseCtx, fetchCtx, stopLeasing, commits)
		}()
	}
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { defer bg.Done(); n.maintain(leaseCtx) }()
	bg.Add(1)
	go func() { defer bg.Done(); n.budget.run(leaseCtx) }()

	done := make(chan struct{})
	if n.cfg.ExitWhenDone {
		bg.Add(1)
		go func() {
			defer bg.Done()
			if n.waitDone(leaseCtx) {
				close(done)
				stopLeasing()
			}
		}()
	}
	// A decommission ends the run like a finished crawl once everything is handed off.
	bg.Add(1)
	go func() {
		defer bg.Done()
		select {
		case <-n.cluster.Left():
			left = true
			stopLeasing()
		case <-leaseCtx.Done():
		}
	}()

	<-leaseCtx.Done()
	select {
	case <-done:
		graceful = true
	default:
		graceful = n.budget.limitReached()
	}
	// Let fetches in flight finish (they are recorded); abort what is still running after
	// the grace: an aborted fetch is requeued, not lost.
	waited := make(chan struct{})
	go func() {
		wg.Wait()
		close(commits) // every slot has handed off its last lease
		cwg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(3 * time.Second):
		abortFetches()
		<-waited
	}
	bg.Wait()
	return graceful || left, left
}

// waitDone reports true once the crawl is done: the frontier idle (nothing queued, in
// flight or waiting for a retry) in two consecutive checks, or MaxPages recorded.
func (n *Node) waitDone(ctx context.Context) bool {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	idleRounds := 0
	for {
		select {
		case <-ctx.Done():
			return n.budget.limitReached()
		case <-t.C:
		}
		if n.cluster != nil && n.cluster.Gossip() != nil {
			if n.clusterDone(ctx) {
				return true
			}
			continue
		}
		if n.front.Idle() && n.stats.busy.Load() == 0 {
			idleRounds++
		} else {
			idleRounds = 0
		}
		if idleRounds >= 2 {
			return true
		}
	}
}

// clusterDone polls the cluster once a second (a lone node: every 200 ms) until every member is idle twice in a row
// (or a peer already decided), then says so to peers for a few seconds before returning.
func (n *Node) clusterDone(ctx context.Context) bool {
	prev := int64(-1)
	for {
		if n.cluster.Done(ctx, &prev) {
			break
		}
		// Peers are asked over HTTP once a second; a node alone checks itself as often as
		// a node without a cluster layer does, so a one-node batch crawl exits promptly.
		wait := time.Second
		if len(n.cluster.Gossip().Alive()) <= 1 {
			wait = 200 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return n.budget.limitReached()
		case <-time.After(wait):
		}
	}
	n.cluster.MarkDone()
	n.log.Info("the cluster's crawl is done")
	if len(n.cluster.Gossip().Alive()) > 1 {
		select { // let peers hear it
		case <-time.After(3 * time.Second):
		case <-ctx.Done():
		}
	}
	return true
}

// maintain runs periodic housekeeping: Badger value-log GC and the crawl-rate meter.
func (n *Node) maintain(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	gc := time.NewTicker(5 * time.Minute)
	defer gc.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.rate.observe(n.cfg.Now(), n.stats.fetched.Load())
			n.checkDisk()
			n.checkUnshipped()
		case <-gc.C:
			for n.db.RunValueLogGC(0.5) == nil {
			}
		}
	}
}

// checkDisk pauses intake while free space is under MinFreeDisk.
func (n *Node) checkDisk() {
	if n.cfg.MinFreeDisk < 0 {
		return
	}
	free, err := n.freeBytes()
	if err != nil {
		return
	}
	if free < n.cfg.MinFreeDisk {
		n.pauseForDisk(fmt.Errorf("%d MiB free, under the %d MiB minimum", free>>20, n.cfg.MinFreeDisk>>20))
		n.lowDisk.Store(true)
	} else if n.lowDisk.Swap(false) {
		n.pausedUntil.Store(0)
		n.diskUntil.Store(0)
		n.log.Warn("disk space back: fetching, extraction and writes resume", "free_mib", free>>20)
	}
}

// freeBytes is the free space of the data directory's file system (for an unprivileged
// user: Bavail).
func (n *Node) freeBytes() (int64, error) {
	if n.cfg.freeDisk != nil {
		return n.cfg.freeDisk()
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.dir.Path, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

func (n *Node) closeStores() {
	n.shutdownOnce.Do(func() {
		if n.client != nil {
			n.client.Close()
		}
		if n.payloads != nil {
			n.payloads.Drain(2 * time.Second)
			n.payloads.Close()
			st := n.payloads.Stats()
			n.log.Info("payload decisions", "lookups", st.Lookups.Load(), "revisits", st.Found.Load(),
				"originals", st.Missed.Load(), "fallback_timeout", st.FallbackTimeout.Load(), "fallback_error", st.FallbackError.Load(),
				"registered", st.Registered.Load(), "lost_race", st.LostRace.Load(), "register_failed", st.RegisterFailed.Load(),
				"requests", st.Requests.Load(), "bytes_sent", st.BytesSent.Load(), "bytes_received", st.BytesRecv.Load())
		}
		if n.uploader != nil {
			n.uploader.Close()
		}
		if n.warcSync != nil {
			n.warcSync.drain()
		}
		if n.warc != nil {
			if err := n.warc.Close(); err != nil {
				n.log.Error("close WARC writer", "err", err)
			}
		}
		if n.front != nil {
			if err := n.front.Close(); err != nil {
				n.log.Error("close frontier", "err", err)
			}
		}
		if n.trim != nil {
			n.trim.Stop()
		}
		if n.db != nil {
			if err := n.db.Close(); err != nil {
				n.log.Error("close badger", "err", err)
			}
		}
		if n.dir != nil {
			n.dir.Close()
		}
	})
}

// addSeeds canonicalizes and queues seeds at depth 0 with the highest priority.
func (n *Node) addSeeds(seeds []string) error {
	if len(seeds) == 0 {
		return nil
	}
	cands := make([]frontier.Candidate, 0, len(seeds))
	for _, s := range seeds {
		c, err := urlnorm.Canonicalize(s)
		if err != nil {
			return fmt.Errorf("%w: seed %q: %v", ErrBadConfig, s, err)
		}
		cands = append(cands, frontier.Candidate{URL: c, Host: urlnorm.HostKey(c), Cash: n.seedCash()})
	}
	hosts := make([]string, len(cands))
	for i, c := range cands {
		hosts[i] = c.Host
	}
	if err := n.addSeedHosts(hosts); err != nil {
		return fmt.Errorf("queue seeds: %w", err)
	}
	res, fwd, err := n.route(context.Background(), cands)
	if err != nil {
		return fmt.Errorf("queue seeds: %w", err)
	}
	n.log.Info("seeds queued", "given", len(seeds), "new", res.Added, "already_seen", res.AlreadySeen, "forwarded", fwd)
	return nil
}

// counters are the node's own figures for progress output and status.
type counters struct {
	fetched    atomic.Int64 // fetches recorded (any final outcome with a response)
	ok2xx      atomic.Int64
	redirects  atomic.Int64
	client4xx  atomic.Int64
	server5xx  atomic.Int64
	fetchErr   atomic.Int64 // transport errors
	forbidden  atomic.Int64 // URLs refused by the address guard (also in fetchErr)
	robotsDeny atomic.Int64
	robotsReq  atomic.Int64
	busy       atomic.Int64 // leases between Next and Done (in a fetch slot or waiting for their links' commit)
	slots      atomic.Int64 // fetch slots busy with a lease (robots, fetch, archive, parse)
	bytes      atomic.Int64
	// commitRetries counts the committer's failed writes that it tried again.
	commitRetries atomic.Int64
	// commitBatches, commitLeases, commitLinks: the group commits, the leases they
	// recorded and the links they queued (before routing): how much each commit shares.
	commitBatches, commitLeases, commitLinks atomic.Int64
	// revisits: fetches of pages seen before; of those, notModified answered 304,
	// unchanged had the same body, changed a new version.
	revisits, notModified, unchanged, changed atomic.Int64

	classMu sync.Mutex
	classes map[string]int64 // transport errors by class
}

func (c *counters) countError(class string) {
	c.fetchErr.Add(1)
	c.classMu.Lock()
	if c.classes == nil {
		c.classes = make(map[string]int64)
	}
	c.classes[class]++
	c.classMu.Unlock()
}

func (c *counters) errorsByClass() map[string]int64 {
	c.classMu.Lock()
	defer c.classMu.Unlock()
	out := make(map[string]int64, len(c.classes))
	for k, v := range c.classes {
		out[k] = v
	}
	return out
}

// rateMeter keeps one sample a second for the last minute.
type rateMeter struct {
	mu      sync.Mutex
	samples []rateSample
}

type rateSample struct {
	at time.Time
	n  int64
}

func (r *rateMeter) observe(at time.Time, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, rateSample{at, n})
	if len(r.samples) > 61 {
		r.samples = r.samples[len(r.samples)-61:]
	}
}

// history returns the per-second rate over the last minute, oldest first.
func (r *rateMeter) history() []api.RatePoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]api.RatePoint, 0, len(r.samples))
	for i := 1; i < len(r.samples); i++ {
		a, b := r.samples[i-1], r.samples[i]
		if d := b.at.Sub(a.at).Seconds(); d > 0 {
			out = append(out, api.RatePoint{T: b.at.UTC(), PagesPerSec: float64(b.n-a.n) / d})
		}
	}
	return out
}

func (r *rateMeter) perSecond() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) < 2 {
		return 0
	}
	a, b := r.samples[0], r.samples[len(r.samples)-1]
	d := b.at.Sub(a.at).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(b.n-a.n) / d
}
