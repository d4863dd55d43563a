package e2e

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/internal/s3test"
	"github.com/crawlnode/crawlnode/simweb"
)

// BenchmarkFetchStageOutputStore runs the fetch stage (--no-extract) over the default web of
// 200 hosts twice, without and with an output store (a real SeaweedFS on loopback, WARC files
// rotated every 5 s so uploads run throughout the crawl), and reports, for each, pages/s over
// the fetch span (first to last request the server saw) and over the time the first 90% of
// requests took, and the ratios on/off of both. The whole span is bound by three hosts with
// Crawl-delay 0.5 and trap spaces (docs/bench-log/whole-crawl.md), so the 90% figure is the
// one the crawler's own speed moves. Coverage must be full both times, and the bucket must
// hold the crawl's files at the end.
//
//	go test -run '^$' -bench BenchmarkFetchStageOutputStore -benchtime 1x ./e2e
func BenchmarkFetchStageOutputStore(b *testing.B) {
	srv := s3test.Start(b, "bench")
	b.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	b.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	for i := 0; i < b.N; i++ {
		off, off90 := fetchStageRun(b, nil)
		on, on90 := fetchStageRun(b, []string{"--output-store", "s3://bench/run", "--s3-endpoint", srv.Endpoint(), "--rotate-every", "5s"})
		b.ReportMetric(off, "pages/s-off")
		b.ReportMetric(on, "pages/s-on")
		b.ReportMetric(on/off, "on/off")
		b.ReportMetric(off90, "p90-pages/s-off")
		b.ReportMetric(on90, "p90-pages/s-on")
		b.ReportMetric(on90/off90, "p90-on/off")
		if objs := srv.Objects(b, "bench", "run/nodes/"); len(objs) < 3 {
			b.Errorf("only %d objects in the store", len(objs))
		}
	}
}

func fetchStageRun(b *testing.B, extra []string) (rate, rate90 float64) {
	w, err := simweb.New(func() simweb.Config { c := simweb.DefaultConfig(); c.Hosts = 200; c.Seed = 1; return c }())
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	addr, err := w.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	seeds := filepath.Join(dir, "seeds.txt")
	if err := w.WriteSeeds(seeds); err != nil {
		b.Fatal(err)
	}
	args := append([]string{
		"--data", filepath.Join(dir, "data"), "--seeds", seeds, "--resolve", "*.sim.test=" + addr,
		"--delay", "0", "--concurrency", "64", "--exit-when-done", "--no-extract", "--robots-retry", "200ms",
		"--retry-base", "200ms", "--timeout", "10s", "--max-depth", "100", "--log-level", "warn", "--quiet", "--http", "127.0.0.1:0",
	}, extra...)
	c := startCrawler(b, args...)
	if code := c.wait(b, 15*time.Minute); code != 0 {
		b.Fatalf("crawlnode exited %d:\n%s", code, tail(c.stderr.String(), 2000))
	}
	rep := w.Report(reportOptions(0))
	if rep.Coverage < 1 {
		b.Errorf("coverage %.4f", rep.Coverage)
	}
	log := w.Log()
	first, last := fetchSpan(log)
	arrivals := make([]time.Time, 0, len(log))
	for _, r := range log {
		arrivals = append(arrivals, r.Arrival)
	}
	slices.SortFunc(arrivals, func(x, y time.Time) int { return x.Compare(y) })
	k := len(arrivals) * 9 / 10
	t90 := arrivals[k-1].Sub(first)
	rate = float64(rep.Requests) / last.Sub(first).Seconds()
	rate90 = float64(k) / t90.Seconds()
	b.Logf("%v: %d requests in %s (%.0f pages/s), 90%% in %s (%.0f pages/s), %.2f cpu-s/1000 pages", extra, rep.Requests,
		last.Sub(first).Round(time.Millisecond), rate, t90.Round(time.Millisecond), rate90, 1000*c.cpuSeconds()/float64(rep.Requests))
	return rate, rate90
}
