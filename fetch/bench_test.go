package fetch

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jimsmart/grobotstxt"
)

// smallPageServer serves a 4 KiB HTML page with keep-alive from a minimal
// loopback server, so that the figure is mostly the client's cost.
func smallPageServer(b *testing.B) string {
	page := "<!doctype html><html><head><title>t</title></head><body>" +
		strings.Repeat("<p><a href=\"/x\">link</a> some text here</p>\n", 90) + "</body></html>"
	resp := []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nETag: \"abc\"\r\n"+
		"Date: Sun, 22 Nov 2026 06:00:00 GMT\r\nContent-Length: %d\r\n\r\n%s", len(page), page))
	return rawServer(b, func(c net.Conn, br *bufio.Reader) {
		for {
			if _, ok := readReq(br); !ok {
				return
			}
			if _, err := c.Write(resp); err != nil {
				return
			}
		}
	})
}

// benchClient keeps idle connections for 1s (a 100ms idle time would make
// the parallel benchmark measure reconnects).
func benchClient(b *testing.B, rule ResolveRule) *Client {
	return testClient(b, func(cfg *Config) {
		cfg.Resolve = []ResolveRule{rule}
		cfg.MaxIdleConnDuration = time.Second
	})
}

// cpuTime is the process's user+system CPU time. The benchmarks report
// cpu-us/op (client and the minimal server together) because wall time on
// a shared 2-core machine says more about the neighbours than about us.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkDoSmallPage(b *testing.B) {
	addr := smallPageServer(b)
	rule, _ := ParseResolve("*.sim.test=" + addr)
	c := benchClient(b, rule)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		resp, err := c.Do(ctx, Request{URL: "http://h1.sim.test/page/" + fmt.Sprint(i%100)})
		if err != nil || resp.Status != 200 || resp.Kind != KindHTML {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
}

// BenchmarkDoSmallPageParallel spreads requests over 64 hosts from 32
// goroutines, like the crawl loop with many ready hosts.
func BenchmarkDoSmallPageParallel(b *testing.B) {
	addr := smallPageServer(b)
	rule, _ := ParseResolve("*.sim.test=" + addr)
	c := benchClient(b, rule)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	cpu0 := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			resp, err := c.Do(ctx, Request{URL: fmt.Sprintf("http://h%d.sim.test/p/%d", i%64, i)})
			if err != nil || resp.Status != 200 {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
}

var benchRobots = `# a realistic robots.txt
User-agent: *
Disallow: /cgi-bin/
Disallow: /tmp/
Disallow: /*?sessionid=
Disallow: /*.pdf$
Disallow: /search
Allow: /search/about
Disallow: /private*/
Crawl-delay: 1

User-agent: googlebot
Disallow: /nogoogle/

User-agent: bingbot
User-agent: slurp
Disallow: /nobing/
Crawl-delay: 5

User-agent: crawlnode
Disallow: /no-crawlnode/
Disallow: /*/print$
Allow: /no-crawlnode/public/
Disallow: /account
Disallow: /cart
Disallow: /checkout
Disallow: /*.json$
Disallow: /api/
` + strings.Repeat("Disallow: /archive/20\nDisallow: /tag/*/page/\n", 20) + `
Sitemap: https://www.example.com/sitemap.xml
`

var benchURLs = func() []string {
	paths := []string{"/", "/articles/how-to-crawl", "/no-crawlnode/x", "/no-crawlnode/public/y",
		"/a/b/print", "/data.json", "/search?q=x", "/tag/go/page/2", "/archive/2019/01/", "/products/item-12345?color=red"}
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, "https://www.example.com"+p)
	}
	return out
}()

func BenchmarkRobotsAllowed(b *testing.B) {
	r := ParseRobots(200, []byte(benchRobots), time.Now())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Allowed(DefaultUserAgent, benchURLs[i%len(benchURLs)])
	}
}

func BenchmarkGrobotstxtAgentAllowed(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		grobotstxt.AgentAllowed(benchRobots, "crawlnode", benchURLs[i%len(benchURLs)])
	}
}

func TestBenchRobotsAgree(t *testing.T) {
	r := ParseRobots(200, []byte(benchRobots), time.Now())
	for _, u := range benchURLs {
		if r.Allowed(DefaultUserAgent, u) != grobotstxt.AgentAllowed(benchRobots, "crawlnode", u) {
			t.Errorf("%s disagrees", u)
		}
	}
}

func BenchmarkParseRobots(b *testing.B) {
	body := []byte(benchRobots)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ParseRobots(200, body, time.Time{})
	}
}
