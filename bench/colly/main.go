// Command colly-vs-crawlnode crawls the same simulated web with Colly v2.3.0 and with
// Crawlnode's fetch stage, one after the other in the same run, and prints both crawlers'
// figures side by side, judged by simweb's report.
//
//	cd bench/colly && go run . [-rounds 3] [-hosts 40] [-mean-pages 500] [-words 5600] [-pin-server 1 -pin-crawler 0]
//	cd bench/colly && go run . -bodies "$(go env GOMODCACHE)/github.com/markusmobius/go-trafilatura@v1.12.2/test-files/comparison/*.html" ...
//
// It is a module of its own so that the main module does not carry Colly as a dependency;
// a replace directive points at the Crawlnode tree two directories up.
//
// The setup follows the measurement of Colly: ~40 KB documentation-like pages, 40
// hosts, one request in flight per host, no delay. The web is simweb's clean profile: every
// pathology (traps, robots rules, redirects, errors, slow and huge pages, link variety) is
// switched off, because Colly handles none of them and the comparison is about cost per page.
// simweb's generated article text is random words from a list in plain paragraphs: it costs
// a DOM builder like Colly's less than real pages do (Colly did 655-691 pages per CPU-second
// on it, against the issue's ~375 on real documentation pages) and costs deflate twice what
// real pages do per byte (BenchmarkGzipCorpus). With -bodies, article pages carry real
// pages' bodies instead (markup, text, inline scripts and styles; their links neutralised,
// see loadBodies), inside the same simweb page with the same links: the same web, with
// real pages' cost per byte. go-trafilatura's module holds 947 real-world pages
// (test-files/comparison), in the module cache once the main module's dependencies are.
//
// Each crawler runs as a child process against a fresh simweb (same seed, so the same web)
// served by this process: the child's CPU time (getrusage of the child, user + system) is
// the crawler's alone, never simweb's. Pages are the must-reach pages simweb saw fetched, so
// Crawlnode's extra requests (robots.txt, tdmrep.json) do not count in its favour.
//
// With -pin-server and -pin-crawler (taskset CPU lists) simweb (this process) and the
// crawler run on separate CPUs, so that pages/s measures the crawler alone and not the
// server's share of the same cores: on a 2-core machine, -pin-server 1 -pin-crawler 0.
//
// Colly keeps everything in memory and writes nothing; Crawlnode runs with --no-extract
// (the extract stage is measured separately) and otherwise does everything it always does:
// robots.txt, canonicalization, the exact seen set in Badger, WARC records on disk, link
// routing.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/crawlnode/crawlnode/simweb"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "colly-child" {
		if err := runColly(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "colly child:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	rounds     int
	hosts      int
	meanPages  int
	maxPages   int
	words      int
	seed       int64
	crawlnode  string
	only       string
	cpuProfile string
	keep       bool
	extra      string
	pinServer  string
	pinCrawler string
	compressed bool
	bodiesGlob string
	bodyMin    int
	bodyMax    int
	bodies     [][]byte
}

