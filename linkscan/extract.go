package linkscan

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/crawlnode/crawlnode/urlnorm"
)

const (
	// MaxLinks is the most links Parse collects from one page; it stops
	// reading there. Real pages hold a few hundred; more is a trap or a dump.
	MaxLinks = 10000
	// MaxTitleBytes caps Page.Title (cut at a UTF-8 boundary).
	MaxTitleBytes = 1024
)

// LinkKind is the element a link came from.
type LinkKind uint8

// Link kinds.
const (
	Anchor    LinkKind = iota + 1 // <a href>
	Area                          // <area href>
	Frame                         // <frame src>
	IFrame                        // <iframe src>
	Canonical                     // <link rel=canonical href>
)

func (k LinkKind) String() string {
	switch k {
	case Anchor:
		return "anchor"
	case Area:
		return "area"
	case Frame:
		return "frame"
	case IFrame:
		return "iframe"
	case Canonical:
		return "canonical"
	}
	return "unknown"
}

// Link is one link as found in a page.
type Link struct {
	URL      string   // raw href/src (entity-decoded), unresolved
	Kind     LinkKind // element it came from
	NoFollow bool     // rel=nofollow on the element
}

// Page holds what Parse found in one HTML page. Reuse one Page across pages
// to reuse its memory; a Page is not safe for concurrent use.
type Page struct {
	Base  string // first <base href> value, raw; "" if none
	Title string // first <title> outside <svg>, white space collapsed
	Links []Link

	// From <meta name=robots|crawlnode content=...>.
	MetaNoFollow, MetaNoIndex, MetaNoAI, MetaNoImageAI bool

	TDMReservation bool   // <meta name="tdm-reservation" content="1">
	TDMPolicy      string // <meta name="tdm-policy" content>, raw

	Canonical string // first <link rel=canonical href>, raw

	seen map[string]struct{} // Resolve's dedup set, reused
}

// Parse reads body (HTML, assumed UTF-8 or ASCII-compatible) in one
// pass and fills dst, which it resets first (keeping the capacity of
// dst.Links). It never panics on malformed input. The result is the
// x/net/html tokenizer's reading of the body (parseTokens); scan gives it
// without the tokenizer for nearly every page (see scan.go).
func Parse(body []byte, dst *Page) {
	*dst = Page{Links: dst.Links[:0], seen: dst.seen}
	if scan(body, dst) {
		return
	}
	*dst = Page{Links: dst.Links[:0], seen: dst.seen}
	parseTokens(body, dst)
}

// parseTokens is Parse with the x/net/html tokenizer: one streaming pass over
// its tokens. dst must be reset.
func parseTokens(body []byte, dst *Page) {
	z := html.NewTokenizer(bytes.NewReader(body))
	var (
		titleDone bool
		inTitle   bool
		svgDepth  int
		baseDone  bool
	)
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return
		case html.TextToken:
			if inTitle {
				dst.Title = cleanTitle(z.Text())
				inTitle, titleDone = false, true
			}
			continue
		case html.EndTagToken:
			name := rawTagName(z.Raw())
			if equalFold(name, "svg") && svgDepth > 0 {
				svgDepth--
			}
			if inTitle && equalFold(name, "title") { // <title></title>
				inTitle, titleDone = false, true
			}
			continue
		case html.StartTagToken, html.SelfClosingTagToken:
		default:
			continue
		}
		// The tokenizer's TagName and TagAttr copy what they return; read
		// the raw token instead, and its attributes only for the tags that
		// matter (see attrs.go).
		raw := z.Raw()
		name := rawTagName(raw)
		var lname [8]byte
		if len(name) == 0 || len(name) > len(lname) {
			continue
		}
		for i, c := range name {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			lname[i] = c
		}
		switch string(lname[:len(name)]) {
		case "a":
			addLink(dst, newAttrs(z, raw), Anchor, "href")
		case "area":
			addLink(dst, newAttrs(z, raw), Area, "href")
		case "frame":
			addLink(dst, newAttrs(z, raw), Frame, "src")
		case "iframe":
			addLink(dst, newAttrs(z, raw), IFrame, "src")
		case "link":
			readLinkTag(dst, newAttrs(z, raw))
		case "meta":
			readMeta(dst, newAttrs(z, raw))
		case "base":
			if !baseDone {
				a := newAttrs(z, raw)
				for k, v, ok := a.next(); ok; k, v, ok = a.next() {
					if string(k) == "href" {
						dst.Base, baseDone = string(a.value(v)), true
						break
					}
				}
			}
		case "title":
			if !titleDone && svgDepth == 0 && tt == html.StartTagToken {
				inTitle = true
			}
		case "svg":
			if tt == html.StartTagToken {
				svgDepth++
			}
		case "noscript", "noframes", "noembed":
			if tt == html.StartTagToken {
				z.NextIsNotRawText()
			}
		}
		if len(dst.Links) >= MaxLinks {
			return
		}
	}
}

