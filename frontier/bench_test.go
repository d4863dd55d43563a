package frontier

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time: on a shared, loaded machine it says more
// about cost per operation than wall time does (it includes Badger's own goroutines).
func cpuTime() time.Duration {
	ru := rusage()
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func rusage() (ru syscall.Rusage) {
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru
}

// faults returns the process's minor and major page faults so far and its system CPU
// time: a mapped file's page the process does not map any more (a trim advised it) costs
// a minor fault in the kernel on its next touch, which a CPU profile charges to the
// instruction that touched it.
func faults() (minor, major int64, sys time.Duration) {
	ru := rusage()
	return ru.Minflt, ru.Majflt, time.Duration(ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

func benchURL(i int) Candidate {
	return Candidate{URL: fmt.Sprintf("http://host%d.bench.test/section/%d/page-%d.html", i%1000, i%97, i), Depth: i % 5}
}

func benchFrontier(b *testing.B) *Frontier {
	return openF(b, Config{DB: openDB(b, ""), DefaultDelaySet: true, MaxPagesPerHost: -1, GeneratedBudget: -1, ExpectedURLs: 1 << 20})
}

// BenchmarkAddNew: ns per new URL, added in batches of 100 (one Badger transaction each).
func BenchmarkAddNew(b *testing.B) {
	f := benchFrontier(b)
	batch := make([]Candidate, 0, 100)
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for i := 0; i < b.N; i++ {
		batch = append(batch, benchURL(i))
		if len(batch) == cap(batch) || i == b.N-1 {
			if _, err := f.Add(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "urls/s")
}

// BenchmarkAddMostlySeen: ns per candidate when 99 of 100 are already seen (Bloom "maybe",
// confirmed by a Badger Get) and 1 is new.
func BenchmarkAddMostlySeen(b *testing.B) {
	f := benchFrontier(b)
	const pre = 100_000
	addInBatches(b, f, pre, benchURL)
	batch := make([]Candidate, 0, 100)
	next := pre
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for i := 0; i < b.N; i++ {
		if len(batch) == 99 {
			batch = append(batch, benchURL(next))
			next++
			if _, err := f.Add(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
			continue
		}
		batch = append(batch, benchURL((i*7919)%pre))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
}

// BenchmarkSeenCheckAllSeen: ns per candidate for batches of 100 already-seen URLs: the
// pure check path (hash, Bloom, seen cache or Badger Get), no write. "hot" draws from 20k
// URLs (the repeated navigation links of real crawls: served by the seen cache), "cold" from
// 100k with a 16k-entry cache (nearly every check is a Badger Get).
func BenchmarkSeenCheckAllSeen(b *testing.B) {
	for _, bc := range []struct {
		name       string
		set, cache int
	}{{"hot", 20_000, 1 << 16}, {"cold", 100_000, 1 << 14}} {
		b.Run(bc.name, func(b *testing.B) {
			f := openF(b, Config{DB: openDB(b, ""), DefaultDelaySet: true, MaxPagesPerHost: -1, GeneratedBudget: -1,
				ExpectedURLs: 1 << 20, SeenCacheSize: bc.cache})
			pre := 100_000
			batch := make([]Candidate, 0, 1000)
			for i := 0; i < pre; i++ {
				batch = append(batch, benchURL(i))
				if len(batch) == cap(batch) {
					if _, err := f.Add(batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			cands := make([]Candidate, bc.set)
			for i := range cands {
				cands[i] = benchURL((i * 7919) % pre)
			}
			b.ReportAllocs()
			b.ResetTimer()
			defer reportCPU(b, cpuTime())
			for i := 0; i < b.N; i += 100 {
				j := i % bc.set
				r, err := f.Add(cands[j:min(j+100, bc.set)])
				if err != nil || r.Added != 0 {
					b.Fatal(err, r)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
		})
	}
}

// BenchmarkSeenCheckParallel: the same mostly-seen load from GOMAXPROCS goroutines.
func BenchmarkSeenCheckParallel(b *testing.B) {
	f := benchFrontier(b)
	const pre = 100_000
	addInBatches(b, f, pre, benchURL)
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	b.RunParallel(func(pb *testing.PB) {
		batch := make([]Candidate, 0, 100)
		i := 0
		for pb.Next() {
			i++
			batch = append(batch, benchURL((i*7919)%pre))
			if len(batch) == cap(batch) {
				if _, err := f.Add(batch); err != nil {
					b.Error(err)
					return
				}
				batch = batch[:0]
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
}

// BenchmarkNextDone: one lease + Done(Fetched) over 1000 hosts, no delay.
func BenchmarkNextDone(b *testing.B) {
	f := benchFrontier(b)
	batch := make([]Candidate, 0, 1000)
	for i := 0; i < b.N; i++ {
		batch = append(batch, benchURL(i))
		if len(batch) == cap(batch) || i == b.N-1 {
			if _, err := f.Add(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	defer func() { b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "leases/s") }()
	for i := 0; i < b.N; i++ {
		l, _ := tryNext(b, f)
		if l == nil {
			b.Fatalf("no lease at %d: %+v", i, f.Stats())
		}
		if err := f.Done(l, Outcome{Kind: Fetched, Status: 200}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBloomBytesPerURL reports the filter's RAM per URL at the default sizing.
func BenchmarkBloomBytesPerURL(b *testing.B) {
	f := openF(b, Config{DB: openDB(b, "")})
	for i := 0; i < b.N; i++ {
		_ = f.Stats()
	}
	b.ReportMetric(float64(f.Stats().BloomBytes)/float64(f.cfg.ExpectedURLs), "bytes/url")
}

// BenchmarkNextDoneParallel: 16 workers leasing and completing over 1000 hosts (Badger
// groups their commits).
func BenchmarkNextDoneParallel(b *testing.B) {
	f := benchFrontier(b)
	batch := make([]Candidate, 0, 1000)
	for i := 0; i < b.N+1000; i++ {
		batch = append(batch, benchURL(i))
		if len(batch) == cap(batch) || i == b.N+999 {
			if _, err := f.Add(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.SetParallelism(8)
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			l, err := f.Next(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if err := f.Done(l, Outcome{Kind: Fetched, Status: 200}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "leases/s")
}
