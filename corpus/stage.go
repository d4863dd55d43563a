package corpus

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// ErrInvalidJob is returned by Enqueue for a job without a URL.
var ErrInvalidJob = errors.New("corpus: invalid job")

var statsKey = []byte{prefixState, 's', 't', 'a', 't', 's'}

// Stats are the stage's counters. The page counters survive restarts (they are committed with
// the records); the rates cover the current run.
type Stats struct {
	Backlog   int
	Processed int64 // records written (every outcome)
	Kept      int64 // text records: not rejected, not a duplicate
	ExactDup  int64
	NearDup   int64
	OptedOut  int64            // pages with at least one opt-out signal (kept or not)
	Rejected  map[string]int64 // by reason
	// ExtractPanics counts this run's pages that panicked the extractor (each also counts in
	// Rejected["extract_panic"], which survives restarts).
	ExtractPanics int64
	// PagesPerSec is this run's processed pages per wall-clock second since Start.
	PagesPerSec float64
	// PagesPerCoreSec is pages per second of one worker's busy time (load + extraction), i.e. the
	// throughput one core gives.
	PagesPerCoreSec float64
	// ExtractTime is this run's summed worker busy time.
	ExtractTime time.Duration
	// Shards is the number of shards closed this run.
	Shards int
	// Held is this run's summed time workers waited, between pages, for the machine to
	// leave CPU idle (Config.DeferBelowIdle); HeldSpells counts the times the gate closed.
	Held       time.Duration
	HeldSpells int64
	// DecideFailures counts this run's failed Decider calls (each retried with backoff).
	DecideFailures int64
}

type persistedStats struct {
	Processed, Kept, ExactDup, NearDup, OptedOut int64
	Rejected                                     map[string]int64
}

type dispatched struct {
	seq uint64
	job Job
}

type result struct {
	seq     uint64
	a       analysis
	busy    time.Duration
	dropped bool // cancelled mid-job: the job stays in the backlog
}

// Stage is the extract stage: a durable backlog of fetched pages, a pool of extraction
// workers and one committer that makes the duplicate decisions and writes the shards.
type Stage struct {
	cfg Config
	db  *badger.DB
	// pendingPages are the per-URL page records ('u' family) of the records written since
	// the last commit; they are written in the commit's batch.
	pendingPages []pageEntry
	extractor    *extractor
	near         *BadgerNearIndex
	log          *slog.Logger

	// testHook, when set (tests only, before Start), is called at the named points of the
	// committer; an error stops the stage there as a crash would (no further commit, the open
	// shard is left .partial and unfinished).
	testHook func(point string) error

	mu      sync.Mutex // Enqueue order, lifecycle
	nextSeq uint64
	started bool
	closed  bool

	backlog     atomic.Int64
	inflight    atomic.Int64
	decideFails atomic.Int64 // Decider calls that failed (retried)
	notify      chan struct{}
	work        chan dispatched
	results     chan result
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	stopped     chan struct{} // closed when the committer exits
	gate        *cpuGate      // nil: workers never wait for idle CPU
	draining    atomic.Int32  // Drain calls waiting: the gate is open

	statsMu   sync.Mutex
	stats     persistedStats
	runDone   int64
	runBusy   time.Duration
	runShards int
	startedAt time.Time
	fatal     error

	// durable is the open shard's flushed part (nil: no shard open); set by the committer.
	durable atomic.Pointer[DurableShard]

	// committer-owned
	shard    *shardWriter
	shardSeq int
	pending  []uint64
}

// New opens the stage on cfg.DB: it counts the backlog and loads the counters. Nothing runs
// until Start; Enqueue works at once.
func New(cfg Config) (*Stage, error) {
	cfg.Filters.Languages = append([]string(nil), cfg.Filters.Languages...)
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	s := &Stage{
		cfg:       cfg,
		db:        cfg.DB,
		extractor: newExtractor(&cfg),
		near:      NewBadgerNearIndex(cfg.DB),
		log:       cfg.Logger.With("component", "corpus"),
		notify:    make(chan struct{}, 1),
		stopped:   make(chan struct{}),
		stats:     persistedStats{Rejected: map[string]int64{}},
	}
	err := cfg.DB.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte{prefixJob}
		it := txn.NewIterator(opts)
		defer it.Close()
		n := int64(0)
		for it.Seek(opts.Prefix); it.ValidForPrefix(opts.Prefix); it.Next() {
			n++
			if seq := binary.BigEndian.Uint64(it.Item().Key()[1:]); seq >= s.nextSeq {
				s.nextSeq = seq + 1
			}
		}
		s.backlog.Store(n)
		item, err := txn.Get(statsKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return json.Unmarshal(v, &s.stats) })
	})
	if err != nil {
		return nil, fmt.Errorf("corpus: open: %w", err)
	}
	if s.stats.Rejected == nil {
		s.stats.Rejected = map[string]int64{}
	}
	return s, nil
}

