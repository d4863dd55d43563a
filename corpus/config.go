package corpus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/crawlnode/crawlnode/internal/keyspace"
)

// Key families owned by this package in the shared Badger DB (registered in internal/keyspace).
const (
	prefixJob   = keyspace.CorpusJob   // 'x' <seq:8 BE> -> Job (JSON): the durable backlog
	prefixExact = keyspace.CorpusExact // 'c' <sha256:32> -> "<url>\t<fetch time>" of the first page with that text
	prefixNear  = keyspace.CorpusNear  // 'n' <table:1> <block:2 BE> <simhash:8 BE> -> "<url>\t<fetch time>"
	prefixState = keyspace.CorpusState // 'k' <name> -> counters and stage state
	// 'u' (prefixPage, page.go): per-URL page record without text, for lookups
)

// Sentinel errors.
var (
	// ErrBacklogFull is returned by Enqueue when the backlog would pass Config.MaxBacklog; the
	// fetch side should slow down (or keep the jobs) and retry.
	ErrBacklogFull = errors.New("corpus: extract backlog full")
	// ErrInvalidConfig wraps every Validate failure.
	ErrInvalidConfig = errors.New("corpus: invalid config")
	// ErrClosed is returned after Shutdown.
	ErrClosed = errors.New("corpus: stage closed")
	// ErrNotStarted is returned by Drain before Start.
	ErrNotStarted = errors.New("corpus: stage not started")
)

// Default values.
const (
	DefaultShardMaxBytes  = 256 << 20
	DefaultMaxBacklog     = 1_000_000
	DefaultMinTextLength  = 200
	DefaultMaxLinkDensity = 0.5
	DefaultCommitEvery    = 256
	DefaultCommitInterval = time.Second
	DefaultUserAgentToken = "crawlnode"
	DefaultMaxBodyBytes   = 8 << 20
	// DefaultDeferBelowIdle is Config.DeferBelowIdle's default, in cores.
	DefaultDeferBelowIdle = 0.5

	// IdleNice as Config.Nice puts the worker threads in the SCHED_IDLE class (Linux): below
	// nice 19, they run only on CPU time no other thread of the machine wants.
	IdleNice = 20
)

// Filters are the job's corpus filters. A page that fails one gets a record with Rejected set
// to the reason and no text.
type Filters struct {
	// MinTextLength is the minimum length of the main text, in characters (runes).
	// Default 200. Lower keeps short pages (stubs, listings) at the cost of noisier text.
	MinTextLength int
	// MaxLinkDensity is the largest share (0..1] of the main text's non-space characters that
	// may sit inside <a> elements on the page (Quality.LinkDensity): link lists and link farms
	// score high; a page's navigation, menus and footers do not count, as they are not main
	// text. Default 0.5.
	MaxLinkDensity float64
	// Languages are the ISO 639-1 codes kept (e.g. "en", "de"); empty keeps every language. With
	// a list, a page whose language could not be told is rejected too.
	Languages []string
	// IncludeOptOut keeps the text of pages that opted out (noindex, noai, TDM reservation).
	// Default false: such pages get a record with the signals and Rejected "opt_out", no text.
	IncludeOptOut bool
	// IncludeDuplicates writes the text of duplicate pages too. Default false: a duplicate gets
	// a record with duplicate_of and duplicate_kind set but no text (its text is the original's,
	// or within 3 bits of it), which keeps shards small; export filters duplicates either way.
	IncludeDuplicates bool
}

