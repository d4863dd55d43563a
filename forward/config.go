package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Sentinel errors. Callers test them with errors.Is; the package wraps them with %w.
var (
	ErrConfig      = errors.New("forward: invalid config")
	ErrFull        = errors.New("forward: outbox full")
	ErrClosed      = errors.New("forward: outbox shut down")
	ErrCorrupt     = errors.New("forward: corrupt batch")
	ErrTooLarge    = errors.New("forward: batch over limits")
	ErrInvalidLink = errors.New("forward: invalid link")
	// ErrNotOwner is returned by the receiver's apply function for a partition it does not
	// own at the batch's epoch; the handler answers 409 and the sender re-resolves the owner.
	ErrNotOwner = errors.New("forward: not the owner of the partition")
	// ErrForbidden is returned by the receiver's apply function for a batch its
	// authenticated caller may not deliver (one naming another sender); the handler
	// answers 403 and applies nothing of the batch.
	ErrForbidden = errors.New("forward: sender not allowed")
	// ErrSend wraps transport failures reported by HTTPSender.
	ErrSend = errors.New("forward: send failed")
)

// Config configures an Outbox. Zero values take the documented defaults.
type Config struct {
	// DB is the node's Badger database, opened and closed by the caller. Required. The
	// outbox owns key family 'o' only: o|partition(2, BE)|seq(8, BE) -> link section.
	DB *badger.DB

	// Self is this node's name, as OwnerOf reports it. Required. Partitions OwnerOf assigns
	// to Self are handed to Local instead of Send.
	Self string

	// OwnerOf resolves a partition's current owner and lease epoch; ok false means "no
	// owner known now" (the partition's links wait). Called at send time, for every batch,
	// so queued links follow ring changes. Must be fast and safe for concurrent use. Required.
	OwnerOf func(partition uint16) (peer string, epoch uint64, ok bool)

	// Send ships a batch to a peer and returns nil only once the peer has committed every
	// partition of the batch to its frontier (then the entries are deleted). A *RefusedError
	// (errors.Is ErrNotOwner) says which partitions were refused; the others count as
	// committed. Any other error keeps the whole batch queued. Required; see HTTPSender.
	Send func(ctx context.Context, peer string, b Batch) error

	// Local receives the queued links of partitions this node now owns (after a ring
	// change); nil return deletes them from the outbox. Required.
	Local func(links []Link) error

	// MaxQueued is the most links the outbox holds; Add past it returns ErrFull and the
	// caller applies back-pressure. Default 5,000,000 (a few hundred MB of Badger at
	// roughly 60 bytes a link). Larger rides out longer peer outages at the cost of disk.
	MaxQueued int

	// BatchLinks is the most links in one batch (and in one stored entry). Default 2000,
	// at most MaxBatchLinks. Larger batches compress better (fewer bytes a link) but a
	// failed send retries more, and the receiver commits more in one go.
	BatchLinks int

	// BatchURLBytes bounds the URL bytes of one batch. Default 4 MiB, at most
	// MaxBatchURLBytes. Only matters for unusually long URLs.
	BatchURLBytes int

	// SendInterval is how often the sender looks for pending links. Default 200ms. Lower
	// forwards sooner but makes smaller batches. An Add that fills a partition's batch
	// wakes the sender at once.
	SendInterval time.Duration

	// SendTimeout bounds one Send call. Default 10s.
	SendTimeout time.Duration

	// PeerConcurrency is the most batches in flight to one peer at once (each from its own
	// drain, over its own partitions). Default 4, at most MaxPeerConcurrency. A receiver
	// acknowledges a batch only once its replicas hold the links (up to a few seconds), so
	// one batch at a time limits a peer to one batch per replica round; more overlap those
	// waits (the receiver's replica rounds serve all batches waiting at once). After a
	// failed send the peer gets one batch at a time (a probe) until a send succeeds again.
	// Memory and connections grow with it: a batch of BatchLinks links per drain.
	PeerConcurrency int

	// BackoffBase and BackoffMax shape the per-peer retry delay after a failed send:
	// min(BackoffMax, BackoffBase*2^(failures-1)), plus up to 25% jitter. The same delay
	// holds a partition a peer refused, until its owner or epoch changes. Defaults 500ms
	// and 30s.
	BackoffBase, BackoffMax time.Duration

	// RecentCache is how many recently queued URLs are remembered (by 64-bit hash); an
	// Add of one of them is skipped and counted. Default 200,000 (about 8 MB); negative
	// disables the cache. Larger cuts more repeats, at 40 bytes a URL of memory.
	RecentCache int

	// Logger receives structured logs (component=forward). Default slog.Default().
	Logger *slog.Logger

	// Now is the clock used for backoff. Default time.Now. Tests pass a fake clock.
	Now func() time.Time
}

