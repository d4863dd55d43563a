package urlnorm

import (
	"testing"

	wurl "github.com/nlnwa/whatwg-url/url"
)

var sink int

// benchLinks is a typical mix of links on one page.
var benchLinks = []string{
	"../c.html#top",
	"/docs/guide/intro.html",
	"intro.html",
	"//h3.sim.test/x?b=2&a=1&utm_source=z",
	"/p;jsessionid=ABC?sid=9&q=%7euser",
	"https://www.example.org/blog/2024/05/some-article-title/",
	"#section-2",
	"/search?q=go+url&page=2&lang=en",
	"mailto:someone@example.org",
	"/wiki/Stra%C3%9Fe",
}

func BenchmarkResolve(b *testing.B) {
	r, err := NewResolver("http://h1.sim.test/a/b.html")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for i := 0; b.Loop(); i++ {
		s, _ := r.Resolve(benchLinks[i%len(benchLinks)])
		n += len(s)
	}
	sink = n
}

// BenchmarkResolveSlowPath forces every link through the library path.
func BenchmarkResolveSlowPath(b *testing.B) {
	r, err := NewResolver("http://h1.sim.test/a/b.html")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var buf [256]byte
	for i := 0; b.Loop(); i++ {
		_, _ = slowResolve(buf[:0], r, benchLinks[i%len(benchLinks)])
	}
}

// BenchmarkLibraryOnly is the WHATWG library's resolution alone, without any
// canonicalization: the floor the fast path avoids.
func BenchmarkLibraryOnly(b *testing.B) {
	base, err := wurl.Parse("http://h1.sim.test/a/b.html")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if u, err := base.Parse(benchLinks[i%len(benchLinks)]); err == nil {
			_ = u.Href(true)
		}
	}
}

func BenchmarkCanonicalize(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Canonicalize("HTTP://Www.Example.ORG:80/a/./b/../c?z=1&utm_source=x&a=%7e#frag")
	}
}