func jobKey(seq uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixJob
	binary.BigEndian.PutUint64(k[1:], seq)
	return k
}

// Enqueue adds jobs to the durable backlog: they are committed to Badger when it returns.
// All or none: past MaxBacklog it returns ErrBacklogFull and queues nothing.
func (s *Stage) Enqueue(jobs ...Job) error {
	if len(jobs) == 0 {
		return nil
	}
	vals := make([][]byte, len(jobs))
	for i := range jobs {
		if jobs[i].URL == "" {
			return fmt.Errorf("%w: empty URL", ErrInvalidJob)
		}
		v, err := json.Marshal(&jobs[i])
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidJob, err)
		}
		vals[i] = v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if n := s.backlog.Load(); n+int64(len(jobs)) > int64(s.cfg.MaxBacklog) {
		return fmt.Errorf("%w: %d queued, max %d", ErrBacklogFull, n, s.cfg.MaxBacklog)
	}
	// Keys become visible in sequence order (one Enqueue at a time), which the dispatcher's
	// cursor relies on.
	seq := s.nextSeq
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for _, v := range vals {
		err := txn.Set(jobKey(seq), v)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = txn.Commit(); err == nil {
				txn = s.db.NewTransaction(true)
				err = txn.Set(jobKey(seq), v)
			}
		}
		if err != nil {
			return fmt.Errorf("corpus: enqueue: %w", err)
		}
		seq++
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("corpus: enqueue: %w", err)
	}
	s.nextSeq = seq
	s.backlog.Add(int64(len(jobs)))
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return nil
}

// Durable returns the open shard's flushed part, nil when no shard is open: a reader of the
// shard files takes finished shards whole and of the .partial one only these bytes, so it
// never meets a torn line or block.
func (s *Stage) Durable() *DurableShard { return s.durable.Load() }

// Backlog is the number of jobs not yet written to a durable shard.
func (s *Stage) Backlog() int { return int(s.backlog.Load()) }

// Start recovers what a crash left (see the package doc) and starts the dispatcher, the
// workers and the committer. They run until Shutdown or until ctx is cancelled.
func (s *Stage) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.started {
		return nil
	}
	if err := s.recover(); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.work = make(chan dispatched)
	s.results = make(chan result, 2*s.cfg.Workers)
	s.statsMu.Lock()
	s.startedAt = s.cfg.Now()
	s.statsMu.Unlock()

	if s.cfg.Nice > 0 && s.cfg.DeferBelowIdle > 0 {
		s.gate = newCPUGate(s.cfg.DeferBelowIdle, gateReader)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.gate.run(runCtx); err != nil {
				s.log.Warn("extract workers will not wait for idle CPU", "err", err)
			}
		}()
	}
	var workers sync.WaitGroup
	s.wg.Add(3 + s.cfg.Workers)
	go func() { defer s.wg.Done(); s.dispatch(runCtx) }()
	for i := 0; i < s.cfg.Workers; i++ {
		workers.Add(1)
		go func() { defer s.wg.Done(); defer workers.Done(); s.worker(runCtx) }()
	}
	go func() { defer s.wg.Done(); workers.Wait(); close(s.results) }()
	go func() { defer s.wg.Done(); defer close(s.stopped); s.commitLoop(runCtx, cancel) }()
	s.started = true
	s.log.Info("extract stage started", "workers", s.cfg.Workers, "backlog", s.Backlog(), "shard_seq", s.shardSeq)
	return nil
}

