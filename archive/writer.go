package archive

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
)

// Stats counts what a Writer wrote since Open.
type Stats struct {
	Files   int64 // files written to: created plus the one adopted on Open
	Records int64 // records appended, warcinfo records included
	Bytes   int64 // compressed bytes appended
}

// file is what the writer needs of an open WARC file; tests inject failing ones.
type file interface {
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Close() error
}

// segment is the open file records are appended to.
type segment struct {
	name string // base name
	path string // full path
	// index holds the CDXJ lines of the file's records, unsorted; written beside the file
	// (path + IndexSuffix) when the segment is closed.
	index  []string
	f      file
	size   int64     // end of the last complete record
	synced int64     // end of the last complete record that an fsync covered (guarded by Writer.mu)
	infoID string    // WARC-Record-ID of the file's warcinfo record
	gen    uint64    // changes with every segment, so writers notice a rotation
	opened time.Time // creation (or adoption on Open): MaxFileAge counts from here

	mu     sync.Mutex // guards f against Close while a background Sync runs
	closed bool
}

func (s *segment) sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if err := s.f.Sync(); err != nil {
		return ioErr("fsync", s.name, err)
	}
	return nil
}

func (s *segment) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	serr := s.f.Sync()
	cerr := s.f.Close()
	if serr != nil {
		return ioErr("fsync", s.name, serr)
	}
	if cerr != nil {
		return ioErr("close", s.name, cerr)
	}
	return nil
}

// closeSegment closes seg and writes its CDXJ index. An index that cannot be written is
// logged, not returned: the records are safe, and the next Open rebuilds the missing index.
func (w *Writer) closeSegment(seg *segment) error {
	err := seg.close()
	lines := seg.index
	seg.index = nil
	if ierr := writeIndexFile(seg.path+IndexSuffix, lines); ierr != nil {
		w.log.Error("cannot write cdxj index of warc file; the next start rebuilds it", "file", seg.name, "err", ierr)
	}
	return err
}

// Writer appends WARC records to rotating gzip files. Safe for concurrent use.
type Writer struct {
	cfg Config
	log *slog.Logger
	// openFile opens path with flag; a test hook for injecting failing files.
	openFile func(path string, flag int) (file, error)

	gzPool sync.Pool
	// storePool holds writers at gzip.NoCompression for responses whose payload is
	// compressed already (Exchange.PayloadCompressed).
	storePool sync.Pool
	bufPool   sync.Pool

	mu      sync.Mutex
	seg     *segment // nil until the next write creates a file
	nextSeq int
	gen     uint64
	dirty   bool
	closed  bool
	stats   Stats

	// encodeSerial makes write compress under a lock too: a benchmark hook to measure what
	// compressing outside the append lock buys.
	encodeSerial bool
	serialMu     sync.Mutex

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
	reindex  sync.WaitGroup // the background rebuild of missing indexes (Open)
}

func osOpenFile(path string, flag int) (file, error) { return os.OpenFile(path, flag, 0o644) }

// Open creates cfg.Dir if needed and prepares a Writer. It inspects the newest file of this
// prefix and node: a torn tail (a half-written or garbage record after the last complete one,
// left by a crash or a full disk) is cut back to the end of the last complete record, logging
// what was cut, and the writer appends to that file. If the damage is followed by further valid
// records it is not a torn tail: the file is left untouched (logged) and a new file is started.
// The writer never appends after garbage. Files are created lazily on the first write.
func Open(cfg Config) (*Writer, error) {
	return open(cfg, osOpenFile)
}