func run(args []string) error {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each round runs Colly, then Crawlnode (order alternates)")
	fs.IntVar(&o.hosts, "hosts", 40, "hosts in the simulated web")
	fs.IntVar(&o.meanPages, "mean-pages", 500, "mean article pages per host")
	fs.IntVar(&o.maxPages, "max-pages", 1000, "cap on one host's article pages (keeps the per-host serial tail short)")
	fs.IntVar(&o.words, "words", 5600, "main-text words per article (5,600 words: ~40 KB pages)")
	fs.Int64Var(&o.seed, "seed", 1, "simweb seed")
	fs.StringVar(&o.crawlnode, "crawlnode", "", "crawlnode binary (default: built from ../.. into a temp dir)")
	fs.StringVar(&o.only, "only", "", "run only this crawler: colly or crawlnode")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "pass --cpuprofile FILE to crawlnode (last round wins)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temp dir (crawlnode data) for inspection")
	fs.StringVar(&o.extra, "crawlnode-args", "", "extra crawlnode flags, space-separated (later flags win)")
	fs.BoolVar(&o.compressed, "compressed", false, "every host compresses its HTML when the client asks, as most real servers do (gzip; brotli on half the hosts when offered)")
	fs.StringVar(&o.bodiesGlob, "bodies", "", "HTML files (a glob) whose bodies, links neutralised, article pages carry instead of generated text, e.g. go-trafilatura's real-world test pages")
	fs.IntVar(&o.bodyMin, "body-min", 25000, "with -bodies: smallest body (bytes) used")
	fs.IntVar(&o.bodyMax, "body-max", 60000, "with -bodies: largest body (bytes) used")
	fs.StringVar(&o.pinServer, "pin-server", "", "CPU list (taskset -c) for this process, which serves simweb, e.g. 1")
	fs.StringVar(&o.pinCrawler, "pin-crawler", "", "CPU list (taskset -c) for the crawler child, e.g. 0")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "colly-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Println("temp dir:", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	if o.crawlnode == "" {
		o.crawlnode = filepath.Join(tmp, "crawlnode")
		build := exec.Command("go", "build", "-o", o.crawlnode, "./cmd/crawlnode")
		build.Dir = filepath.Join("..", "..")
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build crawlnode: %w", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if o.pinServer != "" {
		// Every thread of this process (-a), and so every thread it starts later.
		if out, err := exec.Command("taskset", "-a", "-p", "-c", o.pinServer, fmt.Sprint(os.Getpid())).CombinedOutput(); err != nil {
			return fmt.Errorf("taskset -a -p -c %s: %v: %s", o.pinServer, err, out)
		}
		runtime.GOMAXPROCS(cpuCount(o.pinServer))
	}
	if o.pinServer != "" || o.pinCrawler != "" {
		fmt.Printf("pinned: simweb (this process) on CPUs %q, each crawler on CPUs %q\n", o.pinServer, o.pinCrawler)
	}
	fmt.Printf("machine: %d CPUs (GOMAXPROCS %d), %s/%s, %s; load average %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0),
		runtime.GOOS, runtime.GOARCH, runtime.Version(), loadAvg())
	encoding := "uncompressed answers"
	if o.compressed {
		encoding = "answers compressed when asked (gzip, or br on half the hosts)"
	}
	text := fmt.Sprintf("%d words/article", o.words)
	if o.bodiesGlob != "" {
		var files int
		if o.bodies, files, err = loadBodies(o.bodiesGlob, o.bodyMin, o.bodyMax); err != nil {
			return err
		}
		total := 0
		for _, b := range o.bodies {
			total += len(b)
		}
		text = fmt.Sprintf("article bodies from %d of %d real pages (%d-%d bytes, mean %d, links neutralised)",
			len(o.bodies), files, o.bodyMin, o.bodyMax, total/len(o.bodies))
	}
	fmt.Printf("web: %d hosts, seed %d, mean %d pages/host (cap %d), %s, %s, no delay, 1 request in flight per host\n\n",
		o.hosts, o.seed, o.meanPages, o.maxPages, text, encoding)

	var results []result
	for r := 0; r < o.rounds; r++ {
		order := []string{"colly", "crawlnode"}
		if r%2 == 1 {
			order = []string{"crawlnode", "colly"}
		}
		for _, who := range order {
			if o.only != "" && o.only != who {
				continue
			}
			res, err := crawlOnce(o, who, r, self, tmp)
			if err != nil {
				return fmt.Errorf("round %d %s: %w", r+1, who, err)
			}
			res.print()
			results = append(results, res)
		}
	}
	summarize(results)
	return nil
}

// cleanWeb is simweb's clean profile: documentation-like pages and links, no pathologies.
func cleanWeb(o options) simweb.Config {
	c := simweb.DefaultConfig()
	c.Seed, c.Hosts, c.MeanPages, c.MaxPages = o.seed, o.hosts, o.meanPages, o.maxPages
	c.MinWords, c.MaxWords = o.words, o.words
	c.Bodies = o.bodies
	c.RobotsRulesHosts, c.RobotsGroupsHosts, c.CrawlDelayHosts = 0, 0, 0
	c.Robots5xxHosts, c.RobotsUnreachableHosts, c.Robots4xxHosts, c.RobotsRedirectHosts, c.RobotsOversizeHosts = 0, 0, 0, 0, 0
	c.SitemapHosts = 0
	c.CalendarTrapHosts, c.SessionTrapHosts, c.DeepTrapHosts, c.FacetTrapHosts, c.SubdomainTrapHosts = 0, 0, 0, 0, 0
	c.MirrorHosts, c.NearDupHosts, c.CanonicalHosts = 0, 0, 0
	c.RedirectHosts, c.ErrorHosts, c.RetryAfterHosts = 0, 0, 0
	c.SlowHosts, c.TrickleHosts, c.HugeHosts = 0, 0, 0
	c.BinaryHosts, c.EncodingHosts, c.MalformedHosts, c.BaseHrefHosts = 0, 0, 0, 0
	c.LinkVariety, c.TrackingParams = false, false
	c.NofollowHosts, c.OptOutHosts = 0, 0
	if o.compressed {
		c.EncodingHosts = o.hosts
	}
	return c
}

