package frontier

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/crawlnode/crawlnode/internal/badgermem"
	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/ristretto/v2/z"
)

// BenchmarkSeenSetScale is the synthetic frontier benchmark of the seen set: it feeds URLs
// into an on-disk frontier through Add, as a node does, without fetching anything, with the
// node's Badger options and its table-page trimmer (internal/badgermem), and reports memory
// as it grows and the cost of mostly-already-seen link checks at the end.
//
//	CRAWLNODE_SCALE_URLS=100000000 go test -run '^$' -bench SeenSetScale -benchtime 1x -timeout 0 -v ./frontier/
//
// Environment:
//   - CRAWLNODE_SCALE_URLS: URLs to add (default 1,000,000); every URL
//     added is both seen and queued (a worst case for the queue: a real crawl at 100M seen
//     has most of them fetched and out of the queue);
//   - CRAWLNODE_SCALE_HOSTS: hosts the URLs are spread over, round robin (default URLs/1000;
//     each Add then touches min(batch, hosts) hosts, and Add's cost grows with that: a
//     host record written and a heap fix per host);
//   - CRAWLNODE_SCALE_BATCH: URLs per Add (default 10,000);
//   - CRAWLNODE_SCALE_CALLERS: how many goroutines call Add at once in the checks (default
//     GOMAXPROCS, as a node's fetch workers and forward receivers do; 1: one caller, which
//     leaves the other cores idle, so that each hand-off to Badger's goroutines wakes an
//     idle thread: 1.0M against 1.3M checks per CPU-second at 3M URLs, docs/bench-log/seen-set-at-scale.md);
//   - CRAWLNODE_SCALE_ROWS: how many rows the table of memory has (default 10);
//   - CRAWLNODE_SCALE_MAXTIME: stop adding after this long (a Go duration) and measure what
//     was reached; unset, add all;
//   - CRAWLNODE_SCALE_FILE_BUDGET: the trimmer's RssFile budget in bytes (default the node's,
//     badgermem.DefaultFileBudget); 0 turns the trimmer off;
//   - CRAWLNODE_SCALE_TRIM_INTERVAL: how often the trimmer checks (a Go duration; default
//     the node's, badgermem.TrimInterval);
//   - GOMEMLIMIT: as for the binary, the Go memory limit when set, else
//     badgermem.GoMemoryLimit;
//   - CRAWLNODE_SCALE_BADGER: Badger options to try over the node's, as a comma-separated
//     list of name=value: compactors (NumCompactors), memtable, basetable (MiB),
//     tablemult (TableSizeMultiplier), compression (none, snappy, zstd);
//   - CRAWLNODE_SCALE_SEEN_MAP: Config.SeenIndexMapBytes (default the node's,
//     DefaultSeenIndexMapBytes; -1: always pread);
//   - CRAWLNODE_SCALE_ALLOC_POOL: 0 drops Badger's table-builder allocator pool
//     (dropAllocPool), drain releases its allocators over 16 MiB every 100 ms
//     (drainAllocPool); experiments;
//   - CRAWLNODE_SCALE_HEAPPROFILE: a file to write a heap profile to when the adds end;
//   - CRAWLNODE_SCALE_CPUPROFILE: a file to write a CPU profile of the checks to;
//   - CRAWLNODE_SCALE_DIR: keep Badger's directory there (under badger/, with a file held/
//     that says how many of the benchmark's URLs it holds) instead of a temporary one. When
//     it already holds URLs, the adds are skipped: the frontier is opened on it (the Bloom
//     filter and the seen index rebuilt from its keys, as at a node's restart) and the
//     checks run against what it holds, whatever CRAWLNODE_SCALE_URLS says; the checks'
//     new URLs are added to it and counted in held. So the checks of several binaries can
//     be compared at 100M URLs without an hour of adds before each.
//
// Each row: URLs held; the resident set as ps shows it (VmRSS, no forced GC), split into
// anonymous memory and file-backed pages (Badger's mmapped tables and memtable files, the
// binary); the peaks so far (VmHWM, and sampled every 100 ms for the split); the Go heap
// in use; the largest live heap a collection has marked so far (sampled every 100 ms: what
// the memory limit cannot collect); the Bloom filter's bytes per URL held; the add rate
// since the previous row. The largest Bloom bytes per URL held is also tracked after every
// Add past ExpectedURLs. The checks: batches of 100 links: 80 navigation links from a hot
// set of 5,000 URLs, 19 links to any seen URL, 1 new URL, split in whole batches between
// the callers; rate per second of process CPU (Badger's goroutines included).
func BenchmarkSeenSetScale(b *testing.B) {
	envInt := func(name string, def, least int) int {
		s := os.Getenv(name)
		if s == "" {
			return def
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < least {
			b.Fatalf("%s=%q: want an integer >= %d", name, s, least)
		}
		return v
	}
	n := envInt("CRAWLNODE_SCALE_URLS", 1_000_000, 10_000)
	batchSize := envInt("CRAWLNODE_SCALE_BATCH", 10_000, 1)
	rows := envInt("CRAWLNODE_SCALE_ROWS", 10, 1)
	budget := envInt("CRAWLNODE_SCALE_FILE_BUDGET", badgermem.DefaultFileBudget, 0)
	envDuration := func(name string, def time.Duration) time.Duration {
		s := os.Getenv(name)
		if s == "" {
			return def
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			b.Fatalf("%s=%q: want a positive Go duration", name, s)
		}
		return d
	}
	maxTime := envDuration("CRAWLNODE_SCALE_MAXTIME", 0) // 0: add all
	trimInterval := envDuration("CRAWLNODE_SCALE_TRIM_INTERVAL", badgermem.TrimInterval)
	hosts := envInt("CRAWLNODE_SCALE_HOSTS", max(n/1000, 10), 1)
	callers := envInt("CRAWLNODE_SCALE_CALLERS", runtime.GOMAXPROCS(0), 1)
	url := func(i int) string {
		return "http://host" + strconv.Itoa(i%hosts) + ".scale.test/section/" + strconv.Itoa(i%97) + "/page-" + strconv.Itoa(i) + ".html"
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	badgermem.SetGoMemoryLimit() // as the crawlnode binary does
	dbDir, held, heldHosts, saveHeld, err := scaleDir(b, os.Getenv("CRAWLNODE_SCALE_DIR"), hosts)
	if err != nil {
		b.Fatal(err)
	}
	if held > 0 {
		hosts = heldHosts // url reads it: the URLs held are spread over these
	}
	opts, err := scaleBadgerOptions(badgermem.Options(dbDir), os.Getenv("CRAWLNODE_SCALE_BADGER"))
	if err != nil {
		b.Fatal(err)
	}
	db, err := badger.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	switch v := os.Getenv("CRAWLNODE_SCALE_ALLOC_POOL"); v {
	case "":
	case "0":
		old, err := dropAllocPool(db)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(old.Release) // after db.Close: no builder returns to it any more
		b.Logf("Badger's allocator pool dropped: every table builder allocates afresh")
	case "drain":
		pool, err := allocPool(db)
		if err != nil {
			b.Fatal(err)
		}
		defer every(100*time.Millisecond, func() { drainAllocPool(pool, 16<<20) })()
		b.Logf("Badger's allocator pool drained of allocators over 16 MiB every 100 ms")
	default:
		b.Fatalf("CRAWLNODE_SCALE_ALLOC_POOL=%q: want 0 or drain", v)
	}
	var trim *badgermem.Trimmer
	if budget > 0 {
		if trim, err = badgermem.NewTrimmer(db, int64(budget)); err != nil {
			b.Fatal(err)
		}
		trim.Start(trimInterval)
		defer trim.Stop()
	}
	seenMap := envInt("CRAWLNODE_SCALE_SEEN_MAP", 0, -1)
	opened := time.Now()
	f, err := Open(Config{DB: db, DefaultDelaySet: true, MaxPagesPerHost: -1, GeneratedBudget: -1,
		SeenIndexDir: b.TempDir(), SeenIndexMapBytes: int64(seenMap)}) // as a node has
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if trim != nil {
		trim.Also(f.TrimSeenIndex)
	}
	if held > 0 {
		if st := f.Stats(); st.Seen != held {
			b.Fatalf("CRAWLNODE_SCALE_DIR holds %d seen URLs, its held file says %d", st.Seen, held)
		}
		n = held
		b.Logf("reopened %s with %d URLs in %.1f s (Bloom filter and seen index rebuilt): no adds", dbDir, n, time.Since(opened).Seconds())
	}

	// Peaks of the split, sampled.
	var peakAnon, peakFile, peakLive atomic.Int64
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	sample := func() {
		a, fb := badgermem.ProcStatus("RssAnon"), badgermem.ProcStatus("RssFile")
		if a > peakAnon.Load() {
			peakAnon.Store(a)
		}
		if fb > peakFile.Load() {
			peakFile.Store(fb)
		}
		metrics.Read(live)
		if v := int64(live[0].Value.Uint64()); v > peakLive.Load() {
			peakLive.Store(v)
		}
	}
	sample()
	stopSampling := every(100*time.Millisecond, sample)
	defer stopSampling()

	bloomPerURL := func(held int) float64 {
		f.bloomMu.RLock()
		defer f.bloomMu.RUnlock()
		return float64(f.bloom.bytes()) / float64(max(held, 1))
	}
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	b.Logf("%d URLs over %d hosts, batches of %d, trimmer budget %d MiB; columns: URLs held | RSS | anon | file-backed | peak RSS (VmHWM) | peak anon | peak file | Go heap in use | peak live heap | Bloom B/URL | adds/s since last row | adds per CPU-s | LSM on disk",
		n, hosts, batchSize, budget>>20)
	row := func(held int, rate, cpuRate float64) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		lsm, vlog := db.Size()
		b.Logf("| %d | %.0f MiB | %.0f MiB | %.0f MiB | %.0f MiB | %.0f MiB | %.0f MiB | %.0f MiB | %.0f MiB | %.3f | %.0f | %.0f | %.1f GiB |",
			held, mib(badgermem.ProcStatus("VmRSS")), mib(badgermem.ProcStatus("RssAnon")), mib(badgermem.ProcStatus("RssFile")),
			mib(badgermem.ProcStatus("VmHWM")), mib(peakAnon.Load()), mib(peakFile.Load()), mib(int64(ms.HeapInuse)), mib(peakLive.Load()),
			bloomPerURL(held), rate, cpuRate, float64(lsm+vlog)/(1<<30))
		b.Logf("  Badger's allocators now (table builders, in use and pooled): %s", z.Allocators())
		if trim != nil {
			p, _, _ := trim.Stats()
			b.Logf("  trimmer so far: %d passes; %v; %d tables", p, trim.PassTimes(), len(db.Tables()))
		}
	}

	maxBloom, maxBloomAt := 0.0, 0
	step := max(n/rows, 1)
	batch := make([]Candidate, 0, batchSize)
	start, cpu0 := time.Now(), cpuTime()
	lastT, lastCPU, lastN := start, cpu0, 0
	added := 0
	for i := 0; i < n && held == 0; i++ {
		batch = append(batch, Candidate{URL: url(i), Depth: i % 5})
		if len(batch) < cap(batch) && i < n-1 && (i+1)%step != 0 {
			continue
		}
		r, err := f.Add(batch)
		if err != nil {
			b.Fatal(err)
		}
		if r.Added != len(batch) {
			b.Fatalf("batch ending at %d: %+v", i, r)
		}
		added = i + 1
		batch = batch[:0]
		if uint(added) > f.cfg.ExpectedURLs {
			if v := bloomPerURL(added); v > maxBloom {
				maxBloom, maxBloomAt = v, added
			}
		}
		if added%step == 0 || added == n {
			now, c := time.Now(), cpuTime()
			row(added, float64(added-lastN)/now.Sub(lastT).Seconds(), float64(added-lastN)/(c-lastCPU).Seconds())
			lastT, lastCPU, lastN = now, c, added
		}
		if maxTime > 0 && time.Since(start) > maxTime {
			if added%step != 0 {
				now, c := time.Now(), cpuTime()
				row(added, float64(added-lastN)/now.Sub(lastT).Seconds(), float64(added-lastN)/(c-lastCPU).Seconds())
			}
			b.Logf("CRAWLNODE_SCALE_MAXTIME %v reached: stopped adding at %d of %d URLs", maxTime, added, n)
			break
		}
	}
	if held == 0 {
		n = added
		if err := saveHeld(n); err != nil {
			b.Fatal(err)
		}
	}
	addWall, addCPU := time.Since(start), cpuTime()-cpu0
	if path := os.Getenv("CRAWLNODE_SCALE_HEAPPROFILE"); path != "" {
		if err := writeHeapProfile(path); err != nil {
			b.Fatal(err)
		}
	}
	st := f.Stats()
	if held == 0 {
		b.Logf("added %d URLs in %.1f s (%.0f URLs/s, %.0f per CPU-second); seen %d, queued %d",
			n, addWall.Seconds(), float64(n)/addWall.Seconds(), float64(n)/addCPU.Seconds(), st.Seen, st.Queued)
	}
	b.Logf("Bloom: %d bytes for %d URLs = %.3f bytes/URL, fill %.3f; largest after any Add past ExpectedURLs (%d): %.3f bytes/URL at %d URLs",
		st.BloomBytes, st.Seen, float64(st.BloomBytes)/float64(st.Seen), st.BloomFill, f.cfg.ExpectedURLs, maxBloom, maxBloomAt)
	if trim != nil {
		p, t, by := trim.Stats()
		sn, sb := trim.StrayStats()
		b.Logf("trimmer: %d passes, %d table mappings, %.1f GiB advised; of them %d mappings outside the levels paged out, %.1f GiB; %v",
			p, t, float64(by)/(1<<30), sn, float64(sb)/(1<<30), trim.PassTimes())
	}

	// Mostly-seen link checks, once the background rebuilds the adds left due are done (their
	// CPU is the adds', and the checks' CPU is the whole process's).
	idle := time.Now()
	for deadline := idle.Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		f.bloomMu.RLock()
		busy := f.bloom.running
		f.bloomMu.RUnlock()
		if !busy {
			break
		}
	}
	b.Logf("waited %.1f s for the sub-filter and seen-index rebuilds the adds left", time.Since(idle).Seconds())
	if f.seenIdx != nil {
		var entries int64
		for i := range bloomSubs {
			entries += int64(f.seenIdx.entries(byte(i)))
		}
		b.Logf("seen index: %d entries, %.0f MiB, of it %.0f MiB mapped (the rest read with pread)",
			entries, float64(entries*idxEntry)/(1<<20), float64(f.seenIdx.mapped.Load())/(1<<20))
	}
	r := rand.New(rand.NewPCG(1, 2))
	const hot = 5000
	const batches = 20_000
	next := n
	res := AddResult{}
	if path := os.Getenv("CRAWLNODE_SCALE_CPUPROFILE"); path != "" {
		pf, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			b.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); pf.Close() }()
	}
	// The links are drawn and their strings built in chunks outside the measured time:
	// building a URL costs about as much as checking it, and it is the benchmark's work.
	// Two rounds: at once, while Badger still compacts what the adds wrote (its CPU is
	// counted: the checks' CPU is the whole process's), and again once the process idles.
	const chunk = 500
	stream := make([]Candidate, 0, chunk*100)
	b.Logf("the checks: %d Add callers at once", callers)
	checkRound := func(when string) (checksPerCPU float64) {
		st0 := f.Stats()
		var wall, cpu, sys time.Duration
		var minor, major int64
		for k := 0; k < batches; k += chunk {
			stream = stream[:0]
			for range chunk {
				for j := 0; j < 80; j++ {
					stream = append(stream, Candidate{URL: url(r.IntN(hot) * (n / hot))})
				}
				for j := 0; j < 19; j++ {
					stream = append(stream, Candidate{URL: url(r.IntN(n))})
				}
				stream = append(stream, Candidate{URL: url(next)})
				next++
			}
			mi0, ma0, sys0 := faults()
			start, cpu0 = time.Now(), cpuTime()
			if err := addCallers(f, stream, callers, &res); err != nil {
				b.Fatal(err)
			}
			wall, cpu = wall+time.Since(start), cpu+cpuTime()-cpu0
			mi1, ma1, sys1 := faults()
			minor, major, sys = minor+mi1-mi0, major+ma1-ma0, sys+sys1-sys0
		}
		checks := batches * 100
		b.Logf("mostly-seen checks, %s: %d links in %.2f s wall, %.2f s CPU: %.0f checks/s, %.0f checks per CPU-second",
			when, checks, wall.Seconds(), cpu.Seconds(), float64(checks)/wall.Seconds(), float64(checks)/cpu.Seconds())
		st1 := f.Stats()
		b.Logf("of them confirmed beyond the seen cache: %d (Bloom said maybe), %d by the seen index, %d Bloom false positives",
			st1.BloomChecks-st0.BloomChecks, st1.SeenIndexHits-st0.SeenIndexHits, st1.BloomFalsePositives-st0.BloomFalsePositives)
		b.Logf("the process meanwhile: %.2f s of its CPU in the kernel, %d minor and %d major page faults", sys.Seconds(), minor, major)
		return float64(checks) / cpu.Seconds()
	}
	when := "right after the adds"
	if held > 0 {
		when = "right after the reopen"
	}
	busyRate := checkRound(when)
	// Idle: no Badger level due for compaction and under 5% of a core over the last
	// second (one quiet second alone ended the wait at 100M with a compaction still to
	// come, and the round counted it: 30% of its profile).
	settle := time.Now()
	due := func() (levels []string) {
		for _, l := range db.Levels() {
			if l.Score >= 1 {
				levels = append(levels, fmt.Sprintf("L%d %.2f", l.Level, l.Score))
			}
		}
		return levels
	}
	for c0 := cpuTime(); time.Since(settle) < 20*time.Minute; {
		time.Sleep(time.Second)
		c1 := cpuTime()
		if c1-c0 < 50*time.Millisecond && len(due()) == 0 {
			break
		}
		c0 = c1
	}
	b.Logf("waited %.1f s for the process to idle (Badger's compactions); levels still due: %v", time.Since(settle).Seconds(), due())
	idleRate := checkRound("the process idle")
	b.Logf("checks over both rounds: added %d, already seen %d", res.Added, res.AlreadySeen)
	if res.Added != next-n {
		b.Errorf("the checks added %d URLs, want their %d new ones", res.Added, next-n)
	}
	if err := saveHeld(next); err != nil {
		b.Fatal(err)
	}
	row(n+res.Added, 0, 0)
	stopSampling()
	b.Logf("peak over the run: RSS (VmHWM) %.0f MiB, anonymous %.0f MiB, file-backed %.0f MiB, live Go heap %.0f MiB (sampled every 100 ms)",
		mib(badgermem.ProcStatus("VmHWM")), mib(peakAnon.Load()), mib(peakFile.Load()), mib(peakLive.Load()))
	b.ReportMetric(float64(peakLive.Load()), "peak-live-heap-bytes")
	b.ReportMetric(float64(badgermem.ProcStatus("VmHWM")), "peak-rss-bytes")
	b.ReportMetric(busyRate, "checks/cpu-s")
	b.ReportMetric(idleRate, "idle-checks/cpu-s")
	// A reopened directory has no adds: n over the few microseconds the
	// empty add loop took would report trillions of adds a second, and the
	// largest Bloom size after an Add would be a zero.
	if held == 0 {
		b.ReportMetric(maxBloom, "max-bloom-bytes/url")
		b.ReportMetric(float64(n)/addWall.Seconds(), "adds/s")
	}
}

