package simweb

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strconv"
	"strings"
	"time"
)

// mainText generates the planted main text: paragraphs of sentences from the word list.
// A near-duplicate draws the same sequence and replaces ~NearDupEditRate of the words.
func (w *Web) mainText(d *doc) []string {
	r := newRng(d.textSeed)
	var er *rng
	if d.editSeed != 0 {
		er = newRng(d.editSeed)
	}
	rate := w.cfg.NearDupEditRate
	lb := &langBanks[w.langIndex(d)]
	var paras []string
	var b strings.Builder
	left := d.words
	for left > 0 {
		plen := 40 + r.intn(120)
		if plen > left || left-plen < 20 {
			plen = left
		}
		left -= plen
		b.Reset()
		sentence := 0
		for i := 0; i < plen; i++ {
			wd := lb.words[r.intn(len(lb.words))]
			comma := r.intn(12) == 0
			if er != nil && er.float() < rate {
				wd = lb.words[er.intn(len(lb.words))]
			}
			if sentence == 0 {
				sentence = 6 + r.intn(14)
				if b.Len() > 0 && lb.spaced {
					b.WriteByte(' ')
				}
				if lb.cased {
					wd = capitalize(wd)
				}
			} else if lb.spaced {
				b.WriteByte(' ')
			}
			b.WriteString(wd)
			sentence--
			if sentence == 0 || i == plen-1 {
				b.WriteString(lb.stop)
				sentence = 0
			} else if comma {
				b.WriteString(lb.comma)
			}
		}
		paras = append(paras, b.String())
	}
	return paras
}

// boilerplate lists the planted navigation, footer and advertising strings of a host.
func (w *Web) boilerplate(h *host) []string {
	ch := w.hosts[h.content]
	r := newRng(mix(uint64(w.cfg.Seed), 12, uint64(ch.idx)))
	return []string{
		"Subscribe to the " + ch.site + " newsletter and never miss a story",
		"Advertisement: " + title(wordAt(r), wordAt(r)) + " – the " + wordAt(r) + " " + wordAt(r) + " you deserve. Order today",
		"We use cookies to improve your experience on " + ch.site + ". By continuing you accept our cookie policy.",
		"© 2026 " + ch.site + ". All rights reserved.",
		"Privacy policy", "Terms of use", "Contact the editors",
	}
}

func esc(s string) string {
	if !strings.ContainsAny(s, `&<>"'`) {
		return s
	}
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	return r.Replace(s)
}

// hostOf returns the host and path?query of a canonical absolute URL.
func splitURL(u string) (host, pq string) {
	rest := u[strings.Index(u, "://")+3:]
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return rest, "/"
	}
	return rest[:i], rest[i:]
}

// baseDir is the directory that relative references on d resolve against.
func baseDir(d *doc) string {
	p := d.base
	if p == "" {
		_, p = splitURL(d.url)
	} else if strings.HasPrefix(p, "http") {
		_, p = splitURL(p)
	}
	p, _, _ = strings.Cut(p, "?")
	return p[:strings.LastIndexByte(p, '/')+1]
}

func relRef(dir, path string) string {
	if strings.HasPrefix(path, dir) {
		r := path[len(dir):]
		if r == "" || strings.Contains(strings.SplitN(r, "/", 2)[0], ":") {
			return "./" + r
		}
		return r
	}
	depth := strings.Count(dir, "/") - 1
	r := strings.Repeat("../", depth) + path[1:]
	if r == "" {
		return "./"
	}
	return r
}

var trackers = [...]string{"utm_source=newsletter&utm_medium=email", "fbclid=IwAR2x9kq", "sid=83412", "utm_campaign=spring&utm_content=banner", "gclid=Cj0KCQ"}

// href writes link l as it appears in page d.
func (w *Web) href(d *doc, l link) string {
	host, pq := splitURL(l.url)
	pageHost, _ := splitURL(d.url)
	same := host == pageHost
	path, q, hasQ := strings.Cut(pq, "?")
	qpart := ""
	if hasQ {
		qpart = "?" + q
	}
	local := func(s string) string {
		if same {
			return s
		}
		return "http://" + host + s
	}
	hh := strHash(l.url)
	switch l.form {
	case formRoot:
		if same {
			return pq
		}
		return l.url
	case formRel:
		if same {
			return relRef(baseDir(d), path) + qpart
		}
		return l.url
	case formProto:
		return "//" + host + pq
	case formUpper:
		return "HTTP://" + strings.ToUpper(host) + ":80" + pq
	case formFrag:
		return local(pq) + "#" + wordList[hh%uint64(len(wordList))]
	case formTrack:
		t := trackers[hh%uint64(len(trackers))]
		if hasQ {
			return local(pq + "&" + t)
		}
		return local(pq + "?" + t)
	case formJsess:
		return local(path + ";jsessionid=" + strconv.FormatUint(hh%1e12, 16) + qpart)
	case formEsc:
		for i := 1; i < len(path); i++ {
			c := path[i]
			if '0' <= c && c <= '9' || 'a' <= c && c <= 'z' {
				return local(path[:i] + fmt.Sprintf("%%%02x", c) + path[i+1:] + qpart)
			}
		}
		return local(pq)
	case formReorder:
		if hasQ && strings.Contains(q, "&") {
			items := strings.Split(q, "&")
			for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
				items[i], items[j] = items[j], items[i]
			}
			return local(path + "?" + strings.Join(items, "&"))
		}
		return local(pq)
	}
	return l.url
}