type result struct {
	who        string
	round      int
	pages      int // must-reach pages fetched (server's view)
	requests   int // every request the server saw
	mustReach  int
	coverage   float64
	dups       int
	violations int
	bytes      int64
	wall       time.Duration // child process, start to exit
	span       time.Duration // server's first request arrival to last request finish
	startup    time.Duration // child start to the server's first request
	cpu        time.Duration // child user + system
	maxRSSMiB  float64
	serverCPU  time.Duration // this process (simweb) during the run
}

func (r result) pagesPerSec() float64    { return float64(r.pages) / r.wall.Seconds() }
func (r result) pagesPerCPUSec() float64 { return float64(r.pages) / r.cpu.Seconds() }

func (r result) print() {
	fmt.Printf("round %d %-9s pages %6d/%-6d coverage %6.2f%%  requests %6d  dup %d  violations %d  wall %7.2fs (startup %.2fs, span %.2fs)  "+
		"pages/s %7.1f  CPU %6.2fs  pages/CPU-s %7.1f  maxRSS %6.1f MiB  simweb CPU %5.2fs  avg %.1f KB/resp\n",
		r.round+1, r.who, r.pages, r.mustReach, 100*r.coverage, r.requests, r.dups, r.violations, r.wall.Seconds(),
		r.startup.Seconds(), r.span.Seconds(), r.pagesPerSec(), r.cpu.Seconds(), r.pagesPerCPUSec(), r.maxRSSMiB, r.serverCPU.Seconds(),
		float64(r.bytes)/float64(max(r.requests, 1))/1000)
}

func crawlOnce(o options, who string, round int, self, tmp string) (result, error) {
	w, err := simweb.New(cleanWeb(o))
	if err != nil {
		return result{}, err
	}
	defer w.Close()
	addr, err := w.Start("127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	dir := filepath.Join(tmp, fmt.Sprintf("%s-%d", who, round))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return result{}, err
	}
	seeds := filepath.Join(dir, "seeds.txt")
	if err := w.WriteSeeds(seeds); err != nil {
		return result{}, err
	}
	var cmd *exec.Cmd
	ua := "crawlnode"
	switch who {
	case "colly":
		ua = "colly"
		cmd = exec.Command(self, "colly-child", "-addr", addr, "-seeds", seeds)
	case "crawlnode":
		args := []string{"--data", filepath.Join(dir, "data"), "--seeds", seeds, "--resolve", "*." + w.Config().Suffix + "=" + addr,
			"--delay", "0", "--per-host", "1", "--concurrency", "64", "--exit-when-done", "--no-extract",
			"--max-depth", "1000", "--timeout", "10s", "--log-level", "warn", "--quiet", "--http", "",
			// Only simweb's hosts, as Colly's AllowedDomains; and no DNS server to ask for
			// any other name, so a link that escapes the web can never leave loopback.
			"--scope", "seed-domains", "--dns", "127.0.0.1:9"}
		args = append(args, strings.Fields(o.extra)...)
		if o.cpuProfile != "" {
			args = append(args, "--cpuprofile", o.cpuProfile)
		}
		cmd = exec.Command(o.crawlnode, args...)
	}
	if o.pinCrawler != "" {
		cmd = exec.Command("taskset", append([]string{"-c", o.pinCrawler, cmd.Path}, cmd.Args[1:]...)...)
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	before := selfCPU()
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return result{}, err
	}
	wall := time.Since(start)
	serverCPU := selfCPU() - before
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	rep := w.Report(simweb.ReportOptions{UserAgent: ua, DefaultDelay: 0, PerHost: 1})
	res := result{who: who, round: round, pages: rep.Reached, requests: rep.Requests, mustReach: rep.MustReach,
		coverage: rep.Coverage, dups: rep.DuplicateFetches, bytes: rep.BytesServed, wall: wall, serverCPU: serverCPU,
		violations: rep.RobotsViolations + rep.PolitenessViolations}
	if ru != nil {
		res.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		res.maxRSSMiB = float64(ru.Maxrss) / 1024
	}
	log := w.Log()
	if len(log) > 0 {
		first, last := log[0].Arrival, log[0].Finish
		for _, r := range log {
			if r.Arrival.Before(first) {
				first = r.Arrival
			}
			if r.Finish.After(last) {
				last = r.Finish
			}
		}
		res.span = last.Sub(first)
		res.startup = first.Sub(start)
	}
	if rep.Coverage < 1 {
		fmt.Printf("  %s missed %d must-reach pages, e.g. %v\n", who, rep.MustReach-rep.Reached, rep.Missing[:min(3, len(rep.Missing))])
	}
	return res, nil
}

