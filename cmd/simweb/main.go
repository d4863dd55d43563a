// Command simweb serves the simulated web on loopback and writes its seeds file.
//
//	go run ./cmd/simweb --hosts 200 --seed 1 --addr 127.0.0.1:8081
//
// Point a crawler at it with --resolve '*.sim.test=127.0.0.1:8081'. The oracle answers at
// http://127.0.0.1:8081/_simweb/report?ua=...&delay=...&per_host=... (see simweb/README.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/crawlnode/crawlnode/simweb"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "simweb:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	c := simweb.DefaultConfig()
	fs := flag.NewFlagSet("simweb", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8081", "listen address (loopback)")
	seedsOut := fs.String("seeds-out", "", "seeds file path (default: a file in the temp dir)")
	fs.Int64Var(&c.Seed, "seed", c.Seed, "generator seed: same seed, same web")
	fs.IntVar(&c.Hosts, "hosts", c.Hosts, "number of hosts h0..hN-1")
	fs.StringVar(&c.Suffix, "suffix", c.Suffix, "DNS suffix of every host")
	fs.IntVar(&c.MeanPages, "mean-pages", c.MeanPages, "mean article pages per host (heavy-tailed)")
	fs.IntVar(&c.MaxPages, "max-pages", c.MaxPages, "cap on one host's article pages")
	fs.IntVar(&c.CrossHostLinks, "cross-host-links", c.CrossHostLinks, "cross-host links per article")
	fs.IntVar(&c.RandomLinks, "random-links", c.RandomLinks, "random same-host links per article")
	fs.IntVar(&c.MinWords, "min-words", c.MinWords, "minimum main-text words per article")
	fs.IntVar(&c.MaxWords, "max-words", c.MaxWords, "maximum main-text words per article")
	fs.IntVar(&c.RobotsRulesHosts, "robots-rules-hosts", c.RobotsRulesHosts, "hosts with Allow/Disallow wildcard rules")
	fs.IntVar(&c.RobotsGroupsHosts, "robots-groups-hosts", c.RobotsGroupsHosts, "hosts with several user-agent groups")
	fs.IntVar(&c.CrawlDelayHosts, "crawl-delay-hosts", c.CrawlDelayHosts, "hosts announcing Crawl-delay")
	fs.DurationVar(&c.CrawlDelay, "crawl-delay", c.CrawlDelay, "the Crawl-delay those hosts announce")
	fs.IntVar(&c.CrawlDelayMaxPages, "crawl-delay-max-pages", c.CrawlDelayMaxPages, "page cap on crawl-delay hosts")
	fs.IntVar(&c.Robots5xxHosts, "robots-5xx-hosts", c.Robots5xxHosts, "hosts whose robots.txt answers 5xx (disallow all)")
	fs.IntVar(&c.RobotsUnreachableHosts, "robots-unreachable-hosts", c.RobotsUnreachableHosts, "hosts dropping the robots.txt connection (disallow all)")
	fs.IntVar(&c.Robots4xxHosts, "robots-4xx-hosts", c.Robots4xxHosts, "hosts whose robots.txt answers 403 (allow all)")
	fs.IntVar(&c.RobotsRedirectHosts, "robots-redirect-hosts", c.RobotsRedirectHosts, "hosts redirecting robots.txt twice")
	fs.IntVar(&c.RobotsOversizeHosts, "robots-oversize-hosts", c.RobotsOversizeHosts, "hosts with a ~600 KiB robots.txt")
	fs.IntVar(&c.SitemapHosts, "sitemap-hosts", c.SitemapHosts, "hosts with Sitemap: lines (XML, index, gzip)")
	fs.IntVar(&c.CalendarTrapHosts, "calendar-trap-hosts", c.CalendarTrapHosts, "hosts with an infinite calendar")
	fs.IntVar(&c.SessionTrapHosts, "session-trap-hosts", c.SessionTrapHosts, "hosts with session ids in paths")
	fs.IntVar(&c.DeepTrapHosts, "deep-trap-hosts", c.DeepTrapHosts, "hosts with ever-deeper paths")
	fs.IntVar(&c.FacetTrapHosts, "facet-trap-hosts", c.FacetTrapHosts, "hosts with infinite query facets")
	fs.IntVar(&c.SubdomainTrapHosts, "subdomain-trap-hosts", c.SubdomainTrapHosts, "hosts inventing subdomains")
	fs.IntVar(&c.MirrorHosts, "mirror-hosts", c.MirrorHosts, "hosts mirroring another host (exact duplicates)")
	fs.IntVar(&c.NearDupHosts, "near-dup-hosts", c.NearDupHosts, "hosts with near-duplicate articles")
	fs.Float64Var(&c.NearDupEditRate, "near-dup-edit-rate", c.NearDupEditRate, "fraction of words changed in a near-duplicate")
	fs.IntVar(&c.CanonicalHosts, "canonical-hosts", c.CanonicalHosts, "hosts with ?print=1 variants carrying rel=canonical")
	fs.IntVar(&c.RedirectHosts, "redirect-hosts", c.RedirectHosts, "hosts with 301/302/307/308, chains, a loop, cross-host")
	fs.IntVar(&c.ErrorHosts, "error-hosts", c.ErrorHosts, "hosts with 404/410/500 pages")
	fs.IntVar(&c.RetryAfterHosts, "retry-after-hosts", c.RetryAfterHosts, "hosts answering 503/429 + Retry-After first")
	fs.DurationVar(&c.RetryAfter, "retry-after", c.RetryAfter, "Retry-After sent (rounded up to seconds)")
	fs.IntVar(&c.SlowHosts, "slow-hosts", c.SlowHosts, "hosts with one slow-first-byte page")
	fs.DurationVar(&c.SlowFirstByte, "slow-first-byte", c.SlowFirstByte, "delay before the first byte of slow pages")
	fs.IntVar(&c.TrickleHosts, "trickle-hosts", c.TrickleHosts, "hosts with one trickled page")
	fs.DurationVar(&c.TrickleDuration, "trickle-duration", c.TrickleDuration, "time to trickle a page out")
	fs.IntVar(&c.HugeHosts, "huge-hosts", c.HugeHosts, "hosts with one huge page")
	fs.Int64Var(&c.HugeBodyBytes, "huge-body-bytes", c.HugeBodyBytes, "size of the huge body")
	fs.IntVar(&c.BinaryHosts, "binary-hosts", c.BinaryHosts, "hosts with PDF, PNG, binary .html, mislabeled content")
	fs.BoolVar(&c.HostilePDFs, "hostile-pdfs", c.HostilePDFs, "binary hosts also link a broken PDF, a 200,000-page PDF and a decompression bomb (/files/2-4.pdf)")
	fs.IntVar(&c.EncodingHosts, "encoding-hosts", c.EncodingHosts, "hosts compressing with gzip/brotli on request")
	fs.IntVar(&c.MalformedHosts, "malformed-hosts", c.MalformedHosts, "hosts with malformed HTML pages")
	fs.IntVar(&c.BaseHrefHosts, "base-href-hosts", c.BaseHrefHosts, "hosts with <base href> pages")
	fs.BoolVar(&c.LinkVariety, "link-variety", c.LinkVariety, "relative, protocol-relative, uppercase, :80, fragment, escaped links")
	fs.BoolVar(&c.TrackingParams, "tracking-params", c.TrackingParams, "utm_*, fbclid, sid, ;jsessionid= on links")
	fs.IntVar(&c.NofollowHosts, "nofollow-hosts", c.NofollowHosts, "hosts with meta robots nofollow / rel=nofollow")
	fs.BoolVar(&c.Languages, "languages", c.Languages, "article text in en, de, fr, es, ru, zh, ja, ar, hi; <html lang> right, absent or wrong")
	fs.IntVar(&c.OptOutHosts, "opt-out-hosts", c.OptOutHosts, "hosts with X-Robots-Tag, tdm-reservation, noai (first: tdmrep.json)")
	fs.DurationVar(&c.LatencyMedian, "latency-median", c.LatencyMedian, "median first-byte latency of hosts (log-normal per host and request; 0: instant)")
	fs.Float64Var(&c.LatencyHostSigma, "latency-host-sigma", 0.8, "spread of host medians (log-normal shape)")
	fs.Float64Var(&c.LatencyRequestSigma, "latency-request-sigma", 0.5, "spread of one host's requests (log-normal shape)")
	fs.DurationVar(&c.LatencyMax, "latency-max", 30*time.Second, "cap on one request's first-byte latency")
	fs.Int64Var(&c.TransferRateMedian, "transfer-rate", c.TransferRateMedian, "median per-host transfer rate, bytes/s (0: unlimited)")
	fs.IntVar(&c.TimeoutHosts, "timeout-hosts", c.TimeoutHosts, "hosts that never answer, robots.txt included (disallow all)")
	fs.IntVar(&c.ConnLimitHosts, "conn-limit-hosts", c.ConnLimitHosts, "hosts refusing a second connection while one is open")
	changes := fs.String("change-intervals", "", "comma-separated change intervals of pages (0 = never), e.g. 0,5s,20s: pages then change, answer conditional GETs, and /_simweb/freshness judges a continuous crawl")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, s := range strings.Split(*changes, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("--change-intervals: %v", err)
		}
		c.ChangeIntervals = append(c.ChangeIntervals, d)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "simweb")
	c.Logger = log
	w, err := simweb.New(c)
	if err != nil {
		return err
	}
	path := *seedsOut
	if path == "" {
		path = filepath.Join(os.TempDir(), fmt.Sprintf("simweb-seeds-%d-%d.txt", c.Seed, c.Hosts))
	}
	if err := w.WriteSeeds(path); err != nil {
		return err
	}
	bound, err := w.Start(*addr)
	if err != nil {
		return err
	}
	fmt.Printf("simweb: serving %d hosts (*.%s) on http://%s\n", c.Hosts, w.Config().Suffix, bound)
	fmt.Printf("simweb: seeds file: %s\n", path)
	fmt.Printf("simweb: crawler flag: --resolve '*.%s=%s'\n", w.Config().Suffix, bound)
	fmt.Printf("simweb: report: http://%s/_simweb/report?ua=crawlnode&delay=0&per_host=1\n", bound)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
