package frontier

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/dgraph-io/badger/v4"
)

// Sentinel errors. Callers test them with errors.Is; the frontier wraps them with %w.
var (
	ErrConfig     = errors.New("frontier: invalid config")
	ErrClosed     = errors.New("frontier: closed")
	ErrLeaseDone  = errors.New("frontier: lease already done")
	ErrBadLease   = errors.New("frontier: lease not issued by this frontier")
	ErrBadOutcome = errors.New("frontier: unknown outcome kind")
	ErrCorrupt    = errors.New("frontier: corrupt record")
)

// Config configures a Frontier. Zero values take the documented defaults; for the integer
// limits a negative value means "no limit" (so 0 can keep meaning "default").
type Config struct {
	// DB is the Badger database, opened (and later closed) by the caller. Required.
	// The frontier owns the key families q/ h/ s/ d/ r/ (one family byte, then a 2-byte
	// big-endian partition).
	DB *badger.DB

	// Now is the clock. Default time.Now. Tests pass a fake clock.
	Now func() time.Time

	// Logger receives the frontier's warnings and errors, with component=frontier added.
	// Default slog.Default() (as it is when Open runs). Two frontiers in one process (two
	// nodes in a test) pass their own to tell their lines apart.
	Logger *slog.Logger

	// PartitionOf maps a host key to its partition. Default: xxhash64(host) % 271.
	PartitionOf func(host string) uint16

	// PerHost is the most leases in flight per host. Default 1. More is faster and less polite.
	PerHost int

	// DefaultDelay is the gap between two requests to a host that has no SetHostDelay
	// (robots Crawl-delay). Default 1s. Because 0 means "default", set DefaultDelaySet to use
	// DefaultDelay as given, including 0 (no delay: only PerHost limits a host).
	DefaultDelay    time.Duration
	DefaultDelaySet bool

	// MaxDepth rejects candidates with Depth > MaxDepth. Default 16; negative = unlimited.
	// Because 0 means "default", set MaxDepthSet to use MaxDepth as given: 0 admits only
	// depth-0 candidates (seeds, and a seed's redirect targets, which keep its depth).
	MaxDepth    int
	MaxDepthSet bool
	// MaxPagesPerHost is how many URLs a host admits over the whole crawl (counted at Add,
	// persisted). Default 100000; negative = unlimited.
	MaxPagesPerHost int
	// MaxURLLength in bytes. Default 2048; negative = unlimited.
	MaxURLLength int
	// MaxRepeatedSegments: a path segment occurring more than this many times is a trap.
	// Default 3; negative = unlimited.
	MaxRepeatedSegments int
	// MaxQueryParams: more query items than this is a trap. Default 12; negative = unlimited.
	MaxQueryParams int
	// GeneratedBudget is how many URLs that look machine-generated (dates in the path,
	// calendars, session-id-like segments, many or facet-style query parameters) a host may
	// admit. Default 200; negative = unlimited.
	GeneratedBudget int
	// QueryVariantsFree is how many distinct queries one path of a host may admit before
	// further ones count as generated (faceted navigation: /catalog/?color=..&size=..&page=N
	// in endless combinations). Default 20; negative = no such rule. Counted in memory per
	// host (at most 4096 paths a host; past that every new query URL counts as generated),
	// so a restart grants each path its free variants again.
	QueryVariantsFree int
	// MaxSubdomains bounds the hosts admitted under an existing host (children of
	// h.example.org: x.h.example.org), the defense against hosts that invent subdomains.
	// Seeds (depth 0) are exempt. Default 100; negative = unlimited. Raise it for platforms
	// that give every user a subdomain.
	MaxSubdomains int

	// MaxAttempts: the MaxAttempts-th transient failure parks the URL as a dead letter. Default 5.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the retry backoff: full jitter over
	// min(BackoffMax, BackoffBase*2^(attempt-1)). Defaults 2s and 10m.
	BackoffBase, BackoffMax time.Duration

	// ExpectedURLs and BloomFPRate size the Bloom filter in front of the exact seen keys
	// (defaults 1M and 0.01: about 1.2 bytes per URL). The filter is 256 sub-filters, one
	// per first byte of the URL hash; one that holds more URLs than it was sized for is
	// rebuilt in the background from its Badger seen keys at 1.2 times its count, so past
	// ExpectedURLs the filter stays between 1.2 and 1.44 bytes per URL held (bloom.go).
	// A false positive costs one Badger lookup, never a lost URL.
	ExpectedURLs uint
	BloomFPRate  float64

	// Rand returns a float in [0,1) for backoff jitter. Default math/rand/v2 Float64.
	Rand func() float64

	// SeenCacheSize bounds a cache of recently seen URLs that answers repeated links
	// without their URLHash or a lookup: two generations of this many entries, 32 bytes of
	// slots each (4 MiB at the default), allocated at Open. Default 65536, at most 1<<26;
	// negative disables it.
	SeenCacheSize int

	// SeenIndexDir, when set, is a directory for the seen index (seenindex.go): per Bloom
	// sub-filter a sorted file of the seen keys of one snapshot that confirms an old
	// ("cold") seen URL without a Badger point read. It costs 18 bytes of disk per seen URL
	// (the files are unlinked while open: nothing is left in the directory) and 8 bytes of
	// memory per 227 URLs. Empty: every confirmation reads Badger.
	SeenIndexDir string
	// SeenIndexMapBytes: the seen index's files are memory-mapped up to this many bytes in
	// all and read with pread beyond, so a large index's pages stay in the page cache
	// instead of the process's resident set, and a lookup the mapped share holds costs no
	// system call. Default DefaultSeenIndexMapBytes (128 MiB); negative: always pread.
	SeenIndexMapBytes int64

	// Prefetch is how many queued records per active host are kept in memory. Default 8.
	Prefetch int

	// Recrawl schedules every fetched URL for later visits (continuous crawling); off by
	// default. SetRecrawl changes it while running.
	Recrawl Recrawl
	// Importance makes OPIC cash given to a URL that is already queued add to its cash
	// (two Badger reads and a rewrite of its queue record per such link, under the
	// frontier's lock, so Next and Done wait meanwhile), so URLs linked from many
	// important pages move up their host's queue. Off, a URL keeps the cash of the link
	// that admitted it. Links without cash (breadth-first order) cost nothing either way.
	Importance bool
}

