package simweb

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Sentinel errors. Callers match them with errors.Is.
var (
	// ErrInvalidConfig wraps every Validate failure.
	ErrInvalidConfig = errors.New("simweb: invalid config")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("simweb: closed")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("simweb: already started")
)

// Config describes one simulated web. Every behaviour has a field; a count of 0 (or false)
// switches it off, a larger count scales it. All counts are numbers of hosts unless the field
// says otherwise. Same Config (Clock and Logger aside) => same web, byte for byte.
type Config struct {
	// Seed drives every random choice. Default 1.
	Seed int64
	// Hosts is the number of top-level hosts h0..h(Hosts-1). Default 200. Range 1..100000.
	Hosts int
	// Suffix is the DNS suffix of every host (hN.<Suffix>). Default "sim.test".
	Suffix string

	// MeanPages is the mean number of article pages per host; counts are Pareto-distributed
	// (heavy tail) and then scaled so their sum is exactly Hosts*MeanPages. Default 110.
	MeanPages int
	// MaxPages caps one host's article pages. Default 4000.
	MaxPages int
	// CrossHostLinks is the number of cross-host links on each article page. Default 2.
	CrossHostLinks int
	// RandomLinks is the number of random (popularity-skewed) same-host links per page, on top
	// of the tree links that make every page reachable. Default 4.
	RandomLinks int
	// MinWords / MaxWords bound the Pareto-distributed main-text length (words) of article
	// pages. Defaults 300 / 40000 (pages of ~4 KB to ~300 KB).
	MinWords, MaxWords int
	// Bodies, when set, are HTML fragments that article pages carry in place of the
	// generated main text (a page's fragment is fixed by its text seed), inside the same
	// page: header, navigation, links, comments, sidebar and footer as always. Benchmarks
	// use them to serve real pages' markup and text (bench/colly -bodies); the fragments'
	// own links should be neutralised by the caller, or crawlers follow them. MinWords and
	// MaxWords then change nothing, and the oracle reports no main text for those pages.
	Bodies [][]byte
	// Languages, when on, serves article main text in nine languages and scripts (see
	// simweb.Languages) with a <html lang> that is right, absent or wrong; the oracle reports
	// each page's true language (PageInfo.Language). Off by default: every page is English
	// with lang="en", as before.
	Languages bool

	// --- robots.txt variants (each host has at most one variant; the rest answer 404) ---

	// RobotsRulesHosts serve Disallow/Allow rules with '*' and '$' wildcards, longest-match
	// cases and an Allow/Disallow tie. Default 30.
	RobotsRulesHosts int
	// RobotsGroupsHosts serve several user-agent groups (badbot, crawlnode+othercrawler, *).
	// Default 8.
	RobotsGroupsHosts int
	// CrawlDelayHosts serve "Crawl-delay: CrawlDelay" for '*'; their page count is capped at
	// CrawlDelayMaxPages so a full crawl stays short. Default 3.
	CrawlDelayHosts int
	// CrawlDelay is the Crawl-delay those hosts announce. Default 500ms.
	CrawlDelay time.Duration
	// CrawlDelayMaxPages caps the pages of crawl-delay hosts. Default 15.
	CrawlDelayMaxPages int
	// Robots5xxHosts answer robots.txt with 500/503 forever (= disallow all). Default 2.
	Robots5xxHosts int
	// RobotsUnreachableHosts drop the connection on robots.txt (= disallow all). Default 1.
	RobotsUnreachableHosts int
	// Robots4xxHosts answer robots.txt with 403 (= allow all, like 404). Default 2.
	Robots4xxHosts int
	// RobotsRedirectHosts redirect robots.txt twice (301 then 302) to the real file. Default 2.
	RobotsRedirectHosts int
	// RobotsOversizeHosts serve a robots.txt of ~600 KiB whose rules past 500 KiB must be
	// ignored. Default 1.
	RobotsOversizeHosts int
	// SitemapHosts list Sitemap: lines in robots.txt (plain XML, or an index naming a gzip
	// and a plain child); sitemaps also list orphan pages linked from nowhere. Default 20.
	SitemapHosts int

	// --- spider traps (infinite URL spaces linked from the host's pages) ---

	CalendarTrapHosts  int // infinite calendar /calendar/YYYY/MM/. Default 2.
	SessionTrapHosts   int // session ids in the path /session/<sid>/... Default 2.
	DeepTrapHosts      int // ever-deeper relative paths /deep/x/x/x/... Default 2.
	FacetTrapHosts     int // infinite query facets /catalog/?... Default 2.
	SubdomainTrapHosts int // a host inventing subdomains wN.hI.<suffix>. Default 1.

	// --- duplicates ---

	// MirrorHosts are exact mirrors of another host's pages (same main text and HTML apart
	// from URLs and host-specific sidebars). Default 4.
	MirrorHosts int
	// NearDupHosts have every 10th article (k%10==5) be a near-duplicate of article k-1
	// (NearDupEditRate of the words changed). Default 20.
	NearDupHosts int
	// NearDupEditRate is the fraction of words changed in a near-duplicate. Default 0.02.
	NearDupEditRate float64
	// CanonicalHosts link every 4th article to a ?print=1 variant carrying rel=canonical.
	// Default 20.
	CanonicalHosts int

	// --- redirects and errors ---

	// RedirectHosts serve 301/302/307/308 redirects, chains (up to 7 hops), a loop and a
	// cross-host redirect, linked from the home page. Default 20.
	RedirectHosts int
	// ErrorHosts serve 404, 410 and 500-forever pages and broken links. Default 20.
	ErrorHosts int
	// RetryAfterHosts answer some URLs first with 503 or 429 + Retry-After. Default 3.
	RetryAfterHosts int
	// RetryAfter is the Retry-After those responses carry (whole seconds). Default 1s.
	RetryAfter time.Duration

	// --- slow and huge ---

	// SlowHosts each have one page whose first byte comes after SlowFirstByte. Default 2.
	SlowHosts     int
	SlowFirstByte time.Duration // Default 2s.
	// TrickleHosts each have one page trickled out over TrickleDuration. Default 2.
	TrickleHosts    int
	TrickleDuration time.Duration // Default 3s.
	// HugeHosts each have one page whose body is HugeBodyBytes long. Default 2.
	HugeHosts     int
	HugeBodyBytes int64 // Default 50 MiB.

	// --- content ---

	// BinaryHosts serve a PDF, a PNG, binary behind a .html name, and a PDF labelled
	// text/html. Default 20.
	BinaryHosts int
	// HostilePDFs: binary hosts also link three hostile PDFs, /files/2.pdf (truncated
	// garbage after its header), /files/3.pdf (a page tree of 200,000 pages in a few KB) and
	// /files/4.pdf (a 64 KB content stream, /FlateDecode twice, inflating to 1 GiB);
	// PageInfo.PDFHostile names which. Default false.
	HostilePDFs bool
	// SharedBinaries: the binary hosts' files (/files/N.pdf, /img/N.png, /bin/N.html and the
	// mislabeled PDFs) are the same bytes on every binary host, so one payload is served
	// under many URLs on many hosts (WARC revisit records, identical-payload-digest).
	// Default false: each host's files are its own.
	SharedBinaries bool
	// EncodingHosts compress responses (gzip, or brotli when offered) when the client asks.
	// Default 20.
	EncodingHosts int
	// MalformedHosts serve every 3rd page as malformed HTML. Default 10.
	MalformedHosts int
	// BaseHrefHosts put <base href> in every 2nd page. Default 20.
	BaseHrefHosts int
	// LinkVariety renders links as relative, protocol-relative, uppercase-host, :80,
	// fragment and percent-escaped forms. Default true.
	LinkVariety bool
	// TrackingParams adds utm_*, fbclid, sid and ;jsessionid= to some links. Default true.
	TrackingParams bool
	// NofollowHosts use meta robots nofollow and rel=nofollow to hide /hidden/ pages.
	// Default 10.
	NofollowHosts int
	// OptOutHosts serve X-Robots-Tag: noindex, tdm-reservation: 1, meta noai and meta
	// tdm-reservation on some pages; the first also serves /.well-known/tdmrep.json. Default 5.
	OptOutHosts int

	// --- the internet regime (see latency.go) ---

	// LatencyMedian switches on per-host latency: each host gets a median first-byte latency
	// drawn from a log-normal distribution with this median and shape LatencyHostSigma, capped
	// at LatencyMax; each request then waits the host's median times a log-normal factor of
	// shape LatencyRequestSigma (median 1). 0: every answer comes at once (loopback speed).
	LatencyMedian time.Duration
	// LatencyHostSigma is the spread of host medians (log-normal shape). Default 0.8: a
	// quarter of hosts above 1.7x the median, 1% above 6x.
	LatencyHostSigma float64
	// LatencyRequestSigma is the spread of one host's requests around its median. Default 0.5.
	LatencyRequestSigma float64
	// LatencyMax caps one request's first-byte latency. Default 30s.
	LatencyMax time.Duration
	// TransferRateMedian is the median per-host transfer rate in bytes/s (log-normal, shape
	// 1); a body takes len/rate after its first 16 KiB. 0: unlimited.
	TransferRateMedian int64
	// TimeoutHosts accept connections and read requests but never answer, robots.txt
	// included (= disallow all), until the client gives up or TimeoutHang passes; then the
	// connection is closed. Their robots variant is exclusive. Default 0.
	TimeoutHosts int
	// TimeoutHang bounds how long a timeout host holds a request. Default 2m.
	TimeoutHang time.Duration
	// ConnLimitHosts serve one connection at a time: a request for such a host on a second
	// connection while another connection that carried its requests is still open is refused
	// (the connection is closed, logged with status 0 and counted in Report.ConnRefused).
	// Works when the Web serves through Start. Default 0.
	ConnLimitHosts int

	// --- change over time (continuous crawling) ---

	// ChangeIntervals, when set, make the home and article pages change: each page gets
	// one of these intervals (chosen from the page, about evenly), 0 meaning "never
	// changes". Such pages carry ETag and Last-Modified, answer conditional requests with
	// 304, show their revision in the body, and sitemaps give their lastmod and changefreq.
	// Freshness judges a crawl of them. Default none (no page ever changes).
	ChangeIntervals []time.Duration

	// Clock stamps the request log and Retry-After windows. Default time.Now.
	Clock func() time.Time
	// Logger receives server errors. Default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig is the default profile: 200 hosts, every behaviour present on a minority of
// hosts, at least 20,000 must-reach pages, a full crawl at delay 0 in about a minute.
func DefaultConfig() Config {
	return Config{
		Seed: 1, Hosts: 200, Suffix: "sim.test",
		MeanPages: 110, MaxPages: 4000, CrossHostLinks: 2, RandomLinks: 4,
		MinWords: 300, MaxWords: 40000,
		RobotsRulesHosts: 30, RobotsGroupsHosts: 8, CrawlDelayHosts: 3, CrawlDelay: 500 * time.Millisecond,
		CrawlDelayMaxPages: 15, Robots5xxHosts: 2, RobotsUnreachableHosts: 1, Robots4xxHosts: 2,
		RobotsRedirectHosts: 2, RobotsOversizeHosts: 1, SitemapHosts: 20,
		CalendarTrapHosts: 2, SessionTrapHosts: 2, DeepTrapHosts: 2, FacetTrapHosts: 2, SubdomainTrapHosts: 1,
		MirrorHosts: 4, NearDupHosts: 20, NearDupEditRate: 0.02, CanonicalHosts: 20,
		RedirectHosts: 20, ErrorHosts: 20, RetryAfterHosts: 3, RetryAfter: time.Second,
		SlowHosts: 2, SlowFirstByte: 2 * time.Second, TrickleHosts: 2, TrickleDuration: 3 * time.Second,
		HugeHosts: 2, HugeBodyBytes: 50 << 20,
		BinaryHosts: 20, EncodingHosts: 20, MalformedHosts: 10, BaseHrefHosts: 20,
		LinkVariety: true, TrackingParams: true, NofollowHosts: 10, OptOutHosts: 5,
	}
}

// InternetConfig is the internet-regime profile: hosts that answer after ~300 ms (median;
// log-normal per host and per request, a tail past 5 s), at ~1 MB/s, 2% of hosts that never
// answer, 2% that refuse a second connection; small plain pages (no traps, mirrors, huge or
// trickled bodies), so the crawl is bound by latency, not by bytes or CPU. Hosts can be many
// thousands; pages per host default to 30.
func InternetConfig(hosts int) Config {
	return Config{
		Seed: 1, Hosts: hosts, Suffix: "sim.test",
		MeanPages: 30, MaxPages: 400, CrossHostLinks: 2, RandomLinks: 3,
		MinWords: 150, MaxWords: 1500,
		RobotsRulesHosts: hosts / 20, RobotsGroupsHosts: hosts / 100, Robots4xxHosts: hosts / 100,
		SitemapHosts: hosts / 20, RedirectHosts: hosts / 50, ErrorHosts: hosts / 50,
		EncodingHosts: hosts / 5, NearDupHosts: hosts / 50, NearDupEditRate: 0.02,
		LatencyMedian: 300 * time.Millisecond, TransferRateMedian: 1 << 20,
		TimeoutHosts: hosts / 50, ConnLimitHosts: hosts / 50,
	}
}

// withDefaults fills the fields that have no meaningful zero value.
func (c Config) withDefaults() Config {
	if c.Suffix == "" {
		c.Suffix = "sim.test"
	}
	c.Suffix = strings.ToLower(strings.Trim(c.Suffix, "."))
	if c.Hosts == 0 {
		c.Hosts = 200
	}
	if c.MeanPages == 0 {
		c.MeanPages = 110
	}
	if c.MaxPages == 0 {
		c.MaxPages = 4000
	}
	if c.MinWords == 0 {
		c.MinWords = 300
	}
	if c.MaxWords == 0 {
		c.MaxWords = 40000
	}
	if c.CrawlDelayMaxPages == 0 {
		c.CrawlDelayMaxPages = 15
	}
	if c.LatencyHostSigma == 0 {
		c.LatencyHostSigma = 0.8
	}
	if c.LatencyRequestSigma == 0 {
		c.LatencyRequestSigma = 0.5
	}
	if c.LatencyMax == 0 {
		c.LatencyMax = 30 * time.Second
	}
	if c.TimeoutHang == 0 {
		c.TimeoutHang = 2 * time.Minute
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first invalid field, wrapped in ErrInvalidConfig.
func (c Config) Validate() error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(f, a...))
	}
	switch {
	case c.Hosts < 1 || c.Hosts > 100000:
		return bad("hosts %d not in 1..100000", c.Hosts)
	case c.MeanPages < 1 || c.MaxPages < 1:
		return bad("mean pages %d and max pages %d must be >= 1", c.MeanPages, c.MaxPages)
	case c.MinWords < 50 || c.MaxWords < c.MinWords:
		return bad("words %d..%d: need 50 <= min <= max", c.MinWords, c.MaxWords)
	case c.NearDupEditRate < 0 || c.NearDupEditRate > 0.5:
		return bad("near-dup edit rate %v not in [0,0.5]", c.NearDupEditRate)
	case c.CrawlDelay < 0 || c.SlowFirstByte < 0 || c.TrickleDuration < 0 || c.RetryAfter < 0 ||
		c.LatencyMedian < 0 || c.LatencyMax < 0 || c.TimeoutHang < 0 || c.TransferRateMedian < 0:
		return bad("durations must not be negative")
	case slices.ContainsFunc(c.ChangeIntervals, func(d time.Duration) bool { return d < 0 || (d > 0 && d < time.Second) }):
		return bad("change intervals must be 0 (never) or at least 1s")
	case c.HugeBodyBytes < 0 || c.CrossHostLinks < 0 || c.RandomLinks < 0:
		return bad("sizes and link counts must not be negative")
	case c.LatencyHostSigma < 0 || c.LatencyRequestSigma < 0 || c.LatencyHostSigma > 3 || c.LatencyRequestSigma > 3:
		return bad("latency sigmas %v, %v not in [0,3]", c.LatencyHostSigma, c.LatencyRequestSigma)
	case strings.ContainsAny(c.Suffix, "/:@ "):
		return bad("suffix %q is not a domain", c.Suffix)
	}
	for name, v := range map[string]int{
		"robots rules": c.RobotsRulesHosts, "robots groups": c.RobotsGroupsHosts, "crawl delay": c.CrawlDelayHosts,
		"robots 5xx": c.Robots5xxHosts, "robots unreachable": c.RobotsUnreachableHosts, "robots 4xx": c.Robots4xxHosts,
		"robots redirect": c.RobotsRedirectHosts, "robots oversize": c.RobotsOversizeHosts, "sitemap": c.SitemapHosts,
		"calendar": c.CalendarTrapHosts, "session": c.SessionTrapHosts, "deep": c.DeepTrapHosts, "facets": c.FacetTrapHosts,
		"subdomain": c.SubdomainTrapHosts, "mirror": c.MirrorHosts, "near dup": c.NearDupHosts, "canonical": c.CanonicalHosts,
		"redirect": c.RedirectHosts, "error": c.ErrorHosts, "retry-after": c.RetryAfterHosts, "slow": c.SlowHosts,
		"trickle": c.TrickleHosts, "huge": c.HugeHosts, "binary": c.BinaryHosts, "encoding": c.EncodingHosts,
		"malformed": c.MalformedHosts, "base href": c.BaseHrefHosts, "nofollow": c.NofollowHosts, "opt-out": c.OptOutHosts,
		"timeout": c.TimeoutHosts, "conn limit": c.ConnLimitHosts,
	} {
		if v < 0 {
			return bad("%s hosts %d is negative", name, v)
		}
	}
	return nil
}