// renderHTML writes the page. Bodies depend only on the Config and the URL.
func (w *Web) renderHTML(d *doc) []byte {
	var b bytes.Buffer
	var text []string
	var frag []byte // Config.Bodies' fragment instead of text
	if n := len(w.cfg.Bodies); n > 0 {
		frag = w.cfg.Bodies[d.textSeed%uint64(n)]
		b.Grow(len(frag) + 4096)
	} else {
		text = w.mainText(d)
		b.Grow(d.words*7 + 4096)
	}
	m := d.malformed
	ch := w.hosts[d.h.content]
	bp := w.boilerplate(d.h)
	attr := func(v string) string {
		if m && !strings.ContainsAny(v, " \"'=<>`") {
			return esc(v)
		}
		return `"` + esc(v) + `"`
	}
	tag := func(s string) string {
		if m {
			return strings.ToUpper(s)
		}
		return s
	}
	if la, _ := w.langAttr(d); la != "" {
		b.WriteString("<!DOCTYPE html>\n<html lang=\"" + la + "\">\n<head>\n<meta charset=\"utf-8\">\n")
	} else {
		b.WriteString("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n")
	}
	b.WriteString("<title>" + esc(d.title) + "</title>\n")
	if d.base != "" {
		b.WriteString("<base href=" + attr(d.base) + ">\n")
	}
	if d.metaRobots != "" {
		b.WriteString("<meta name=\"robots\" content=\"" + d.metaRobots + "\">\n")
	}
	if d.metaTDM {
		b.WriteString("<meta name=\"tdm-reservation\" content=\"1\">\n")
	}
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<meta name=\"description\" content=\"" + esc(ch.site) + " – " + esc(d.title) + "\">\n")
	nav, body := 0, 0
	for _, l := range d.links {
		if l.tag == tagCanonical {
			b.WriteString("<link rel=\"canonical\" href=" + attr(w.href(d, l)) + ">\n")
		}
	}
	b.WriteString("<style>body{font-family:sans-serif;margin:0}nav ul{list-style:none}.ad{border:1px solid #ccc}</style>\n")
	b.WriteString("</head>\n<body>\n")
	b.WriteString("<div class=\"cookie-banner\">" + esc(bp[2]) + "</div>\n")
	b.WriteString("<header class=\"site-header\"><div class=\"logo\">" + esc(ch.site) + "</div>\n<nav class=\"menu\"><" + tag("ul") + ">\n")
	for _, l := range d.links {
		if l.tag == tagA && nav < 1+len(sections) && (l.text == "Home" || strings.HasSuffix(l.url, "/") && strings.Count(l.url, "/") == 4) {
			nav++
			b.WriteString("<" + tag("li") + "><" + tag("a") + " href=" + attr(w.href(d, l)) + ">" + esc(l.text) + "</" + tag("a") + ">")
			if !m {
				b.WriteString("</li>")
			}
			b.WriteByte('\n')
			continue
		}
		break
	}
	b.WriteString("</ul></nav></header>\n<div class=\"layout\">\n<main>\n<article>\n<h1>" + esc(d.title) + "</h1>\n")
	br := newRng(d.textSeed ^ 0x5555)
	b.WriteString("<p class=\"byline\">By " + title(wordAt(br), wordAt(br)) + " · " + fmt.Sprintf("2025-%02d-%02d", 1+br.intn(12), 1+br.intn(28)) + "</p>\n")
	if d.revision > 0 {
		b.WriteString("<p class=\"revision\">Updated: revision " + strconv.Itoa(d.revision) + ".</p>\n")
	}
	b.WriteString("<div class=\"article-body\">\n")
	if frag != nil {
		b.Write(frag)
		b.WriteByte('\n')
	}
	for _, p := range text {
		b.WriteString("<" + tag("p") + ">" + esc(p))
		if !m {
			b.WriteString("</p>")
		}
		b.WriteByte('\n')
	}
	if m {
		b.WriteString("</div></div></span>\n") // stray closers
	}
	b.WriteString("</div>\n</article>\n<section class=\"related\"><h2>Read more</h2>\n<" + tag("ul") + ">\n")
	hasMap := false
	for _, l := range d.links[nav:] {
		if l.tag != tagA {
			continue
		}
		body++
		rel := ""
		if l.nofollow {
			rel = " rel=\"nofollow\""
		}
		b.WriteString("<" + tag("li") + "><" + tag("a") + " " + tag("href") + "=" + attr(w.href(d, l)) + rel + ">" + esc(l.text) + "</" + tag("a") + ">")
		if !m {
			b.WriteString("</li>")
		}
		b.WriteByte('\n')
	}
	b.WriteString("</ul>\n</section>\n")
	for _, l := range d.links[nav:] {
		switch l.tag {
		case tagArea:
			if !hasMap {
				b.WriteString("<img src=\"data:image/gif;base64,R0lGODlhAQABAAAAACw=\" usemap=\"#sitemap\" alt=\"map\">\n<map name=\"sitemap\">\n")
				hasMap = true
			}
			b.WriteString("<area shape=\"rect\" coords=\"0,0,10,10\" href=" + attr(w.href(d, l)) + " alt=\"" + esc(l.text) + "\">\n")
		}
	}
	if hasMap {
		b.WriteString("</map>\n")
	}
	for _, l := range d.links[nav:] {
		if l.tag == tagIframe {
			b.WriteString("<iframe src=" + attr(w.href(d, l)) + " title=\"" + esc(l.text) + "\" width=\"300\" height=\"200\"></iframe>\n")
		}
	}
	// comments: not main text, not boilerplate
	cr := newRng(d.textSeed ^ 0xc0ffee)
	nc := cr.intn(4)
	if nc > 0 {
		b.WriteString("<section class=\"comments\"><h2>Comments</h2>\n")
		for i := 0; i < nc; i++ {
			b.WriteString("<div class=\"comment\"><b>" + wordAt(cr) + strconv.Itoa(cr.intn(100)) + "</b><p>" +
				title(wordAt(cr)) + " " + wordAt(cr) + " " + wordAt(cr) + " " + wordAt(cr) + "!</p></div>\n")
		}
		b.WriteString("</section>\n")
	}
	b.WriteString("</main>\n<aside class=\"sidebar\"><div class=\"newsletter\">" + esc(bp[0]) + "</div>\n")
	b.WriteString("<div class=\"ad\">" + esc(bp[1]) + "</div>\n")
	b.WriteString("<p><a href=\"#top\">Back to top</a> · <a href=\"javascript:void(0)\">Share</a> · <a href=\"mailto:editors@example.invalid\">Email us</a></p></aside>\n</div>\n")
	b.WriteString("<footer><p>" + esc(bp[3]) + "</p><p>" + esc(bp[4]) + " | " + esc(bp[5]) + " | " + esc(bp[6]) + "</p></footer>\n")
	if m {
		b.WriteString("<!-- unterminated comment\n") // and no </body></html>
	} else {
		b.WriteString("</body>\n</html>\n")
	}
	return b.Bytes()
}