// scaleDir is CRAWLNODE_SCALE_DIR's Badger directory, the URLs it holds and the hosts they
// are spread over (held 0: none yet, or no such directory: a temporary one), and a function
// that records how many it holds over hosts.
func scaleDir(b *testing.B, dir string, hosts int) (dbDir string, held, heldHosts int, save func(int) error, err error) {
	if dir == "" {
		return b.TempDir(), 0, 0, func(int) error { return nil }, nil
	}
	heldFile := filepath.Join(dir, "held")
	save = func(n int) error {
		return os.WriteFile(heldFile, []byte(strconv.Itoa(n)+" "+strconv.Itoa(hosts)+"\n"), 0o644)
	}
	dbDir = filepath.Join(dir, "badger")
	data, err := os.ReadFile(heldFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A directory from an interrupted run holds URLs no count knows.
		if ents, _ := os.ReadDir(dbDir); len(ents) > 0 {
			return "", 0, 0, nil, fmt.Errorf("CRAWLNODE_SCALE_DIR: %s is not empty but %s is missing (an interrupted run?)", dbDir, heldFile)
		}
		return dbDir, 0, 0, save, os.MkdirAll(dbDir, 0o755)
	case err != nil:
		return "", 0, 0, nil, err
	}
	if _, err := fmt.Sscanf(string(data), "%d %d", &held, &heldHosts); err != nil || held < 1 || heldHosts < 1 {
		return "", 0, 0, nil, fmt.Errorf("CRAWLNODE_SCALE_DIR: %s: %q is not a count of URLs and hosts", heldFile, data)
	}
	hosts = heldHosts
	return dbDir, held, heldHosts, save, nil
}

