package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/simweb"
)

// TestNofollow crawls a web whose every host hides /hidden/ pages behind nofollow (article
// k%7==1 has meta robots nofollow, k%7==2 a rel=nofollow link, simweb/README.md) and whose
// robots.txt forbids nothing, and holds the crawler to none of those pages fetched
// (checkClean). In the default web every nofollow host also serves the robots rules
// variant, whose "Disallow: /hidden/" keeps an obeying crawler away from the pages anyway,
// so TestFullCrawl's check alone would not see a nofollow ignored.
func TestNofollow(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	w, addr := web(t, func(c *simweb.Config) {
		plainWeb(c)
		c.Hosts, c.Seed = 20, 5
		c.NofollowHosts = 20
	})
	// The check can bite: must-reach pages link to hidden ones both ways, and robots.txt
	// allows them (404, or the simple variant that allows all).
	var meta, rel int
	for _, u := range w.MustReach(reportOptions(0)) {
		p, ok := w.Page(u)
		if !ok || !linksHidden(p.Links) {
			continue
		}
		if p.NoFollow {
			meta++
		} else {
			rel++
		}
	}
	if meta == 0 || rel == 0 {
		t.Fatalf("must-reach pages linking to /hidden/ pages: %d with meta nofollow, %d through rel=nofollow; the test needs both", meta, rel)
	}
	for _, h := range w.Hosts() {
		if h.Robots != "none(404)" && h.Robots != "simple" {
			t.Fatalf("host %s serves robots.txt variant %q: it could hide /hidden/ itself", h.Host, h.Robots)
		}
	}
	data := filepath.Join(t.TempDir(), "data")
	c := startCrawler(t, crawlArgs(data, addr, w, t)...)
	if code := c.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("crawlnode exited %d:\n%s", code, tail(c.stderr.String(), 3000))
	}
	rep := w.Report(reportOptions(0))
	t.Logf("%d must-reach pages link to /hidden/ pages under meta nofollow, %d through rel=nofollow; %d hidden pages fetched",
		meta, rel, rep.NofollowOnlyFetched)
	checkClean(t, rep, 0)
}

func linksHidden(links []string) bool {
	for _, l := range links {
		if strings.Contains(l, "/hidden/") {
			return true
		}
	}
	return false
}
