package corpus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	trafilatura "github.com/markusmobius/go-trafilatura"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
	xunicode "golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
)

// extractor turns one page into a Record (no duplicate decision: that needs the shared index
// and is made by the stage's committer). It is pure CPU work over its inputs and safe for
// concurrent use.
type extractor struct {
	filters  Filters
	token    string
	fallback bool
	maxBody  int
	// md converts kept pages' main content to Markdown; nil with Config.NoMarkdown.
	md *converter.Converter
	// pdf extracts PDFs; nil with PDFConfig.Disabled.
	pdf *pdfEngine
	// log gets one line for each page that panics the extractor.
	log *slog.Logger
	// panics counts the pages that panicked the extractor since the start (Stats.ExtractPanics);
	// a pointer so that copies of the extractor (Stage.Page) count in the same place.
	panics *atomic.Int64
	// beforeParse, when set (tests only), runs on every HTML page just before it is parsed:
	// a hook that panics stands for a page that panics the parser or an extractor after it.
	beforeParse func(j *Job)
}

func newExtractor(cfg *Config) *extractor {
	var md *converter.Converter
	if !cfg.NoMarkdown {
		md = newMarkdownConverter()
	}
	logger := slog.New(slog.DiscardHandler)
	if cfg.Logger != nil {
		logger = cfg.Logger.With("component", "corpus")
	}
	var pdf *pdfEngine
	if !cfg.PDF.Disabled {
		// One instance a worker, and one for Stage.Page.
		pdf = newPDFEngine(cfg.PDF, cfg.Workers+1)
	}
	return &extractor{
		filters:  cfg.Filters,
		token:    strings.ToLower(cfg.UserAgentToken),
		fallback: cfg.Fallback,
		maxBody:  cfg.MaxBodyBytes,
		md:       md,
		pdf:      pdf,
		log:      logger,
		panics:   new(atomic.Int64),
	}
}

// analysis is the extractor's output.
type analysis struct {
	rec       Record
	simhash   uint64
	hasText   bool   // text was extracted (hash and simhash are set): goes to dedup if not rejected
	hashBytes []byte // raw sha256 of the normalized text
	refetch   bool   // Job.Refetch, for the duplicate decision
	// shortcut: the page qualifies for the shortcut (reach 0, no JSON-LD, no fallback),
	// whether or not it was taken. reach, jsonLD and mainChars (non-space characters of the
	// main text, when extracted) are kept for the tests that hold the shortcut to real pages.
	shortcut  bool
	reach     int
	mainChars int
	jsonLD    bool
	// pageLinkChars is the page's visible characters inside <a> (what link density was once
	// judged on), for the tests.
	pageLinkChars int
}

// preCheck rejects a job on its response facts alone, before the body is loaded.
func (e *extractor) preCheck(j *Job) (reason, detail string) {
	if j.Status < 200 || j.Status > 299 {
		return RejectStatus, strconv.Itoa(j.Status)
	}
	switch {
	case isPDFType(j.ContentType):
		if e.pdf == nil {
			return RejectPDFDisabled, ""
		}
	case !isHTML(j.ContentType) && (e.pdf == nil || !mayBePDF(j.ContentType)):
		return RejectContentType, j.ContentType
	}
	if !e.filters.IncludeOptOut && len(optOutSignals(j, nil, e.token)) > 0 {
		return RejectOptOut, ""
	}
	return "", ""
}

func isHTML(contentType string) bool {
	if contentType == "" {
		return true // sniffed as HTML by the fetcher, or unknown: try
	}
	mt := mediaType(contentType)
	return mt == "text/html" || mt == "application/xhtml+xml"
}

func baseRecord(j *Job) Record {
	return Record{
		URL: j.URL, Status: j.Status, FetchTime: j.FetchTime, ContentType: j.ContentType,
		WARCFile: j.WARCFile, WARCOffset: j.WARCOffset, WARCLength: j.WARCLength, TDMPolicy: j.TDMPolicy,
	}
}

// analyze parses the page once and fills the record: opt-out signals from our own walk of the
// DOM, main text, title and language from go-trafilatura on the same DOM, and the quality
// signals and filters on that main text. A page that provably has no text go-trafilatura could
// return (the shortcut, see doc.go) skips it, which is most of the cost.
func (e *extractor) analyze(j *Job, body []byte) analysis {
	return e.run(j, body, true)
}