func summarize(rs []result) {
	by := map[string][]result{}
	for _, r := range rs {
		by[r.who] = append(by[r.who], r)
	}
	med := func(who string, f func(result) float64) float64 {
		var v []float64
		for _, r := range by[who] {
			v = append(v, f(r))
		}
		if len(v) == 0 {
			return 0
		}
		sort.Float64s(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	pps := func(r result) float64 { return r.pagesPerSec() }
	ppc := func(r result) float64 { return r.pagesPerCPUSec() }
	cov := func(r result) float64 { return 100 * r.coverage }
	rss := func(r result) float64 { return r.maxRSSMiB }
	fmt.Printf("\nmedian over %d round(s)\n", max(len(by["colly"]), len(by["crawlnode"])))
	fmt.Printf("%-10s %10s %14s %10s %12s\n", "crawler", "pages/s", "pages/CPU-s", "coverage", "maxRSS MiB")
	for _, who := range []string{"colly", "crawlnode"} {
		if len(by[who]) == 0 {
			continue
		}
		fmt.Printf("%-10s %10.1f %14.1f %9.2f%% %12.1f\n", who, med(who, pps), med(who, ppc), med(who, cov), med(who, rss))
	}
	if len(by["colly"]) > 0 && len(by["crawlnode"]) > 0 {
		// Ratios per round (both crawlers ran back to back), then their median.
		var a, b []float64
		for i := 0; i < min(len(by["colly"]), len(by["crawlnode"])); i++ {
			c, n := by["colly"][i], by["crawlnode"][i]
			a = append(a, n.pagesPerSec()/c.pagesPerSec())
			b = append(b, n.pagesPerCPUSec()/c.pagesPerCPUSec())
		}
		sort.Float64s(a)
		sort.Float64s(b)
		fmt.Printf("crawlnode / colly, per round: pages/s %s; pages/CPU-s %s\n", fmtList(a), fmtList(b))
	}
}

func fmtList(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.2fx", x)
	}
	return strings.Join(s, " ")
}

// cpuCount is the number of CPUs in a taskset-style list ("0", "0-3", "0,2").
func cpuCount(list string) int {
	n := 0
	for _, part := range strings.Split(list, ",") {
		var a, b int
		if k, _ := fmt.Sscanf(part, "%d-%d", &a, &b); k == 2 {
			n += b - a + 1
		} else {
			n++
		}
	}
	return max(n, 1)
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// runColly is the Colly child: the idiomatic Colly crawler (async, an OnHTML callback that
// visits every a[href]), limited to the web's hosts, one request in flight per host (one
// LimitRule per host: a rule's Parallelism is shared by all the domains it matches), no delay.
func runColly(args []string) error {
	fs := flag.NewFlagSet("colly-child", flag.ContinueOnError)
	addr := fs.String("addr", "", "simweb address")
	seedsFile := fs.String("seeds", "", "seeds file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := os.ReadFile(*seedsFile)
	if err != nil {
		return err
	}
	var seeds, hosts []string
	for _, l := range strings.Fields(string(b)) {
		seeds = append(seeds, l)
		h := strings.TrimPrefix(l, "http://")
		hosts = append(hosts, strings.TrimSuffix(h, "/"))
	}
	c := colly.NewCollector(colly.Async(true), colly.AllowedDomains(hosts...), colly.UserAgent("colly/2.3.0"))
	var d net.Dialer
	c.WithTransport(&http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, *addr) // every *.sim.test name is simweb
		},
		MaxIdleConns:        len(hosts) * 2,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
	})
	for _, h := range hosts {
		if err := c.Limit(&colly.LimitRule{DomainGlob: h, Parallelism: 1}); err != nil {
			return err
		}
	}
	var pages atomic.Int64
	c.OnResponse(func(*colly.Response) { pages.Add(1) })
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})
	for _, s := range seeds {
		if err := c.Visit(s); err != nil {
			return err
		}
	}
	c.Wait()
	return nil
}