// recover finishes the .partial shards a crash left and deletes from the backlog the jobs
// whose records they hold (matched by URL and fetch time), then picks the next shard number.
func (s *Stage) recover() error {
	entries, err := os.ReadDir(s.cfg.OutDir)
	if err != nil {
		return fmt.Errorf("corpus: recover: %w", err)
	}
	// A .recover file is what a crash during an earlier recovery left: its .partial is still
	// there and is finished again below. Remove them all first: finishing a .partial writes
	// (and renames away) the .recover of the same name, so removing them in listing order
	// would find one already gone.
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, recoverExt) {
			if err := os.Remove(filepath.Join(s.cfg.OutDir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("corpus: recover: %w", err)
			}
		}
	}
	maxSeq := -1
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, recoverExt) {
			continue
		}
		node, seq, partial, ok := parseShardName(name)
		if !ok || node != s.cfg.NodeName {
			continue
		}
		maxSeq = max(maxSeq, seq)
		if !partial {
			continue
		}
		path := filepath.Join(s.cfg.OutDir, name)
		final := strings.TrimSuffix(path, partialExt)
		if _, err := os.Stat(final); err == nil {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("corpus: recover: %w", err)
			}
			continue
		}
		keys, lines, err := readPartial(path)
		if err != nil {
			return fmt.Errorf("corpus: recover %s: %w", name, err)
		}
		// Jobs first, then the rename: a crash in between finds the .partial again.
		removed, err := s.deleteJobsByKey(keys)
		if err != nil {
			return fmt.Errorf("corpus: recover %s: %w", name, err)
		}
		if err := finishRecovered(path, final, lines); err != nil {
			return fmt.Errorf("corpus: recover %s: %w", name, err)
		}
		s.log.Warn("recovered partial shard", "shard", filepath.Base(final), "records", len(lines), "jobs_already_done", removed)
	}
	s.shardSeq = maxSeq + 1
	return nil
}

// deleteJobsByKey deletes the backlog jobs whose URL and fetch time are in keys.
func (s *Stage) deleteJobsByKey(keys map[string]bool) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	var del [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{prefixJob}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(opts.Prefix); it.ValidForPrefix(opts.Prefix); it.Next() {
			var j Job
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &j) }); err != nil {
				return err
			}
			if keys[recordKey(j.URL, j.FetchTime.UnixNano())] {
				del = append(del, it.Item().KeyCopy(nil))
			}
		}
		return nil
	})
	if err != nil || len(del) == 0 {
		return 0, err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range del {
		if err := wb.Delete(k); err != nil {
			return 0, err
		}
	}
	if err := wb.Flush(); err != nil {
		return 0, err
	}
	s.backlog.Add(-int64(len(del)))
	return len(del), nil
}

// dispatch feeds the workers from the backlog in sequence order. A job is handed out once per
// run; it leaves the backlog only when the committer made its record durable.
func (s *Stage) dispatch(ctx context.Context) {
	defer close(s.work)
	var cursor uint64
	for ctx.Err() == nil {
		batch, err := s.readJobs(cursor, 64)
		if err != nil {
			s.log.Error("read extract backlog", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
			case <-s.notify:
			}
			continue
		}
		for _, d := range batch {
			s.inflight.Add(1)
			select {
			case s.work <- d:
				cursor = d.seq + 1
			case <-ctx.Done():
				s.inflight.Add(-1)
				return
			}
		}
	}
}

func (s *Stage) readJobs(from uint64, limit int) ([]dispatched, error) {
	var out []dispatched
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{prefixJob}
		opts.PrefetchSize = limit
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(jobKey(from)); it.ValidForPrefix(opts.Prefix) && len(out) < limit; it.Next() {
			d := dispatched{seq: binary.BigEndian.Uint64(it.Item().Key()[1:])}
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &d.job) }); err != nil {
				// A job that cannot be decoded can never be processed: log it, hand it out empty so
				// the committer records and deletes it.
				s.log.Error("undecodable extract job", "seq", d.seq, "err", err)
				d.job = Job{URL: fmt.Sprintf("invalid-job:%d", d.seq)}
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

func (s *Stage) worker(ctx context.Context) {
	if s.cfg.Nice > 0 {
		if err := lowerThreadPriority(s.cfg.Nice); err != nil {
			s.log.Warn("extract worker priority", "nice", s.cfg.Nice, "err", err)
		} else if s.gate != nil {
			s.gate.register(threadID())
		}
	}
	for d := range s.work {
		if s.gate != nil {
			// Holding the page: a worker waiting for the gate before taking one would
			// start whatever came next without asking again.
			s.gate.wait(ctx, s.gateOpen)
		}
		s.holdWhile(ctx)
		start := time.Now()
		r := result{seq: d.seq}
		r.a, r.dropped = s.process(ctx, &d.job)
		r.busy = time.Since(start)
		s.results <- r // the committer reads until this channel is closed
	}
}

// holdWhile blocks while Config.Hold says so, or until ctx ends (the page is then dropped
// by process and stays queued).
func (s *Stage) holdWhile(ctx context.Context) {
	if s.cfg.Hold == nil {
		return
	}
	for s.cfg.Hold() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(HoldPoll):
		}
	}
}