// analyzeFull is analyze without the shortcut: go-trafilatura runs on every page that gets to
// the filters. Its decisions are the reference the shortcut is held to (analysis.shortcut
// tells whether analyze would have skipped the page).
func (e *extractor) analyzeFull(j *Job, body []byte) analysis {
	return e.run(j, body, false)
}

// run is runPage under recover(): a page that panics anything in its extraction (the HTML
// parser, go-trafilatura, the Markdown converter, the language detector, our own walk) gets a
// record rejected "extract_panic" instead of taking the node down. The record is written and
// the job deleted like any other, so the page is never retried: a page that panics once would
// panic again, at every restart.
func (e *extractor) run(j *Job, body []byte, useShortcut bool) (a analysis) {
	defer func() {
		if p := recover(); p != nil {
			a = e.panicked(j, p)
		}
	}()
	return e.runPage(j, body, useShortcut)
}

// maxPanicStack bounds the stack logged for a page that panicked the extractor.
const maxPanicStack = 4 << 10

// panicked is the analysis of a page whose extraction panicked with p: a bare record with
// its own reason, one log line with the URL and the start of the stack, and the counter.
func (e *extractor) panicked(j *Job, p any) analysis {
	stack := debug.Stack()
	if len(stack) > maxPanicStack {
		stack = stack[:maxPanicStack]
	}
	e.panics.Add(1)
	e.log.Error("extractor panicked on a page: recorded as rejected, not retried",
		"url", j.URL, "warc", j.WARCFile, "offset", j.WARCOffset, "panic", fmt.Sprint(p), "stack", string(stack))
	rec := baseRecord(j)
	rec.Rejected, rec.RejectDetail = RejectExtractPanic, truncateDetail(fmt.Sprint(p))
	return analysis{rec: rec}
}

// truncateDetail keeps a panic's message short enough for a record.
func truncateDetail(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "")
}

