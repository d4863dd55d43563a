package fetch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jimsmart/grobotstxt"
)

const ua = "crawlnode/0.1 (+https://github.com/crawlnode/crawlnode)"

var t0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func TestRobotsRules(t *testing.T) {
	type check struct {
		path string
		want bool
	}
	cases := []struct {
		name   string
		body   string
		checks []check
	}{
		{"wildcards and $", "User-agent: *\nDisallow: /*.pdf$\nDisallow: /private*/\nDisallow: /q?*sort=\n",
			[]check{{"/a.pdf", false}, {"/a.pdf?x=1", true}, {"/dir/b.pdf", false}, {"/privateX/y", false},
				{"/private", true}, {"/q?a=1&sort=2", false}, {"/q", true}, {"/", true}}},
		{"longest match wins", "User-agent: *\nDisallow: /a\nAllow: /a/b\nDisallow: /a/b/c\n",
			[]check{{"/a", false}, {"/a/b", true}, {"/a/bx", true}, {"/a/b/c", false}, {"/b", true}}},
		{"allow wins tie", "User-agent: *\nDisallow: /page\nAllow: /page\n", []check{{"/page", true}}},
		{"tie with wildcards", "User-agent: *\nDisallow: /*x\nAllow: /a*\n", []check{{"/ax", true}, {"/bx", false}}},
		{"specific group hides global", "User-agent: *\nDisallow: /\n\nUser-agent: crawlnode\nDisallow: /secret\n",
			[]check{{"/", true}, {"/public", true}, {"/secret/x", false}}},
		{"other bot's group ignored", "User-agent: googlebot\nDisallow: /\n\nUser-agent: *\nDisallow: /tmp\n",
			[]check{{"/", true}, {"/tmp/x", false}}},
		{"grouped agents", "User-agent: foo\nUser-agent: CrawlNode\nDisallow: /x\n", []check{{"/x", false}, {"/y", true}}},
		{"empty disallow", "User-agent: crawlnode\nDisallow:\n\nUser-agent: *\nDisallow: /\n", []check{{"/anything", true}}},
		{"rules before any agent ignored", "Disallow: /\nUser-agent: *\nDisallow: /x\n", []check{{"/", true}, {"/x", false}}},
		{"disallow all, robots.txt still allowed", "User-agent: *\nDisallow: /\n", []check{{"/", false}, {"/robots.txt", true}}},
		{"percent and utf-8", "User-agent: *\nDisallow: /caf%c3%a9\nDisallow: /naïve\n",
			[]check{{"/caf%C3%A9/x", false}, {"/na%C3%AFve", false}, {"/cafe", true}}},
		{"index.html quirk", "User-agent: *\nDisallow: /d/\nAllow: /d/index.html\n",
			[]check{{"/d/", true}, {"/d/index.html", true}, {"/d/other", false}}},
		{"typos and crlf", "user-agent: *\r\ndissallow: /t\r\n", []check{{"/t", false}}},
	}
	for _, c := range cases {
		r := ParseRobots(200, []byte(c.body), t0)
		for _, ch := range c.checks {
			u := "http://h.test" + ch.path
			if got := r.Allowed(ua, u); got != ch.want {
				t.Errorf("%s: Allowed(%s) = %v, want %v", c.name, ch.path, got, ch.want)
			}
			// grobotstxt v1.0.3 mangles lower-case escapes; we repair them.
			if ch.path != "/robots.txt" && c.name != "percent and utf-8" {
				if g := grobotstxt.AgentAllowed(c.body, "crawlnode", u); g != ch.want {
					t.Errorf("%s: test expectation for %s disagrees with grobotstxt (%v)", c.name, ch.path, g)
				}
			}
		}
	}
}

