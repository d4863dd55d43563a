package frontier

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// BenchmarkSeenSetScale is the synthetic frontier benchmark of the seen set: it feeds URLs
// into an on-disk frontier without fetching anything, with the Badger options a node uses,
// and reports RAM as it grows and the cost of mostly-already-seen link checks at that size.
//
//	CRAWLNODE_SCALE_URLS=20000000 go test -run '^$' -bench SeenSetScale -benchtime 1x -timeout 60m -v ./frontier/
//
// CRAWLNODE_SCALE_URLS (default 1,000,000) URLs are added over URLs/1000 hosts in batches of
// 1,000; every URL added is both seen and queued (a worst case for the queue: a real crawl at
// 100M seen has most of them fetched and out of the queue). The figures:
//   - bytes/url RSS: growth of the process's resident set (after GC, FreeOSMemory) per URL
//     added, from the midpoint to the end (Badger's memtables and caches, bounded and full
//     after the first ~1.5M URLs, stay out of the slope), split into anonymous memory and
//     file-backed pages (Badger mmaps its tables: the kernel drops those under pressure);
//   - bloom bytes/url: the filter's bit array over the URLs it holds (it is sized for 10M
//     URLs, or twice the seen count after a rebuild, so this swings between ~1.2 and ~2.4);
//   - checks/cpu-s: mostly-seen link checks per second of process CPU (Badger's goroutines
//     included) for batches of 100 links: 80 navigation links from a hot set of 5,000 URLs,
//     19 links to any seen URL, 1 new URL. A single core's rate is checks per CPU-second.
func BenchmarkSeenSetScale(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("CRAWLNODE_SCALE_URLS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 10_000 {
			b.Fatalf("CRAWLNODE_SCALE_URLS=%q: want an integer >= 10000", s)
		}
		n = v
	}
	hosts := max(n/1000, 10)
	url := func(i int) string {
		return "http://host" + strconv.Itoa(i%hosts) + ".scale.test/section/" + strconv.Itoa(i%97) + "/page-" + strconv.Itoa(i) + ".html"
	}
	dir := b.TempDir()
	// The node's Badger options (node.openBadger).
	opts := badger.DefaultOptions(dir).WithLogger(nil).WithNumVersionsToKeep(1).WithCompactL0OnClose(false).
		WithMemTableSize(32 << 20).WithBlockCacheSize(64 << 20).WithIndexCacheSize(32 << 20).WithValueLogFileSize(256 << 20)
	db, err := badger.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	f, err := Open(Config{DB: db, DefaultDelaySet: true, MaxPagesPerHost: -1, GeneratedBudget: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()

	rss0 := settledRSS()
	anon0 := procStatus("RssAnon")
	var rssMid, anonMid int64
	addedMid := 0
	batch := make([]Candidate, 0, 1000)
	start, cpu0 := time.Now(), cpuTime()
	for i := 0; i < n; i++ {
		batch = append(batch, Candidate{URL: url(i), Depth: i % 5})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := f.Add(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
		if i+1 == n/2 {
			rssMid, addedMid = settledRSS(), i+1
			anonMid = procStatus("RssAnon")
		}
		if (i+1)%(n/10) == 0 {
			settledRSS()
			b.Logf("%11d URLs: %s, %4.0f s", i+1, memLine(), time.Since(start).Seconds())
		}
	}
	addWall, addCPU := time.Since(start), cpuTime()-cpu0
	rssN := settledRSS()
	anonN := procStatus("RssAnon")
	st := f.Stats()
	slope := float64(rssN-rssMid) / float64(n-addedMid)
	anonSlope := float64(anonN-anonMid) / float64(n-addedMid)
	b.Logf("added %d URLs over %d hosts in %.1f s (%.0f URLs/s, %.0f per CPU-second); seen %d, queued %d",
		n, hosts, addWall.Seconds(), float64(n)/addWall.Seconds(), float64(n)/addCPU.Seconds(), st.Seen, st.Queued)
	b.Logf("RSS: empty %.1f MiB, at %d URLs %.1f MiB, at %d URLs %.1f MiB: %.1f bytes/URL growth",
		float64(rss0)/(1<<20), addedMid, float64(rssMid)/(1<<20), n, float64(rssN)/(1<<20), slope)
	b.Logf("anonymous memory: empty %.1f MiB, at %d URLs %.1f MiB, at %d URLs %.1f MiB: %.1f bytes/URL growth (the rest of RSS is Badger's mmapped tables)",
		float64(anon0)/(1<<20), addedMid, float64(anonMid)/(1<<20), n, float64(anonN)/(1<<20), anonSlope)
	b.Logf("Bloom: %d bytes for %d URLs = %.3f bytes/URL, fill %.3f", st.BloomBytes, st.Seen, float64(st.BloomBytes)/float64(st.Seen), st.BloomFill)
	extrap := func(seen float64) float64 { return float64(rssMid) + slope*(seen-float64(addedMid)) }
	b.Logf("extrapolated (linear in URLs, an extrapolation, not a measurement): 110M URLs (100M seen + 10M queued, all counted as seen and queued) %.2f GB RSS, %.2f GB anonymous",
		extrap(110e6)/1e9, (float64(anonMid)+anonSlope*(110e6-float64(addedMid)))/1e9)

	// Mostly-seen link checks.
	r := rand.New(rand.NewPCG(1, 2))
	const hot = 5000
	const batches = 20_000
	next := n
	links := make([]Candidate, 0, 100)
	res := AddResult{}
	start, cpu0 = time.Now(), cpuTime()
	for k := 0; k < batches; k++ {
		links = links[:0]
		for j := 0; j < 80; j++ {
			links = append(links, Candidate{URL: url(r.IntN(hot) * (n / hot))})
		}
		for j := 0; j < 19; j++ {
			links = append(links, Candidate{URL: url(r.IntN(n))})
		}
		links = append(links, Candidate{URL: url(next)})
		next++
		ar, err := f.Add(links)
		if err != nil {
			b.Fatal(err)
		}
		res.Added += ar.Added
		res.AlreadySeen += ar.AlreadySeen
	}
	checks := batches * 100
	wall, cpu := time.Since(start), cpuTime()-cpu0
	b.Logf("mostly-seen checks: %d links (added %d, already seen %d) in %.2f s wall, %.2f s CPU: %.0f checks/s, %.0f checks per CPU-second",
		checks, res.Added, res.AlreadySeen, wall.Seconds(), cpu.Seconds(), float64(checks)/wall.Seconds(), float64(checks)/cpu.Seconds())
	b.ReportMetric(slope, "rss-bytes/url")
	b.ReportMetric(anonSlope, "anon-bytes/url")
	b.ReportMetric(float64(st.BloomBytes)/float64(st.Seen), "bloom-bytes/url")
	b.ReportMetric(float64(checks)/cpu.Seconds(), "checks/cpu-s")
	b.ReportMetric(float64(n)/addWall.Seconds(), "adds/s")
}

// settledRSS is the process's resident set after a GC that returns freed memory to the OS.
func settledRSS() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	return procStatus("VmRSS")
}

// procStatus reads one kB figure of /proc/self/status (VmRSS, RssAnon, RssFile) in bytes.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var kb int64
		if _, err := fmt.Sscanf(sc.Text(), field+": %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	return 0
}

// memLine splits the resident set: anonymous memory (Go heap, Bloom, caches) and file-backed
// pages (Badger mmaps its tables; the kernel can drop those pages under pressure).
func memLine() string {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return fmt.Sprintf("RSS %7.1f MiB (anon %7.1f, file-backed %7.1f), Go heap in use %7.1f MiB",
		float64(procStatus("VmRSS"))/(1<<20), float64(procStatus("RssAnon"))/(1<<20),
		float64(procStatus("RssFile"))/(1<<20), float64(ms.HeapInuse)/(1<<20))
}
