package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/cluster"
	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/fetch"
	"github.com/crawlnode/crawlnode/internal/badgermem"
	"github.com/crawlnode/crawlnode/internal/gctune"
	"github.com/crawlnode/crawlnode/internal/peerauth"
	"github.com/crawlnode/crawlnode/node"
	"github.com/crawlnode/crawlnode/urlnorm"
)

// listFlag collects a repeatable string flag. Values from the config file or the
// environment are replaced, not extended, by the first one given on the command line.
type listFlag struct {
	vals    []string
	replace bool // the next Set starts a new list
}

func (l *listFlag) String() string { return strings.Join(l.vals, ",") }
func (l *listFlag) Set(s string) error {
	if l.replace {
		l.vals, l.replace = nil, false
	}
	l.vals = append(l.vals, s)
	return nil
}

// crawlFlags binds the crawl flags to a config. Shared by the crawl and demo commands.
type crawlFlags struct {
	fs        *flag.FlagSet
	cfg       node.Config
	seeds     listFlag
	seedsFile string
	resolve   listFlag
	allowIPs  listFlag
	dns       listFlag
	// members only: key file and TLS files (the key itself comes from CRAWLNODE_CLUSTER_KEY)
	clusterKeyFile, tlsCA, tlsCert, tlsKey string
	logLevel                               string
	logFormat                              string
	robotsRetry                            time.Duration
	quiet                                  bool
	cpuProfile                             string
	gcHeadroom                             int64
	memProfile                             string
	goroutines                             string
	languages                              string
	scope                                  string
	include                                listFlag
	exclude                                listFlag
	join                                   listFlag
	durations                              map[string]*durationFlag // by flag name
}

