package archive

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
)

// Config configures a Writer. Zero values take the documented defaults (see WithDefaults).
type Config struct {
	// Dir is the directory the WARC files live in, e.g. <data>/warc. Created if missing. Required.
	Dir string

	// Prefix starts every file name. Files are named
	// <prefix>-<yyyymmddhhmmss>-<seq5>-<node>.warc.gz (UTC time of creation, sequence number that
	// keeps growing across restarts). Default "crawlnode". Must not contain '/'.
	Prefix string

	// NodeName identifies the writing node in file names and in the warcinfo record. Default
	// "node". Only [A-Za-z0-9._-] are allowed so names stay portable.
	NodeName string

	// MaxFileSize is the size in bytes after which a file is closed and a new one started: the
	// write that makes a file pass this size is the file's last, so a file exceeds it by at most one
	// exchange. Default 1 GiB (the customary WARC file size). Smaller files mean more files and more
	// warcinfo records; larger files mean a longer scan on Open after a crash.
	MaxFileSize int64

	// MaxFileAge closes the current file once it is this old (from its creation, or from
	// Open for an adopted file), even if it is small, so that a file is never open for long:
	// an uploader ships only closed files, and this bounds what waits unshipped. The check
	// runs on the background sync loop (every SyncInterval, at least every second). Default 0:
	// files rotate by size only.
	MaxFileAge time.Duration

	// SyncInterval is the fsync policy. Every record is handed to the kernel (write(2)) before
	// WriteExchange returns, so it survives a crash of the process. It is fsynced at the latest
	// SyncInterval later by a background loop (and always at rotation, Sync and Close), so a power
	// loss or kernel crash can cost at most the records of the last SyncInterval. Default 1s.
	// Negative disables the background loop (fsync only at rotation, Sync and Close). Shorter means
	// more fsyncs (each blocks nothing but costs disk bandwidth); longer means a larger loss window.
	SyncInterval time.Duration

	// Software and Operator go into each file's warcinfo record. Software defaults to
	// "crawlnode"; Operator is omitted when empty.
	Software, Operator string

	// CompressionLevel is the gzip level of each record member (klauspost/compress/gzip levels,
	// 1 = fastest .. 9 = smallest). Default gzip.BestSpeed (1): about 3x the throughput of level 6
	// for 10-15% larger files on HTML, and compression is the main CPU cost of this package.
	// A response whose payload arrived compressed (Exchange.PayloadCompressed: a
	// Content-Encoding, or a compressed media type such as JPEG or ZIP) is written as stored
	// deflate blocks whatever the level: see CompressedPayload.
	CompressionLevel int

	// Now is the clock used for file names, the warcinfo date and exchanges without a Date.
	// Default time.Now.
	Now func() time.Time

	// Logger receives repair and sync-error logs. Default slog.Default() with component=archive.
	Logger *slog.Logger
}

// Defaults for Config fields left zero.
const (
	DefaultPrefix      = "crawlnode"
	DefaultNodeName    = "node"
	DefaultMaxFileSize = int64(1) << 30
	DefaultSync        = time.Second
	DefaultSoftware    = "crawlnode"
)

var validName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.NodeName == "" {
		c.NodeName = DefaultNodeName
	}
	if c.MaxFileSize == 0 {
		c.MaxFileSize = DefaultMaxFileSize
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = DefaultSync
	}
	if c.Software == "" {
		c.Software = DefaultSoftware
	}
	if c.CompressionLevel == 0 {
		c.CompressionLevel = gzip.BestSpeed
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Logger = c.Logger.With("component", "archive")
	return c
}

// Validate reports the first invalid field of a defaulted Config.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return fmt.Errorf("%w: Dir is empty", ErrConfig)
	case !validName.MatchString(c.Prefix):
		return fmt.Errorf("%w: Prefix %q must match %s", ErrConfig, c.Prefix, validName)
	case !validName.MatchString(c.NodeName):
		return fmt.Errorf("%w: NodeName %q must match %s", ErrConfig, c.NodeName, validName)
	case c.MaxFileAge < 0:
		return fmt.Errorf("%w: MaxFileAge %s is negative", ErrConfig, c.MaxFileAge)
	case c.MaxFileSize < 4096:
		return fmt.Errorf("%w: MaxFileSize %d below 4096 bytes", ErrConfig, c.MaxFileSize)
	case strings.ContainsAny(c.Software+c.Operator, "\r\n"):
		return fmt.Errorf("%w: Software/Operator contain a line break", ErrConfig)
	case c.CompressionLevel < gzip.HuffmanOnly || c.CompressionLevel > gzip.BestCompression:
		return fmt.Errorf("%w: CompressionLevel %d out of range", ErrConfig, c.CompressionLevel)
	}
	return nil
}
