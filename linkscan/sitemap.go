package linkscan

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
)

// Sitemap limits, from sitemaps.org.
const (
	// MaxSitemapBytes caps the decoded (uncompressed) sitemap size: 50 MiB.
	MaxSitemapBytes = 50 << 20
	// MaxSitemapURLs caps the entries delivered from one sitemap: 50,000.
	MaxSitemapURLs = 50000
)

// Sitemap errors. Entries read before the error have been delivered.
var (
	// ErrSitemapLimit: the sitemap is larger than MaxSitemapBytes decoded or
	// holds more than MaxSitemapURLs entries.
	ErrSitemapLimit = errors.New("extract: sitemap limit exceeded")
	// ErrSitemapMalformed: broken XML or gzip, or an unsupported encoding.
	ErrSitemapMalformed = errors.New("extract: malformed sitemap")
	// ErrNotSitemap: well-formed XML whose root is neither <urlset> nor
	// <sitemapindex> (an RSS feed, an HTML page, ...).
	ErrNotSitemap = errors.New("extract: not a sitemap")
)

// ParseSitemap reads a <urlset> or <sitemapindex> document, gzip-compressed
// or not, and calls fn for each entry with a <loc>, in document order.
// isIndex reports a <sitemapindex> (its locs are sitemaps). A missing
// lastmod is the zero time; a missing priority is 0.5.
func ParseSitemap(body []byte, fn func(loc string, lastmod time.Time, changefreq string, priority float64)) (isIndex bool, err error) {
	var r io.Reader = bytes.NewReader(body)
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return false, fmt.Errorf("%w: gzip: %v", ErrSitemapMalformed, err)
		}
		defer gz.Close()
		r = gz
	}
	d := xml.NewDecoder(&capReader{r: r, n: MaxSitemapBytes})
	d.CharsetReader = charsetReader

	var (
		rootSpace string
		entryName string
		depth     int // of the current element; root is 1
		inEntry   bool
		field     string // local name of the entry's child being read, or ""
		text      []byte
		e         sitemapEntry
		count     int
	)
	for {
		tok, err := d.Token() // checks nesting and resolves namespaces
		if err != nil {
			if err == io.EOF {
				if entryName == "" {
					return false, fmt.Errorf("%w: no root element", ErrSitemapMalformed)
				}
				if depth > 0 {
					return isIndex, fmt.Errorf("%w: unexpected end of document", ErrSitemapMalformed)
				}
				return isIndex, nil
			}
			if errors.Is(err, ErrSitemapLimit) {
				return isIndex, err
			}
			return isIndex, fmt.Errorf("%w: %v", ErrSitemapMalformed, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			switch {
			case depth == 1:
				if entryName != "" {
					return isIndex, fmt.Errorf("%w: second root element", ErrSitemapMalformed)
				}
				rootSpace = t.Name.Space
				switch t.Name.Local {
				case "urlset":
					entryName = "url"
				case "sitemapindex":
					entryName, isIndex = "sitemap", true
				default:
					return false, fmt.Errorf("%w: root element <%s>", ErrNotSitemap, t.Name.Local)
				}
			case depth == 2 && t.Name.Local == entryName && t.Name.Space == rootSpace:
				inEntry, e = true, sitemapEntry{}
			case depth == 3 && inEntry && t.Name.Space == rootSpace:
				switch t.Name.Local {
				case "loc", "lastmod", "changefreq", "priority":
					field, text = t.Name.Local, text[:0]
				}
			}
		case xml.EndElement:
			if depth == 0 {
				return isIndex, fmt.Errorf("%w: unexpected </%s>", ErrSitemapMalformed, t.Name.Local)
			}
			switch {
			case depth == 3 && field != "":
				e.set(field, text)
				field = ""
			case depth == 2 && inEntry:
				inEntry = false
				if e.loc != "" {
					fn(e.loc, e.lastmod, e.changefreq, e.priority())
					if count++; count >= MaxSitemapURLs {
						return isIndex, fmt.Errorf("%w: more than %d entries", ErrSitemapLimit, MaxSitemapURLs)
					}
				}
			}
			depth--
		case xml.CharData:
			if field != "" && depth == 3 && len(text)+len(t) <= maxFieldBytes {
				text = append(text, t...)
			}
		}
	}
}

// maxFieldBytes caps one field's text; a longer <loc> is cut and will not
// canonicalize (urlnorm rejects inputs this long).
const maxFieldBytes = 8 << 10

type sitemapEntry struct {
	loc         string
	lastmod     time.Time
	changefreq  string
	prio        float64
	hasPriority bool
}

func (e *sitemapEntry) set(field string, text []byte) {
	v := strings.TrimSpace(string(text))
	switch field {
	case "loc":
		e.loc = v
	case "lastmod":
		e.lastmod = parseLastmod(v)
	case "changefreq":
		switch v = strings.ToLower(v); v {
		case "always", "hourly", "daily", "weekly", "monthly", "yearly", "never":
			e.changefreq = v
		}
	case "priority":
		if p, err := strconv.ParseFloat(v, 64); err == nil && p == p { // not NaN
			e.prio, e.hasPriority = min(max(p, 0), 1), true
		}
	}
}

func (e *sitemapEntry) priority() float64 {
	if !e.hasPriority {
		return 0.5
	}
	return e.prio
}

// lastmodLayouts are the W3C Datetime forms, and two common variants
// without a zone (read as UTC). Fractional seconds are accepted by time.Parse
// after the seconds field.
var lastmodLayouts = []string{
	time.RFC3339,
	"2006-01-02T15:04Z07:00",
	"2006-01-02",
	"2006-01-02T15:04:05",
	"2006-01-02 15:04:05",
	"2006-01",
	"2006",
}

func parseLastmod(v string) time.Time {
	for _, l := range lastmodLayouts {
		if t, err := time.Parse(l, v); err == nil {
			return t
		}
	}
	return time.Time{}
}

// capReader reads at most n bytes from r and fails with ErrSitemapLimit if
// r holds more.
type capReader struct {
	r io.Reader
	n int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%w: larger than %d bytes decoded", ErrSitemapLimit, MaxSitemapBytes)
		}
		return 0, err
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

func charsetReader(label string, in io.Reader) (io.Reader, error) {
	switch strings.ToLower(strings.TrimSpace(label)) {
	case "utf-8", "utf8", "us-ascii", "ascii":
		return in, nil
	case "iso-8859-1", "iso8859-1", "latin1", "latin-1", "l1", "windows-1252", "cp1252":
		// windows-1252 differs from ISO-8859-1 only in 0x80-0x9F, which
		// sitemaps (whose URLs must be ASCII-escaped) do not use.
		return &latin1Reader{r: in}, nil
	}
	return nil, fmt.Errorf("unsupported encoding %q", label)
}

// latin1Reader converts ISO-8859-1 to UTF-8.
type latin1Reader struct {
	r   io.Reader
	buf []byte
	out []byte
}

func (l *latin1Reader) Read(p []byte) (int, error) {
	if len(l.out) == 0 {
		if l.buf == nil {
			l.buf = make([]byte, 4096)
		}
		n, err := l.r.Read(l.buf[:min(len(l.buf), max(len(p)/2, 1))])
		l.out = l.out[:0]
		for _, c := range l.buf[:n] {
			l.out = utf8.AppendRune(l.out, rune(c))
		}
		if n == 0 {
			return 0, err
		}
	}
	n := copy(p, l.out)
	l.out = l.out[n:]
	return n, nil
}