func newCrawlFlags(name string) *crawlFlags {
	f := &crawlFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError), durations: map[string]*durationFlag{}}
	fs := f.fs
	fs.SetOutput(io.Discard)
	c := &f.cfg
	fs.String("config", "", "YAML file of settings (keys are flag names); flags and CRAWLNODE_* variables win over it")
	fs.StringVar(&c.DataDir, "data", "./crawl-data", "data directory (Badger, WARC, corpus); running again on it resumes the crawl")
	fs.StringVar(&c.Name, "name", "", "node name (default: the one recorded in --data, else random)")
	fs.Var(&f.seeds, "seed", "seed URL (repeatable)")
	fs.StringVar(&f.seedsFile, "seeds", "", "file of seed URLs, one a line (# comments and blank lines ignored)")
	fs.BoolVar(&c.ExitWhenDone, "exit-when-done", false, "exit 0 once the frontier is empty and nothing is in flight (or --max-pages is reached)")
	fs.Int64Var(&c.MaxPages, "max-pages", 0, "stop fetching once the whole cluster recorded this many fetches (0 = no limit; exit with --exit-when-done); written into the job configuration when it has none (PATCH /v1/job max_pages changes it)")
	fs.IntVar(&c.MaxDepth, "max-depth", 16, "maximum link hops from a seed (0: the seeds only, and where they redirect: list mode, as wget -i)")
	fs.IntVar(&c.MaxPagesPerHost, "max-pages-per-host", 100000, "maximum URLs admitted per host")
	f.durationVar(&c.Delay, "delay", time.Second, "delay between requests to a host when robots.txt gives no Crawl-delay (0 allowed; a bare number is seconds: 0.5 = 500ms)")
	fs.IntVar(&c.PerHost, "per-host", 1, "requests in flight per host")
	fs.IntVar(&c.Concurrency, "concurrency", 64, "fetches in flight on this node")
	fs.StringVar(&c.UserAgent, "user-agent", node.DefaultUserAgent, "User-Agent header; its product token selects the robots.txt group")
	fs.StringVar(&f.scope, "scope", "all", "links followed: all, seed-hosts, or seed-domains (the seeds' registrable domains)")
	fs.Var(&f.include, "include", "follow only links whose URL matches this regular expression (repeatable)")
	fs.Var(&f.exclude, "exclude", "never follow links whose URL matches this regular expression (repeatable)")
	fs.Var(&f.resolve, "resolve", "HOST=ADDR: connect to ADDR for HOST (exact name or *.suffix); repeatable")
	fs.Var(&f.allowIPs, "allow-ips", "CIDR (or IP) the fetcher may connect to although it is loopback, private, link-local or reserved, e.g. an intranet; repeatable or comma-separated (default: public addresses only; --resolve targets are always allowed)")
	fs.Var(&f.dns, "dns", "DNS server IP[:PORT] asked directly, answers cached for their TTL (repeatable or comma-separated; default: the system resolver)")
	f.durationVar(&c.DNSCacheTTL, "dns-cache-ttl", 5*time.Minute, "longest time a DNS answer is cached")
	f.durationVar(&c.FetchTimeout, "timeout", 30*time.Second, "timeout for one request, body included")
	fs.IntVar(&c.MaxBodySize, "max-body", 10<<20, "bodies are cut at this many bytes (recorded as truncated)")
	f.durationVar(&f.robotsRetry, "robots-retry", 10*time.Second, "first wait after a 5xx/unreachable robots.txt (doubles; host parked after 5 tries)")
	f.durationVar(&c.RetryBase, "retry-base", 2*time.Second, "first backoff of a transiently failed URL (exponential with jitter; dead letter after 5 tries)")
	fs.BoolVar(&c.Recrawl, "recrawl", false, "continuous crawling: revisit every fetched page, sooner the more often it changes (conditional GET; the crawl never ends by itself)")
	f.longDurationVar(&c.RecrawlMin, "recrawl-min", time.Hour, "with --recrawl: shortest interval between two visits of a page")
	f.longDurationVar(&c.RecrawlMax, "recrawl-max", 30*24*time.Hour, "with --recrawl: longest interval between two visits of a page (= --recrawl-min: a fixed interval)")
	fs.Float64Var(&c.RevisitShare, "revisit-share", 0.5, "with --recrawl: share of each host's requests that goes to revisits while it also has new URLs")
	fs.StringVar(&c.Priority, "priority", "bfs", "crawl order: bfs (breadth-first) or opic (important pages first by OPIC cash, breadth-first tie-break)")
	fs.IntVar(&c.ExtractWorkers, "extract-workers", 0, "text extraction workers (default: number of CPUs)")
	fs.IntVar(&c.WARCGzipLevel, "warc-gzip-level", 1, "gzip level of WARC records: 1 fastest LZ77; -2 Huffman-only (same format, ~4x less CPU, ~40% larger files); up to 9")
	fs.IntVar(&c.ExtractNice, "extract-nice", corpus.IdleNice, "nice value (0-19, or 20: SCHED_IDLE, below nice 19) of the extract workers' threads: the fetch stage gets the CPU first, extraction lags (0: same priority, Linux only)")
	fs.Float64Var(&c.ExtractDeferIdle, "extract-defer-idle", corpus.DefaultDeferBelowIdle, "with --extract-nice above 0 (Linux): an extract worker starts its next page only while the machine has at least this many cores idle besides the workers' own use, so a CPU-bound crawl is not slowed (pages wait in the backlog; at most 10 s each, none past half the backlog's bound or at the crawl's end); negative: never wait")
	fs.BoolVar(&c.NoExtract, "no-extract", false, "fetch stage only: archive pages as WARC and follow links, build no text corpus")
	fs.BoolVar(&c.BoundedMemory, "bounded-memory", false, "bound the resident set for very large frontiers: a 1.25 GiB soft Go memory limit (unless GOMEMLIMIT is set) and Badger's mapped table pages trimmed above 256 MiB")
	fs.Int64Var(&f.gcHeadroom, "gc-headroom", DefaultGCHeadroom, "bytes the Go heap may grow past what is live before a collection, when that is more than GOGC allows (fewer collections, fewer pauses; at most this much more memory; 0: GOGC alone; ignored when GOGC is set)")
	fs.IntVar(&c.Filters.MinTextLength, "min-text-length", 200, "corpus: pages with less main text (characters) are rejected")
	fs.Float64Var(&c.Filters.MaxLinkDensity, "max-link-density", 0.5, "corpus: pages whose main text has a larger share inside links are rejected")
	fs.StringVar(&f.languages, "languages", "", "corpus: comma-separated ISO 639-1 codes to keep (empty: all)")
	fs.BoolVar(&c.Filters.IncludeOptOut, "include-opt-out", false, "corpus: keep the text of pages that opted out (noindex, noai, TDM reservation)")
	fs.BoolVar(&c.NoMarkdown, "no-markdown", false, "corpus: records carry the main text only, no Markdown beside it (saves its 5-10% of the extract stage's CPU)")
	fs.BoolVar(&c.PDF.Disabled, "no-pdf", false, "corpus: archive PDFs but extract no text from them (record rejected pdf_disabled; the PDF engine never starts)")
	fs.IntVar(&c.PDF.MaxBytes, "pdf-max-bytes", corpus.DefaultPDFMaxBytes, "corpus: larger PDFs are rejected (too_large) without opening them")
	fs.IntVar(&c.PDF.MaxPages, "pdf-max-pages", corpus.DefaultPDFMaxPages, "corpus: PDFs with more pages are rejected (pdf_too_many_pages)")
	fs.DurationVar(&c.PDF.Timeout, "pdf-timeout", corpus.DefaultPDFTimeout, "corpus: longest extraction of one PDF; past it the engine instance is killed (pdf_timeout)")
	fs.Int64Var(&c.PDF.MaxMemory, "pdf-max-memory", corpus.DefaultPDFMaxMemory, "corpus: memory one PDF engine instance may use, in bytes (one instance per extract worker); PDFs needing more are rejected (too_large)")
	fs.StringVar(&c.PDF.CacheDir, "pdf-cache-dir", "", "corpus: where the PDF engine's compiled code is kept (default: the user's cache directory, else DIR/pdfium-cache)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress output")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	fs.BoolVar(&c.Pprof, "pprof", false, "serve Go's profiling endpoints under /debug/pprof/ on the HTTP API (e.g. go tool pprof http://ADDR/debug/pprof/profile?seconds=30)")
	fs.StringVar(&f.memProfile, "memprofile", "", "write a heap profile at exit to this file")
	fs.StringVar(&f.goroutines, "goroutine-dump", "", "on SIGUSR1, write the goroutines (grouped by stack, go tool pprof's debug=1 text) to this file, numbered by dump, and a heap profile to FILE.heap.N")
	addOutputStoreFlags(f)
	fs.BoolVar(&c.NoSync, "no-fsync", false, "UNSAFE: do not fsync Badger commits, nor WARC records before their page is recorded; a crash still loses nothing, a power cut may lose acknowledged links, seeds and pages (RELIABILITY.md)")
	f.durationVar(&c.SyncInterval, "sync-interval", time.Second, "fsync the open WARC file at least this often in the background (10ms..1m); pages are recorded as fetched only after their record's fsync either way")
	fs.Int64Var(&c.MinFreeDisk, "min-free-disk", 256<<20, "while the data directory's disk has fewer free bytes than this, pause fetching and extraction and refuse writes from peers and seeds (resumes by itself)")
	fs.StringVar(&c.APIToken, "api-token", "", "the operator's bearer token: required by every mutating API request and by --pprof's endpoints, and opens every read; it opens no node-to-node route (also CRAWLNODE_API_TOKEN)")
	fs.StringVar(&c.APIReadToken, "api-read-token", "", "bearer token that opens reads only (pages, text, export files; with --api-protect-reads all, every read) (also CRAWLNODE_API_READ_TOKEN)")
	fs.StringVar(&c.APIProtectReads, "api-protect-reads", "data", "once a token is set, the reads that need one: data (pages, their text, the export files) or all (every read but /healthz, /readyz, /metrics and the dashboard page)")
	fs.StringVar(&c.HTTPAddr, "http", "127.0.0.1:7070", "HTTP API address (port 0: any free port, written to DIR/http.addr; empty: no API)")
	fs.StringVar(&c.InternalAddr, "internal-http", "", "separate address for the node-to-node endpoints (default: they share --http)")
	cl := &c.Cluster
	fs.StringVar(&cl.BindAddr, "bind", "", "gossip (memberlist) address, TCP and UDP (default 127.0.0.1:0 when alone; give a fixed port for a cluster)")
	fs.StringVar(&cl.AdvertiseAddr, "advertise", "", "gossip address peers use, when it differs from --bind (NAT, containers)")
	fs.StringVar(&cl.RaftAddr, "raft", "", "Raft address (default: the --bind host, port + 1)")
	fs.Var(&f.join, "join", "gossip address of a cluster member to join (repeatable or comma-separated)")
	fs.IntVar(&cl.BootstrapExpect, "bootstrap-expect", 0, "form the cluster once this many members gossip (give it to every initial node; alone: 1)")
	f.durationVar(&cl.Grace, "grace", 30*time.Second, "how long a stopped node keeps its partitions before others take them over")
	f.durationVar(&cl.ReplicaInterval, "replica-interval", time.Second, "how often each partition's changes are copied to its backup node (negative: no replicas)")
	fs.StringVar(&cl.Profile, "cluster-profile", "lan", "cluster timings: lan, or test (fast, for one machine)")
	// Members only: the cluster key and mutual TLS (see cluster/security.go).
	fs.StringVar(&f.clusterKeyFile, "cluster-key-file", "", "file holding the cluster key (base64 of 16, 24 or 32 bytes) that encrypts and authenticates gossip and, without TLS, signs every node-to-node request (or CRAWLNODE_CLUSTER_KEY, the key itself; neither: node-to-node routes take loopback callers only)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "the cluster's CA certificate (crawlnode tls ca create): with --tls-cert and --tls-key, Raft and node-to-node calls run over mutual TLS")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "this node's certificate, naming the node (crawlnode tls cert create --node NAME)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "this node's private key")
	fs.BoolVar(&cl.InsecureCluster, "insecure-cluster", false, "serve gossip, Raft and the node-to-node endpoints beyond loopback without a cluster key and TLS (a network you trust)")
	return f
}

