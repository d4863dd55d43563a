package node

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/simweb"
)

// plainWeb is simweb's default web with every pathology off: no slow, busy, trap or
// otherwise difficult hosts (every int field named *Hosts but Hosts set to 0).
func plainWeb() simweb.Config {
	cfg := simweb.DefaultConfig()
	v := reflect.ValueOf(&cfg).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Type().Field(i); f.Name != "Hosts" && strings.HasSuffix(f.Name, "Hosts") && f.Type.Kind() == reflect.Int {
			v.Field(i).SetInt(0)
		}
	}
	return cfg
}

// TestCommitFaultsLoseNothing: the committer's writes (links, extract jobs, outcomes) fail
// now and then; the crawl retries them and ends as a crawl without faults does: full
// coverage, no URL fetched twice, every page extracted, no politeness violation.
func TestCommitFaultsLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	type result struct {
		rep       simweb.Report
		processed int64
		retries   int64
		failed    map[string]int
	}
	crawl := func(faulty bool) result {
		// A plain web keeps the two crawls short; the faults are the test.
		cfg := plainWeb()
		cfg.Hosts, cfg.Seed, cfg.MeanPages, cfg.MaxWords = 8, 17, 30, 1500
		w, rule := startSimweb(t, cfg)
		const delay = testCrawlDelay
		nc := testNodeConfig(filepath.Join(t.TempDir(), "n"), "", rule)
		nc.Seeds, nc.Logger, nc.Cluster = w.Seeds(), testLogger("n"), ClusterConfig{Profile: "test"}
		n, err := New(nc)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		calls, failed := map[string]int{}, map[string]int{}
		if faulty {
			// Every third write of each kind fails, the first 60 of each kind.
			n.commitHook = func(point string) error {
				mu.Lock()
				defer mu.Unlock()
				calls[point]++
				if c := calls[point]; c%3 == 1 && c <= 60 {
					failed[point]++
					return fmt.Errorf("injected %s write failure: %w", point, syscall.EIO)
				}
				return nil
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := n.Run(ctx); err != nil {
			t.Fatalf("run (faulty %v): %v", faulty, err)
		}
		mu.Lock()
		defer mu.Unlock()
		return result{rep: w.Report(simweb.ReportOptions{UserAgent: DefaultUserAgent, DefaultDelay: delay, PerHost: 1}),
			processed: n.stage.Stats().Processed, retries: n.stats.commitRetries.Load(), failed: failed}
	}
	clean, faulty := crawl(false), crawl(true)
	for _, r := range []result{clean, faulty} {
		t.Logf("coverage %.4f (%d/%d), requests %d, duplicates %d, politeness %d, extracted %d, injected failures %v, retries %d",
			r.rep.Coverage, r.rep.Reached, r.rep.MustReach, r.rep.Requests, r.rep.DuplicateFetches, r.rep.PolitenessViolations,
			r.processed, r.failed, r.retries)
		if r.rep.Coverage < 1 || r.rep.DuplicateFetches != 0 || r.rep.PolitenessViolations != 0 || r.rep.RobotsViolations != 0 {
			t.Errorf("coverage %.4f (missing %v), duplicates %d %v, politeness %d, robots %d", r.rep.Coverage,
				r.rep.Missing[:min(5, len(r.rep.Missing))], r.rep.DuplicateFetches, r.rep.Duplicates, r.rep.PolitenessViolations, r.rep.RobotsViolations)
		}
	}
	if faulty.failed["links"] == 0 || faulty.failed["jobs"] == 0 || faulty.failed["done"] == 0 {
		t.Fatalf("faults not exercised: %v", faulty.failed)
	}
	if faulty.retries < int64(faulty.failed["links"]+faulty.failed["jobs"]+faulty.failed["done"]) {
		t.Errorf("retries %d < injected failures %v", faulty.retries, faulty.failed)
	}
	if faulty.processed != clean.processed {
		t.Errorf("extracted %d pages with faults, %d without", faulty.processed, clean.processed)
	}
}