// every calls fn every d in a goroutine until the returned stop is called; stop waits for
// it and may be called again.
func every(d time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(d)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				fn()
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }); wg.Wait() }
}

// dropAllocPool sets db's table-builder allocator pool (Badger v4.9.6: DB.allocPool, eight
// allocators kept, each with every buffer it grew) to nil, so that every builder allocates
// afresh and its memory is garbage once the table is written. It returns the old pool, to
// be released once the DB is closed (builders begun before return to it). An experiment:
// it writes the field while Badger's goroutines may read it.
func dropAllocPool(db *badger.DB) (*z.AllocatorPool, error) {
	p, err := allocPoolField(db)
	if err != nil {
		return nil, err
	}
	old := *p
	*p = nil
	return old, nil
}

// allocPool is db's table-builder allocator pool (read once; Badger writes it only in Open).
func allocPool(db *badger.DB) (*z.AllocatorPool, error) {
	p, err := allocPoolField(db)
	if err != nil {
		return nil, err
	}
	return *p, nil
}

func allocPoolField(db *badger.DB) (**z.AllocatorPool, error) {
	f := reflect.ValueOf(db).Elem().FieldByName("allocPool")
	if !f.IsValid() || f.Type() != reflect.TypeOf((*z.AllocatorPool)(nil)) {
		return nil, fmt.Errorf("CRAWLNODE_SCALE_ALLOC_POOL: Badger has no DB.allocPool of type *z.AllocatorPool")
	}
	return (**z.AllocatorPool)(unsafe.Pointer(f.UnsafeAddr())), nil
}