// parse parses args and builds the config. Nothing is written.
func (f *crawlFlags) parse(args []string) error {
	file, err := configFileArg(args)
	if err != nil {
		return err
	}
	if file != "" {
		if err := applyConfigFile(f.fs, file); err != nil {
			return err
		}
	}
	if err := applyEnv(f.fs); err != nil {
		return err
	}
	f.dns.replace = true
	f.allowIPs.replace = true
	f.seeds.replace, f.resolve.replace, f.include.replace, f.exclude.replace, f.join.replace = true, true, true, true, true
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			f.printHelp()
			return errHelp
		}
		if derr := f.durationError(); derr != nil {
			return derr
		}
		return usageError{err.Error()}
	}
	if f.fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q (seeds go after --seed)", f.fs.Arg(0))}
	}
	c := &f.cfg
	c.DelaySet, c.MaxDepthSet = true, true // the flags always carry a value (defaults 1s and 16), so 0 means 0
	// Flags carry explicit values: a 0 here is the user's, not "use the default".
	for _, chk := range []struct {
		bad  bool
		flag string
		want string
	}{
		{c.PerHost < 1, "per-host", ">= 1"},
		{c.Concurrency < 1, "concurrency", ">= 1"},
		{c.MaxDepth < 0, "max-depth", ">= 0"},
		{c.MaxPages < 0, "max-pages", ">= 0"},
		{c.MaxPagesPerHost < 1, "max-pages-per-host", ">= 1"},
		{c.Delay < 0, "delay", ">= 0"},
		{c.FetchTimeout <= 0, "timeout", "> 0"},
		{c.MaxBodySize < 1024, "max-body", ">= 1024"},
		{f.robotsRetry <= 0, "robots-retry", "> 0"},
		{c.RetryBase <= 0, "retry-base", "> 0"},
		{c.RecrawlMin <= 0, "recrawl-min", "> 0"},
		{c.RecrawlMax < c.RecrawlMin, "recrawl-max", ">= --recrawl-min"},
		{c.RevisitShare <= 0 || c.RevisitShare > 1, "revisit-share", "in (0, 1]"},
		{c.Priority != node.PriorityOPIC && c.Priority != node.PriorityBFS, "priority", "opic or bfs"},
		{c.ExtractWorkers < 0, "extract-workers", ">= 0"},
		{f.gcHeadroom < 0, "gc-headroom", ">= 0"},
		{c.Filters.MinTextLength < 0, "min-text-length", ">= 0"},
		{c.Filters.MaxLinkDensity <= 0 || c.Filters.MaxLinkDensity > 1, "max-link-density", "in (0, 1]"},
		{c.RotateEvery < 0, "rotate-every", ">= 0"},
		{c.SyncInterval < 10*time.Millisecond || c.SyncInterval > time.Minute, "sync-interval", "in [10ms, 1m]"},
		{c.OutputStore.MaxUnshipped <= 0, "output-store-max-unshipped", "> 0"},
	} {
		if chk.bad {
			return usageError{fmt.Sprintf("--%s must be %s", chk.flag, chk.want)}
		}
	}
	c.RobotsRetryBase = f.robotsRetry
	if err := api.ValidProtectReads(c.APIProtectReads); err != nil {
		return usageError{"--api-protect-reads: want data or all"}
	}
	if err := checkOutputStoreFlags(c); err != nil {
		return err
	}
	for _, j := range f.join.vals {
		for _, a := range strings.Split(j, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.Cluster.Join = append(c.Cluster.Join, a)
			}
		}
	}
	if err := f.loadClusterSecrets(); err != nil {
		return err
	}
	if c.Cluster.BootstrapExpect < 0 {
		return usageError{"--bootstrap-expect must be >= 0"}
	}
	if c.Cluster.Grace <= 0 {
		return usageError{"--grace must be > 0"}
	}
	if c.Cluster.Profile != "lan" && c.Cluster.Profile != "test" {
		return usageError{fmt.Sprintf("--cluster-profile %q: want lan or test", c.Cluster.Profile)}
	}
	for _, a := range append([]string{c.Cluster.BindAddr, c.Cluster.AdvertiseAddr, c.Cluster.RaftAddr}, c.Cluster.Join...) {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return usageError{fmt.Sprintf("address %q: want host:port", a)}
		}
	}
	sc, err := node.ParseScope(f.scope)
	if err != nil {
		return usageError{fmt.Sprintf("--scope %q: want all, seed-hosts or seed-domains", f.scope)}
	}
	c.Scope, c.Include, c.Exclude = sc, f.include.vals, f.exclude.vals
	for _, p := range append(append([]string(nil), c.Include...), c.Exclude...) {
		if _, err := regexp.Compile(p); err != nil {
			return usageError{fmt.Sprintf("bad --include/--exclude pattern %q: %v", p, err)}
		}
	}
	for _, l := range strings.Split(f.languages, ",") {
		if l = strings.ToLower(strings.TrimSpace(l)); l == "" {
			continue
		}
		if len(l) != 2 || l[0] < 'a' || l[0] > 'z' || l[1] < 'a' || l[1] > 'z' {
			return usageError{fmt.Sprintf("--languages: %q is not an ISO 639-1 code", l)}
		}
		c.Filters.Languages = append(c.Filters.Languages, l)
	}
	for _, r := range f.resolve.vals {
		rule, err := fetch.ParseResolve(r)
		if err != nil {
			return usageError{fmt.Sprintf("--resolve %q: %v", r, err)}
		}
		c.Resolve = append(c.Resolve, rule)
	}
	for _, v := range f.allowIPs.vals {
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a == "" {
				continue
			}
			p, err := fetch.ParseAllowIP(a)
			if err != nil {
				return usageError{fmt.Sprintf("--allow-ips %q: %v", a, err)}
			}
			c.AllowIPs = append(c.AllowIPs, p)
		}
	}
	for _, v := range f.dns.vals {
		for _, d := range strings.Split(v, ",") {
			if d = strings.TrimSpace(d); d == "" {
				continue
			}
			if _, err := fetch.ParseDNSServer(d); err != nil {
				return usageError{fmt.Sprintf("--dns %q: %v", d, err)}
			}
			c.DNSServers = append(c.DNSServers, d)
		}
	}
	seeds := append([]string(nil), f.seeds.vals...)
	if f.seedsFile != "" {
		fromFile, err := readSeeds(f.seedsFile)
		if err != nil {
			return err
		}
		seeds = append(seeds, fromFile...)
	}
	for _, s := range seeds {
		if _, err := urlnorm.Canonicalize(s); err != nil {
			return usageError{fmt.Sprintf("bad seed URL %q: %v", s, err)}
		}
	}
	c.Seeds = seeds
	lvl, err := parseLevel(f.logLevel)
	if err != nil {
		return err
	}
	var h slog.Handler
	switch f.logFormat {
	case "text":
		h = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})
	case "json":
		h = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})
	default:
		return usageError{fmt.Sprintf("--log-format %q: want text or json", f.logFormat)}
	}
	c.Logger = slog.New(h)
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, usageError{fmt.Sprintf("--log-level %q: want debug, info, warn or error", s)}
	}
	return l, nil
}