func (e *extractor) runPage(j *Job, body []byte, useShortcut bool) analysis {
	rec := baseRecord(j)
	a := analysis{}
	reject := func(reason, detail string) analysis {
		rec.Rejected, rec.RejectDetail = reason, detail
		a.rec = rec
		return a
	}
	if reason, detail := e.preCheck(j); reason != "" {
		rec.OptOut = optOutSignals(j, nil, e.token)
		return reject(reason, detail)
	}
	if isPDFType(j.ContentType) || sniffPDF(body) {
		if e.pdf == nil {
			return reject(RejectPDFDisabled, "")
		}
		return e.runPDF(j, body, rec)
	}
	if !isHTML(j.ContentType) {
		return reject(RejectContentType, j.ContentType) // read back to sniff: not a PDF
	}
	if len(body) > e.maxBody {
		return reject(RejectTooLarge, strconv.Itoa(len(body)))
	}

	if e.beforeParse != nil {
		e.beforeParse(j)
	}
	doc, err := parseHTML(body, j.ContentType)
	if err != nil {
		return reject(RejectParse, err.Error())
	}

	w := walkPage(doc, e.token)
	a.reach, a.jsonLD, a.pageLinkChars = w.reach, w.jsonLD, w.linkChars
	// The shortcut (doc.go, "The shortcut"): without JSON-LD and without the fallback
	// extractors, every non-space character of go-trafilatura's main text comes from a text
	// node that reach counts, so a page with reach 0 gets no text on the full path either.
	a.shortcut = w.reach == 0 && !w.jsonLD && !e.fallback
	rec.Title = w.title
	rec.OptOut = optOutSignals(j, &w.signals, e.token)
	if rec.TDMPolicy == "" {
		rec.TDMPolicy = w.signals.tdmPolicy
	}
	rec.Quality.VisibleChars = w.visible
	rec.Language = w.lang // until go-trafilatura tells
	if len(rec.OptOut) > 0 && !e.filters.IncludeOptOut {
		return reject(RejectOptOut, "")
	}
	if a.shortcut && useShortcut {
		rec.Quality.BoilerplateShare = 1
		return reject(RejectNoText, "no page text")
	}

	opts := trafilatura.Options{
		ExcludeComments: true,
		EnableFallback:  e.fallback,
		HtmlDateMode:    trafilatura.Disabled, // the corpus carries no publication date
	}
	if u, err := url.Parse(j.URL); err == nil {
		opts.OriginalURL = u
	}
	res, err := trafilatura.ExtractDocument(doc, opts)
	if err != nil {
		if strings.Contains(err.Error(), "not long enough") {
			rec.Quality.BoilerplateShare = 1
			return reject(RejectNoText, "")
		}
		return reject(RejectExtractFailed, err.Error())
	}
	text := strings.TrimSpace(res.ContentText)
	if res.Metadata.Title != "" {
		rec.Title = res.Metadata.Title
	}
	rec.Language = normalizeLang(res.Metadata.Language)
	if rec.Language == "" {
		rec.Language = w.lang
	}
	normalized := NormalizeText(text)
	rec.Quality.TextLength = utf8.RuneCountInString(text)
	if normalized != "" {
		rec.Quality.Words = strings.Count(normalized, " ") + 1
	}
	mainChars := countNonSpace(text)
	a.mainChars = mainChars
	if w.visible > 0 {
		rec.Quality.BoilerplateShare = min(1, max(0, 1-float64(mainChars)/float64(w.visible)))
	}
	if mainChars > 0 && w.linkChars > 0 {
		rec.Quality.LinkDensity = float64(w.words.linkCharsOf(text)) / float64(mainChars)
	}
	if normalized == "" {
		return reject(RejectNoText, "")
	}
	a.hasText = true
	a.simhash = SimHash(text)
	rec.SimHash = fmt.Sprintf("%016x", a.simhash)
	sum := sha256.Sum256([]byte(normalized))
	rec.ContentHash = hex.EncodeToString(sum[:])
	a.hashBytes = sum[:]
	rec.Text = text

	switch {
	case rec.Quality.TextLength < e.filters.MinTextLength:
		rec.Text = ""
		return reject(RejectTooShort, strconv.Itoa(rec.Quality.TextLength))
	case rec.Quality.LinkDensity > e.filters.MaxLinkDensity:
		rec.Text = ""
		return reject(RejectLinkDensity, strconv.FormatFloat(rec.Quality.LinkDensity, 'f', 2, 64))
	case len(e.filters.Languages) > 0 && !slices.Contains(e.filters.Languages, rec.Language):
		rec.Text = ""
		return reject(RejectLanguage, rec.Language)
	}
	if e.md != nil {
		// Kept pages only: a conversion error leaves the record without Markdown.
		rec.Markdown, _ = markdownOf(e.md, res.ContentNode, &w, j.URL)
	}
	a.rec = rec
	return a
}

// parseHTML parses a page: as it is when it is valid UTF-8, else decoded by the Content-Type
// charset, a BOM or <meta charset>, as browsers do.
func parseHTML(body []byte, contentType string) (*html.Node, error) {
	r := bytes.NewReader(body)
	if utf8.Valid(body) {
		return html.Parse(r)
	}
	cr, err := charset.NewReader(r, contentType)
	if err != nil {
		return nil, err
	}
	// charset passes bytes through untouched when it settles on UTF-8 (no label, and a
	// prefix that looks like UTF-8): invalid sequences then become U+FFFD here, as browsers
	// show them, so every text and attribute of the tree is valid UTF-8.
	return html.Parse(transform.NewReader(cr, xunicode.UTF8.NewDecoder()))
}

// normalizeLang turns "en-US", "EN_gb", "en" into "en"; anything else not two letters into "".
func normalizeLang(l string) string {
	l = strings.ToLower(strings.TrimSpace(l))
	if i := strings.IndexAny(l, "-_"); i >= 0 {
		l = l[:i]
	}
	if len(l) != 2 || l[0] < 'a' || l[0] > 'z' || l[1] < 'a' || l[1] > 'z' {
		return ""
	}
	return l
}

func countNonSpace(s string) int {
	n := 0
	for _, r := range s {
		if !unicode.IsSpace(r) {
			n++
		}
	}
	return n
}

// pageWalk is what one pass over the DOM finds.
type pageWalk struct {
	title     string
	lang      string // <html lang>
	signals   pageSignals
	visible   int // non-space characters of visible body text
	linkChars int // of which inside <a>
	jsonLD    bool
	// reach counts the non-space characters of every text node outside <script> and
	// <style>, anywhere in the document (head, <title>, <noscript>, <template> included): the
	// characters go-trafilatura's main text can be made of (doc.go, "The shortcut").
	reach int
	words pageWords
	// hrefs are the href attributes of the body's links in document order (pageWords.hrefs
	// points into them), base the first <base href>, images the body's visible images with
	// alt text: what the Markdown's links and images are made of.
	hrefs  []string
	base   string
	images []pageImage
}