// TestRobotsMatchesGrobotstxt holds the parse-once matcher against
// grobotstxt.AgentAllowed on random robots files and paths.
func TestRobotsMatchesGrobotstxt(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	agents := []string{"*", "crawlnode", "CrawlNode/2.0", "otherbot", "* extra"}
	pieces := []string{"/", "a", "b", "*", "$", ".html", "/index.html", "?", "=", "%41", "é"}
	randPath := func() string {
		var sb strings.Builder
		sb.WriteString("/")
		for i := rng.Intn(5); i > 0; i-- {
			sb.WriteString(pieces[rng.Intn(len(pieces))])
		}
		return strings.ReplaceAll(sb.String(), "$", "")
	}
	for iter := 0; iter < 400; iter++ {
		var sb strings.Builder
		for l := rng.Intn(12); l > 0; l-- {
			switch rng.Intn(6) {
			case 0, 1:
				fmt.Fprintf(&sb, "User-agent: %s\n", agents[rng.Intn(len(agents))])
			case 2:
				fmt.Fprintf(&sb, "Allow: %s\n", randPath()+[]string{"", "$", "*"}[rng.Intn(3)])
			case 3, 4:
				fmt.Fprintf(&sb, "Disallow: %s\n", randPath()+[]string{"", "$", "*"}[rng.Intn(3)])
			case 5:
				sb.WriteString("\n")
			}
		}
		body := sb.String()
		r := ParseRobots(200, []byte(body), t0)
		for k := 0; k < 20; k++ {
			u := "http://h.test" + randPath()
			if u == "http://h.test/robots.txt" {
				continue
			}
			want := grobotstxt.AgentAllowed(body, "crawlnode", u)
			if got := r.Allowed(ua, u); got != want {
				t.Fatalf("robots:\n%s\nurl %s: got %v, grobotstxt %v", body, u, got, want)
			}
		}
	}
}

func TestRobotsStatuses(t *testing.T) {
	body := []byte("User-agent: *\nDisallow: /\n")
	cases := []struct {
		status      int
		allowed     bool
		unreachable bool
	}{
		{200, false, false},
		{404, true, false},
		{403, true, false},
		{410, true, false},
		{301, true, false}, // redirects exhausted: unavailable
		{429, false, true},
		{500, false, true},
		{503, false, true},
	}
	for _, c := range cases {
		r := ParseRobots(c.status, body, t0)
		if got := r.Allowed(ua, "http://h.test/page"); got != c.allowed {
			t.Errorf("%d: Allowed = %v", c.status, got)
		}
		if r.Unreachable() != c.unreachable {
			t.Errorf("%d: Unreachable = %v", c.status, r.Unreachable())
		}
		if !r.Allowed(ua, "http://h.test/robots.txt") {
			t.Errorf("%d: /robots.txt disallowed", c.status)
		}
		ttl := RobotsTTL
		if c.unreachable {
			ttl = RobotsRetryTTL
		}
		if r.Expired(t0.Add(ttl-time.Second)) || !r.Expired(t0.Add(ttl)) {
			t.Errorf("%d: expiry not at %v", c.status, ttl)
		}
	}
	u := UnreachableRobots(t0)
	if u.Allowed(ua, "http://h.test/") || !u.Unreachable() || !u.Expired(t0.Add(time.Minute)) || u.Expired(t0.Add(59*time.Second)) {
		t.Error("UnreachableRobots wrong")
	}
}

func TestRobotsSizeCap(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("User-agent: *\nDisallow: /early\n")
	for b.Len() < 600<<10 {
		b.WriteString("# padding padding padding padding padding padding padding\n")
	}
	b.WriteString("Disallow: /late\n")
	r := ParseRobots(200, b.Bytes(), t0)
	if r.Allowed(ua, "http://h.test/early") || !r.Allowed(ua, "http://h.test/late") {
		t.Fatal("rules past 500 KiB must be ignored, those before applied")
	}
	if len(r.body) > MaxRobotsSize {
		t.Fatalf("kept %d bytes", len(r.body))
	}
	// A cut in the middle of a line drops the partial line.
	long := append(bytes.Repeat([]byte("#"), MaxRobotsSize-10), []byte("\nDisallow: /abcdefghijkl\n")...)
	r = ParseRobots(200, append([]byte("User-agent: *\n"), long...), t0)
	if !r.Allowed(ua, "http://h.test/abc") {
		t.Fatal("partial last line applied")
	}
}

