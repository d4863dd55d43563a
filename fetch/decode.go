package fetch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
)

// ContentKind tells the crawl loop what a body is good for.
type ContentKind string

// Content kinds.
const (
	// KindHTML: declared text/html or application/xhtml+xml (or undeclared
	// and sniffed as HTML) and not sniffed as binary. Parse for links.
	KindHTML ContentKind = "html"
	// KindRobots: a textual body at path /robots.txt.
	KindRobots ContentKind = "robots"
	// KindSitemap: an XML body whose root is <urlset> or <sitemapindex>,
	// plain or as a gzip file (then Body holds the uncompressed XML).
	KindSitemap ContentKind = "sitemap"
	// KindOther: everything else; recorded, not parsed.
	KindOther ContentKind = "other"
)

var errUnknownEncoding = errors.New("unsupported content-encoding")

var (
	gzipPool   sync.Pool // *gzip.Reader
	brotliPool sync.Pool // *brotli.Reader
)

// decodeBody removes Content-Encoding codings (applied in listed order, so
// removed in reverse), reading at most limit decoded bytes. A raw body
// already truncated ends early; what decoded until then is kept.
func decodeBody(encs []string, raw []byte, limit int, rawTruncated bool) ([]byte, bool, error) {
	var codings []string
	for _, e := range encs {
		for _, p := range strings.Split(e, ",") {
			p = strings.ToLower(strings.TrimSpace(p))
			if p != "" && p != "identity" {
				codings = append(codings, p)
			}
		}
	}
	if len(codings) == 0 {
		return raw, false, nil
	}
	if len(codings) > 3 {
		return nil, false, fmt.Errorf("%w: %d codings", errUnknownEncoding, len(codings))
	}
	body := raw
	truncated := false
	for i := len(codings) - 1; i >= 0; i-- {
		out, trunc, err := decodeOne(codings[i], body, limit)
		if err != nil && !(rawTruncated && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF))) {
			return nil, false, err
		}
		body, truncated = out, truncated || trunc
	}
	return body, truncated, nil
}

func decodeOne(coding string, in []byte, limit int) ([]byte, bool, error) {
	hint := int64(len(in)) * 4
	switch coding {
	case "gzip", "x-gzip":
		return gunzipCapped(in, limit)
	case "deflate":
		// RFC 9110 says zlib; some servers send raw deflate.
		if zr, err := zlib.NewReader(bytes.NewReader(in)); err == nil {
			out, trunc, err := readCapped(zr, limit, hint)
			zr.Close()
			return out, trunc, err
		}
		fr := flate.NewReader(bytes.NewReader(in))
		out, trunc, err := readCapped(fr, limit, hint)
		fr.Close()
		return out, trunc, err
	case "br":
		br, _ := brotliPool.Get().(*brotli.Reader)
		if br == nil {
			br = brotli.NewReader(bytes.NewReader(in))
		} else if err := br.Reset(bytes.NewReader(in)); err != nil {
			return nil, false, err
		}
		out, trunc, err := readCapped(br, limit, hint)
		_ = br.Reset(bytes.NewReader(nil))
		brotliPool.Put(br)
		return out, trunc, err
	}
	return nil, false, fmt.Errorf("%w: %q", errUnknownEncoding, coding)
}

// gunzipCapped decompresses at most limit bytes: a gzip bomb costs limit
// bytes of memory and the CPU to produce them, never more.
func gunzipCapped(in []byte, limit int) ([]byte, bool, error) {
	zr, _ := gzipPool.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(in))
	} else {
		err = zr.Reset(bytes.NewReader(in))
	}
	if err != nil {
		return nil, false, err
	}
	out, trunc, err := readCapped(zr, limit, int64(len(in))*4)
	gzipPool.Put(zr)
	return out, trunc, err
}

// mediaType returns the lower-case media type of a Content-Type value.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// detectContentKind decides from the path, the declared media type and the
// body's first bytes. gz reports a gzip file that may hold a sitemap.
func detectContentKind(path, ct string, body []byte) (kind ContentKind, gz bool) {
	head := body
	if len(head) > 512 {
		head = head[:512]
	}
	sniffed := mediaType(http.DetectContentType(head))
	textual := strings.HasPrefix(sniffed, "text/")
	if path == "/robots.txt" {
		if textual {
			return KindRobots, false
		}
		return KindOther, false
	}
	switch {
	case ct == "text/html" || ct == "application/xhtml+xml":
		if textual {
			return KindHTML, false
		}
		return KindOther, false
	case ct == "" || ct == "application/octet-stream" || ct == "text/plain" || strings.Contains(ct, "xml"):
		if sniffed == "application/x-gzip" {
			return KindOther, strings.HasSuffix(strings.ToLower(path), ".gz")
		}
		if textual && sniffSitemapXML(body) {
			return KindSitemap, false
		}
		if ct == "" && sniffed == "text/html" {
			return KindHTML, false
		}
		return KindOther, false
	case ct == "application/gzip" || ct == "application/x-gzip":
		return KindOther, sniffed == "application/x-gzip"
	}
	return KindOther, false
}

// sniffSitemapXML reports whether the first KiB of body holds a <urlset>
// or <sitemapindex> element (after the XML declaration and comments).
func sniffSitemapXML(body []byte) bool {
	if len(body) > 1024 {
		body = body[:1024]
	}
	return bytes.Contains(body, []byte("<urlset")) || bytes.Contains(body, []byte("<sitemapindex"))
}

// Decode removes the Content-Encoding codings named in contentEncoding (the header's
// values) from a body as archived, reading at most limit decoded bytes. It is what the
// fetcher does on the fly, for readers of stored responses (the extract stage reads pages
// back from WARC). A body longer than limit is cut there.
func Decode(contentEncoding []string, raw []byte, limit int) ([]byte, error) {
	body, _, err := decodeBody(contentEncoding, raw, limit, false)
	return body, err
}