func open(cfg Config, openFile func(string, int) (file, error)) (*Writer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, ioErr("mkdir", cfg.Dir, err)
	}
	w := &Writer{cfg: cfg, log: cfg.Logger, openFile: openFile,
		stop: make(chan struct{}), done: make(chan struct{})}
	level := cfg.CompressionLevel
	w.gzPool.New = func() any {
		gz, _ := gzip.NewWriterLevel(io.Discard, level) // level checked by Validate
		return gz
	}
	w.storePool.New = func() any {
		gz, _ := gzip.NewWriterLevel(io.Discard, gzip.NoCompression)
		return gz
	}
	w.bufPool.New = func() any { return new(bytes.Buffer) }

	entries, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, ioErr("readdir", cfg.Dir, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	newest, next := planFiles(names, cfg.Prefix, cfg.NodeName)
	w.nextSeq = next
	if newest != "" {
		if err := w.adopt(newest); err != nil {
			return nil, err
		}
	}
	if missing := w.missingIndexes(names); len(missing) > 0 {
		w.reindex.Add(1)
		go w.rebuildIndexes(missing)
	}
	if cfg.SyncInterval > 0 || cfg.MaxFileAge > 0 {
		go w.syncLoop()
	} else {
		close(w.done)
	}
	return w, nil
}

// adopt repairs the newest existing file and makes it the current segment when it is fit to
// append to.
func (w *Writer) adopt(name string) error {
	path := filepath.Join(w.cfg.Dir, name)
	infoID := ""
	var index []string
	size, scanErr := scanFile(path, func(off, n int64, r *Record) error {
		if off == 0 && r.Type == "warcinfo" {
			infoID = r.ID
		}
		if e, ok := entryOf(r, name, off, n); ok {
			index = append(index, e.Line())
		}
		return nil
	})
	if scanErr != nil && !errors.Is(scanErr, ErrCorrupt) && !errors.Is(scanErr, ErrTruncated) {
		return scanErr // cannot read it: say so rather than guess
	}
	fi, err := os.Stat(path)
	if err != nil {
		return ioErr("stat", path, err)
	}
	if scanErr != nil {
		if more, at := validRecordAfter(path, size); more {
			w.log.Error("warc file damaged before further valid records; leaving it untouched and starting a new file",
				"file", name, "damage_offset", size, "next_valid_offset", at, "err", scanErr)
			return nil
		}
		w.log.Warn("cutting torn tail of warc file", "file", name, "offset", size,
			"bytes_cut", fi.Size()-size, "err", scanErr)
	}
	f, err := w.openFile(path, os.O_RDWR)
	if err != nil {
		return ioErr("open", path, err)
	}
	if scanErr != nil {
		if err := f.Truncate(size); err != nil {
			_ = f.Close()
			return ioErr("truncate", path, err)
		}
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return ioErr("fsync", path, err)
		}
	}
	if size == 0 || infoID == "" || size >= w.cfg.MaxFileSize {
		// Nothing complete left (remove the empty file), or not ours to append to, or full.
		_ = f.Close()
		if size == 0 {
			if err := os.Remove(path); err != nil {
				return ioErr("remove", path, err)
			}
			w.log.Warn("removed warc file without a complete record", "file", name)
		}
		return nil
	}
	// Records will be appended: an index written at an earlier close is stale from now on
	// (a crash before the next close leaves none, and the next Open rebuilds it).
	if err := os.Remove(path + IndexSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = f.Close()
		return ioErr("remove stale index", path+IndexSuffix, err)
	}
	w.gen++
	w.seg = &segment{name: name, path: path, f: f, size: size, synced: size, infoID: infoID, gen: w.gen, index: index, opened: w.cfg.Now()}
	w.stats.Files++
	return nil
}

// missingIndexes lists the files of this prefix and node, other than the current segment,
// that have no CDXJ index beside them: files closed by a crash, or written before indexes were.
func (w *Writer) missingIndexes(names []string) []string {
	have := make(map[string]bool, len(names))
	for _, n := range names {
		have[n] = true
	}
	var missing []string
	for _, n := range names {
		p, ok := parseFileName(n)
		if !ok || p.prefix != w.cfg.Prefix || p.node != w.cfg.NodeName || have[n+IndexSuffix] {
			continue
		}
		if w.seg != nil && w.seg.name == n {
			continue
		}
		missing = append(missing, filepath.Join(w.cfg.Dir, n))
	}
	return missing
}

