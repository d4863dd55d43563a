package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/simweb"
)

// BenchmarkCrawl is the whole-crawl benchmark: the real binary crawls a default simulated
// web of 200 hosts with --delay 0 to completion, and reports pages/s, CPU seconds per 1,000
// pages and peak RSS, judged by simweb's report (coverage must be full).
//
//	go test -run '^$' -bench BenchmarkCrawl -benchtime 1x ./e2e
func BenchmarkCrawl(b *testing.B) {
	for i := 0; i < b.N; i++ {
		w, err := simweb.New(func() simweb.Config { c := simweb.DefaultConfig(); c.Hosts = 200; c.Seed = 1; return c }())
		if err != nil {
			b.Fatal(err)
		}
		addr, err := w.Start("127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		dir := b.TempDir()
		seeds := filepath.Join(dir, "seeds.txt")
		if err := w.WriteSeeds(seeds); err != nil {
			b.Fatal(err)
		}
		args := []string{
			"--data", filepath.Join(dir, "data"), "--seeds", seeds, "--resolve", "*.sim.test=" + addr,
			"--delay", "0", "--concurrency", "64", "--exit-when-done", "--robots-retry", "200ms",
			"--retry-base", "200ms", "--timeout", "10s", "--max-depth", "100", "--log-level", "warn", "--quiet", "--http", "127.0.0.1:0",
		}
		start := time.Now()
		c := startCrawler(b, args...)
		code := c.wait(b, 15*time.Minute)
		elapsed := time.Since(start)
		if code != 0 {
			b.Fatalf("crawlnode exited %d:\n%s", code, tail(c.stderr.String(), 2000))
		}
		rep := w.Report(reportOptions(0))
		w.Close()
		if rep.Coverage < 1 {
			b.Errorf("coverage %.4f", rep.Coverage)
		}
		b.ReportMetric(float64(rep.Requests)/elapsed.Seconds(), "pages/s")
		b.ReportMetric(1000*c.cpuSeconds()/float64(rep.Requests), "cpu-s/1000pages")
		b.ReportMetric(c.maxRSSMiB(), "peak-RSS-MiB")
		b.ReportMetric(float64(rep.Requests), "requests")
	}
}

// BenchmarkFsyncCost measures what durability costs the fetch stage: the same crawl
// (40 plain hosts, --no-extract, 64 in flight, no delay) with fsync on (the default:
// Badger SyncWrites, the WARC file fsynced before its pages are recorded) and with
// --no-fsync, one after the other on fresh data directories under the test's temp dir
// (TMPDIR's file system). It reports each run's pages/s and CPU, and the ratio of pages/s
// (sync / no sync; 1 = free). CRAWLNODE_FSYNC_DELAY sets --delay (default 0: the
// latency-bound worst case, where a host's next URL often waits for the commit of the link
// that names it).
func BenchmarkFsyncCost(b *testing.B) {
	delay := "0"
	if d := os.Getenv("CRAWLNODE_FSYNC_DELAY"); d != "" {
		delay = d
	}
	for i := 0; i < b.N; i++ {
		rate := map[bool]float64{}
		for _, sync := range []bool{true, false} {
			w, err := simweb.New(func() simweb.Config {
				c := simweb.DefaultConfig()
				plainWeb(&c)
				c.Hosts, c.Seed = 40, 5
				return c
			}())
			if err != nil {
				b.Fatal(err)
			}
			addr, err := w.Start("127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			dir := b.TempDir()
			seeds := filepath.Join(dir, "seeds.txt")
			if err := w.WriteSeeds(seeds); err != nil {
				b.Fatal(err)
			}
			args := []string{
				"--data", filepath.Join(dir, "data"), "--seeds", seeds, "--resolve", "*.sim.test=" + addr,
				"--delay", delay, "--concurrency", "64", "--exit-when-done", "--robots-retry", "200ms", "--no-extract",
				"--retry-base", "200ms", "--timeout", "10s", "--max-depth", "100", "--log-level", "warn", "--quiet", "--http", "127.0.0.1:0",
			}
			if !sync {
				args = append(args, "--no-fsync")
			}
			c := startCrawler(b, args...)
			code := c.wait(b, 10*time.Minute)
			if code != 0 {
				b.Fatalf("crawlnode exited %d:\n%s", code, tail(c.stderr.String(), 2000))
			}
			rep := w.Report(reportOptions(0))
			first, last := fetchSpan(w.Log())
			w.Close()
			if rep.Coverage < 1 {
				b.Errorf("coverage %.4f", rep.Coverage)
			}
			span := last.Sub(first).Seconds()
			rate[sync] = float64(rep.Requests) / span
			name := map[bool]string{true: "sync", false: "nosync"}[sync]
			b.ReportMetric(rate[sync], name+"-pages/s")
			b.ReportMetric(1000*c.cpuSeconds()/float64(rep.Requests), name+"-cpu-s/1000pages")
			b.Logf("%s: %d requests in %.1f s of fetching: %.0f pages/s, %.2f CPU-s per 1000 pages", name, rep.Requests, span, rate[sync], 1000*c.cpuSeconds()/float64(rep.Requests))
		}
		b.ReportMetric(rate[true]/rate[false], "ratio-sync/nosync")
	}
}