// gateOpen tells the workers not to wait for idle CPU: the backlog is above half of
// MaxBacklog (Enqueue would soon push back on the fetch stage) or Drain is waiting.
func (s *Stage) gateOpen() bool {
	return s.draining.Load() > 0 || s.backlog.Load() >= int64(s.cfg.MaxBacklog/2)
}

// process loads and analyzes one job. dropped is true when the stage is stopping and the job
// must stay queued.
func (s *Stage) process(ctx context.Context, j *Job) (a analysis, dropped bool) {
	if reason, detail := s.extractor.preCheck(j); reason != "" {
		// Dropped on response facts alone: the body is not even read back.
		rec := baseRecord(j)
		rec.Rejected, rec.RejectDetail = reason, detail
		rec.OptOut = optOutSignals(j, nil, s.extractor.token)
		return analysis{rec: rec}, false
	}
	if j.PayloadOf != "" {
		// An identical payload archived on another node (a WARC revisit record here): its
		// text is the original's, so it is an exact duplicate of it, decided with no read.
		rec := baseRecord(j)
		rec.OptOut = optOutSignals(j, nil, s.extractor.token)
		markDup(&rec, j.PayloadOf, DupExact, 0, false)
		return analysis{rec: rec}, false
	}
	body, err := s.cfg.Load(ctx, *j)
	if err != nil {
		if ctx.Err() != nil {
			return analysis{}, true
		}
		rec := baseRecord(j)
		rec.Rejected, rec.RejectDetail = RejectLoad, err.Error()
		s.log.Warn("load page for extraction", "url", j.URL, "warc", j.WARCFile, "offset", j.WARCOffset, "err", err)
		return analysis{rec: rec}, false
	}
	a = s.extractor.analyze(j, body)
	a.refetch = j.Refetch
	return a, false
}

// commitLoop is the single writer: duplicate decisions, shard writes, backlog deletions.
func (s *Stage) commitLoop(ctx context.Context, cancel context.CancelFunc) {
	ticker := time.NewTicker(s.cfg.CommitInterval)
	defer ticker.Stop()
	failed := false
	fail := func(err error) {
		if !failed {
			failed = true
			s.statsMu.Lock()
			s.fatal = err
			s.statsMu.Unlock()
			s.log.Error("extract stage stopped: jobs stay queued for the next start", "err", err)
			cancel()
		}
	}
	for {
		select {
		case r, ok := <-s.results:
			if !ok {
				s.finishCommits(failed, fail)
				return
			}
			if failed || r.dropped {
				s.inflight.Add(-1)
				continue
			}
			batch, closed := s.gather(r)
			if s.cfg.Decider != nil && !s.decideBatch(ctx, batch) {
				// Stopping while the owners could not be asked: the jobs stay queued.
				s.inflight.Add(-int64(len(batch)))
				batch = nil
			}
			for _, r := range batch {
				if !failed {
					if err := s.handle(r); err != nil {
						fail(err)
					}
				}
				s.inflight.Add(-1)
				if !failed && (len(s.pending) >= s.cfg.CommitEvery || s.inflight.Load() == 0) {
					if err := s.commit(); err != nil {
						fail(err)
					}
				}
			}
			if closed {
				s.finishCommits(failed, fail)
				return
			}
		case <-ticker.C:
			if !failed && len(s.pending) > 0 {
				if err := s.commit(); err != nil {
					fail(err)
				}
			}
			if !failed && len(s.pending) == 0 && s.shard != nil && s.shardTooOld() {
				if err := s.rotateShard(); err != nil {
					fail(err)
				}
			}
		}
	}
}

// finishCommits is the committer's last step once the workers are done: commit, close the
// shard (or, after a failure, leave its .partial for recovery as a crash would).
func (s *Stage) finishCommits(failed bool, fail func(error)) {
	if !failed {
		if err := s.commit(); err != nil {
			fail(err)
			failed = true
		}
	}
	if s.shard != nil {
		if failed {
			// No frame end, nothing more written (the file is closed before the encoder).
			s.shard.f.Close()
			s.shard.enc.Close()
		} else if err := s.shard.close(); err != nil {
			fail(err)
		}
		s.durable.Store(nil)
		s.shard = nil
	}
}