// Config configures a Stage. Zero values take the defaults.
type Config struct {
	// DB is the node's Badger DB (required). The stage uses the key families 'x', 'c', 'n', 'k'.
	DB *badger.DB
	// OutDir is where shards are written (required): corpus-<node>-<seq6>.jsonl.zst, with a
	// .partial suffix while open.
	OutDir string
	// NodeName names the shards (required; letters, digits, '-', '_', '.').
	NodeName string
	// Workers is the number of extraction goroutines. Default runtime.NumCPU(). Extraction is
	// CPU bound, so more than the cores only adds memory.
	Workers int
	// Nice, when 1..19, runs each worker on an OS thread of its own at that nice value, and
	// IdleNice (20) in SCHED_IDLE, below nice 19 (Linux; elsewhere it is ignored with a warning), so the kernel gives the crawl's
	// threads the CPU first and extraction what they leave: the stage lags instead of slowing
	// the fetch stage. Give the process GOMAXPROCS of its CPUs plus Workers, so that a worker
	// thread waiting for CPU does not hold one of the crawl's Ps. Higher values yield more but
	// make stop-the-world GC pauses wait longer for a starved worker thread. Default 0: the
	// workers are ordinary goroutines and compete with the crawl for the cores.
	Nice int
	// DeferBelowIdle, with Nice > 0 (Linux), holds a worker back from starting its next page
	// while the machine has fewer than this many cores idle, not counting the workers' own
	// CPU: a worker that runs at all still slows a CPU-bound crawl (its garbage, the
	// collector's stop-the-world waiting for its starved thread, the shared caches), so
	// pages wait in the backlog until the crawl leaves CPU idle (see cpuGate). A worker
	// waits at most 10 s a page, and not at all while the backlog is above half of
	// MaxBacklog or Drain waits. Default 0.5; negative turns it off. The machine's times
	// are the whole machine's, not a container's CPU quota.
	DeferBelowIdle float64
	// MaxBacklog is the largest number of queued jobs; Enqueue returns ErrBacklogFull past it.
	// Default 1,000,000 (a job is ~300 bytes in Badger).
	MaxBacklog int
	// ShardMaxBytes rotates a shard once it holds this many uncompressed bytes. Default 256 MiB.
	ShardMaxBytes int64
	// ShardMaxAge also rotates a shard once it was opened this long ago, checked at every
	// commit and every CommitInterval, so that an uploader (which ships finished shards only)
	// never waits long for a slow shard. Default 0: shards rotate by size only.
	ShardMaxAge time.Duration
	// CommitEvery and CommitInterval bound the work redone after a crash: the open shard is
	// flushed and fsynced, and the finished jobs deleted from the backlog, every CommitEvery
	// records or CommitInterval, whichever comes first, and whenever the stage goes idle.
	// Defaults 256 and 1s. Smaller costs more fsyncs.
	CommitEvery    int
	CommitInterval time.Duration
	// MaxBodyBytes: bodies larger than this are rejected ("too_large") without parsing. Default
	// 8 MiB; parse time and memory grow with the DOM.
	MaxBodyBytes int
	// UserAgentToken is the product token whose user-agent-specific robots directives apply to
	// us ("crawlnode: noindex" in X-Robots-Tag, <meta name="crawlnode">). Default "crawlnode".
	UserAgentToken string
	// Fallback runs go-trafilatura's fallback extractors (readability, dom-distiller) when its own
	// result looks poor. Default false: it roughly doubles the cost per page for a small gain in
	// recall on odd layouts.
	Fallback bool
	// NoMarkdown leaves Record.Markdown empty. Default false: kept pages carry their main
	// content as Markdown too, which adds 5-10% to the stage's CPU per page on real pages
	// (BENCHMARKS.md, "Markdown beside the text") and roughly doubles a kept record's size
	// before compression.
	NoMarkdown bool
	// PDF bounds PDF extraction (limits, Disabled); see PDFConfig and the package doc.
	PDF PDFConfig
	// Load returns the page body for a job, e.g. read back from WARC (required). HTML that is
	// valid UTF-8 is parsed as is; anything else is decoded by the Content-Type charset, a BOM
	// or <meta charset>, as browsers do, and invalid UTF-8 left after that becomes U+FFFD.
	Load func(ctx context.Context, j Job) (body []byte, err error)
	// Filters are the corpus filters of the job.
	Filters Filters
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives the stage's logs. Default: discarded.
	Logger *slog.Logger
	// Decider, when set, makes the duplicate decisions (package dedup: one owner per key
	// across the cluster), for up to DecideBatch pages at once; a failed call is retried
	// with backoff and the pages' jobs stay queued meanwhile. Nil: this node's own indexes
	// ('c', 'n'), one page at a time.
	Decider Decider
	// DecideBatch is the most pages one Decider call decides. Default 64.
	DecideBatch int
	// Hold, when set, is asked before each page: while it returns true the workers wait,
	// holding the page, and ask again every HoldPoll (the node's disk is full: the record
	// and its commit would have nowhere to go). Default nil: never hold.
	Hold func() bool
}

// HoldPoll is how often a held worker asks Config.Hold again.
const HoldPoll = 200 * time.Millisecond