// drainAllocPool takes every allocator the pool holds (it holds at most eight) and releases
// those with more than max bytes of buffers, returning the others. Through the pool's own
// methods, so it races with nothing. A Get on an empty pool makes a new 512-byte allocator,
// which is released too. Not a node's: a compaction builder of a 2 MiB table grows its
// allocator to 28 MiB too (buffers of 4, 8 and 16 MiB), so with max 16 MiB nearly every
// allocator a builder returns is released and the next builder allocates afresh (186,276
// MiB by 30M URLs). Against the pool left alone (docs/bench-log/seen-set-at-scale.md): peak live
// heap 563 against 692 MiB at 5M URLs, 765 against 784 MiB at 10M; VmHWM 1,349 against
// 1,404 and 1,487 against 1,512 MiB; adds per CPU-second 1% fewer to 5M, 21% fewer from 5M
// to 10M. Counting the pooled allocators instead of sizing them is not tried yet.
func drainAllocPool(p *z.AllocatorPool, max uint64) (released int, bytes uint64) {
	var keep []*z.Allocator
	for range 8 {
		a := p.Get(0, "drain")
		if sz := a.Allocated(); sz <= 512 || sz > max {
			if sz > 512 {
				released++
				bytes += sz
			}
			a.Release()
			continue
		}
		a.Tag = "Builder"
		keep = append(keep, a)
	}
	for _, a := range keep {
		p.Return(a)
	}
	return released, bytes
}

