package e2e

import (
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