func TestRobotsCrawlDelayAndSitemaps(t *testing.T) {
	body := "Sitemap: http://h.test/s1.xml\nUser-agent: *\nCrawl-delay: 2\nDisallow: /x\n\n" +
		"User-agent: crawlnode\nCrawl-delay: 0.5\nDisallow: /y\n\nUser-agent: slowbot\nCrawl-delay: 9999\nDisallow:\n" +
		"Sitemap: https://h.test/s2.xml.gz\nSitemap: /relative.xml\nSitemap: http://h.test/s1.xml\n"
	r := ParseRobots(200, []byte(body), t0)
	if d, ok := r.CrawlDelay(ua); !ok || d != 500*time.Millisecond {
		t.Errorf("crawlnode delay %v %v", d, ok)
	}
	if d, ok := r.CrawlDelay("otherbot"); !ok || d != 2*time.Second {
		t.Errorf("global delay %v %v", d, ok)
	}
	if d, ok := r.CrawlDelay("slowbot/1"); !ok || d != MaxCrawlDelay {
		t.Errorf("capped delay %v %v", d, ok)
	}
	// Alternating agents must not break the per-agent cache.
	if !r.Allowed(ua, "http://h.test/x") || r.Allowed("otherbot", "http://h.test/x") || r.Allowed(ua, "http://h.test/y") {
		t.Error("per-agent rules wrong")
	}
	if got := fmt.Sprint(r.Sitemaps()); got != "[http://h.test/s1.xml https://h.test/s2.xml.gz]" {
		t.Errorf("sitemaps %s", got)
	}
	r = ParseRobots(200, []byte("User-agent: crawlnode\nDisallow: /a\n\nUser-agent: *\nCrawl-delay: 3\n"), t0)
	if _, ok := r.CrawlDelay(ua); ok {
		t.Error("delay of the * group applied although a crawlnode group exists")
	}
	if _, ok := ParseRobots(404, nil, t0).CrawlDelay(ua); ok {
		t.Error("delay on 404")
	}
}

func TestRobotsMarshalRoundTrip(t *testing.T) {
	in := []*Robots{
		ParseRobots(200, []byte("User-agent: *\nDisallow: /x\nCrawl-delay: 4\nSitemap: http://h.test/s.xml\n"), t0),
		ParseRobots(404, nil, t0),
		ParseRobots(503, nil, t0),
		UnreachableRobots(t0),
	}
	for i, r := range in {
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var out Robots
		if err := out.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"/", "/x", "/y"} {
			if out.Allowed(ua, "http://h.test"+p) != r.Allowed(ua, "http://h.test"+p) {
				t.Errorf("%d: Allowed(%s) differs after round trip", i, p)
			}
		}
		d1, ok1 := r.CrawlDelay(ua)
		d2, ok2 := out.CrawlDelay(ua)
		if d1 != d2 || ok1 != ok2 || out.Status() != r.Status() || !out.FetchedAt().Equal(r.FetchedAt()) ||
			out.Unreachable() != r.Unreachable() || fmt.Sprint(out.Sitemaps()) != fmt.Sprint(r.Sitemaps()) {
			t.Errorf("%d: state differs after round trip", i)
		}
		if err := out.UnmarshalBinary(b[:len(b)-1]); err == nil && len(b) > 12 {
			t.Errorf("%d: truncated encoding accepted", i)
		}
	}
	var r Robots
	if err := r.UnmarshalBinary([]byte{9, 0}); err == nil {
		t.Error("bad version accepted")
	}
}