// scaleBadgerOptions applies CRAWLNODE_SCALE_BADGER's overrides to o.
func scaleBadgerOptions(o badger.Options, spec string) (badger.Options, error) {
	if spec == "" {
		return o, nil
	}
	for _, kv := range strings.Split(spec, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return o, fmt.Errorf("CRAWLNODE_SCALE_BADGER: %q is not name=value", kv)
		}
		if name == "compression" {
			switch val {
			case "none":
				o = o.WithCompression(options.None)
			case "snappy":
				o = o.WithCompression(options.Snappy)
			case "zstd":
				o = o.WithCompression(options.ZSTD)
			default:
				return o, fmt.Errorf("CRAWLNODE_SCALE_BADGER: compression %q: want none, snappy or zstd", val)
			}
			continue
		}
		v, err := strconv.Atoi(val)
		if err != nil || v < 1 {
			return o, fmt.Errorf("CRAWLNODE_SCALE_BADGER: %s=%q: want a positive integer", name, val)
		}
		switch name {
		case "compactors":
			o = o.WithNumCompactors(v)
		case "memtable":
			o = o.WithMemTableSize(int64(v) << 20)
		case "basetable":
			o = o.WithBaseTableSize(int64(v) << 20)
		case "tablemult":
			o.TableSizeMultiplier = v
		default:
			return o, fmt.Errorf("CRAWLNODE_SCALE_BADGER: unknown option %q", name)
		}
	}
	return o, nil
}