// pageImage is an <img> with alt text, placed before page word at.
type pageImage struct {
	at       int32
	alt, src string
}

// pageWords are the words of the page's text in document order with, for each, how many of its
// characters sit inside <a>: what the main text is aligned with to tell its link characters.
// The words' bytes sit one after another in buf, so the walk allocates no string per word.
type pageWords struct {
	buf   []byte
	ends  []int32 // word i is buf[ends[i-1]:ends[i]]
	links []int32 // non-space characters of word i inside <a>
	// hrefs[i] is the link (1-based index into pageWalk.hrefs) word i's first character
	// inside an <a href> sits in, 0 for none: what the Markdown's links are made of.
	hrefs []int32
	start int // start of the word being read
	link  int32
	href  int32
}

// add appends text's words; link is the enclosing <a>: 0 none, -1 one without href, else its
// 1-based index into pageWalk.hrefs.
func (p *pageWords) add(text string, link int32) {
	inLink := link != 0
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			i++
			if c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v' {
				p.flush()
				continue
			}
			p.buf = append(p.buf, c)
		} else {
			r, size := utf8.DecodeRuneInString(text[i:])
			if unicode.IsSpace(r) {
				i += size
				p.flush()
				continue
			}
			p.buf = append(p.buf, text[i:i+size]...)
			i += size
		}
		if inLink {
			p.link++
			if p.href == 0 && link > 0 {
				p.href = link
			}
		}
	}
}

// flush ends the current word (at white space and at the edges of elements that are not
// inline, where go-trafilatura separates text too).
func (p *pageWords) flush() {
	if len(p.buf) > p.start {
		p.ends = append(p.ends, int32(len(p.buf)))
		p.links = append(p.links, p.link)
		p.hrefs = append(p.hrefs, p.href)
		p.start, p.link, p.href = len(p.buf), 0, 0
	}
}

func (p *pageWords) word(i int) []byte {
	from := int32(0)
	if i > 0 {
		from = p.ends[i-1]
	}
	return p.buf[from:p.ends[i]]
}