// Defaults.
const (
	DefaultMaxQueued     = 5_000_000
	DefaultBatchLinks    = 2000
	DefaultBatchURLBytes = 4 << 20
	DefaultSendInterval  = 200 * time.Millisecond
	DefaultSendTimeout   = 10 * time.Second
	DefaultBackoffBase   = 500 * time.Millisecond
	DefaultBackoffMax    = 30 * time.Second
	DefaultRecentCache   = 200_000

	// DefaultPeerConcurrency batches in flight per peer; MaxPeerConcurrency bounds the setting.
	DefaultPeerConcurrency = 4
	MaxPeerConcurrency     = 32
)

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.MaxQueued == 0 {
		c.MaxQueued = DefaultMaxQueued
	}
	if c.BatchLinks == 0 {
		c.BatchLinks = DefaultBatchLinks
	}
	if c.BatchURLBytes == 0 {
		c.BatchURLBytes = DefaultBatchURLBytes
	}
	if c.SendInterval == 0 {
		c.SendInterval = DefaultSendInterval
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = DefaultSendTimeout
	}
	if c.PeerConcurrency == 0 {
		c.PeerConcurrency = DefaultPeerConcurrency
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.RecentCache == 0 {
		c.RecentCache = DefaultRecentCache
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// TestConfig returns c with defaults suited to tests: fast sends and short backoff.
func TestConfig(c Config) Config {
	if c.SendInterval == 0 {
		c.SendInterval = 5 * time.Millisecond
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = 2 * time.Second
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = 20 * time.Millisecond
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = 200 * time.Millisecond
	}
	return c.WithDefaults()
}

// Validate reports the first problem with a defaulted config, wrapping ErrConfig.
func (c Config) Validate() error {
	switch {
	case c.DB == nil:
		return fmt.Errorf("%w: DB is required", ErrConfig)
	case c.Self == "":
		return fmt.Errorf("%w: Self is required", ErrConfig)
	case c.OwnerOf == nil:
		return fmt.Errorf("%w: OwnerOf is required", ErrConfig)
	case c.Send == nil:
		return fmt.Errorf("%w: Send is required", ErrConfig)
	case c.Local == nil:
		return fmt.Errorf("%w: Local is required", ErrConfig)
	case c.MaxQueued < 1:
		return fmt.Errorf("%w: MaxQueued %d < 1", ErrConfig, c.MaxQueued)
	case c.BatchLinks < 1 || c.BatchLinks > MaxBatchLinks:
		return fmt.Errorf("%w: BatchLinks %d not in 1..%d", ErrConfig, c.BatchLinks, MaxBatchLinks)
	case c.BatchURLBytes < MaxURLLength || c.BatchURLBytes > MaxBatchURLBytes:
		return fmt.Errorf("%w: BatchURLBytes %d not in %d..%d", ErrConfig, c.BatchURLBytes, MaxURLLength, MaxBatchURLBytes)
	case c.SendInterval <= 0, c.SendTimeout <= 0:
		return fmt.Errorf("%w: SendInterval and SendTimeout must be positive", ErrConfig)
	case c.PeerConcurrency < 1 || c.PeerConcurrency > MaxPeerConcurrency:
		return fmt.Errorf("%w: PeerConcurrency %d not in 1..%d", ErrConfig, c.PeerConcurrency, MaxPeerConcurrency)
	case c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase:
		return fmt.Errorf("%w: need 0 < BackoffBase <= BackoffMax", ErrConfig)
	case c.Logger == nil || c.Now == nil:
		return fmt.Errorf("%w: Logger and Now are required (use WithDefaults)", ErrConfig)
	}
	return nil
}