// handle decides duplicates and appends the record to the open shard.
func (s *Stage) handle(r result) error {
	rec := r.a.rec
	if r.a.hasText && rec.Rejected == "" && s.cfg.Decider == nil { // else decided (decideBatch)
		if err := s.dedup(&rec, &r.a); err != nil {
			return err
		}
	}
	rec.ExtractedAt = s.cfg.Now().UTC()
	line, err := json.Marshal(&rec)
	if err != nil {
		return fmt.Errorf("corpus: encode record: %w", err)
	}
	line = append(line, '\n')
	if s.shard == nil {
		if s.shard, err = openShard(s.cfg.OutDir, s.cfg.NodeName, s.shardSeq, s.cfg.Now()); err != nil {
			return err
		}
	}
	if err := s.shard.write(line); err != nil {
		return err
	}
	s.pending = append(s.pending, r.seq)
	meta, err := pageMeta(&rec)
	if err != nil {
		return fmt.Errorf("corpus: encode page: %w", err)
	}
	s.pendingPages = append(s.pendingPages, pageEntry{key: pageKey(rec.URL), meta: meta})
	if err := s.hook("written"); err != nil {
		return err
	}

	s.statsMu.Lock()
	st := &s.stats
	st.Processed++
	s.runDone++
	s.runBusy += r.busy
	switch {
	case rec.Rejected != "":
		st.Rejected[rec.Rejected]++
	case rec.DuplicateKind == DupExact:
		st.ExactDup++
	case rec.DuplicateKind == DupNear:
		st.NearDup++
	default:
		st.Kept++
	}
	if len(rec.OptOut) > 0 {
		st.OptedOut++
	}
	s.statsMu.Unlock()
	return nil
}

// dedup marks rec as a duplicate of the first page with the same normalized text (exact) or a
// SimHash within 3 bits (near). Only originals enter the indexes. A page that finds itself
// (same URL and fetch time: redone after a crash) is an original.
func (s *Stage) dedup(rec *Record, a *analysis) error {
	ref := recordKey(rec.URL, rec.FetchTime.UnixNano())
	exactKey := append([]byte{prefixExact}, a.hashBytes...)
	var exactRef string
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(exactKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		exactRef = string(v)
		return err
	})
	if err != nil {
		return fmt.Errorf("corpus: exact dedup: %w", err)
	}
	switch {
	case exactRef == ref:
		return nil // redone after a crash: this page is the original
	case exactRef != "":
		markDup(rec, exactRef, DupExact, 0, s.cfg.Filters.IncludeDuplicates)
		return nil
	}
	m, found, _, err := s.near.Lookup(a.simhash)
	if err != nil {
		return err
	}
	if found && m.Ref != ref {
		markDup(rec, m.Ref, DupNear, m.Distance, s.cfg.Filters.IncludeDuplicates)
		return nil
	}
	// An original: both indexes in one commit (a self-match above was already an original).
	err = s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(exactKey, []byte(ref)); err != nil {
			return err
		}
		if found {
			return nil
		}
		return s.near.InsertTxn(txn, a.simhash, ref)
	})
	if err != nil {
		return fmt.Errorf("corpus: dedup index: %w", err)
	}
	return nil
}

func (s *Stage) hook(point string) error {
	if s.testHook == nil {
		return nil
	}
	return s.testHook(point)
}

func markDup(rec *Record, ref, kind string, dist int, keepText bool) {
	url, _, _ := strings.Cut(ref, "\t")
	rec.DuplicateOf, rec.DuplicateKind, rec.DupDistance = url, kind, dist
	if !keepText {
		rec.Text, rec.Markdown = "", ""
	}
}

