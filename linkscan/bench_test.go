package linkscan

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// genPage writes a deterministic, realistic HTML page: a head with meta,
// styles and scripts, a navigation menu, an article with inline links, a
// sidebar and a footer, about 270 bytes of markup and text per link (about
// 40 KB for 150 links).
func genPage(links int) string {
	rng := rand.New(rand.NewPCG(1, uint64(links)))
	words := strings.Fields(`the crawler fetches pages politely from many hosts and writes every
		response to a durable archive before any parser sees it so a crash costs a re-parse
		never a re-fetch links are canonicalized and routed to the node that owns their host`)
	text := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		return b.String()
	}
	href := func(i int) string {
		switch i % 10 {
		case 0:
			return fmt.Sprintf("https://www.example.org/blog/2024/%02d/post-%d/", i%12+1, i)
		case 1:
			return fmt.Sprintf("/docs/guide/chapter-%d.html#section-%d", i, i%5)
		case 2:
			return fmt.Sprintf("../related/item-%d?ref=sidebar&amp;utm_source=site&amp;id=%d", i, i)
		case 3:
			return fmt.Sprintf("//cdn.sim.test/assets/%d/index.html", i)
		case 4:
			return "#top"
		case 5:
			return fmt.Sprintf("/search?q=term%d&amp;page=%d&amp;lang=en", i, i%7)
		case 6:
			return fmt.Sprintf("article-%d.html", i)
		case 7:
			return "mailto:editor@example.org"
		case 8:
			return fmt.Sprintf("/tag/%s/", words[i%len(words)])
		default:
			return fmt.Sprintf("https://h%d.sim.test/p/%d", i%20, i)
		}
	}
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>A realistic page about crawling &amp; canonical URLs</title>
<meta name="description" content="` + text(25) + `">
<meta name="robots" content="index, follow, max-image-preview:large">
<link rel="canonical" href="https://h1.sim.test/a/b.html">
<link rel="stylesheet" href="/static/site.css"><link rel="icon" href="/favicon.ico">
<style>body{font-family:sans-serif;margin:0 auto;max-width:60em}nav a{padding:.5em}
.sidebar{float:right;width:20em}.footer{clear:both;color:#555}</style>
<script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}
var s='<a href="/not-a-link">';gtag('js',new Date());</script>
</head><body><header><nav class="menu"><ul>`)
	i := 0
	for ; i < links/10; i++ {
		fmt.Fprintf(&b, `<li class="menu-item"><a href="%s">%s</a></li>`, href(i), text(2))
	}
	b.WriteString(`</ul></nav></header><main><article><h1>` + text(8) + `</h1>`)
	for ; i < links*7/10; i++ {
		fmt.Fprintf(&b, "<p class=\"para\">%s <a href=\"%s\" title=\"%s\">%s</a> %s.</p>\n",
			text(24), href(i), text(3), text(3), text(20))
		if i%9 == 0 {
			fmt.Fprintf(&b, `<figure><img src="/img/%d.jpg" alt="%s" width="640" height="480"><figcaption>%s</figcaption></figure>`, i, text(4), text(6))
		}
	}
	b.WriteString(`</article><aside class="sidebar"><h2>Related</h2><ul>`)
	for ; i < links*9/10; i++ {
		rel := ""
		if i%4 == 0 {
			rel = ` rel="nofollow noopener"`
		}
		fmt.Fprintf(&b, `<li><a href="%s"%s>%s</a> <span class="date">2024-0%d-1%d</span></li>`, href(i), rel, text(4), i%9+1, i%10)
	}
	b.WriteString(`</ul></aside></main><footer class="footer"><p>`)
	for ; i < links; i++ {
		fmt.Fprintf(&b, `<a href="%s">%s</a> | `, href(i), text(2))
	}
	b.WriteString(`</p><p>` + text(30) + `</p></footer>
<script async src="https://www.googletagmanager.com/gtag/js?id=G-XXXX"></script></body></html>`)
	return b.String()
}

// BenchmarkParse: Parse (its fast path reads this page) against the
// tokenizer path it falls back to, on the same page.
func BenchmarkParse(b *testing.B) {
	body := []byte(genPage(150))
	for _, bc := range []struct {
		name  string
		parse func([]byte, *Page)
	}{
		{"scan", Parse},
		{"tokenizer", func(body []byte, p *Page) { *p = Page{Links: p.Links[:0]}; parseTokens(body, p) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var p Page
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				bc.parse(body, &p)
			}
			b.ReportMetric(float64(len(p.Links)), "links/page")
		})
	}
}

// BenchmarkResolveLinks: parse, then resolve and canonicalize every
// followable link, as the fetch path does for each page.
func BenchmarkResolveLinks(b *testing.B) {
	body := []byte(genPage(150))
	var p Page
	n := 0
	Parse(body, &p)
	p.Resolve("http://h1.sim.test/a/b.html", func(string, Link) { n++ })
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		Parse(body, &p)
		p.Resolve("http://h1.sim.test/a/b.html", func(string, Link) {})
	}
	b.ReportMetric(float64(n), "resolved/page")
}
