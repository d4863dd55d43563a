package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadBodies keeps a page's markup and text and leaves no URL a crawler could follow.
func TestLoadBodiesNeutralisesLinks(t *testing.T) {
	dir := t.TempDir()
	page := `<!DOCTYPE html><html><head><title>T</title><link rel="canonical" href="https://example.org/a"></head>
<body><base href="https://example.org/"><meta http-equiv="refresh" content="0;url=https://example.org/r">
<nav class="menu"><a href="https://example.org/docs">Docs</a> <a href="/relative">Rel</a></nav>
<p class="lead">Some real text about a function.</p><img src="/i.png" srcset="/i2.png 2x" data-src="/lazy.png">
<iframe src="https://example.org/frame"></iframe><form action="/search"><button formaction="/go">Go</button></form>
<area href="/map" alt="m"><script>var x = "https://example.org/js";</script>
<noscript><img src="https://pixel.example.org/p.gif"><a href="https://example.org/ns">ns</a></noscript>
<noframes><a href="https://example.org/nf">nf</a></noframes><noembed><a href="https://example.org/ne">ne</a></noembed>` +
		strings.Repeat(`<div class="row"><span>filler</span></div>`, 20) + `</body></html>`
	if err := os.WriteFile(filepath.Join(dir, "a.html"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tiny.html"), []byte(`<p>x</p>`), 0o644); err != nil {
		t.Fatal(err)
	}
	bodies, files, err := loadBodies(filepath.Join(dir, "*.html"), 500, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if files != 2 || len(bodies) != 1 {
		t.Fatalf("%d files, %d bodies; want 2 files, 1 body (the tiny one too small)", files, len(bodies))
	}
	b := string(bodies[0])
	for _, gone := range []string{`https://pixel`, `https://example.org/ns`, `https://example.org/nf`, `https://example.org/ne`, `href="https:`, `href="/`, `src="/`, `src="https:`, `/i2.png`, `/lazy.png`,
		`action="/`, `<base`, `<meta`, `<link`, `<title`} {
		if strings.Contains(b, gone) {
			t.Errorf("body still holds %q:\n%s", gone, b)
		}
	}
	for _, kept := range []string{`<nav class="menu">`, `Some real text about a function.`, `<p class="lead">`,
		`var x = "https://example.org/js";`, `href="#r`, `>Docs</a>`, `<span>filler</span>`} {
		if !strings.Contains(b, kept) {
			t.Errorf("body lost %q:\n%s", kept, b)
		}
	}
	if _, _, err := loadBodies(filepath.Join(dir, "*.html"), 1<<20, 2<<20); err == nil {
		t.Error("no body in range: want an error")
	}
	if _, _, err := loadBodies(filepath.Join(dir, "*.none"), 0, 1<<20); err == nil {
		t.Error("no file: want an error")
	}
}