// rebuildIndexes writes the missing indexes from the WARC files, one file at a time, until
// done or Close. A damaged file gets no index (logged with the offset of the damage); export
// skips it and says so.
func (w *Writer) rebuildIndexes(paths []string) {
	defer w.reindex.Done()
	for _, p := range paths {
		select {
		case <-w.stop:
			return
		default:
		}
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			continue // removed by adopt: it held no complete record
		}
		if err := RebuildIndex(p); err != nil {
			w.log.Error("cannot build cdxj index of warc file", "file", filepath.Base(p), "err", err)
			continue
		}
		w.log.Info("rebuilt missing cdxj index", "file", filepath.Base(p))
	}
}

// validRecordAfter reports whether a valid gzip member holding a valid WARC record starts
// somewhere after off in path (looking for the gzip magic bytes), and where. It streams the
// file in chunks, so a damaged 1 GiB file does not have to fit in memory.
func validRecordAfter(path string, off int64) (bool, int64) {
	f, err := os.Open(path)
	if err != nil {
		return false, 0
	}
	defer func() { _ = f.Close() }()
	magic := []byte{0x1f, 0x8b, 0x08}
	chunk := make([]byte, 1<<20)
	for pos := off + 1; ; {
		n, err := f.ReadAt(chunk, pos)
		if n < len(magic) {
			return false, 0
		}
		b := chunk[:n]
		for i := 0; ; {
			j := bytes.Index(b[i:], magic)
			if j < 0 {
				break
			}
			at := pos + int64(i+j)
			if memberHoldsRecord(f, at) {
				return true, at
			}
			i += j + 1
		}
		if err != nil { // io.EOF: nothing more to read
			return false, 0
		}
		pos += int64(n - len(magic) + 1) // overlap so a magic split across chunks is found
	}
}

// memberHoldsRecord reports whether a gzip member at off in f decodes to a valid WARC record.
func memberHoldsRecord(f *os.File, off int64) bool {
	zr, err := gzip.NewReader(bufio.NewReader(io.NewSectionReader(f, off, 1<<62)))
	if err != nil {
		return false
	}
	zr.Multistream(false)
	data, err := io.ReadAll(zr)
	if err != nil {
		return false
	}
	_, err = parseRecord(data)
	return err == nil
}

func (w *Writer) syncLoop() {
	defer close(w.done)
	every := w.cfg.SyncInterval
	if w.cfg.MaxFileAge > 0 && (every < 0 || every > time.Second) {
		every = time.Second // the age check needs the loop even without periodic fsync
	}
	t := time.NewTicker(every)
	defer t.Stop()
	syncTicks, ticks := int64(0), int64(0) // fsync every syncTicks ticks; 0: never
	if w.cfg.SyncInterval > 0 {
		syncTicks = max(1, int64(w.cfg.SyncInterval/every))
	}
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.rotateIfOld()
			w.mu.Lock()
			dirty := w.dirty
			w.mu.Unlock()
			if ticks++; dirty && syncTicks > 0 && ticks%syncTicks == 0 {
				if err := w.Sync(); err != nil {
					w.log.Error("periodic fsync failed", "err", err)
				}
			}
		}
	}
}

// rotateIfOld closes the current file when it is older than MaxFileAge; the next write
// starts a new one.
func (w *Writer) rotateIfOld() {
	if w.cfg.MaxFileAge <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	seg := w.seg
	if seg == nil || w.closed || w.cfg.Now().Sub(seg.opened) < w.cfg.MaxFileAge {
		return
	}
	w.seg = nil
	if err := w.closeSegment(seg); err != nil {
		w.log.Error("closing warc file at its age limit", "file", seg.name, "err", err)
	}
}