func (f *crawlFlags) printHelp() {
	printGroupedHelp(f.fs, os.Stdout)
}

// readSeeds reads one URL a line; blank lines and # comments are skipped. A bad URL is an
// error naming its line.
func readSeeds(path string) ([]string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("seeds file: %w", err)
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if _, err := urlnorm.Canonicalize(s); err != nil {
			return nil, usageError{fmt.Sprintf("seeds file %s line %d: bad URL %q: %v", path, line, s, err)}
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("seeds file %s: %w", path, err)
	}
	return out, nil
}

func runCrawl(args []string) error {
	f := newCrawlFlags("crawl")
	if err := f.parse(args); err != nil {
		return err
	}
	// Check the data directory before creating anything, so a wrong one writes nothing.
	if _, err := node.CheckDataDir(f.cfg.DataDir, f.cfg.Name); err != nil {
		return err
	}
	// A cluster member takes its work from its peers, and a node that serves its API waits
	// for seeds sent to it (POST /v1/crawl/seeds, crawlnode seed) as a cluster does; a node
	// alone without an API needs seeds, or a crawl to resume.
	if len(f.cfg.Seeds) == 0 && len(f.cfg.Cluster.Join) == 0 && f.cfg.Cluster.BootstrapExpect <= 1 {
		if _, err := os.Stat(f.cfg.DataDir); errors.Is(err, os.ErrNotExist) {
			if f.cfg.HTTPAddr == "" {
				return usageError{"no seeds and no API to receive them: give --seed URL or --seeds FILE, or --http ADDR to take seeds by POST /v1/crawl/seeds (or --data of a crawl to resume, or --join a cluster)"}
			}
			f.cfg.Logger.Info("no seeds yet: waiting for them on the HTTP API (POST /v1/crawl/seeds, or crawlnode seed --api http://ADDR URL)", "http", f.cfg.HTTPAddr)
		}
	}
	stopProfile, err := startProfiles(f.cpuProfile, f.memProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if f.goroutines != "" {
		defer dumpGoroutinesOnSignal(f.goroutines)()
	}
	return crawl(f.cfg, f.quiet, f.gcHeadroom)
}

// startProfiles starts CPU profiling and arranges a heap profile at exit.
func startProfiles(cpu, mem string) (stop func(), err error) {
	var cpuFile *os.File
	if cpu != "" {
		if cpuFile, err = os.Create(cpu); err != nil {
			return nil, fmt.Errorf("cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(cpuFile); err != nil {
			cpuFile.Close()
			return nil, fmt.Errorf("cpuprofile: %w", err)
		}
	}
	return func() {
		if cpuFile != nil {
			pprof.StopCPUProfile()
			cpuFile.Close()
		}
		if mem != "" {
			if fh, err := os.Create(mem); err == nil {
				runtime.GC()
				_ = pprof.WriteHeapProfile(fh)
				fh.Close()
			}
		}
	}, nil
}

// dumpGoroutinesOnSignal writes PATH.N (N = 1, 2, ...) with the goroutines grouped by
// stack, and PATH.heap.N with a heap profile (go tool pprof), each time the process gets
// SIGUSR1: where fetch slots wait and what the heap holds, mid-run (the --memprofile at
// exit sees the heap after shutdown freed it).
func dumpGoroutinesOnSignal(path string) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for i := 1; ; i++ {
			select {
			case <-done:
				return
			case <-ch:
			}
			if fh, err := os.Create(path + "." + strconv.Itoa(i)); err == nil {
				_ = pprof.Lookup("goroutine").WriteTo(fh, 1)
				fh.Close()
			}
			if fh, err := os.Create(path + ".heap." + strconv.Itoa(i)); err == nil {
				_ = pprof.Lookup("heap").WriteTo(fh, 0)
				fh.Close()
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// DefaultGCHeadroom is --gc-headroom's default: a node's live heap is 70-100 MiB on the
// fetch path, so GOGC=100 collected about twice a second in the single-node benchmark;
// 256 MiB of headroom cut the fetch stage's time by about a tenth and the extract stage's
// slowing of it by about half (docs/bench-log/extract-stage.md, "Collections the fetch stage pays for").
const DefaultGCHeadroom = 256 << 20

// crawl runs a node until it is done or signalled.
func crawl(cfg node.Config, quiet bool, gcHeadroom int64) error {
	if cfg.BoundedMemory {
		badgermem.SetGoMemoryLimit()
	}
	if os.Getenv("GOGC") == "" {
		// The soft memory limit above, when set, still caps the heap goal.
		defer gctune.Start(uint64(gcHeadroom)).Stop()
	}
	if cfg.ExtractNice > 0 && !cfg.NoExtract {
		// Niced extract workers each hold a P while they wait for the CPU the crawl leaves
		// them; give them Ps of their own so the fetch stage keeps all of the usual ones.
		workers := cfg.ExtractWorkers
		if workers <= 0 {
			workers = runtime.NumCPU()
		}
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + workers)
	}
	n, err := node.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	progCtx, stopProg := context.WithCancel(context.Background())
	progDone := make(chan struct{})
	go func() {
		defer close(progDone)
		if !quiet {
			showProgress(progCtx, n, cfg.Logger)
		}
	}()
	cfg.Logger.Info("crawl started", "node", n.Name(), "data", cfg.DataDir, "seeds", len(cfg.Seeds), "concurrency", cfg.Concurrency)
	err = n.Run(ctx)
	stopProg()
	<-progDone
	if err != nil {
		return err
	}
	p := n.Status()
	cfg.Logger.Info("crawl stopped", append([]any{"pages", p.PagesCrawled, "queued", p.PagesQueued, "dead_letters", p.DeadLetters, "elapsed", p.Elapsed.Round(time.Millisecond)}, n.TransferStats()...)...)
	return nil
}

// showProgress draws a live line on a terminal, else logs a line every 5 seconds.
func showProgress(ctx context.Context, n *node.Node, log *slog.Logger) {
	tty := isTerminal(os.Stderr)
	every := 5 * time.Second
	if tty {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(os.Stderr)
			}
			return
		case <-t.C:
		}
		p := n.Status()
		if tty {
			fmt.Fprintf(os.Stderr, "\r\033[K%s pages %d  %.0f/s  queued %d  in flight %d  errors %d  hosts %d  extract backlog %d",
				p.Elapsed.Round(time.Second), p.PagesCrawled, p.CrawlRate, p.PagesQueued, p.InFlight, p.ErrorCount(), p.HostsKnown, p.ExtractBacklog)
		} else {
			log.Info("progress", "pages", p.PagesCrawled, "pages_per_s", fmt.Sprintf("%.1f", p.CrawlRate), "queued", p.PagesQueued,
				"in_flight", p.InFlight, "errors", p.ErrorCount(), "hosts", p.HostsKnown, "dead_letters", p.DeadLetters, "extract_backlog", p.ExtractBacklog)
		}
	}
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// loadClusterSecrets reads the cluster key (--cluster-key-file, else
// CRAWLNODE_CLUSTER_KEY) and the TLS credentials (--tls-ca, --tls-cert, --tls-key: all
// three or none).
func (f *crawlFlags) loadClusterSecrets() error {
	cl := &f.cfg.Cluster
	key := os.Getenv("CRAWLNODE_CLUSTER_KEY")
	src := "CRAWLNODE_CLUSTER_KEY"
	if f.clusterKeyFile != "" {
		b, err := os.ReadFile(f.clusterKeyFile)
		if err != nil {
			return fmt.Errorf("--cluster-key-file: %w", err)
		}
		key, src = string(b), "--cluster-key-file "+f.clusterKeyFile
	}
	if strings.TrimSpace(key) != "" {
		k, err := cluster.ParseKey(key)
		if err != nil {
			return usageError{fmt.Sprintf("%s: %v", src, err)}
		}
		cl.ClusterKey = k
	}
	given := 0
	for _, v := range []string{f.tlsCA, f.tlsCert, f.tlsKey} {
		if v != "" {
			given++
		}
	}
	switch given {
	case 0:
		return nil
	case 3:
		creds, err := peerauth.Load(f.tlsCA, f.tlsCert, f.tlsKey)
		if err != nil {
			return err
		}
		cl.TLS = creds
		return nil
	default:
		return usageError{"TLS needs all three of --tls-ca, --tls-cert and --tls-key"}
	}
}
