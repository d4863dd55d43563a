package outstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/crawlnode/crawlnode/internal/durablefile"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/minio/minio-go/v7"
)

// Defaults of Config.
const (
	DefaultPartSize     = 32 << 20
	MinPartSize         = 5 << 20 // S3's smallest part
	DefaultMaxUnshipped = int64(2) << 30
	DefaultScanInterval = 2 * time.Second
	DefaultRetryBase    = time.Second
	DefaultRetryMax     = time.Minute
)

// Config configures an Uploader.
type Config struct {
	Store *Store // from Dial (required)
	Node  string // the node's name: its manifest and key space (required)
	// WARCDir and CorpusDir are the node's output directories (required).
	WARCDir, CorpusDir string
	// StateFile is the local copy of the manifest (with the target), which export --data
	// reads to say which files are only in the store. Empty: none is kept.
	StateFile string
	// PartSize is the multipart part size; files up to it go in one PUT. Default 32 MiB,
	// at least 5 MiB. Each upload holds about one part in memory per parallel part.
	PartSize uint64
	// MaxUnshipped is the bound OverBound reports against: bytes of output not yet in the
	// store (closed files waiting plus the open ones). Default 2 GiB.
	MaxUnshipped int64
	// DeleteAfterUpload removes a local file once it is verified in the store and listed in
	// the manifest, when CanDelete allows it. The newest file of each kind stays, so file
	// numbering continues after a restart and no name is ever reused in the store.
	DeleteAfterUpload bool
	// CanDelete, when set, is asked before a local file is removed (the node: no extract
	// job still reads the WARC file). A file refused now is asked again at the next scan.
	CanDelete func(kind, path string) bool
	// ScanInterval is how often the directories are scanned without a Wake. Default 2s.
	ScanInterval time.Duration
	// RetryBase and RetryMax bound the backoff after a failed upload: RetryBase doubled per
	// failure in a row up to RetryMax, each wait drawn from [half, full] (jitter).
	// Defaults 1s and 1m. Uploads are retried for as long as the node runs.
	RetryBase, RetryMax time.Duration
	Logger              *slog.Logger
	Now                 func() time.Time

	// corrupt, when set (tests), wraps the reader of an upload, to show that a damaged
	// upload is caught by the ETag check.
	corrupt func(name string, r io.Reader) io.Reader
}

func (c *Config) setDefaults() error {
	if c.Store == nil || c.Node == "" || c.WARCDir == "" || c.CorpusDir == "" {
		return fmt.Errorf("%w: uploader needs a store, a node name and both output directories", ErrConfig)
	}
	if c.PartSize == 0 {
		c.PartSize = DefaultPartSize
	}
	if c.PartSize < MinPartSize {
		return fmt.Errorf("%w: part size %d below S3's minimum of 5 MiB", ErrConfig, c.PartSize)
	}
	if c.MaxUnshipped <= 0 {
		c.MaxUnshipped = DefaultMaxUnshipped
	}
	if c.ScanInterval <= 0 {
		c.ScanInterval = DefaultScanInterval
	}
	if c.RetryBase <= 0 {
		c.RetryBase = DefaultRetryBase
	}
	if c.RetryMax < c.RetryBase {
		c.RetryMax = max(DefaultRetryMax, c.RetryBase)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Stats is the uploader's state for status and metrics.
type Stats struct {
	Target         string    `json:"target"`
	State          string    `json:"state"` // "ok", "uploading" or "retrying"
	LastError      string    `json:"last_error,omitempty"`
	LastUpload     time.Time `json:"last_upload,omitzero"`
	UnshippedBytes int64     `json:"unshipped_bytes"`
	UnshippedFiles int       `json:"unshipped_files"` // closed files waiting
	MaxUnshipped   int64     `json:"max_unshipped_bytes"`
	Shipped        int       `json:"files_in_store"`
	Uploads        int64     `json:"uploads"`  // files uploaded and verified this run
	Failures       int64     `json:"failures"` // failed attempts this run
	BytesUploaded  int64     `json:"bytes_uploaded"`
}

// Uploader ships closed output files to the store and keeps the node's manifest.
type Uploader struct {
	cfg  Config
	log  *slog.Logger
	wake chan struct{}

	shipMu  sync.Mutex
	mu      sync.Mutex
	entries []Entry        // the manifest, in upload order
	byKey   map[string]int // key -> index in entries
	stats   Stats
}

// New reads the node's manifest from the store (what was shipped before, by any earlier
// run) and prepares an Uploader; nothing is uploaded before Run.
func New(ctx context.Context, cfg Config) (*Uploader, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	es, err := cfg.Store.ReadManifest(ctx, cfg.Node)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, cfg.Store.Target(), err)
	}
	u := &Uploader{cfg: cfg, log: cfg.Logger.With("component", "outstore"), wake: make(chan struct{}, 1), byKey: map[string]int{}}
	for _, e := range es {
		u.put(e)
	}
	u.stats = Stats{Target: cfg.Store.Target().String(), State: "ok", MaxUnshipped: cfg.MaxUnshipped, Shipped: len(u.entries)}
	return u, nil
}