// startSegmentLocked creates a new file and writes its warcinfo record. On failure no file is
// left behind.
func (w *Writer) startSegmentLocked() error {
	now := w.cfg.Now()
	name := fileName(w.cfg.Prefix, w.cfg.NodeName, now, w.nextSeq)
	w.nextSeq++
	path := filepath.Join(w.cfg.Dir, name)
	f, err := w.openFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return ioErr("create", path, err)
	}
	buf := w.bufPool.Get().(*bytes.Buffer)
	defer w.putBuf(buf)
	buf.Reset()
	gz := w.gzPool.Get().(*gzip.Writer)
	id := newRecordID()
	err = encodeWarcinfo(buf, gz, &w.cfg, id, name, now)
	w.gzPool.Put(gz)
	if err == nil {
		if _, werr := f.WriteAt(buf.Bytes(), 0); werr != nil {
			err = ioErr("write", path, werr)
		}
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return err
	}
	w.gen++
	w.seg = &segment{name: name, path: path, f: f, size: int64(buf.Len()), infoID: id, gen: w.gen, opened: now}
	w.stats.Files++
	w.stats.Records++
	w.stats.Bytes += int64(buf.Len())
	w.dirty = true
	return nil
}

func (w *Writer) putBuf(b *bytes.Buffer) {
	if b.Cap() <= 8<<20 {
		w.bufPool.Put(b)
	}
}

// snapshot returns the warcinfo id and generation of the current segment, creating one if
// needed.
func (w *Writer) snapshot() (string, uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return "", 0, ErrClosed
	}
	if w.seg == nil {
		if err := w.startSegmentLocked(); err != nil {
			return "", 0, err
		}
	}
	return w.seg.infoID, w.seg.gen, nil
}

// WriteExchange appends a response record and (if ex.Request is set) a request record, linked
// by WARC-Concurrent-To. When it returns nil the records have been written to the file (see
// Config.SyncInterval for when they are fsynced). It returns the response record's location
// and its payload digest ("sha1:BASE32"). I/O errors wrap ErrIO or ErrDiskFull; after one the
// file is cut back to its last complete record (or, if that fails, abandoned for a new file).
func (w *Writer) WriteExchange(ex Exchange) (Location, string, error) {
	if err := checkExchange(&ex); err != nil {
		return Location{}, "", err
	}
	loc, enc, err := w.write(&ex, nil)
	if err != nil {
		return Location{}, "", err
	}
	return loc, enc, nil
}

// WriteRevisit appends a revisit record (HTTP response headers only, no payload) that refers to
// an earlier capture, plus a request record if ex.Request is set. ex.ResponseBody is ignored.
func (w *Writer) WriteRevisit(ex Exchange, ref Revisit) (Location, error) {
	if err := checkExchange(&ex); err != nil {
		return Location{}, err
	}
	if err := checkRevisit(&ref); err != nil {
		return Location{}, err
	}
	loc, _, err := w.write(&ex, &ref)
	return loc, err
}

// write compresses the records outside the lock into a private buffer, then appends the buffer
// under the lock. If the file rotated in between, the records name the wrong warcinfo record and
// are re-encoded under the lock (once per rotation at most per writer).
func (w *Writer) write(ex *Exchange, ref *Revisit) (Location, string, error) {
	if w.encodeSerial {
		w.serialMu.Lock()
		defer w.serialMu.Unlock()
	}
	infoID, gen, err := w.snapshot()
	if err != nil {
		return Location{}, "", err
	}
	buf := w.bufPool.Get().(*bytes.Buffer)
	defer w.putBuf(buf)
	buf.Reset()
	gz := w.gzPool.Get().(*gzip.Writer)
	defer w.gzPool.Put(gz)
	var store *gzip.Writer
	if w.cfg.CompressionLevel != gzip.NoCompression && ref == nil && ex.PayloadCompressed {
		store = w.storePool.Get().(*gzip.Writer)
		defer w.storePool.Put(store)
	}
	enc, err := encodeExchange(buf, gz, store, ex, ref, infoID, w.cfg.Now)
	if err != nil {
		return Location{}, "", err
	}
	enc.gen = gen
	enc.indexPrefix = exchangeLinePrefix(ex, ref, enc)

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return Location{}, "", ErrClosed
	}
	if w.seg == nil || w.seg.gen != enc.gen {
		if w.seg == nil {
			if err := w.startSegmentLocked(); err != nil {
				return Location{}, "", err
			}
		}
		buf.Reset()
		if enc, err = encodeExchange(buf, gz, store, ex, ref, w.seg.infoID, w.cfg.Now); err != nil {
			return Location{}, "", err
		}
		enc.gen = w.seg.gen
		enc.indexPrefix = exchangeLinePrefix(ex, ref, enc)
	}
	loc, err := w.appendLocked(enc)
	if err != nil {
		return Location{}, "", err
	}
	return loc, enc.payloadDigest, nil
}