func (c *Config) setDefaults() {
	if c.Workers <= 0 {
		c.Workers = runtime.NumCPU()
	}
	if c.MaxBacklog <= 0 {
		c.MaxBacklog = DefaultMaxBacklog
	}
	if c.ShardMaxBytes <= 0 {
		c.ShardMaxBytes = DefaultShardMaxBytes
	}
	if c.CommitEvery <= 0 {
		c.CommitEvery = DefaultCommitEvery
	}
	if c.CommitInterval <= 0 {
		c.CommitInterval = DefaultCommitInterval
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.UserAgentToken == "" {
		c.UserAgentToken = DefaultUserAgentToken
	}
	if c.DeferBelowIdle == 0 {
		c.DeferBelowIdle = DefaultDeferBelowIdle
	}
	c.Filters.setDefaults()
	c.PDF.setDefaults()
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.DecideBatch <= 0 {
		c.DecideBatch = 64
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

func (f *Filters) setDefaults() {
	if f.MinTextLength == 0 {
		f.MinTextLength = DefaultMinTextLength
	}
	if f.MaxLinkDensity == 0 {
		f.MaxLinkDensity = DefaultMaxLinkDensity
	}
	for i, l := range f.Languages {
		f.Languages[i] = strings.ToLower(strings.TrimSpace(l))
	}
}

// Validate reports the first invalid field, wrapped in ErrInvalidConfig.
func (c *Config) Validate() error {
	switch {
	case c.DB == nil:
		return fmt.Errorf("%w: DB is required", ErrInvalidConfig)
	case c.OutDir == "":
		return fmt.Errorf("%w: OutDir is required", ErrInvalidConfig)
	case c.NodeName == "" || strings.ContainsFunc(c.NodeName, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}):
		return fmt.Errorf("%w: NodeName %q must be non-empty [A-Za-z0-9._-]", ErrInvalidConfig, c.NodeName)
	case c.Load == nil:
		return fmt.Errorf("%w: Load is required", ErrInvalidConfig)
	case c.Nice < 0 || c.Nice > IdleNice:
		return fmt.Errorf("%w: Nice %d not in 0..%d", ErrInvalidConfig, c.Nice, IdleNice)
	case math.IsNaN(c.DeferBelowIdle) || math.IsInf(c.DeferBelowIdle, 0):
		return fmt.Errorf("%w: DeferBelowIdle %v is not a number of cores", ErrInvalidConfig, c.DeferBelowIdle)
	case c.Filters.MinTextLength < 0:
		return fmt.Errorf("%w: Filters.MinTextLength %d < 0", ErrInvalidConfig, c.Filters.MinTextLength)
	case c.Filters.MaxLinkDensity < 0 || c.Filters.MaxLinkDensity > 1:
		return fmt.Errorf("%w: Filters.MaxLinkDensity %v not in [0,1]", ErrInvalidConfig, c.Filters.MaxLinkDensity)
	case c.PDF.MaxMemory < 16<<20:
		return fmt.Errorf("%w: PDF.MaxMemory %d below 16 MiB, too little for the PDF engine", ErrInvalidConfig, c.PDF.MaxMemory)
	case !c.PDF.Disabled && c.PDF.MaxMemory < int64(c.PDF.MaxBytes)+16<<20:
		// The document is copied into the engine's memory before it is read.
		return fmt.Errorf("%w: PDF.MaxMemory %d must exceed PDF.MaxBytes %d by 16 MiB at least", ErrInvalidConfig, c.PDF.MaxMemory, c.PDF.MaxBytes)
	}
	for _, l := range c.Filters.Languages {
		if len(l) != 2 {
			return fmt.Errorf("%w: Filters.Languages: %q is not an ISO 639-1 code", ErrInvalidConfig, l)
		}
	}
	return nil
}

// Job is one fetched page waiting for extraction. The node fills it from the fetch result and
// the WARC writer's position; the headers are those of the final response.
type Job struct {
	URL         string    `json:"url"`
	FetchTime   time.Time `json:"fetch_time"`
	Status      int       `json:"status"`
	ContentType string    `json:"content_type"`
	WARCFile    string    `json:"warc_file"`
	WARCOffset  int64     `json:"warc_offset"`
	// WARCLength is the length of the WARC record (its gzip member) holding the payload.
	WARCLength int64 `json:"warc_length,omitempty"`
	// XRobotsTag holds every X-Robots-Tag header value of the response.
	XRobotsTag []string `json:"x_robots_tag,omitempty"`
	// TDMReservation and TDMPolicy are the W3C TDMRep response headers tdm-reservation and tdm-policy.
	TDMReservation string `json:"tdm_reservation,omitempty"`
	TDMPolicy      string `json:"tdm_policy,omitempty"`
	// HostTDMReserved: the host's /.well-known/tdmrep.json reserves TDM rights for this URL
	// (looked up by the node).
	HostTDMReserved bool `json:"host_tdm_reserved,omitempty"`
	// PayloadOf is the URL of the page whose identical payload (same bytes, WARC payload
	// digest) another node archived first: this response was written as a WARC revisit
	// record and its payload is not on this node. The stage does not read it back: the
	// record is an exact duplicate of that page (the same bytes have the same text).
	PayloadOf string `json:"payload_of,omitempty"`
	// Refetch: the fetch is not a revisit, so it replaces any capture of the same URL the
	// duplicate index still names (made by a node lost since, its record gone; also set
	// for the refetches a promotion queues, frontier.Lease.Refetch): the decision lets it
	// take over keys naming its own URL (DedupPage.Refetch). False for a revisit, whose
	// unchanged text stays a duplicate of its earlier capture.
	Refetch bool `json:"refetch,omitempty"`
}

// Quality holds the page's quality signals.
type Quality struct {
	// TextLength is the main text's length in characters (runes).
	TextLength int `json:"text_length"`
	// Words is the number of words of the normalized main text.
	Words int `json:"words"`
	// VisibleChars counts the non-space characters of the page's visible text (body, without
	// script, style, template, noscript).
	VisibleChars int `json:"visible_chars"`
	// LinkDensity is the share of the main text's non-space characters that sit inside <a>
	// elements on the page (found by aligning the main text with the page's words; see the
	// package doc). Links outside the main text (navigation, footers) do not count. 0 when no
	// main text was extracted.
	LinkDensity float64 `json:"link_density"`
	// BoilerplateShare is 1 - (non-space main text chars / VisibleChars), clamped to [0,1]:
	// the share of the visible page that extraction dropped (navigation, footers, sidebars...).
	BoilerplateShare float64 `json:"boilerplate_share"`
}

// Rejection reasons (Record.Rejected).
const (
	RejectStatus        = "status"        // not a 2xx final status
	RejectContentType   = "content_type"  // not HTML/XHTML nor PDF
	RejectLoad          = "load_failed"   // the body could not be read back
	RejectTooLarge      = "too_large"     // body above MaxBodyBytes (PDF.MaxBytes for PDFs), or a PDF over PDF.MaxMemory
	RejectParse         = "parse_failed"  // not parseable as HTML
	RejectOptOut        = "opt_out"       // noindex / noai / TDM reservation and !IncludeOptOut
	RejectNoText        = "no_text"       // the extractor found no main text (detail "no page text": the page has none)
	RejectTooShort      = "too_short"     // main text < MinTextLength
	RejectLinkDensity   = "link_density"  // main text's link density > MaxLinkDensity
	RejectLanguage      = "language"      // language not in Languages
	RejectExtractFailed = "extract_error" // the extractor failed
	RejectExtractPanic  = "extract_panic" // the extractor panicked on the page (logged with a stack); never retried
)

// Opt-out signals (Record.OptOut).
const (
	OptOutNoIndex        = "noindex"         // meta robots or X-Robots-Tag noindex (or none)
	OptOutNoAI           = "noai"            // meta robots or X-Robots-Tag noai
	OptOutTDMReservation = "tdm-reservation" // TDMRep header, meta tag or /.well-known/tdmrep.json
)

// Duplicate kinds (Record.DuplicateKind).
const (
	DupExact = "exact"
	DupNear  = "near"
)

// Record is one line of a corpus shard: one page.
type Record struct {
	URL         string    `json:"url"`
	Status      int       `json:"status"`
	FetchTime   time.Time `json:"fetch_time"`
	ContentType string    `json:"content_type,omitempty"`
	Language    string    `json:"language,omitempty"`
	Title       string    `json:"title,omitempty"`
	// Text is the main text; empty for rejected pages, and for duplicates unless IncludeDuplicates.
	Text string `json:"text,omitempty"`
	// Markdown is the same main content as Markdown: headings, paragraphs, lists, tables, code
	// blocks, emphasis, links (absolute URLs) and images' alt text (see the package doc,
	// "Markdown"). Empty when Text is, and with Config.NoMarkdown. Added after the first
	// shards: records without it read as before.
	Markdown string `json:"markdown,omitempty"`
	// ContentHash is the hex SHA-256 of NormalizeText(Text) (set whenever text was extracted).
	ContentHash string `json:"content_hash,omitempty"`
	// SimHash is the 64-bit near-duplicate fingerprint (see SimHash) as 16 hex digits (set
	// whenever text was extracted).
	SimHash       string  `json:"simhash,omitempty"`
	DuplicateOf   string  `json:"duplicate_of,omitempty"`
	DuplicateKind string  `json:"duplicate_kind,omitempty"`
	DupDistance   int     `json:"duplicate_distance,omitempty"`
	Quality       Quality `json:"quality"`
	// PDFPages is a PDF's page count (0 for HTML, and for PDFs that could not be opened).
	PDFPages     int       `json:"pdf_pages,omitempty"`
	Rejected     string    `json:"rejected,omitempty"`
	RejectDetail string    `json:"reject_detail,omitempty"`
	OptOut       []string  `json:"opt_out,omitempty"`
	TDMPolicy    string    `json:"tdm_policy,omitempty"`
	WARCFile     string    `json:"warc_file,omitempty"`
	WARCOffset   int64     `json:"warc_offset"`
	WARCLength   int64     `json:"warc_length,omitempty"`
	ExtractedAt  time.Time `json:"extracted_at"`
}

// Kept reports whether the record is corpus text: not rejected and not a duplicate.
func (r *Record) Kept() bool { return r.Rejected == "" && r.DuplicateOf == "" }