func (u *Uploader) put(e Entry) {
	if i, ok := u.byKey[e.Key]; ok {
		u.entries[i] = e
		return
	}
	u.byKey[e.Key] = len(u.entries)
	u.entries = append(u.entries, e)
}

// Close drops the idle connections to the store; call it after Run and Flush returned.
func (u *Uploader) Close() { u.cfg.Store.Close() }

// Wake asks for a scan now (a file was just closed).
func (u *Uploader) Wake() {
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// Stats returns a copy of the current state.
func (u *Uploader) Stats() Stats {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stats
}

// OverBound reports whether the unshipped bytes passed MaxUnshipped (fetching should pause).
func (u *Uploader) OverBound() bool {
	st := u.Stats()
	return st.UnshippedBytes > st.MaxUnshipped
}

// Manifest returns a copy of the node's manifest as this uploader knows it.
func (u *Uploader) Manifest() []Entry {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.entries)
}

// unit is one upload: a WARC file with its CDXJ index, or a corpus shard.
type unit struct {
	kind  string
	paths []string // local files, shipped in order; the manifest lists them after the last
}

// Run ships closed files until ctx ends: a scan every ScanInterval or on Wake, each pending
// file uploaded, verified and listed; after a failure it backs off and tries again.
func (u *Uploader) Run(ctx context.Context) {
	fails := 0
	for {
		pending, err := u.scan()
		if err != nil {
			u.log.Error("scanning output directories", "err", err)
		}
		for _, p := range pending {
			if ctx.Err() != nil {
				return
			}
			if err := u.ship(ctx, p); err != nil {
				if ctx.Err() != nil {
					return
				}
				fails++
				wait := u.backoff(fails)
				u.failed(err, wait)
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				break // rescan: the store may be back, files may have changed
			}
			fails = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-u.wake:
		case <-time.After(u.cfg.ScanInterval):
		}
	}
}

// Flush ships every file closed now and returns nil once none is left, or ctx's error.
// Failures are retried with the same backoff as Run.
func (u *Uploader) Flush(ctx context.Context) error {
	fails := 0
	for {
		pending, err := u.scan()
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			return nil
		}
		for _, p := range pending {
			if err := u.ship(ctx, p); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				fails++
				wait := u.backoff(fails)
				u.failed(err, wait)
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(wait):
				}
				break
			}
			fails = 0
		}
	}
}

func (u *Uploader) backoff(fails int) time.Duration {
	d := u.cfg.RetryBase << min(fails-1, 20)
	if d <= 0 || d > u.cfg.RetryMax {
		d = u.cfg.RetryMax
	}
	return d/2 + rand.N(d/2+1)
}

func (u *Uploader) failed(err error, wait time.Duration) {
	u.mu.Lock()
	first := u.stats.State != "retrying"
	u.stats.State = "retrying"
	u.stats.LastError = err.Error()
	u.stats.Failures++
	u.mu.Unlock()
	if first {
		u.log.Error("upload to the output store failed; retrying with backoff, the crawl goes on", "err", err, "retry_in", wait.Round(time.Millisecond))
	} else {
		u.log.Warn("upload still failing", "err", err, "retry_in", wait.Round(time.Millisecond))
	}
}