// exchangeLinePrefix is the start of the CDXJ line of the response or revisit record in enc.
func exchangeLinePrefix(ex *Exchange, ref *Revisit, enc *encoded) string {
	status, mt := httpStatusAndType(ex.ResponseHeader)
	e := IndexEntry{URL: ex.URL, Time: enc.date, Status: status, Mime: mt, Digest: enc.payloadDigest, Length: enc.mainLen}
	if ref != nil {
		e.Mime, e.Digest = "warc/revisit", ref.PayloadDigest
	}
	return linePrefix(e)
}

// appendLocked writes enc at the end of the current segment. A failed or short write is cut
// back off the file so the next append follows a complete record; if even that fails the
// segment is abandoned (the next write starts a new file) and the damage is logged.
func (w *Writer) appendLocked(enc *encoded) (Location, error) {
	seg := w.seg
	off := seg.size
	b := enc.buf.Bytes()
	if _, err := seg.f.WriteAt(b, off); err != nil {
		werr := ioErr("write", seg.name, err)
		if terr := seg.f.Truncate(off); terr != nil {
			w.log.Error("cannot cut failed write back off warc file; abandoning it",
				"file", seg.name, "offset", off, "write_err", err, "truncate_err", terr)
			_ = w.closeSegment(seg)
			w.seg = nil
			return Location{}, fmt.Errorf("%w (truncate back to %d failed: %v)", werr, off, terr)
		}
		return Location{}, werr
	}
	seg.size += int64(len(b))
	seg.index = append(seg.index, lineAt(enc.indexPrefix, off+enc.mainOff, seg.name))
	w.dirty = true
	w.stats.Records += enc.records
	w.stats.Bytes += int64(len(b))
	loc := Location{File: seg.name, Offset: off + enc.mainOff, Length: enc.mainLen}
	if seg.size >= w.cfg.MaxFileSize {
		// Rotate now; the next write creates the new file. The records above are written.
		w.seg = nil
		if err := w.closeSegment(seg); err != nil {
			w.log.Error("closing full warc file failed", "file", seg.name, "err", err)
		}
	}
	return loc, nil
}

// Sync fsyncs the current file.
func (w *Writer) Sync() error {
	w.mu.Lock()
	seg := w.seg
	w.dirty = false
	var size int64
	if seg != nil {
		size = seg.size
	}
	w.mu.Unlock()
	if seg == nil {
		return nil
	}
	if err := seg.sync(); err != nil {
		return err
	}
	w.mu.Lock()
	seg.synced = max(seg.synced, size)
	w.mu.Unlock()
	return nil
}

// Durable names the open file and how many of its bytes are durable: complete records that
// an fsync covered (see Sync), so a reader of that prefix never meets a torn or unsynced
// record. name is "" when no file is open; every other file in Dir is closed and complete.
func (w *Writer) Durable() (name string, size int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seg == nil {
		return "", 0
	}
	return w.seg.name, w.seg.synced
}

// Stats returns counters since Open.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Close stops the sync loop, fsyncs and closes the current file. Later writes return
// ErrClosed; a second Close returns nil.
func (w *Writer) Close() error {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
	w.reindex.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.seg == nil {
		return nil
	}
	seg := w.seg
	w.seg = nil
	return w.closeSegment(seg)
}