func addLink(dst *Page, a attrs, kind LinkKind, urlAttr string) {
	var (
		u               []byte
		found, foundRel bool
		nofollow        bool
	)
	for k, v, ok := a.next(); ok; k, v, ok = a.next() {
		switch {
		case !found && string(k) == urlAttr:
			u, found = v, true
		case !foundRel && string(k) == "rel" && (kind == Anchor || kind == Area):
			nofollow, foundRel = hasToken(a.value(v), "nofollow"), true
		}
	}
	if !found || len(u) > urlnorm.MaxInputLength {
		return
	}
	dst.Links = append(dst.Links, Link{URL: string(a.value(u)), Kind: kind, NoFollow: nofollow})
}

func readLinkTag(dst *Page, a attrs) {
	var (
		href                       []byte
		found, foundRel, canonical bool
	)
	for k, v, ok := a.next(); ok; k, v, ok = a.next() {
		switch {
		case !found && string(k) == "href":
			href, found = v, true
		case !foundRel && string(k) == "rel":
			canonical, foundRel = hasToken(a.value(v), "canonical"), true
		}
	}
	if !canonical || !found || len(href) > urlnorm.MaxInputLength {
		return
	}
	s := string(a.value(href))
	if dst.Canonical == "" {
		dst.Canonical = s
	}
	dst.Links = append(dst.Links, Link{URL: s, Kind: Canonical})
}

func readMeta(dst *Page, a attrs) {
	var name, content []byte
	var hasName, hasContent bool
	for k, v, ok := a.next(); ok; k, v, ok = a.next() {
		switch {
		case !hasName && string(k) == "name":
			name, hasName = v, true
		case !hasContent && string(k) == "content":
			content, hasContent = v, true
		}
	}
	if !hasContent {
		return
	}
	name, content = bytes.TrimSpace(a.value(name)), a.value(content)
	switch {
	case equalFold(name, "robots") || equalFold(name, crawlerToken):
		d := parseDirectives(content)
		dst.MetaNoIndex = dst.MetaNoIndex || d.noIndex
		dst.MetaNoFollow = dst.MetaNoFollow || d.noFollow
		dst.MetaNoAI = dst.MetaNoAI || d.noAI
		dst.MetaNoImageAI = dst.MetaNoImageAI || d.noImageAI
	case equalFold(name, "tdm-reservation"):
		if string(bytes.TrimSpace(content)) == "1" {
			dst.TDMReservation = true
		}
	case equalFold(name, "tdm-policy"):
		if dst.TDMPolicy == "" {
			dst.TDMPolicy = string(bytes.TrimSpace(content))
		}
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
}

// hasToken reports whether the white-space separated list v holds tok
// (lower-case ASCII), case-insensitively.
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		i := 0
		for i < len(v) && isSpace(v[i]) {
			i++
		}
		j := i
		for j < len(v) && !isSpace(v[j]) {
			j++
		}
		if j > i && equalFold(v[i:j], tok) {
			return true
		}
		v = v[j:]
	}
	return false
}

// equalFold compares b with the lower-case ASCII string s, ignoring ASCII case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// cleanTitle collapses white space runs to one space, trims, and cuts the
// result at MaxTitleBytes on a rune boundary.
func cleanTitle(t []byte) string {
	var b strings.Builder
	b.Grow(min(len(t), MaxTitleBytes))
	space := false
	for _, c := range t {
		if isSpace(c) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteByte(c)
		if b.Len() >= MaxTitleBytes+utf8.UTFMax {
			break
		}
	}
	s := b.String()
	if len(s) > MaxTitleBytes {
		s = s[:MaxTitleBytes]
		for len(s) > 0 && !utf8.ValidString(s[len(s)-min(len(s), utf8.UTFMax):]) {
			s = s[:len(s)-1]
		}
	}
	return s
}

// Resolve calls fn, in document order, for every followable link of the page
// with its canonical URL: links are resolved against the page's base (a
// valid <base href>, else pageURL) and canonicalized by urlnorm; links that do
// not resolve to an http(s) URL are dropped, as are repeats within the page.
// NoFollow links are skipped, and every link but the canonical one when the
// page's meta robots says nofollow. Nothing is called when pageURL itself is
// not a valid http(s) URL.
func (p *Page) Resolve(pageURL string, fn func(canonical string, l Link)) {
	r, err := urlnorm.NewResolver(pageURL)
	if err != nil {
		return
	}
	if p.Base != "" {
		if b, err := r.Resolve(p.Base); err == nil {
			if br, err := urlnorm.NewResolver(b); err == nil {
				r = br
			}
		}
	}
	if p.seen == nil {
		p.seen = make(map[string]struct{}, len(p.Links))
	} else {
		clear(p.seen)
	}
	for _, l := range p.Links {
		if l.Kind != Canonical && (l.NoFollow || p.MetaNoFollow) {
			continue
		}
		c, err := r.Resolve(l.URL)
		if err != nil {
			continue
		}
		if _, dup := p.seen[c]; dup {
			continue
		}
		p.seen[c] = struct{}{}
		fn(c, l)
	}
}

// rawTagName returns the tag name of a raw start or end tag token ("<a ...>",
// "</svg>"), as written.
func rawTagName(raw []byte) []byte {
	i := 1
	if len(raw) > 1 && raw[1] == '/' {
		i = 2
	}
	j := i
	for j < len(raw) && !isSpace(raw[j]) && raw[j] != '/' && raw[j] != '>' {
		j++
	}
	if i > len(raw) {
		return nil
	}
	return raw[i:j]
}
