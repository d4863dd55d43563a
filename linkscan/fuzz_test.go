package linkscan

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// FuzzParse: no panic on any body, bounded output, and every resolved link
// is a canonical http(s) URL reported once.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`<a href="/x">x</a>`,
		`<base href="../b/"><a href=c rel=nofollow><link rel=canonical href=/c>`,
		`<meta name=robots content="none"><title>t</title><iframe src=//h/x></iframe>`,
		`<script><a href=/no></script><noscript><a href=/yes></noscript>`,
		"<a href=\"\x00\xff\">\x00<<<",
		genPage(20),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAttrs(t, body)
		checkScan(t, body)
		var p Page
		Parse(body, &p)
		if len(p.Links) > MaxLinks || len(p.Title) > MaxTitleBytes {
			t.Fatalf("unbounded: %d links, title %d bytes", len(p.Links), len(p.Title))
		}
		seen := map[string]bool{}
		p.Resolve("http://h1.sim.test/a/b.html", func(c string, l Link) {
			if seen[c] {
				t.Fatalf("%q reported twice", c)
			}
			seen[c] = true
			if !strings.HasPrefix(c, "http://") && !strings.HasPrefix(c, "https://") {
				t.Fatalf("not http(s): %q", c)
			}
			if l.Kind != Canonical && (l.NoFollow || p.MetaNoFollow) {
				t.Fatalf("nofollow link followed: %+v", l)
			}
		})
	})
}

// FuzzParseSitemap: no panic, bounded output, consistent results.
func FuzzParseSitemap(f *testing.F) {
	f.Add([]byte(urlset))
	f.Add(gz(f, urlset))
	f.Add([]byte(`<sitemapindex><sitemap><loc>http://h/s.xml</loc></sitemap></sitemapindex>`))
	f.Add([]byte(`<urlset><url><loc>http://h/1</loc></url><url><loc>http://h/2`))
	f.Add([]byte("<?xml version=\"1.0\" encoding=\"latin1\"?><urlset><url><loc>\xe9</loc></url></urlset>"))
	f.Fuzz(func(t *testing.T, body []byte) {
		n := 0
		_, err1 := ParseSitemap(body, func(loc string, _ time.Time, cf string, p float64) {
			n++
			if p < 0 || p > 1 {
				t.Fatalf("priority %v", p)
			}
			if loc == "" {
				t.Fatal("empty loc delivered")
			}
		})
		if n > MaxSitemapURLs {
			t.Fatalf("%d locs", n)
		}
		m := 0
		_, err2 := ParseSitemap(body, func(string, time.Time, string, float64) { m++ })
		if m != n || (err1 == nil) != (err2 == nil) {
			t.Fatalf("not deterministic: %d/%v vs %d/%v", n, err1, m, err2)
		}
	})
}

// checkAttrs holds the raw attribute reader (attrs.go) against the
// tokenizer's TagAttr on every start tag of body.
func checkAttrs(t *testing.T, body []byte) {
	t.Helper()
	z := html.NewTokenizer(bytes.NewReader(body))
	z2 := html.NewTokenizer(bytes.NewReader(body))
	for {
		tt := z.Next()
		z2.Next()
		if tt == html.ErrorToken {
			return
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		raw := z.Raw()
		if bytes.IndexByte(raw, 0) >= 0 {
			continue
		}
		var got, want []string
		seen := map[string]bool{}
		a := newAttrs(z, raw)
		for k, v, ok := a.next(); ok; k, v, ok = a.next() {
			if !seen[string(k)] && len(k) <= 16 {
				got = append(got, fmt.Sprintf("%s=%q", k, a.value(v)))
			}
			seen[string(k)] = true
		}
		_, more := z2.TagName()
		for more {
			var k, v []byte
			k, v, more = z2.TagAttr()
			if len(k) <= 16 {
				want = append(want, fmt.Sprintf("%s=%q", k, v))
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("tag %q: raw reader %v, tokenizer %v", raw, got, want)
		}
	}
}

// checkScan holds Parse's fast path against the tokenizer: where scan accepts
// body, the Page it fills must equal parseTokens', field by field. It reports
// whether scan accepted.
func checkScan(t *testing.T, body []byte) bool {
	t.Helper()
	var fast, slow Page
	ok := scan(body, &fast)
	parseTokens(body, &slow)
	if ok && !reflect.DeepEqual(fast, slow) {
		t.Fatalf("body %q:\nscan        %+v\nparseTokens %+v", body, fast, slow)
	}
	return ok
}
