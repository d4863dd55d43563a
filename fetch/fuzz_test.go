package fetch

import (
	"bytes"
	"testing"
	"time"
)

// FuzzParseRobots: any robots.txt body parses without panicking; matching any path is
// safe; /robots.txt itself is always allowed; the parsed form survives a MarshalBinary /
// UnmarshalBinary round trip with the same answers.
//
//	go test -run '^$' -fuzz FuzzParseRobots -fuzztime 10m ./fetch/   (long run)
func FuzzParseRobots(f *testing.F) {
	for _, seed := range []struct {
		body, path string
	}{
		{"User-agent: *\nDisallow: /private/\nAllow: /private/ok$\n", "/private/x"},
		{"User-agent: crawlnode\nDisallow: /\n\nUser-agent: *\nAllow: /\n", "/a"},
		{"User-agent: *\nCrawl-delay: 2.5\nSitemap: http://h.test/s.xml\nDisallow: /*.pdf$\n", "/a/b.pdf"},
		{"user-agent:crawlnode\ndisallow:/%7euser\nallow: /*?\n", "/~user?x=1"},
		{"\xef\xbb\xbfUser-agent: *\r\nDisallow: /a\r\n", "/a"},
		{"User-agent: *\nDisallow: /" + string(bytes.Repeat([]byte("*"), 300)) + "x\n", "/" + string(bytes.Repeat([]byte("y"), 300))},
		{"garbage \x00\xff\nDisallow", "/"},
	} {
		f.Add([]byte(seed.body), seed.path)
	}
	const ua = "crawlnode/0.1 (+https://github.com/crawlnode/crawlnode)"
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		at := time.Unix(1700000000, 0)
		r := ParseRobots(200, body, at)
		url := "http://h.test/" + path
		allowed := r.Allowed(ua, url)
		if !r.Allowed(ua, "http://h.test/robots.txt") {
			t.Fatal("/robots.txt disallowed")
		}
		r.CrawlDelay(ua)
		r.Sitemaps()
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var back Robots
		if err := back.UnmarshalBinary(b); err != nil {
			t.Fatalf("unmarshal: %v", err)
		}
		if back.Allowed(ua, url) != allowed {
			t.Fatalf("round trip changed the answer for %q", url)
		}
	})
}