func writeHeapProfile(path string) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(fh); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// drainAllocPool releases the pool's grown allocators and keeps the others.
func TestDrainAllocPool(t *testing.T) {
	p := z.NewAllocatorPool(8)
	defer p.Release()
	var as []*z.Allocator
	for range 3 {
		as = append(as, p.Get(4<<20, "Builder"))
	}
	as[0].Allocate(24 << 20) // grows past 16 MiB, as an L0 flush's does
	for _, a := range as {
		p.Return(a)
	}
	n, bytes := drainAllocPool(p, 16<<20)
	if n != 1 || bytes < 24<<20 {
		t.Fatalf("released %d allocators, %d bytes; want the grown one", n, bytes)
	}
	kept := 0
	for range 8 {
		a := p.Get(0, "check")
		if sz := a.Allocated(); sz > 512 {
			if sz > 16<<20 {
				t.Fatalf("an allocator of %d bytes is still pooled", sz)
			}
			kept++
		}
		a.Release()
	}
	if kept != 2 {
		t.Fatalf("%d small allocators kept in the pool, want 2", kept)
	}
}

// addCallers adds stream in batches of 100 from callers goroutines at once, each its own
// contiguous share of whole batches, and sums their results into res.
func addCallers(f *Frontier, stream []Candidate, callers int, res *AddResult) error {
	per := (len(stream)/100 + callers - 1) / callers * 100
	errs := make([]error, callers)
	sums := make([]AddResult, callers)
	var wg sync.WaitGroup
	for c := range callers {
		part := stream[min(c*per, len(stream)):min((c+1)*per, len(stream))]
		wg.Go(func() {
			for links := range slices.Chunk(part, 100) {
				ar, err := f.Add(links)
				if err != nil {
					errs[c] = err
					return
				}
				sums[c].Added += ar.Added
				sums[c].AlreadySeen += ar.AlreadySeen
			}
		})
	}
	wg.Wait()
	for c := range callers {
		res.Added += sums[c].Added
		res.AlreadySeen += sums[c].AlreadySeen
	}
	return errors.Join(errs...)
}