// commit makes the pending records durable (flush + fsync), then deletes their jobs and saves
// the counters in one batch, then rotates the shard if it is full.
func (s *Stage) commit() error {
	if len(s.pending) == 0 {
		return nil
	}
	if err := s.hook("before_flush"); err != nil {
		return err
	}
	if err := s.shard.flush(); err != nil {
		return err
	}
	s.durable.Store(&DurableShard{Name: filepath.Base(s.shard.path) + partialExt, Size: s.shard.out.n})
	if err := s.hook("flushed"); err != nil {
		return err
	}
	s.statsMu.Lock()
	sv, err := json.Marshal(&s.stats)
	s.statsMu.Unlock()
	if err != nil {
		return fmt.Errorf("corpus: encode stats: %w", err)
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, seq := range s.pending {
		if err := wb.Delete(jobKey(seq)); err != nil {
			return fmt.Errorf("corpus: commit: %w", err)
		}
	}
	for _, p := range s.pendingPages {
		if err := wb.Set(p.key, p.meta); err != nil {
			return fmt.Errorf("corpus: commit: %w", err)
		}
	}
	if err := wb.Set(bytes.Clone(statsKey), sv); err != nil {
		return fmt.Errorf("corpus: commit: %w", err)
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("corpus: commit: %w", err)
	}
	s.backlog.Add(-int64(len(s.pending)))
	s.pending = s.pending[:0]
	s.pendingPages = s.pendingPages[:0]
	if s.shard.bytes >= s.cfg.ShardMaxBytes || s.shardTooOld() {
		return s.rotateShard()
	}
	return nil
}

// shardTooOld reports whether the open shard passed Config.ShardMaxAge.
func (s *Stage) shardTooOld() bool {
	return s.cfg.ShardMaxAge > 0 && s.cfg.Now().Sub(s.shard.opened) >= s.cfg.ShardMaxAge
}

// rotateShard closes the open shard (everything in it committed); the next record opens the
// next one.
func (s *Stage) rotateShard() error {
	if err := s.shard.close(); err != nil {
		return err
	}
	s.log.Info("corpus shard closed", "shard", filepath.Base(s.shard.path), "records", s.shard.lines, "bytes", s.shard.bytes)
	s.durable.Store(nil)
	s.shard = nil
	s.shardSeq++
	s.statsMu.Lock()
	s.runShards++
	s.statsMu.Unlock()
	return nil
}

// Drain waits until the backlog is empty (every queued job has a durable record), ctx ends,
// or the stage stops on an error.
func (s *Stage) Drain(ctx context.Context) error {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if !started {
		return ErrNotStarted
	}
	s.draining.Add(1)
	defer s.draining.Add(-1)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if s.backlog.Load() <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stopped:
			if s.backlog.Load() <= 0 {
				return nil
			}
			if err := s.err(); err != nil {
				return err
			}
			return ErrClosed
		case <-t.C:
		}
	}
}

func (s *Stage) err() error {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return s.fatal
}

// Shutdown stops the workers (a job being extracted is finished and recorded; one still being
// loaded stays queued), commits, and closes the open shard. If ctx ends first it returns
// ctx.Err() and the goroutines finish in the background.
func (s *Stage) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	started := s.started
	s.mu.Unlock()
	if !started {
		return s.closePDF()
	}
	s.cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := s.closePDF(); err != nil {
		s.log.Warn("close pdf engine", "err", err)
	}
	st := s.Stats()
	s.log.Info("extract stage stopped", "backlog", st.Backlog, "held", st.Held.Round(time.Millisecond), "held_spells", st.HeldSpells)
	return s.err()
}

// closePDF releases the PDF engine (its WebAssembly instances and compiled code).
func (s *Stage) closePDF() error {
	if s.extractor.pdf == nil {
		return nil
	}
	return s.extractor.pdf.close()
}

// Stats returns a snapshot of the counters.
func (s *Stage) Stats() Stats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	st := Stats{
		Backlog:     s.Backlog(),
		Processed:   s.stats.Processed,
		Kept:        s.stats.Kept,
		ExactDup:    s.stats.ExactDup,
		NearDup:     s.stats.NearDup,
		OptedOut:    s.stats.OptedOut,
		Rejected:    make(map[string]int64, len(s.stats.Rejected)),
		ExtractTime: s.runBusy,
		Shards:      s.runShards,

		DecideFailures: s.decideFails.Load(),
	}
	st.ExtractPanics = s.extractor.panics.Load()
	if s.gate != nil {
		st.Held, st.HeldSpells = time.Duration(s.gate.held.Load()), s.gate.closes.Load()
	}
	for k, v := range s.stats.Rejected {
		st.Rejected[k] = v
	}
	if !s.startedAt.IsZero() {
		if el := s.cfg.Now().Sub(s.startedAt).Seconds(); el > 0 {
			st.PagesPerSec = float64(s.runDone) / el
		}
	}
	if s.runBusy > 0 {
		st.PagesPerCoreSec = float64(s.runDone) / s.runBusy.Seconds()
	}
	return st
}

type pageEntry struct{ key, meta []byte }