// scan lists the closed files not yet in the manifest (as they are now: a file that grew
// since is shipped again), updates the unshipped counts, and removes shipped files when
// DeleteAfterUpload allows.
func (u *Uploader) scan() ([]unit, error) {
	var pending []unit
	var unshipped int64
	var firstErr error
	warcs, err := readDir(u.cfg.WARCDir)
	if err != nil {
		firstErr = err
	}
	newestWARC := newest(warcs, func(n string) bool { return strings.HasSuffix(n, ".warc.gz") })
	for name, size := range warcs {
		if !strings.HasSuffix(name, ".warc.gz") {
			continue
		}
		idxSize, closed := warcs[name+".cdxj"]
		if !closed { // open (or its index is being rebuilt)
			unshipped += size
			continue
		}
		if u.shipped(KindWARC, name, size) && u.shipped(KindCDXJ, name+".cdxj", idxSize) {
			if name != newestWARC {
				u.maybeDelete(KindWARC, filepath.Join(u.cfg.WARCDir, name), filepath.Join(u.cfg.WARCDir, name+".cdxj"))
			}
			continue
		}
		unshipped += size + idxSize
		pending = append(pending, unit{KindWARC, []string{filepath.Join(u.cfg.WARCDir, name), filepath.Join(u.cfg.WARCDir, name+".cdxj")}})
	}
	shards, err := readDir(u.cfg.CorpusDir)
	if err != nil && firstErr == nil {
		firstErr = err
	}
	isShard := func(n string) bool { return strings.HasPrefix(n, "corpus-") && strings.HasSuffix(n, ".jsonl.zst") }
	newestShard := newest(shards, isShard)
	for name, size := range shards {
		switch {
		case strings.HasPrefix(name, "corpus-") && strings.HasSuffix(name, ".partial"):
			unshipped += size
		case !isShard(name):
		case u.shipped(KindCorpus, name, size):
			if name != newestShard {
				u.maybeDelete(KindCorpus, filepath.Join(u.cfg.CorpusDir, name))
			}
		default:
			unshipped += size
			pending = append(pending, unit{KindCorpus, []string{filepath.Join(u.cfg.CorpusDir, name)}})
		}
	}
	sort.Slice(pending, func(i, k int) bool { return pending[i].paths[0] < pending[k].paths[0] })
	u.mu.Lock()
	u.stats.UnshippedBytes, u.stats.UnshippedFiles = unshipped, len(pending)
	if len(pending) == 0 && u.stats.State == "uploading" {
		u.stats.State = "ok"
	}
	u.mu.Unlock()
	return pending, firstErr
}

// readDir maps the regular files of dir to their sizes; a missing dir is empty.
func readDir(dir string) (map[string]int64, error) {
	es, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(es))
	for _, e := range es {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out[e.Name()] = fi.Size()
	}
	return out, nil
}

// newest is the greatest name that ok accepts: names start with a creation time or a
// zero-padded sequence number, so it is the latest file.
func newest(files map[string]int64, ok func(string) bool) string {
	best := ""
	for n := range files {
		if ok(n) && n > best {
			best = n
		}
	}
	return best
}

func (u *Uploader) shipped(kind, name string, size int64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	i, ok := u.byKey[u.cfg.Store.objectKey(u.cfg.Node, kind, name)]
	return ok && u.entries[i].Size == size
}

func (u *Uploader) maybeDelete(kind string, paths ...string) {
	if !u.cfg.DeleteAfterUpload || (u.cfg.CanDelete != nil && !u.cfg.CanDelete(kind, paths[0])) {
		return
	}
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			u.log.Warn("cannot remove shipped local file", "file", p, "err", err)
			return
		}
	}
	u.log.Info("removed local copy verified in the output store", "file", filepath.Base(paths[0]))
}

// ship uploads the files of p, verifies each, then lists them in the manifest.
func (u *Uploader) ship(ctx context.Context, p unit) error {
	u.shipMu.Lock() // Run and Flush may overlap; one upload at a time keeps the manifest in order
	defer u.shipMu.Unlock()
	u.mu.Lock()
	if u.stats.State == "ok" {
		u.stats.State = "uploading"
	}
	u.mu.Unlock()
	var es []Entry
	var total int64
	for i, path := range p.paths {
		kind := p.kind
		if p.kind == KindWARC && i == 1 {
			kind = KindCDXJ
		}
		e, err := u.upload(ctx, kind, path)
		if err != nil {
			return err
		}
		es = append(es, e)
		total += e.Size
	}
	if p.kind == KindWARC && len(es) == 2 {
		es[0].Records = es[1].Records // the index has one line per response/revisit record
	}
	u.mu.Lock()
	for _, e := range es {
		u.put(e)
	}
	manifest := slices.Clone(u.entries)
	u.mu.Unlock()
	if err := u.cfg.Store.writeManifest(ctx, u.cfg.Node, manifest); err != nil {
		return err
	}
	u.saveState(manifest)
	u.mu.Lock()
	u.stats.Uploads += int64(len(es))
	u.stats.BytesUploaded += total
	u.stats.LastUpload = u.cfg.Now()
	u.stats.Shipped = len(manifest)
	if u.stats.State == "retrying" {
		u.log.Info("output store reachable again; uploads resume")
	}
	u.stats.State, u.stats.LastError = "uploading", ""
	u.mu.Unlock()
	u.log.Info("uploaded to the output store", "file", filepath.Base(p.paths[0]), "bytes", total)
	return nil
}

