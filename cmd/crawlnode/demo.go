package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/crawlnode/crawlnode/fetch"
	"github.com/crawlnode/crawlnode/simweb"
)

// runDemo crawls an in-process simulated web on loopback, so it works with no internet,
// then prints what the server saw and where the outputs went.
func runDemo(args []string) error {
	f := newCrawlFlags("demo")
	hosts := f.fs.Int("hosts", 20, "hosts in the simulated web")
	seed := f.fs.Int64("web-seed", 1, "seed of the simulated web")
	out := f.fs.String("out", "", "data directory (default: a new directory under the system temp dir)")
	if err := f.parse(args); err != nil {
		return err
	}
	cfg := f.cfg
	wcfg := simweb.DefaultConfig()
	wcfg.Seed = *seed
	wcfg.Hosts = *hosts
	// A few of the demo's hosts announce a Crawl-delay (and a few of those carry a trap
	// space too, up to ~220 budgeted URLs): 100 ms instead of simweb's 500 ms keeps the
	// demo short while the crawler still honours every delay.
	wcfg.CrawlDelay = 100 * time.Millisecond
	web, err := simweb.New(wcfg)
	if err != nil {
		return fmt.Errorf("simulated web: %w", err)
	}
	addr, err := web.Start("127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("simulated web: %w", err)
	}
	defer web.Close()

	if *out == "" {
		d, err := os.MkdirTemp("", "crawlnode-demo-")
		if err != nil {
			return err
		}
		*out = d
	}
	cfg.DataDir = filepath.Join(*out, "data")
	if len(cfg.Seeds) == 0 {
		cfg.Seeds = web.Seeds()
	}
	rule, err := fetch.ParseResolve("*." + wcfg.Suffix + "=" + addr)
	if err != nil {
		return err
	}
	cfg.Resolve = append(cfg.Resolve, rule)
	if !flagGiven(f, "delay") {
		cfg.Delay = 0
	}
	cfg.ExitWhenDone = true
	// The simulated web has hosts whose robots.txt never answers and pages that always
	// fail: short retries keep the demo to well under a minute.
	if !flagGiven(f, "robots-retry") {
		cfg.RobotsRetryBase = 200 * time.Millisecond
	}
	if !flagGiven(f, "retry-base") {
		cfg.RetryBase = 200 * time.Millisecond
	}
	if !flagGiven(f, "http") {
		cfg.HTTPAddr = "127.0.0.1:0" // a free port: the demo must not collide with a running node
	}
	fmt.Fprintf(os.Stderr, "demo: simulated web of %d hosts on %s; crawling into %s\n", *hosts, addr, cfg.DataDir)
	start := time.Now()
	if err := crawl(cfg, f.quiet, f.gcHeadroom); err != nil {
		return err
	}
	rep := web.Report(simweb.ReportOptions{UserAgent: cfg.UserAgent, DefaultDelay: cfg.Delay, PerHost: cfg.PerHost, MaxDepth: cfg.MaxDepth})
	fmt.Printf("\nCrawled the simulated web in %s.\n", time.Since(start).Round(time.Millisecond))
	fmt.Printf("What the server saw: %d requests; coverage %d/%d (%.1f%%); duplicate fetches %d; robots violations %d; politeness violations %d\n",
		rep.Requests, rep.Reached, rep.MustReach, 100*rep.Coverage, rep.DuplicateFetches, rep.RobotsViolations+rep.BeforeRobots, rep.PolitenessViolations)
	fmt.Printf("Raw pages (WARC):   %s\n", filepath.Join(cfg.DataDir, "warc"))
	fmt.Printf("Text corpus (JSONL): %s\n", filepath.Join(cfg.DataDir, "corpus"))
	fmt.Printf("Export the corpus:  go run ./cmd/crawlnode export --data %s --format jsonl --out corpus.jsonl\n", cfg.DataDir)
	return nil
}

func flagGiven(f *crawlFlags, name string) bool {
	given := false
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name == name {
			given = true
		}
	})
	return given
}