func TestFetchRobots(t *testing.T) {
	var hits atomic.Int64
	var sixth atomic.Int64
	big := "User-agent: *\nDisallow: /early\n" + strings.Repeat("# pad pad pad pad pad pad pad pad pad pad\n", 600<<10/42) + "Disallow: /late\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch {
		case r.URL.Path == "/robots.txt" && r.Host == "ok.sim.test":
			io.WriteString(w, "User-agent: *\nDisallow: /private\n")
		case r.URL.Path == "/robots.txt" && r.Host == "big.sim.test":
			io.WriteString(w, big)
		case r.URL.Path == "/robots.txt" && r.Host == "down.sim.test":
			w.WriteHeader(503)
		case strings.HasPrefix(r.URL.Path, "/hop/"):
			var n, limit int
			fmt.Sscanf(r.URL.Path, "/hop/%d/%d", &limit, &n)
			if n == 6 {
				sixth.Add(1)
			}
			if n >= limit {
				io.WriteString(w, "User-agent: *\nDisallow: /\n")
				return
			}
			http.Redirect(w, r, fmt.Sprintf("http://r%d.sim.test/hop/%d/%d", n+1, limit, n+1), 301)
		case r.URL.Path == "/robots.txt":
			var limit int
			fmt.Sscanf(r.Host, "chain%d.sim.test", &limit)
			http.Redirect(w, r, fmt.Sprintf("/hop/%d/1", limit), 302)
		default:
			w.WriteHeader(404)
		}
	}))
	defer srv.Close()
	rule, _ := ParseResolve("*.sim.test=" + strings.TrimPrefix(srv.URL, "http://"))
	c := testClient(t, func(cfg *Config) { cfg.Resolve = []ResolveRule{rule} })
	ctx := context.Background()

	res, err := c.FetchRobots(ctx, "http", "ok.sim.test")
	if err != nil || res.Status != 200 || res.Redirects != 0 || res.FinalURL != "http://ok.sim.test/robots.txt" {
		t.Fatalf("ok: %v %+v", err, res)
	}
	r := ParseRobots(res.Status, res.Body, res.Finished)
	if r.Allowed(ua, "http://ok.sim.test/private/x") || !r.Allowed(ua, "http://ok.sim.test/pub") {
		t.Fatal("ok: rules not applied")
	}
	if !bytes.HasPrefix(res.RawRequest, []byte("GET /robots.txt HTTP/1.1\r\nHost: ok.sim.test\r\n")) {
		t.Fatalf("raw request %q", res.RawRequest)
	}

	// Five redirects (robots.txt -> hop1 ... hop5) are followed.
	res, err = c.FetchRobots(ctx, "http", "chain5.sim.test")
	if err != nil || res.Status != 200 || res.Redirects != 5 || res.FinalURL != "http://r5.sim.test/hop/5/5" || len(res.Hops) != 6 {
		t.Fatalf("chain5: %v %+v", err, res)
	}
	if ParseRobots(res.Status, res.Body, t0).Allowed(ua, "http://chain5.sim.test/x") {
		t.Fatal("chain5: rules at the end of the chain not applied")
	}
	// A sixth is not: the result is the 5th redirect, i.e. unavailable.
	res, err = c.FetchRobots(ctx, "http", "chain6.sim.test")
	if err != nil || res.Status != 301 || res.Redirects != 5 || sixth.Load() != 0 {
		t.Fatalf("chain6: %v status %d redirects %d sixth %d", err, res.Status, res.Redirects, sixth.Load())
	}
	if !ParseRobots(res.Status, res.Body, t0).Allowed(ua, "http://chain6.sim.test/x") {
		t.Fatal("chain6: should be allow-all")
	}

	res, err = c.FetchRobots(ctx, "http", "big.sim.test")
	if err != nil || len(res.Body) != MaxRobotsSize {
		t.Fatalf("big: %v len %d", err, len(res.Body))
	}
	r = ParseRobots(res.Status, res.Body, t0)
	if r.Allowed(ua, "http://big.sim.test/early") || !r.Allowed(ua, "http://big.sim.test/late") {
		t.Fatal("big: cap not applied")
	}

	res, err = c.FetchRobots(ctx, "http", "down.sim.test")
	if err != nil || res.Status != 503 || !ParseRobots(res.Status, res.Body, t0).Unreachable() {
		t.Fatalf("down: %v %+v", err, res)
	}
	// Transport failure: error (caller uses UnreachableRobots).
	if _, err := c.FetchRobots(ctx, "http", "nxdomain.example"); Classify(err) != ClassDNS {
		t.Fatalf("nxdomain: %v", err)
	}
}