// robotsBody returns the robots.txt a host serves (the redirect target for robotsRedirect).
func (w *Web) robotsBody(h *host) []byte {
	var b strings.Builder
	sm := ""
	switch h.sitemap {
	case 1:
		sm = "Sitemap: http://" + h.name + "/sitemap.xml\n"
	case 2:
		sm = "Sitemap: http://" + h.name + "/sitemap_index.xml\n"
	}
	switch h.robots {
	case robotsSimple:
		b.WriteString("User-agent: *\nDisallow:\n\n" + sm)
	case robotsRules:
		b.WriteString("# robots.txt for " + h.name + "\nUser-agent: *\nDisallow: /forum/\nAllow: /forum/1\n" +
			"Disallow: /*.pdf$\nDisallow: /*?print=\nDisallow: /reviews/*1-\nAllow: /reviews/11-\n" +
			"Disallow: /wiki/\nAllow: /wiki/\nDisallow: /hidden/\n\n" + sm)
	case robotsGroups:
		b.WriteString("User-agent: badbot\nDisallow: /\n\nUser-agent: crawlnode\nUser-agent: othercrawler\n" +
			"Disallow: /docs/\nAllow: /docs/$\nDisallow: /shop/\n\nUser-agent: *\nDisallow: /blog/\nDisallow: /docs/\n\n" + sm)
	case robotsDelay:
		b.WriteString("User-agent: *\nCrawl-delay: " + strconv.FormatFloat(w.cfg.CrawlDelay.Seconds(), 'f', -1, 64) +
			"\nDisallow: /shop/\n\n" + sm)
	case robotsRedirect:
		b.WriteString("User-agent: *\nDisallow: /guides/\n\n" + sm)
	case robotsOversize:
		b.WriteString("User-agent: *\nDisallow: /wiki/\n" + sm)
		line := "# padding padding padding padding padding padding padding padding padding padding\n"
		for b.Len() < 520<<10 {
			b.WriteString(line)
		}
		b.WriteString("Disallow: /news/\n") // past 500 KiB: must be ignored
		for b.Len() < 600<<10 {
			b.WriteString(line)
		}
	default:
		return nil
	}
	return []byte(b.String())
}

