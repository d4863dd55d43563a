package linkscan

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

type entry struct {
	loc        string
	lastmod    time.Time
	changefreq string
	priority   float64
}

func parseAll(body []byte) ([]entry, bool, error) {
	var out []entry
	idx, err := ParseSitemap(body, func(loc string, lm time.Time, cf string, p float64) {
		out = append(out, entry{loc, lm, cf, p})
	})
	return out, idx, err
}

func gz(t testing.TB, s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

const urlset = `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <url>
    <loc> http://h.sim.test/a?x=1&amp;y=2 </loc>
    <lastmod>2024-05-06T07:08:09+02:00</lastmod>
    <changefreq>Daily</changefreq>
    <priority>0.8</priority>
    <image:image><image:loc>http://h.sim.test/img.png</image:loc></image:image>
  </url>
  <url><loc>http://h.sim.test/b</loc><lastmod>2024-05-06</lastmod><changefreq>sometimes</changefreq><priority>7</priority></url>
  <url><lastmod>2024-01-01</lastmod></url>
  <url><loc>http://h.sim.test/c</loc><lastmod>garbage</lastmod><priority>abc</priority></url>
</urlset>`

func TestParseSitemapURLSet(t *testing.T) {
	want := []entry{
		{"http://h.sim.test/a?x=1&y=2", time.Date(2024, 5, 6, 5, 8, 9, 0, time.UTC), "daily", 0.8},
		{"http://h.sim.test/b", time.Date(2024, 5, 6, 0, 0, 0, 0, time.UTC), "", 1},
		{"http://h.sim.test/c", time.Time{}, "", 0.5},
	}
	for name, body := range map[string][]byte{"plain": []byte(urlset), "gzip": gz(t, urlset)} {
		got, idx, err := parseAll(body)
		if err != nil || idx {
			t.Fatalf("%s: idx %v err %v", name, idx, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: got %+v", name, got)
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.loc != w.loc || !g.lastmod.Equal(w.lastmod) || g.changefreq != w.changefreq || g.priority != w.priority {
				t.Errorf("%s: entry %d = %+v, want %+v", name, i, g, w)
			}
		}
	}
}

func TestParseSitemapIndex(t *testing.T) {
	body := `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>http://h.sim.test/s1.xml.gz</loc><lastmod>2004-10-01T18:23:17.5Z</lastmod></sitemap>
<sitemap><loc>http://h.sim.test/s2.xml</loc></sitemap></sitemapindex>`
	got, idx, err := parseAll([]byte(body))
	if err != nil || !idx || len(got) != 2 {
		t.Fatalf("idx %v err %v got %+v", idx, err, got)
	}
	if got[0].loc != "http://h.sim.test/s1.xml.gz" || !got[0].lastmod.Equal(time.Date(2004, 10, 1, 18, 23, 17, 5e8, time.UTC)) {
		t.Errorf("entry 0 %+v", got[0])
	}
	// A <url> inside a sitemap index is not an entry.
	got, _, _ = parseAll([]byte(`<sitemapindex><url><loc>http://x/</loc></url></sitemapindex>`))
	if len(got) != 0 {
		t.Errorf("url in index delivered: %+v", got)
	}
}

func TestParseSitemapLastmodForms(t *testing.T) {
	for in, want := range map[string]time.Time{
		"1997":                      time.Date(1997, 1, 1, 0, 0, 0, 0, time.UTC),
		"1997-07":                   time.Date(1997, 7, 1, 0, 0, 0, 0, time.UTC),
		"1997-07-16":                time.Date(1997, 7, 16, 0, 0, 0, 0, time.UTC),
		"1997-07-16T19:20+01:00":    time.Date(1997, 7, 16, 18, 20, 0, 0, time.UTC),
		"1997-07-16T19:20:30+01:00": time.Date(1997, 7, 16, 18, 20, 30, 0, time.UTC),
		"1997-07-16T19:20:30.45Z":   time.Date(1997, 7, 16, 19, 20, 30, 45e7, time.UTC),
		"1997-07-16T19:20:30":       time.Date(1997, 7, 16, 19, 20, 30, 0, time.UTC),
		"16/07/1997":                {},
	} {
		if got := parseLastmod(in); !got.Equal(want) {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}

func TestParseSitemapErrors(t *testing.T) {
	cases := []struct {
		name  string
		body  []byte
		err   error
		nlocs int
	}{
		{"empty", nil, ErrSitemapMalformed, 0},
		{"not xml", []byte("hello world"), ErrSitemapMalformed, 0},
		{"html", []byte("<html><body><a href=/x>x</a></body></html>"), ErrNotSitemap, 0},
		{"rss", []byte(`<?xml version="1.0"?><rss><channel><item><link>http://x/</link></item></channel></rss>`), ErrNotSitemap, 0},
		{"truncated after two", []byte(`<urlset><url><loc>http://h/1</loc></url><url><loc>http://h/2</loc></url><url><loc>http://h/3`), ErrSitemapMalformed, 2},
		{"mismatched tags", []byte(`<urlset><url><loc>http://h/1</loc></url><url><loc>http://h/2</url></urlset>`), ErrSitemapMalformed, 1},
		{"bad gzip", append([]byte{0x1f, 0x8b}, "not really gzip"...), ErrSitemapMalformed, 0},
		{"truncated gzip", gz(t, urlset)[:60], ErrSitemapMalformed, 0},
		{"unknown encoding", []byte(`<?xml version="1.0" encoding="EBCDIC"?><urlset></urlset>`), ErrSitemapMalformed, 0},
		{"two roots", []byte(`<urlset></urlset><urlset></urlset>`), ErrSitemapMalformed, 0},
	}
	for _, tc := range cases {
		got, _, err := parseAll(tc.body)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.err)
		}
		if len(got) != tc.nlocs {
			t.Errorf("%s: %d locs delivered, want %d", tc.name, len(got), tc.nlocs)
		}
	}
}

func TestParseSitemapLatin1(t *testing.T) {
	body := []byte("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><urlset><url><loc>http://h/caf\xe9</loc></url></urlset>")
	got, _, err := parseAll(body)
	if err != nil || len(got) != 1 || got[0].loc != "http://h/café" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestParseSitemapLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString("<urlset>")
	for i := 0; i < MaxSitemapURLs+10; i++ {
		fmt.Fprintf(&b, "<url><loc>http://h.sim.test/%d</loc></url>", i)
	}
	b.WriteString("</urlset>")
	n := 0
	_, err := ParseSitemap(gz(t, b.String()), func(string, time.Time, string, float64) { n++ })
	if !errors.Is(err, ErrSitemapLimit) || n != MaxSitemapURLs {
		t.Errorf("count limit: %d locs, err %v", n, err)
	}

	// A gzip bomb: a tiny body that decodes past MaxSitemapBytes.
	var big bytes.Buffer
	w := gzip.NewWriter(&big)
	_, _ = w.Write([]byte("<urlset><url><loc>http://h.sim.test/x</loc></url><!--"))
	pad := bytes.Repeat([]byte(" "), 1<<20)
	for i := 0; i < MaxSitemapBytes>>20+1; i++ {
		_, _ = w.Write(pad)
	}
	_, _ = w.Write([]byte("--></urlset>"))
	_ = w.Close()
	n = 0
	_, err = ParseSitemap(big.Bytes(), func(string, time.Time, string, float64) { n++ })
	if !errors.Is(err, ErrSitemapLimit) || n != 1 {
		t.Errorf("size limit: %d locs, err %v (compressed %d bytes)", n, err, big.Len())
	}
}
