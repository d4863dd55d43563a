package simweb

import (
	"strings"
	"testing"
	"time"
)

func TestCanonicalizeTable(t *testing.T) {
	const page = "http://h1.sim.test/a/b.html"
	cases := []struct{ base, in, want string }{
		// the examples of docs/CANONICAL_URLS.md
		{page, "../c.html#top", "http://h1.sim.test/c.html"},
		{page, "HTTP://H2.SIM.TEST:80/", "http://h2.sim.test/"},
		{page, "//h3.sim.test/x?b=2&a=1&utm_source=z", "http://h3.sim.test/x?a=1&b=2"},
		{page, "/p;jsessionid=ABC?sid=9&q=%7euser", "http://h1.sim.test/p?q=~user"},
		{page, "https://h4.sim.test:443", "https://h4.sim.test/"},
		{page, "mailto:a@b.c", ""},
		{page, "http://bücher.sim.test/", "http://xn--bcher-kva.sim.test/"},
		// more rules
		{page, "javascript:void(0)", ""},
		{page, "ftp://h1.sim.test/x", ""},
		{page, "tel:+123", ""},
		{page, "data:text/plain,hi", ""},
		{page, "#frag", "http://h1.sim.test/a/b.html"},
		{page, "", "http://h1.sim.test/a/b.html"},
		{page, "c.html", "http://h1.sim.test/a/c.html"},
		{page, "./", "http://h1.sim.test/a/"},
		{page, "/x/./y/../z", "http://h1.sim.test/x/z"},
		{page, "http://user:pw@h1.sim.test./x", "http://h1.sim.test/x"},
		{page, "http://h1.sim.test:8080/x", "http://h1.sim.test:8080/x"},
		{page, "https://h1.sim.test:80/x", "https://h1.sim.test:80/x"},
		{page, "/a%2fb%7E%41%3a", "http://h1.sim.test/a%2Fb~A%3A"},
		{page, "/Case/Kept/", "http://h1.sim.test/Case/Kept/"},
		{page, "/a/", "http://h1.sim.test/a/"},
		{page, "/x?&&b=1&&a=2&", "http://h1.sim.test/x?a=2&b=1"},
		{page, "/x?UTM_Medium=1&FBCLID=2&gclid=3&dclid=4&msclkid=5&mc_eid=6&sessionid=7&session_id=8&PHPSESSID=9&jsessionid=10&keep=1", "http://h1.sim.test/x?keep=1"},
		{page, "/x?utm_source=a", "http://h1.sim.test/x"},
		{page, "/x?a=%7e&b", "http://h1.sim.test/x?a=~&b"},
		{page, "/p;JSESSIONID=X/q", "http://h1.sim.test/p/q"},
		{page, "/p;other=1", "http://h1.sim.test/p;other=1"},
		{page, "http://h1.sim.test", "http://h1.sim.test/"},
		{"", "HTTP://H5.SIM.TEST/A?b=1&a=1#x", "http://h5.sim.test/A?a=1&b=1"},
	}
	for _, c := range cases {
		got, ok := Canonicalize(c.base, c.in)
		if c.want == "" {
			if ok {
				t.Errorf("Canonicalize(%q) = %q, want dropped", c.in, got)
			}
			continue
		}
		if !ok || got != c.want {
			t.Errorf("Canonicalize(%q) = %q,%v want %q", c.in, got, ok, c.want)
		}
	}
}

func TestRobotsMatching(t *testing.T) {
	f := parseRobots([]byte("User-agent: *\nDisallow: /forum/\nAllow: /forum/1\nDisallow: /*.pdf$\nDisallow: /wiki/\nAllow: /wiki/\n" +
		"Disallow: /reviews/*1-\nAllow: /reviews/11-\n\nUser-agent: CrawlNode\nUser-agent: other\nDisallow: /docs/\nAllow: /docs/$\nCrawl-delay: 2.5\n"))
	star := f.policyFor("somebot")
	cn := f.policyFor(ProductToken("crawlnode/0.1 (+https://crawlnode.dev)"))
	cases := []struct {
		p    robotsPolicy
		path string
		want bool
	}{
		{star, "/forum/", false}, {star, "/forum/12-a.html", true}, {star, "/forum/2-a.html", false},
		{star, "/files/a.pdf", false}, {star, "/files/a.pdf?x=1", true}, {star, "/wiki/x", true},
		{star, "/reviews/21-a.html", false}, {star, "/reviews/11-a.html", true}, {star, "/reviews/105-a.html", true},
		{star, "/robots.txt", true}, {star, "/docs/x", true},
		{cn, "/docs/", true}, {cn, "/docs/x", false}, {cn, "/forum/", true},
	}
	for _, c := range cases {
		if got := c.p.allowed(c.path); got != c.want {
			t.Errorf("allowed(%q) = %v want %v", c.path, got, c.want)
		}
	}
	if !cn.hasDelay || cn.delay != 2500*time.Millisecond || star.hasDelay {
		t.Errorf("crawl-delay: crawlnode %v %v, star %v", cn.hasDelay, cn.delay, star.hasDelay)
	}
	// only the first 500 KiB count
	big := []byte("User-agent: *\nDisallow: /a/\n" + strings.Repeat("# pad\n", 100<<10) + "Disallow: /b/\n")
	p := parseRobots(big).policyFor("x")
	if p.allowed("/a/1") || !p.allowed("/b/1") {
		t.Errorf("oversize robots: rules past 500 KiB must be ignored")
	}
}
