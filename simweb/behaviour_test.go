package simweb

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
)

func TestDefaultMustReachSize(t *testing.T) {
	w, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	m := w.MustReach(ReportOptions{UserAgent: "crawlnode/0.1 (+https://crawlnode.dev)"})
	if len(m) < 20000 {
		t.Fatalf("default web must-reach = %d, want >= 20000", len(m))
	}
	t.Logf("default web: %d hosts, %d must-reach URLs", len(w.hosts), len(m))
	// the must-reach set holds no trap, no disallowed and no robots URL
	for _, u := range m {
		hn, pq := splitURL(u)
		rs := w.route(hn, pq)
		if rs.trap != "" || rs.isRobotsFile() || !w.policy(rs.h, rs.sub, "crawlnode").allowed(pq) {
			t.Fatalf("must-reach holds %s (trap %q)", u, rs.trap)
		}
	}
}

func TestScalesTo5000Hosts(t *testing.T) {
	c := DefaultConfig()
	c.Hosts = 5000
	t0 := time.Now()
	w, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("New(5000 hosts) took %v", d)
	}
	if len(w.Seeds()) != 5000 || w.Seeds()[4999] != "http://h4999.sim.test/" {
		t.Errorf("seeds wrong")
	}
}

func serveOnce(w *Web, u string) (int, http.Header, []byte) {
	req := httptest.NewRequest("GET", u, nil)
	rec := httptest.NewRecorder()
	w.Handler().ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

func TestDeterminism(t *testing.T) {
	c := smallConfig()
	a, _ := New(c)
	b, _ := New(c)
	c2 := c
	c2.Seed = 2
	d, _ := New(c2)
	urls := a.MustReach(ReportOptions{})
	if len(urls) < 100 {
		t.Fatalf("small web too small: %d", len(urls))
	}
	differ := 0
	for i, u := range urls {
		if i%3 != 0 {
			continue
		}
		if strings.Contains(u, "/busy/") || strings.Contains(u, "/limited/") || strings.Contains(u, "/slow/") ||
			strings.Contains(u, "/trickle/") || strings.Contains(u, "/huge/") {
			continue
		}
		s1, h1, b1 := serveOnce(a, u)
		s2, h2, b2 := serveOnce(b, u)
		if s1 != s2 || !bytes.Equal(b1, b2) || h1.Get("Content-Type") != h2.Get("Content-Type") {
			t.Fatalf("same seed differs at %s", u)
		}
		_, _, b3 := serveOnce(d, u)
		if !bytes.Equal(b1, b3) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("a different seed served identical bytes everywhere")
	}
	if a.Hosts()[5].Pages != b.Hosts()[5].Pages {
		t.Fatal("host profiles differ")
	}
}

// TestServedLinksMatchOracle parses every served HTML page of the small web and checks that
// the links a crawler extracts are exactly the links the oracle's graph holds.
func TestServedLinksMatchOracle(t *testing.T) {
	w, _ := New(smallConfig())
	pages := 0
	for _, u := range w.MustReach(ReportOptions{}) {
		pi, ok := w.Page(u)
		if !ok || pi.MainText == nil || pi.PDF || strings.Contains(u, "/slow/") || strings.Contains(u, "/trickle/") {
			continue
		}
		code, _, body := serveOnce(w, u)
		if code != 200 {
			continue
		}
		pages++
		linksMatchOracle(t, u, body, pi)
	}
	if pages < 200 {
		t.Fatalf("only %d pages checked", pages)
	}
}

// linksMatchOracle fails t unless the links page u serves in body are exactly the oracle's.
func linksMatchOracle(t *testing.T, u string, body []byte, pi PageInfo) {
	t.Helper()
	follow, nofollow, _ := pageLinks(u, body)
	got := map[string]bool{}
	for _, l := range append(follow, nofollow...) {
		got[l] = true
	}
	want := map[string]bool{u: true} // "#top" resolves to the page itself
	for _, l := range pi.Links {
		want[l] = true
	}
	for l := range got {
		if !want[l] {
			t.Errorf("%s: served link %s not in oracle graph", u, l)
		}
	}
	for l := range want {
		if !got[l] && l != u {
			t.Errorf("%s: oracle link %s not served", u, l)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

func TestBehavioursServed(t *testing.T) {
	c := smallConfig()
	w, cl := startWeb(t, c)
	byRobots := func(k robotsKind) *host { return hostWith(w, func(h *host) bool { return h.robots == k }) }
	byFeat := func(f feature) *host { return hostWith(w, func(h *host) bool { return h.has(f) }) }
	u := func(h *host, p string) string {
		if h == nil {
			t.Fatalf("no host for %s", p)
		}
		return "http://" + h.name + p
	}
	type check func(f fetched) bool
	status := func(s int) check { return func(f fetched) bool { return f.err == nil && f.status == s } }
	contains := func(s int, sub string) check {
		return func(f fetched) bool { return f.err == nil && f.status == s && bytes.Contains(f.body, []byte(sub)) }
	}
	header := func(s int, k, v string) check {
		return func(f fetched) bool { return f.err == nil && f.status == s && strings.Contains(f.hdr.Get(k), v) }
	}
	and := func(cs ...check) check {
		return func(f fetched) bool {
			for _, c := range cs {
				if !c(f) {
					return false
				}
			}
			return true
		}
	}
	noneH := hostWith(w, func(h *host) bool { return h.robots == robotsNone && h.mirrorOf < 0 })
	sm1 := hostWith(w, func(h *host) bool { return h.sitemap == 1 })
	sm2 := hostWith(w, func(h *host) bool { return h.sitemap == 2 })
	mirror := hostWith(w, func(h *host) bool { return h.mirrorOf >= 0 })
	redir := byFeat(fRedirects)
	errH := byFeat(fErrors)
	ra := byFeat(fRetryAfter)
	bin := byFeat(fBinary)
	sub := byFeat(fSubdomains)
	cases := []struct {
		name string
		url  string
		hdr  []string
		ok   check
	}{
		{"robots 404", u(noneH, "/robots.txt"), nil, status(404)},
		{"robots rules", u(byRobots(robotsRules), "/robots.txt"), nil, and(contains(200, "Allow: /forum/1"), contains(200, "Disallow: /*.pdf$"))},
		{"robots groups", u(byRobots(robotsGroups), "/robots.txt"), nil, and(contains(200, "User-agent: crawlnode"), contains(200, "User-agent: badbot"))},
		{"robots crawl-delay", u(byRobots(robotsDelay), "/robots.txt"), nil, contains(200, "Crawl-delay: 0.1")},
		{"robots 5xx", u(byRobots(robots5xx), "/robots.txt"), nil, func(f fetched) bool { return f.status >= 500 }},
		{"robots unreachable", u(byRobots(robotsUnreachable), "/robots.txt"), nil, func(f fetched) bool { return f.err != nil }},
		{"robots 403", u(byRobots(robots4xx), "/robots.txt"), nil, status(403)},
		{"robots redirect 1", u(byRobots(robotsRedirect), "/robots.txt"), nil, header(301, "Location", "/robots-moved.txt")},
		{"robots redirect 2", u(byRobots(robotsRedirect), "/robots-moved.txt"), nil, header(302, "Location", "/cfg/robots.txt")},
		{"robots redirect 3", u(byRobots(robotsRedirect), "/cfg/robots.txt"), nil, contains(200, "Disallow: /guides/")},
		{"robots oversize", u(byRobots(robotsOversize), "/robots.txt"), nil, func(f fetched) bool { return f.status == 200 && len(f.body) > 500<<10 }},
		{"robots sitemap line", u(sm1, "/robots.txt"), nil, contains(200, "Sitemap: http://"+sm1.name+"/sitemap.xml")},
		{"sitemap xml", u(sm1, "/sitemap.xml"), nil, and(contains(200, "<urlset"), contains(200, "/orphans/1.html"))},
		{"sitemap index", u(sm2, "/sitemap_index.xml"), nil, contains(200, "pages-1.xml.gz")},
		{"sitemap gzip", u(sm2, "/sitemaps/pages-1.xml.gz"), nil, func(f fetched) bool {
			return f.status == 200 && f.hdr.Get("Content-Type") == "application/gzip" && bytes.Contains(gunzip(f.body), []byte("<urlset"))
		}},
		{"orphan page", u(sm2, "/orphans/2.html"), nil, status(200)},
		{"calendar trap", u(byFeat(fCalendar), "/calendar/2026/01/"), nil, contains(200, "/calendar/2026/02/")},
		{"calendar far future", u(byFeat(fCalendar), "/calendar/9876/05/"), nil, status(200)},
		{"session trap", w.trapEntries(byFeat(fSession))[0], nil, contains(200, "/session/")},
		{"deep trap", u(byFeat(fDeep), "/deep/more/next/more/sub/"), nil, status(200)},
		{"facet trap", u(byFeat(fFacets), "/catalog/?size=m&color=red&page=7"), nil, contains(200, "page=8")},
		{"invented subdomain", "http://w12345." + sub.name + "/", nil, contains(200, "w24691."+sub.name)},
		{"mirror home", u(mirror, "/"), nil, status(200)},
		{"301", u(redir, "/r/301/1/1.html"), nil, header(301, "Location", "moved/1.html")},
		{"302", u(redir, "/r/302/1/2.html"), nil, status(302)},
		{"307", u(redir, "/r/307/1/3.html"), nil, status(307)},
		{"308", u(redir, "/r/308/1/4.html"), nil, status(308)},
		{"chain", u(redir, "/r/302/7/6.html"), nil, header(302, "Location", "/r/302/6/6.html")},
		{"loop", u(redir, "/loop/b.html"), nil, header(301, "Location", "/loop/a.html")},
		{"cross-host", u(redir, "/out/3.html"), nil, header(301, "Location", "http://h3."+c.Suffix+"/moved/9.html")},
		{"moved target", u(redir, "/moved/1.html"), nil, status(200)},
		{"404", u(errH, "/missing/1.html"), nil, status(404)},
		{"410", u(errH, "/gone/1.html"), nil, status(410)},
		{"500", u(errH, "/error/1.html"), nil, status(500)},
		{"503 retry-after", u(ra, "/busy/1.html"), nil, and(status(503), header(503, "Retry-After", "1"))},
		{"503 then 200", u(ra, "/busy/1.html"), nil, status(200)},
		{"429 retry-after", u(ra, "/limited/1.html"), nil, and(status(429), header(429, "Retry-After", "1"))},
		{"slow first byte", u(byFeat(fSlow), "/slow/1.html"), nil, func(f fetched) bool { return f.status == 200 && f.took >= c.SlowFirstByte }},
		{"trickle", u(byFeat(fTrickle), "/trickle/1.html"), nil, func(f fetched) bool { return f.status == 200 && f.took >= c.TrickleDuration*8/10 }},
		{"huge body", u(byFeat(fHuge), "/huge/1.html"), nil, func(f fetched) bool { return f.status == 200 && int64(len(f.body)) >= c.HugeBodyBytes }},
		{"pdf", u(bin, "/files/1.pdf"), nil, and(header(200, "Content-Type", "application/pdf"), contains(200, "%PDF-"))},
		{"png", u(bin, "/img/1.png"), nil, and(header(200, "Content-Type", "image/png"), contains(200, "\x89PNG"))},
		{"binary .html", u(bin, "/bin/1.html"), nil, and(header(200, "Content-Type", "application/octet-stream"), contains(200, "\x7fELF"))},
		{"wrong content-type", u(bin, "/mislabeled/1.html"), nil, and(header(200, "Content-Type", "text/html"), contains(200, "%PDF-"))},
		{"tdmrep.json", u(byFeat(fTDMRep), "/.well-known/tdmrep.json"), nil, contains(200, `"tdm-reservation":1`)},
		{"tracking params ignored", u(noneH, "/?utm_source=x&fbclid=1"), nil, contains(200, "<article>")},
		{"unknown query 404", u(noneH, "/?x=1"), nil, status(404)},
		{"unknown host", "http://nope.example/", nil, status(404)},
	}
	for _, tc := range cases {
		f := get(cl, tc.url, tc.hdr...)
		if !tc.ok(f) {
			t.Errorf("%s: %s -> status %d err %v hdr %v body %.120q", tc.name, tc.url, f.status, f.err, f.hdr, f.body)
		}
	}

	// gzip and brotli on an encoding host
	enc := byFeat(fEncoding)
	plain := get(cl, u(enc, "/"), "Accept-Encoding", "identity")
	gz := get(cl, u(enc, "/"), "Accept-Encoding", "gzip")
	br := get(cl, u(enc, "/"), "Accept-Encoding", "br, gzip")
	if gz.hdr.Get("Content-Encoding") != "gzip" || !bytes.Equal(gunzip(gz.body), plain.body) {
		t.Errorf("gzip encoding not served")
	}
	if enc.brotli {
		dec, _ := io.ReadAll(brotli.NewReader(bytes.NewReader(br.body)))
		if br.hdr.Get("Content-Encoding") != "br" || !bytes.Equal(dec, plain.body) {
			t.Errorf("brotli encoding not served")
		}
	}

	// page-level markup across the web
	seen := map[string]bool{}
	marks := map[string]string{
		"base href": "<base href=", "malformed": "<!-- unterminated", "uppercase tags": "<A HREF=",
		"protocol-relative": `href="//`, "uppercase host :80": `href="HTTP://H`, "fragment": `.html#`,
		"utm": "utm_", "fbclid": "fbclid=", "jsessionid": ";jsessionid=", "relative ../": `href="../`,
		"rel=canonical": `rel="canonical"`, "meta nofollow": `content="nofollow"`, "meta noindex": `content="noindex"`,
		"rel=nofollow": `rel="nofollow"`, "meta noai": "noai", "meta tdm": `name="tdm-reservation"`,
		"area": "<area ", "iframe": "<iframe ", "percent-escape": "/%", "print variant": "?print=1",
	}
	hdrs := map[string]bool{}
	for _, mu := range w.MustReach(ReportOptions{}) {
		pi, ok := w.Page(mu)
		if !ok || pi.MainText == nil || pi.PDF || strings.Contains(mu, "/slow/") || strings.Contains(mu, "/trickle/") {
			continue
		}
		code, h, body := serveOnce(w, mu)
		if code != 200 {
			continue
		}
		for k, m := range marks {
			if bytes.Contains(body, []byte(m)) {
				seen[k] = true
			}
		}
		if h.Get("X-Robots-Tag") == "noindex" {
			hdrs["x-robots-tag"] = true
		}
		if h.Get("tdm-reservation") == "1" {
			hdrs["tdm-reservation"] = true
		}
	}
	for k := range marks {
		if !seen[k] {
			t.Errorf("no served page shows %s", k)
		}
	}
	if !hdrs["x-robots-tag"] || !hdrs["tdm-reservation"] {
		t.Errorf("opt-out headers missing: %v", hdrs)
	}
}

func TestDuplicatesGroundTruth(t *testing.T) {
	w, _ := New(smallConfig())
	ex := w.ExactDuplicateGroups()
	mirrorSeen := false
	for _, g := range ex {
		var first []string
		for i, u := range g {
			pi, ok := w.Page(u)
			if !ok {
				t.Fatalf("group member %s unknown", u)
			}
			if i == 0 {
				first = pi.MainText
			} else if strings.Join(pi.MainText, "\n") != strings.Join(first, "\n") {
				t.Fatalf("exact group %v: texts differ", g)
			}
			if pi.MirrorOf != "" && !strings.Contains(u, "print=1") {
				mirrorSeen = true
			}
		}
	}
	if len(ex) == 0 || !mirrorSeen {
		t.Fatalf("no exact duplicate groups with mirrors (%d groups)", len(ex))
	}
	nd := w.NearDuplicateGroups()
	if len(nd) == 0 {
		t.Fatal("no near-duplicate groups")
	}
	for _, g := range nd {
		var texts [][]string
		for _, u := range g {
			pi, _ := w.Page(u)
			texts = append(texts, strings.Fields(strings.Join(pi.MainText, " ")))
		}
		for i := 1; i < len(texts); i++ {
			a, b := texts[0], texts[i]
			if len(a) != len(b) || len(a) < 300 {
				t.Fatalf("near group %v: lengths %d %d", g, len(a), len(b))
			}
			diff := 0
			for j := range a {
				if a[j] != b[j] {
					diff++
				}
			}
			if frac := float64(diff) / float64(len(a)); frac > 0.05 {
				t.Fatalf("near group %v: %.3f of words differ", g, frac)
			}
		}
	}
	// a near-dup page names its original
	found := false
	for _, g := range nd {
		for _, u := range g {
			if pi, _ := w.Page(u); pi.NearDupOf != "" {
				found = true
			}
		}
	}
	if !found {
		t.Fatal("no page has NearDupOf")
	}
	// main text and boilerplate are really in the served HTML
	u := nd[0][0]
	pi, _ := w.Page(u)
	_, _, body := serveOnce(w, u)
	for _, p := range append(pi.MainText[:1], pi.Boilerplate[0]) {
		if !bytes.Contains(body, []byte(esc(p))) {
			t.Fatalf("planted text %q not served", p)
		}
	}
}

// With Config.Bodies, article pages carry one of the fragments in place of the generated
// text, every fragment is used, and the links served are still exactly the oracle's.
func TestBodiesServed(t *testing.T) {
	c := smallConfig()
	frags := []string{
		`<div class="doc"><h2>Alpha section</h2><pre><code>func alpha() {}</code></pre></div>`,
		`<table class="api"><tr><td>Beta</td><td>returns a value</td></tr></table>`,
		`<ul class="toc"><li>Gamma one</li><li>Gamma two</li></ul>`,
	}
	for _, f := range frags {
		c.Bodies = append(c.Bodies, []byte(f))
	}
	w, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	used := map[int]int{}
	pages := 0
	for _, u := range w.MustReach(ReportOptions{}) {
		pi, ok := w.Page(u)
		if !ok || pi.ContentType != htmlType || strings.Contains(u, "/slow/") || strings.Contains(u, "/trickle/") {
			continue
		}
		code, _, body := serveOnce(w, u)
		if code != 200 || !bytes.Contains(body, []byte(`class="article-body"`)) {
			continue
		}
		pages++
		if pi.MainText != nil {
			t.Fatalf("%s: the oracle reports main text for a page with a fragment", u)
		}
		n := 0
		for i, f := range frags {
			if bytes.Contains(body, []byte(f)) {
				used[i]++
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%s: carries %d of the fragments, want 1:\n%s", u, n, body)
		}
		linksMatchOracle(t, u, body, pi)
	}
	if pages < 200 || len(used) != len(frags) {
		t.Fatalf("%d pages checked, fragments used %v", pages, used)
	}
}