// DefaultPartitions is the partition count of the default PartitionOf.
const DefaultPartitions = 271

func (c *Config) setDefaults() {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.PartitionOf == nil {
		c.PartitionOf = func(host string) uint16 { return uint16(xxhash.Sum64String(host) % DefaultPartitions) }
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.PerHost, 1)
	if !c.MaxDepthSet {
		def(&c.MaxDepth, 16)
	}
	def(&c.MaxPagesPerHost, 100000)
	def(&c.MaxURLLength, 2048)
	def(&c.MaxRepeatedSegments, 3)
	def(&c.MaxQueryParams, 12)
	def(&c.GeneratedBudget, 200)
	def(&c.QueryVariantsFree, 20)
	def(&c.MaxSubdomains, 100)
	def(&c.MaxAttempts, 5)
	def(&c.Prefetch, 8)
	def(&c.SeenCacheSize, 1<<16)
	if !c.DefaultDelaySet && c.DefaultDelay == 0 {
		c.DefaultDelay = time.Second
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = 2 * time.Second
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = 10 * time.Minute
	}
	if c.ExpectedURLs == 0 {
		c.ExpectedURLs = 1_000_000
	}
	if c.BloomFPRate == 0 {
		c.BloomFPRate = 0.01
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
}

// Validate reports the first invalid field. It is called by Open after defaults are applied.
func (c *Config) Validate() error {
	switch {
	case c.DB == nil:
		return fmt.Errorf("%w: DB is required", ErrConfig)
	case c.PerHost < 1:
		return fmt.Errorf("%w: PerHost must be >= 1", ErrConfig)
	case c.DefaultDelay < 0:
		return fmt.Errorf("%w: DefaultDelay must be >= 0", ErrConfig)
	case c.MaxAttempts < 1:
		return fmt.Errorf("%w: MaxAttempts must be >= 1", ErrConfig)
	case c.BackoffBase < 0 || c.BackoffMax < c.BackoffBase:
		return fmt.Errorf("%w: need 0 <= BackoffBase <= BackoffMax", ErrConfig)
	case c.BloomFPRate <= 0 || c.BloomFPRate >= 1:
		return fmt.Errorf("%w: BloomFPRate must be in (0,1)", ErrConfig)
	case c.Prefetch < 1:
		return fmt.Errorf("%w: Prefetch must be >= 1", ErrConfig)
	}
	return nil
}
