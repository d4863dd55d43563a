package frontier

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/crawlnode/crawlnode/internal/badgermem"
	"github.com/dgraph-io/badger/v4"
)

// BenchmarkSeenCheckMix: the link check of a crawl where nearly every link is already seen,
// with a given share of cold links. Hot links are the repeated ones (navigation, footers,
// the pages of hosts being crawled: 20,000 URLs that the seen cache holds); cold links are
// seen URLs drawn uniformly from the whole seen set (300,000 URLs on an on-disk Badger
// with the node's options, badgermem.Options), which the cache (default size) mostly does
// not hold, so the Bloom filter says "maybe" and the seen index (or Badger) confirms. Published URL-cache studies (Broder et
// al., "Efficient URL caching for World Wide Web crawling", 2003) see 80-85% of a crawl's
// link checks hit a cache of 2^16-2^18 entries: cold 15-20% is the realistic range, 0% and 5%
// bound it. Batches of 100 candidates with their host set, as the crawl loop sends them.
// The frontier has a seen index (Config.SeenIndexDir), as a node's has.
// Reported: checks/s, cpu-ns/op and checks per CPU-second (the "per core"),
// confirms/op, the share of checks that needed a confirmation, and idxhits/op, the share
// that the seen index confirmed (the rest read Badger).
//
//	go test -run '^$' -bench SeenCheckMix -benchtime 1000000x ./frontier/
func BenchmarkSeenCheckMix(b *testing.B) {
	const (
		seen = 300_000
		hot  = 20_000
	)
	dir := b.TempDir()
	open := func() *badger.DB {
		db, err := badger.Open(badgermem.Options(dir))
		if err != nil {
			b.Fatal(err)
		}
		return db
	}
	cfg := Config{DefaultDelaySet: true, MaxPagesPerHost: -1, GeneratedBudget: -1, SeenIndexDir: b.TempDir()}
	url := func(i int) Candidate {
		h := fmt.Sprintf("host%d.mix.test", i%5000)
		return Candidate{URL: fmt.Sprintf("http://%s/section/%d/page-%d.html", h, i%97, i), Host: h, Depth: 2}
	}
	db := open()
	cfg.DB = db
	f, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	addInBatches(b, f, seen, url)
	// Make the seen set look like a crawl's after a while: in tables on disk, with the
	// flushes and compactions of the fill over before anything is timed (CPU time counts
	// Badger's background goroutines too).
	_ = f.Close()
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	db = open()
	b.Cleanup(func() { _ = db.Close() })
	if err := db.Flatten(1); err != nil {
		b.Fatal(err)
	}
	cfg.DB = db
	f = openF(b, cfg)
	for _, cold := range []float64{0, 0.05, 0.10, 0.20} {
		b.Run(fmt.Sprintf("cold=%.0f%%", cold*100), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, uint64(cold*1000)))
			hotSet := make([]Candidate, hot)
			for i := range hotSet {
				hotSet[i] = url((i * 7919) % seen)
			}
			// Pre-draw the stream so drawing costs nothing inside the timer.
			stream := make([]Candidate, 1<<18)
			for i := range stream {
				if rng.Float64() < cold {
					stream[i] = url(rng.IntN(seen))
				} else {
					stream[i] = hotSet[rng.IntN(hot)]
				}
			}
			for i := 0; i < hot; i += 100 { // warm the cache with the hot set
				if _, err := f.Add(hotSet[i:min(i+100, hot)]); err != nil {
					b.Fatal(err)
				}
			}
			st0 := f.Stats()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i += 100 {
				j := i % len(stream)
				r, err := f.Add(stream[j:min(j+100, len(stream), j+b.N-i)])
				if err != nil || r.Added != 0 {
					b.Fatal(err, r)
				}
			}
			cpu := cpuTime() - cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
			b.ReportMetric(float64(b.N)/cpu.Seconds(), "checks/cpu-s")
			st := f.Stats()
			b.ReportMetric(float64(st.BloomChecks-st0.BloomChecks)/float64(b.N), "confirms/op")
			b.ReportMetric(float64(st.SeenIndexHits-st0.SeenIndexHits)/float64(b.N), "idxhits/op")
		})
	}
}