func TestDetectContentKind(t *testing.T) {
	gz := compress(t, "gzip", []byte(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"></urlset>`))
	pdf := []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj")
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	cases := []struct {
		path, ct string
		body     []byte
		want     ContentKind
		gz       bool
	}{
		{"/a.html", "text/html", []byte("<!doctype html><p>hi"), KindHTML, false},
		{"/a", "application/xhtml+xml", []byte(`<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml">`), KindHTML, false},
		{"/a.html", "text/html", pdf, KindOther, false},
		{"/a.html", "text/html", png, KindOther, false},
		{"/a.html", "application/octet-stream", []byte("\x00\x01\x02binary"), KindOther, false},
		{"/a.html", "", []byte("<html><body>x</body></html>"), KindHTML, false},
		{"/a.html", "", []byte("\x00\x01\x02\x03"), KindOther, false},
		{"/doc.pdf", "application/pdf", pdf, KindOther, false},
		{"/robots.txt", "text/plain", []byte("User-agent: *\nDisallow:\n"), KindRobots, false},
		{"/robots.txt", "text/plain", png, KindOther, false},
		{"/sitemap.xml", "application/xml", []byte(`<?xml version="1.0" encoding="UTF-8"?><urlset>`), KindSitemap, false},
		{"/sm", "text/xml", []byte(`<sitemapindex xmlns="x">`), KindSitemap, false},
		{"/feed.xml", "application/rss+xml", []byte(`<?xml version="1.0"?><rss>`), KindOther, false},
		{"/sitemap.xml.gz", "application/x-gzip", gz, KindOther, true},
		{"/sitemap.xml.gz", "application/octet-stream", gz, KindOther, true},
		{"/file.gz", "text/html", gz, KindOther, false},
		{"/a.txt", "text/plain", []byte("hello"), KindOther, false},
	}
	for _, c := range cases {
		k, g := detectContentKind(c.path, c.ct, c.body)
		if k != c.want || g != c.gz {
			t.Errorf("%s %s: got %s,%v want %s,%v", c.path, c.ct, k, g, c.want, c.gz)
		}
	}
}

func TestGzipSitemapDecoded(t *testing.T) {
	xml := `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://h.test/</loc></url></urlset>`
	gz := compress(t, "gzip", []byte(xml))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-gzip")
		if r.URL.Path == "/notasitemap.xml.gz" {
			w.Write(compress(t, "gzip", []byte("just text")))
			return
		}
		w.Write(gz)
	}))
	defer srv.Close()
	c := testClient(t, nil)
	resp, err := c.Do(context.Background(), Request{URL: srv.URL + "/sitemap.xml.gz"})
	if err != nil || resp.Kind != KindSitemap || string(resp.Body) != xml || !bytes.Equal(resp.RawBody, gz) {
		t.Fatalf("%v kind %s body %q", err, resp.Kind, resp.Body)
	}
	resp, err = c.Do(context.Background(), Request{URL: srv.URL + "/notasitemap.xml.gz"})
	if err != nil || resp.Kind != KindOther {
		t.Fatalf("%v kind %s", err, resp.Kind)
	}
}

func TestMatchesAgainstGrobotstxt(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	alpha := "ab/*$"
	gen := func(n int, a string) string {
		b := make([]byte, rng.Intn(n))
		for i := range b {
			b[i] = a[rng.Intn(len(a))]
		}
		return string(b)
	}
	for i := 0; i < 200000; i++ {
		path := "/" + gen(8, "ab/$*")
		pat := gen(7, alpha)
		if got, want := matches(path, pat), grobotstxt.Matches(path, pat); got != want {
			t.Fatalf("matches(%q, %q) = %v, grobotstxt %v", path, pat, got, want)
		}
	}
}

func TestRobotsPathFastPathAgrees(t *testing.T) {
	urls := []string{
		"http://h.test", "http://h.test/", "https://h.test:8080/a/b?c=d&e=f#frag", "http://h.test?x=1",
		"http://h.test/a;p=1?q", "http://h.test/%7euser/%41", "http://h.test/a%2Fb", "http://h.test/!$&'()*+,;=:",
		"http://h.test/a#b?c", "http://h.test/a/../b/./c", "http://h.test/x?y=%zz", "http://h.test/%e2%82%ac",
		"http://h.test/a b", "http://h.test/é", "HTTP://h.test/x", "http://u@h.test/x", "http://[::1]/x",
		"http://h.test/x?a=1#", "http://h.test/#", "http://h.test/?", "http://h.test/a?b?c#d#e",
	}
	for _, u := range urls {
		fast, _ := robotsPath(u)
		pu, err := url.Parse(u)
		if err != nil {
			continue
		}
		if slow := pathParamsQuery(pu.String()); fast != slow {
			t.Errorf("%q: fast %q slow %q", u, fast, slow)
		}
	}
}