func fnv64(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// linkCharsOf returns how many non-space characters of text (the extracted main text) come
// from inside links, by aligning text's words with the page's words (aligner).
func (p *pageWords) linkCharsOf(text string) int {
	al := p.aligner()
	if al == nil {
		return 0
	}
	main := strings.Fields(text)
	links := 0
	for i, w := range main {
		next := ""
		if i+1 < len(main) {
			next = main[i+1]
		}
		if found := al.place(w, next, i+1 == len(main)); found >= 0 {
			links += int(p.links[found])
		}
	}
	return links
}

// aligner places the words of an extracted text on the page's words in document order: each
// word is matched with the next page word spelled the same, at most 8 words on, or further
// on where the following word matches too (go-trafilatura drops whole blocks between kept
// ones, and a lone common word far ahead is more likely a coincidence); at most 64 further
// occurrences are tried. Words it cannot place (reordered, joined differently, from JSON-LD)
// stay unplaced. The alignment only moves forward.
type aligner struct {
	p *pageWords
	// Chains of equal-hash words in document order: head[b] is the first word of bucket b not
	// yet passed, same[i] the next word after i in i's bucket.
	head, same []int32
	mask       uint64
	next       int // first page word not yet passed
}

// aligner returns a fresh aligner over the page's words, nil when the page has none.
func (p *pageWords) aligner() *aligner {
	n := len(p.ends)
	if n == 0 {
		return nil
	}
	size := 1
	for size < 2*n {
		size <<= 1
	}
	a := &aligner{p: p, mask: uint64(size - 1), head: make([]int32, size), same: make([]int32, n)}
	for i := range a.head {
		a.head[i] = -1
	}
	for i := n - 1; i >= 0; i-- {
		b := fnv64(p.word(i)) & a.mask
		a.same[i] = a.head[b]
		a.head[b] = int32(i)
	}
	return a
}

// place returns the page word that w (followed by next; last when w ends the text) is
// aligned with, or -1.
func (a *aligner) place(w, next string, last bool) int {
	const near, tries = 8, 64
	p, n := a.p, len(a.p.ends)
	b := fnv64([]byte(w)) & a.mask
	for a.head[b] >= 0 && int(a.head[b]) < a.next {
		a.head[b] = a.same[a.head[b]]
	}
	for c, t := a.head[b], 0; c >= 0 && t < tries; c = a.same[c] {
		if string(p.word(int(c))) != w {
			continue
		}
		t++
		if int(c)-a.next <= near || last ||
			(int(c)+1 < n && string(p.word(int(c)+1)) == next) {
			a.next = int(c) + 1
			return int(c)
		}
	}
	return -1
}

// inline elements do not separate words: text on both sides of their edges runs on.
func inline(a atom.Atom) bool {
	switch a {
	case atom.A, atom.Abbr, atom.B, atom.Bdi, atom.Bdo, atom.Big, atom.Cite, atom.Code,
		atom.Data, atom.Dfn, atom.Em, atom.Font, atom.I, atom.Kbd, atom.Label, atom.Mark, atom.Q,
		atom.S, atom.Samp, atom.Small, atom.Span, atom.Strike, atom.Strong, atom.Sub, atom.Sup,
		atom.Time, atom.Tt, atom.U, atom.Var:
		return true
	}
	return false
}

// walkPage makes one pass over the DOM for the title, <html lang>, robots / TDM meta tags, the
// visible-text counts behind VisibleChars and boilerplate share, the shortcut's bound and the
// page's words for link density.
func walkPage(doc *html.Node, token string) pageWalk {
	var w pageWalk
	// link is the enclosing <a>: 0 none, -1 one without href, else 1 + its index in w.hrefs.
	var walk func(n *html.Node, inBody, hidden bool, link int32)
	walk = func(n *html.Node, inBody, hidden bool, link int32) {
		inLink := link != 0
		switch n.Type {
		case html.TextNode:
			c := countNonSpace(n.Data)
			w.reach += c
			if inBody && !hidden {
				w.visible += c
				if inLink {
					w.linkChars += c
				}
			}
			if inBody {
				w.words.add(n.Data, link)
			}
			return
		case html.ElementNode:
			switch n.DataAtom {
			case atom.Html:
				if w.lang == "" {
					w.lang = normalizeLang(attr(n, "lang"))
				}
			case atom.Title:
				if w.title == "" && n.FirstChild != nil {
					w.title = strings.Join(strings.Fields(n.FirstChild.Data), " ")
				}
				hidden = true
			case atom.Meta:
				name := strings.ToLower(strings.TrimSpace(attr(n, "name")))
				content := attr(n, "content")
				switch name {
				case "robots", token:
					parseRobotsDirectives(content, token, &w.signals.robots)
				case "tdm-reservation":
					w.signals.tdmReservation = content
				case "tdm-policy":
					w.signals.tdmPolicy = strings.TrimSpace(content)
				}
				return
			case atom.Script:
				if strings.EqualFold(strings.TrimSpace(attr(n, "type")), "application/ld+json") {
					w.jsonLD = true
				}
				return
			case atom.Style:
				return
			case atom.Noscript, atom.Template, atom.Iframe, atom.Object:
				hidden = true
			case atom.Body:
				inBody = true
			case atom.A:
				link = -1
				if href := attr(n, "href"); href != "" {
					w.hrefs = append(w.hrefs, href)
					link = int32(len(w.hrefs))
				}
			case atom.Base:
				if w.base == "" {
					w.base = attr(n, "href")
				}
			case atom.Img:
				// An image with alt text, where the Markdown may show it (markdown.go): it
				// sits before page word len(ends), which is a block edge.
				if alt := strings.Join(strings.Fields(attr(n, "alt")), " "); inBody && !hidden && alt != "" {
					w.words.flush()
					w.images = append(w.images, pageImage{at: int32(len(w.words.ends)), alt: alt, src: attr(n, "src")})
				}
			}
		}
		block := n.Type == html.ElementNode && !inline(n.DataAtom)
		if block {
			w.words.flush()
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inBody, hidden, link)
		}
		if block {
			w.words.flush()
		}
	}
	walk(doc, false, false, 0)
	w.words.flush()
	return w
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
