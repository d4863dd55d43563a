package node

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/outstore"
	"github.com/crawlnode/crawlnode/replica"
)

// OutputStoreConfig ships the node's WARC files and corpus shards to S3-compatible object
// storage (package outstore). Zero URL: outputs stay in the data directory only.
type OutputStoreConfig struct {
	// URL is s3://BUCKET/PREFIX.
	URL string
	// Endpoint is the S3 endpoint (http(s)://HOST[:PORT]); default AWS S3.
	Endpoint string
	// AccessKey, SecretKey and Region: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION.
	AccessKey, SecretKey, Region string
	// MaxUnshipped pauses fetching while more bytes of output than this are not yet in the
	// store (closed files waiting plus the open ones). Default 2 GiB.
	MaxUnshipped int64
	// DeleteAfterUpload removes local copies verified in the store (outstore.Config).
	DeleteAfterUpload bool
	// PartSize is the multipart part size. Default 32 MiB.
	PartSize uint64
	// RetryBase and RetryMax bound the upload backoff (defaults 1s and 1m).
	RetryBase, RetryMax time.Duration
}

// DefaultRotateEvery is Config.RotateEvery's default with an output store.
const DefaultRotateEvery = 5 * time.Minute

// OutputStoreStateFile is the local copy of the manifest in the data directory.
const OutputStoreStateFile = "outstore.json"

// dialOutputStore checks the output store's settings and the store itself before anything
// is created on disk: a bad URL, refused credentials, a missing bucket or an unreachable
// store is one error, and the node starts nothing.
func dialOutputStore(c OutputStoreConfig) (*outstore.Store, error) {
	if c.URL == "" {
		return nil, nil
	}
	tg, err := outstore.ParseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: --output-store: %v", ErrBadConfig, err)
	}
	st, err := outstore.Dial(context.Background(), tg, outstore.Conn{
		Endpoint: c.Endpoint, AccessKey: c.AccessKey, SecretKey: c.SecretKey, Region: c.Region,
		Timeout: 15 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	st.Close() // no idle connection held while the node starts; uploads connect again
	return st, nil
}

// openUploader reads the node's manifest from the store and prepares the uploader.
func (n *Node) openUploader(st *outstore.Store) error {
	if st == nil {
		return nil
	}
	c := n.cfg.OutputStore
	u, err := outstore.New(context.Background(), outstore.Config{
		Store: st, Node: n.dir.Node,
		WARCDir: n.dir.WARCDir(), CorpusDir: n.dir.CorpusDir(),
		StateFile:    filepath.Join(n.dir.Path, OutputStoreStateFile),
		PartSize:     c.PartSize,
		MaxUnshipped: c.MaxUnshipped,
		RetryBase:    c.RetryBase, RetryMax: c.RetryMax,
		DeleteAfterUpload: c.DeleteAfterUpload,
		CanDelete:         n.canDeleteLocal,
		Logger:            n.cfg.Logger, Now: n.cfg.Now,
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	n.uploader, n.outStore = u, st
	return nil
}

// shippedWARC reads from the output store which WARC files node shipped and how many of
// their bytes (replica.Shipped): a promotion of a lost node's partitions queues again the
// pages whose captures are not there. Nil without an output store.
func (n *Node) shippedWARC() replica.Shipped {
	st := n.outStore
	if st == nil {
		return nil
	}
	return func(ctx context.Context, node string) (map[string]int64, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		es, err := st.ReadManifest(ctx, node)
		if err != nil {
			return nil, err
		}
		files := make(map[string]int64, len(es))
		for _, e := range es {
			if e.Kind == outstore.KindWARC {
				files[e.Name] = e.Size
			}
		}
		return files, nil
	}
}

// canDeleteLocal keeps a WARC file while extract jobs may still read it back (loadPage):
// jobs name the file they read, and none are queued once the backlog is empty. Jobs for a
// closed file are all queued before it closes, so an empty backlog is final for it.
func (n *Node) canDeleteLocal(kind, _ string) bool {
	if kind == outstore.KindWARC {
		return n.stage.Backlog() == 0
	}
	return true
}

// runUploader runs the uploader until the returned stop is called.
func (n *Node) runUploader() (stop func()) {
	if n.uploader == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.uploader.Run(ctx) }()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

// flushOutputs closes the last WARC file (the extract stage has closed its shard) and
// ships what is left. A finished batch crawl waits until everything is in the store (or
// ctx ends: a signal); a crawl stopped by a signal waits at most flushGrace. What is not
// shipped stays on disk and goes up at the next start.
func (n *Node) flushOutputs(ctx context.Context, finished bool) {
	if n.uploader == nil {
		return
	}
	if err := n.warc.Close(); err != nil {
		n.log.Error("close WARC writer", "err", err)
	}
	if !finished {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), flushGrace)
		defer cancel()
	}
	st := n.uploader.Stats()
	n.log.Info("shipping the last outputs to the output store", "target", st.Target, "unshipped_bytes", st.UnshippedBytes)
	if err := n.uploader.Flush(ctx); err != nil {
		st = n.uploader.Stats()
		n.log.Error("outputs not yet in the output store stay in the data directory and are shipped at the next start",
			"unshipped_bytes", st.UnshippedBytes, "files", st.UnshippedFiles, "err", err)
	}
}

// flushGrace bounds the final upload of a crawl stopped by a signal.
const flushGrace = 10 * time.Second

// checkUnshipped pauses fetching while the unshipped bytes are above the bound (renewed
// every second by maintain) and says so once per pause.
func (n *Node) checkUnshipped() {
	if n.uploader == nil {
		return
	}
	if n.uploader.OverBound() {
		n.pausedUntil.Store(n.cfg.Now().Add(diskPause).UnixNano())
		if !n.storeBehind.Swap(true) {
			st := n.uploader.Stats()
			n.log.Error("fetching paused: too much output not yet in the output store; it resumes once uploads catch up",
				"unshipped_bytes", st.UnshippedBytes, "bound", st.MaxUnshipped, "store_state", st.State, "last_error", st.LastError)
		}
	} else if n.storeBehind.Swap(false) {
		n.log.Warn("output store caught up: fetching resumes")
	}
}

// outputStoreStatus is the uploader's state for /v1/crawl/status; nil without a store.
func (n *Node) outputStoreStatus() *api.OutputStoreStatus {
	if n.uploader == nil {
		return nil
	}
	s := n.uploader.Stats()
	return &api.OutputStoreStatus{
		Target: s.Target, State: s.State, LastError: s.LastError, LastUpload: s.LastUpload,
		UnshippedBytes: s.UnshippedBytes, UnshippedFiles: s.UnshippedFiles, MaxUnshippedBytes: s.MaxUnshipped,
		FilesInStore: s.Shipped, Uploads: s.Uploads, Failures: s.Failures, BytesUploaded: s.BytesUploaded,
		Paused: n.storeBehind.Load(),
	}
}