// sitemapLocs lists the URLs a sitemap resource names.
func (w *Web) sitemapLocs(rs res) []string {
	h := rs.h
	var out []string
	pages := func() {
		out = append(out, w.url(h, "/"))
		for k := 1; k < h.pages; k++ {
			out = append(out, w.url(h, w.articlePath(h, k)))
		}
	}
	orphans := func() {
		for n := 1; n <= orphanPages; n++ {
			out = append(out, w.url(h, "/orphans/"+strconv.Itoa(n)+".html"))
		}
	}
	switch rs.kind {
	case kSitemap:
		pages()
		orphans()
	case kSitemapIndex:
		out = append(out, w.url(h, "/sitemaps/pages-1.xml.gz"), w.url(h, "/sitemaps/pages-2.xml"))
	case kSitemapPart:
		if rs.n == 1 {
			pages()
		} else {
			orphans()
		}
	}
	return out
}

func (w *Web) renderSitemap(rs res) []byte {
	var b bytes.Buffer
	b.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
	if rs.kind == kSitemapIndex {
		b.WriteString("<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n")
		for _, l := range w.sitemapLocs(rs) {
			b.WriteString("  <sitemap><loc>" + esc(l) + "</loc><lastmod>2026-01-15</lastmod></sitemap>\n")
		}
		b.WriteString("</sitemapindex>\n")
		return b.Bytes()
	}
	b.WriteString("<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n")
	now := w.cfg.Clock()
	for _, l := range w.sitemapLocs(rs) {
		if len(w.cfg.ChangeIntervals) == 0 {
			b.WriteString("  <url><loc>" + esc(l) + "</loc><changefreq>weekly</changefreq></url>\n")
			continue
		}
		hn, pq := splitURL(l)
		p := w.changeInterval(w.route(hn, pq))
		_, begin := w.versionAt(l, p, now)
		b.WriteString("  <url><loc>" + esc(l) + "</loc><lastmod>" + begin.UTC().Format(time.RFC3339) + "</lastmod><changefreq>" + changefreqOf(p) + "</changefreq></url>\n")
	}
	b.WriteString("</urlset>\n")
	if rs.kind == kSitemapPart && rs.n == 1 {
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestSpeed)
		zw.Write(b.Bytes())
		zw.Close()
		return z.Bytes()
	}
	return b.Bytes()
}

// binary bodies (deterministic); pdfBody is in pdf.go
func (w *Web) pngBody(h *host, n int) []byte {
	hidx, _ := w.binaryOwner(h)
	r := newRng(mix(uint64(w.cfg.Seed), 14, hidx, uint64(n)))
	img := image.NewNRGBA(image.Rect(0, 0, 64, 64))
	for y := 0; y < 64; y++ {
		for x := 0; x < 64; x++ {
			v := r.next()
			img.Set(x, y, color.NRGBA{uint8(v), uint8(v >> 8), uint8(v >> 16), 255})
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return b.Bytes()
}

func (w *Web) binBody(h *host, n int) []byte {
	hidx, _ := w.binaryOwner(h)
	r := newRng(mix(uint64(w.cfg.Seed), 15, hidx, uint64(n)))
	out := make([]byte, 16384)
	for i := 0; i < len(out); i += 8 {
		v := r.next()
		for j := 0; j < 8; j++ {
			out[i+j] = byte(v >> (8 * j))
		}
	}
	out[0], out[1], out[2], out[3] = 0x7f, 'E', 'L', 'F'
	return out
}

func (w *Web) smallHTML(title, msg string) []byte {
	return []byte("<!DOCTYPE html>\n<html><head><title>" + esc(title) + "</title></head><body><h1>" + esc(title) +
		"</h1><p>" + esc(msg) + "</p><p><a href=\"/\">Home</a></p></body></html>\n")
}