// upload puts one file and verifies it: the ETag of the PUT and of a fresh HEAD must be
// the one computed locally (MD5, or MD5 of the parts' MD5s with the same part size), and
// the size must match. The SHA-256 goes into the manifest and the object's metadata, so a
// reader verifies the whole content.
func (u *Uploader) upload(ctx context.Context, kind, path string) (Entry, error) {
	name := filepath.Base(path)
	sums, err := sumFile(path, u.cfg.PartSize)
	if err != nil {
		return Entry{}, fmt.Errorf("read %s: %w", name, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return Entry{}, fmt.Errorf("read %s: %w", name, err)
	}
	defer f.Close()
	var r io.Reader = io.NewSectionReader(f, 0, sums.size)
	if u.cfg.corrupt != nil {
		r = u.cfg.corrupt(name, r)
	}
	key := u.cfg.Store.objectKey(u.cfg.Node, kind, name)
	bucket := u.cfg.Store.target.Bucket
	info, err := u.cfg.Store.client.PutObject(ctx, bucket, key, r, sums.size, minio.PutObjectOptions{
		PartSize: u.cfg.PartSize, NumThreads: 2, ContentType: contentType(kind),
		UserMetadata: map[string]string{"sha256": sums.sha256},
	})
	if err != nil {
		return Entry{}, fmt.Errorf("upload %s: %s", name, describe(err))
	}
	if got := strings.Trim(info.ETag, `"`); got != sums.etag || info.Size != sums.size {
		return Entry{}, fmt.Errorf("upload %s: store holds %d bytes etag %s, local file is %d bytes etag %s", name, info.Size, got, sums.size, sums.etag)
	}
	st, err := u.cfg.Store.client.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return Entry{}, fmt.Errorf("verify %s: %s", name, describe(err))
	}
	if got := strings.Trim(st.ETag, `"`); got != sums.etag || st.Size != sums.size {
		return Entry{}, fmt.Errorf("verify %s: store holds %d bytes etag %s, local file is %d bytes etag %s", name, st.Size, got, sums.size, sums.etag)
	}
	return Entry{Key: key, Name: name, Kind: kind, Size: sums.size, SHA256: sums.sha256, ETag: sums.etag,
		Records: countRecords(kind, path), Uploaded: u.cfg.Now().UTC()}, nil
}

func contentType(kind string) string {
	switch kind {
	case KindWARC:
		return "application/warc"
	case KindCorpus:
		return "application/zstd"
	}
	return "text/plain"
}

// countRecords counts a CDXJ index's lines or a shard's records; -1 if it cannot.
func countRecords(kind, path string) int64 {
	if kind == KindWARC {
		return -1 // taken from its index
	}
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	var r io.Reader = f
	if kind == KindCorpus {
		dec, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return -1
		}
		defer dec.Close()
		r = dec
	}
	var n int64
	buf := make([]byte, 64<<10)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		k, err := br.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if err == io.EOF {
			return n
		}
		if err != nil {
			return -1
		}
	}
}

// State is the local copy of the manifest: export --data reads it to say which files are
// only in the store.
type State struct {
	Target  string  `json:"target"`
	Entries []Entry `json:"entries"`
}

func (u *Uploader) saveState(es []Entry) {
	if u.cfg.StateFile == "" {
		return
	}
	b, err := json.Marshal(State{Target: u.cfg.Store.Target().String(), Entries: es})
	if err == nil {
		err = durablefile.WriteFile(u.cfg.StateFile, b, 0o644)
	}
	if err != nil {
		u.log.Warn("cannot save the local copy of the manifest", "file", u.cfg.StateFile, "err", err)
	}
}

// ReadState reads a local manifest copy; a missing file is no state (nil, nil).
func ReadState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &st, nil
}
