package corpus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	trafilatura "github.com/markusmobius/go-trafilatura"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
)

// extractor turns one page into a Record (no duplicate decision: that needs the shared index
// and is made by the stage's committer). It is pure CPU work over its inputs and safe for
// concurrent use.
type extractor struct {
	filters  Filters
	token    string
	fallback bool
	maxBody  int
}

func newExtractor(cfg *Config) *extractor {
	return &extractor{
		filters:  cfg.Filters,
		token:    strings.ToLower(cfg.UserAgentToken),
		fallback: cfg.Fallback,
		maxBody:  cfg.MaxBodyBytes,
	}
}

// analysis is the extractor's output.
type analysis struct {
	rec       Record
	simhash   uint64
	hasText   bool   // text was extracted (hash and simhash are set): goes to dedup if not rejected
	hashBytes []byte // raw sha256 of the normalized text
}

// preCheck rejects a job on its response facts alone, before the body is loaded.
func (e *extractor) preCheck(j *Job) (reason, detail string) {
	if j.Status < 200 || j.Status > 299 {
		return RejectStatus, strconv.Itoa(j.Status)
	}
	if !isHTML(j.ContentType) {
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
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(strings.SplitN(contentType, ";", 2)[0]))
	}
	return mt == "text/html" || mt == "application/xhtml+xml"
}

func baseRecord(j *Job) Record {
	return Record{
		URL: j.URL, Status: j.Status, FetchTime: j.FetchTime, ContentType: j.ContentType,
		WARCFile: j.WARCFile, WARCOffset: j.WARCOffset, WARCLength: j.WARCLength, TDMPolicy: j.TDMPolicy,
	}
}

// analyze parses the page once and fills the record: opt-out signals and quality signals from
// our own walk of the DOM, main text, title and language from go-trafilatura on the same DOM.
// Pages that the filters will drop whatever the extractor says (opted out, too many links, too
// little visible text) skip the extractor, which is most of the cost.
func (e *extractor) analyze(j *Job, body []byte) analysis {
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
	if len(body) > e.maxBody {
		return reject(RejectTooLarge, strconv.Itoa(len(body)))
	}

	var r = bytes.NewReader(body)
	var doc *html.Node
	var err error
	if utf8.Valid(body) {
		doc, err = html.Parse(r)
	} else {
		var cr interface{ Read([]byte) (int, error) }
		cr, err = charset.NewReader(r, j.ContentType)
		if err == nil {
			doc, err = html.Parse(cr)
		}
	}
	if err != nil {
		return reject(RejectParse, err.Error())
	}

	w := walkPage(doc, e.token)
	rec.Title = w.title
	rec.OptOut = optOutSignals(j, &w.signals, e.token)
	if rec.TDMPolicy == "" {
		rec.TDMPolicy = w.signals.tdmPolicy
	}
	rec.Quality.VisibleChars = w.visible
	if w.visible > 0 {
		rec.Quality.LinkDensity = float64(w.linkChars) / float64(w.visible)
	}
	if len(rec.OptOut) > 0 && !e.filters.IncludeOptOut {
		rec.Language = w.lang
		return reject(RejectOptOut, "")
	}
	// The main text is at most the visible text plus its separators; JSON-LD articleBody is the
	// one source of main text that is not visible, so such pages always go to the extractor.
	if 2*w.visible < e.filters.MinTextLength && !w.jsonLD {
		rec.Language = w.lang
		rec.Quality.BoilerplateShare = 1
		return reject(RejectTooShort, "visible text")
	}
	if rec.Quality.LinkDensity > e.filters.MaxLinkDensity {
		rec.Language = w.lang
		rec.Quality.BoilerplateShare = 1
		return reject(RejectLinkDensity, "")
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
		rec.Language = w.lang
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
	if w.visible > 0 {
		rec.Quality.BoilerplateShare = min(1, max(0, 1-float64(mainChars)/float64(w.visible)))
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
	case len(e.filters.Languages) > 0 && !slices.Contains(e.filters.Languages, rec.Language):
		rec.Text = ""
		return reject(RejectLanguage, rec.Language)
	}
	a.rec = rec
	return a
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
}

// walkPage makes one pass over the DOM for the title, <html lang>, robots / TDM meta tags and
// the visible-text counts behind link density and boilerplate share.
func walkPage(doc *html.Node, token string) pageWalk {
	var w pageWalk
	var walk func(n *html.Node, inBody, inLink bool)
	walk = func(n *html.Node, inBody, inLink bool) {
		switch n.Type {
		case html.TextNode:
			if inBody {
				c := countNonSpace(n.Data)
				w.visible += c
				if inLink {
					w.linkChars += c
				}
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
				return
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
			case atom.Style, atom.Noscript, atom.Template, atom.Iframe, atom.Object:
				return
			case atom.Body:
				inBody = true
			case atom.A:
				inLink = true
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inBody, inLink)
		}
	}
	walk(doc, false, false)
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
