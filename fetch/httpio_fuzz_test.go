package fetch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
)

// scriptConn is a net.Conn whose peer sends script and swallows what is written.
type scriptConn struct {
	r *bytes.Reader
}

func (c *scriptConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *scriptConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// fuzzClient is a Client with only what roundTrip.run and finish use.
func fuzzClient(maxHeader int) *Client {
	c := &Client{cfg: Config{MaxHeaderSize: maxHeader, FirstByteTimeout: time.Hour, Now: time.Now}}
	c.readers.New = func() any { return bufio.NewReaderSize(nil, 8<<10) }
	c.scratch.New = func() any { b := make([]byte, 0, 4<<10); return &b }
	return c
}

// readScripted runs one round trip against a server that answers with script.
func readScripted(t *testing.T, script []byte, maxHeader, maxBody int) (*Response, bool, error) {
	t.Helper()
	c := fuzzClient(maxHeader)
	resp := &Response{URL: "http://h.test/a", RawRequest: []byte("GET /a HTTP/1.1\r\nHost: h.test\r\n\r\n")}
	rt := roundTrip{c: c, conn: &scriptConn{r: bytes.NewReader(script)}, maxBody: maxBody, deadline: time.Now().Add(time.Hour)}
	keep, _, err := rt.run(resp)
	return resp, keep, err
}

// FuzzReadResponse feeds arbitrary server bytes to the HTTP/1.1 response reader and then
// to the decoding step (finish). Errors are errors, never panics; the header block never
// exceeds MaxHeaderSize and the body never exceeds the body limit, raw or decoded; a
// response read without error has a final status and, when framed by Content-Length and
// not cut, exactly that many body bytes.
//
//	go test -run '^$' -fuzz '^FuzzReadResponse$' -fuzztime 60s -parallel 1 ./fetch
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/html\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 301 Moved\r\nLocation: /b c\r\n\r\n",
		"\r\nHTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\nX: a\r\n  folded\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 2\r\n\r\nffffffffffffffff\r\n",
		"HTTP/1.1 503 Busy\r\nRetry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\nConnection: close\r\n\r\nbody to EOF",
		"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 23\r\n\r\n\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\xcbH\xcd\xc9\xc9\a\x00\x86\xa6\x106\x05\x00\x00\x00",
		"HTTP/1.1 200 OK\r\nContent-Encoding: br, identity\r\n\r\n\x0b\x02\x80hello\x03",
		"HTTP/1.1 200\r\n\r\n",
		"HTTP/2 200 OK\r\n\r\n",
	} {
		f.Add([]byte(s), uint16(64), uint16(1024))
		f.Add([]byte(s), uint16(3), uint16(40))
	}
	f.Fuzz(func(t *testing.T, script []byte, maxBody, maxHeader uint16) {
		mb, mh := int(maxBody), int(maxHeader)
		resp, keep, err := readScripted(t, script, mh, mb)
		if len(resp.RawBody) > mb {
			t.Fatalf("raw body %d bytes, limit %d", len(resp.RawBody), mb)
		}
		if len(resp.RawHeader) > mh {
			t.Fatalf("raw header %d bytes, limit %d", len(resp.RawHeader), mh)
		}
		if err != nil {
			if keep {
				t.Fatalf("connection kept after error %v", err)
			}
			if errors.Is(err, ErrHeaderTooLarge) && len(script) <= mh {
				t.Fatalf("header too large with %d bytes in all, limit %d", len(script), mh)
			}
			return
		}
		if resp.Status < 200 || resp.Status > 999 {
			t.Fatalf("status %d accepted as final", resp.Status)
		}
		if cls := resp.Header["Content-Length"]; len(cls) > 0 && len(resp.Header["Transfer-Encoding"]) == 0 &&
			resp.Status != 204 && resp.Status != 304 && !resp.Truncated {
			n, perr := parseContentLength(cls)
			if perr != nil || int64(len(resp.RawBody)) != n {
				t.Fatalf("Content-Length %q, body %d bytes (%v)", cls, len(resp.RawBody), perr)
			}
		}
		if resp.Truncated && keep {
			t.Fatal("truncated body but connection kept")
		}
		tg, terr := parseTarget(resp.URL)
		if terr != nil {
			t.Fatal(terr)
		}
		resp.Finished = time.Unix(1700000000, 0)
		c := fuzzClient(mh)
		c.finish(resp, tg, mb, true)
		if len(resp.Body) > mb {
			t.Fatalf("decoded body %d bytes, limit %d", len(resp.Body), mb)
		}
		if resp.RetryAfter < 0 {
			t.Fatalf("negative Retry-After %v", resp.RetryAfter)
		}
	})
}

// FuzzResponseRoundTrip writes a well-formed response (one header field, a body framed by
// Content-Length, chunked coding or the connection's end) and reads it back: the status,
// the field and the body come back as written, the body cut at the limit and marked so.
//
//	go test -run '^$' -fuzz '^FuzzResponseRoundTrip$' -fuzztime 60s -parallel 1 ./fetch
func FuzzResponseRoundTrip(f *testing.F) {
	f.Add(uint16(200), "X-Test", "value", []byte("hello world"), uint8(0), uint8(4), uint16(1024))
	f.Add(uint16(404), "Set-Cookie", "a=b; Path=/", []byte(""), uint8(1), uint8(1), uint16(10))
	f.Add(uint16(302), "Location", "http://h.test/x", []byte("moved"), uint8(2), uint8(0), uint16(2))
	f.Add(uint16(599), "x", "", bytes.Repeat([]byte("0123456789\r\n"), 50), uint8(1), uint8(7), uint16(100))
	f.Fuzz(func(t *testing.T, status uint16, name, value string, body []byte, framing, chunk uint8, maxBody uint16) {
		st := 200 + int(status)%400
		if st == 204 || st == 304 {
			st = 200
		}
		if !validFieldName(name) || strings.ContainsAny(value, "\r\n\x00") || value != strings.Trim(value, " \t") {
			t.Skip()
		}
		switch strings.ToLower(name) {
		case "content-length", "transfer-encoding", "connection", "content-encoding":
			t.Skip()
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "HTTP/1.1 %d Reason\r\n%s: %s\r\n", st, name, value)
		mode := framing % 3
		switch mode {
		case 0:
			fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
			b.Write(body)
		case 1:
			b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
			size := int(chunk) + 1
			for rest := body; len(rest) > 0; {
				n := min(size, len(rest))
				fmt.Fprintf(&b, "%x\r\n", n)
				b.Write(rest[:n])
				b.WriteString("\r\n")
				rest = rest[n:]
			}
			b.WriteString("0\r\n\r\n")
		case 2:
			b.WriteString("Connection: close\r\n\r\n")
			b.Write(body)
		}
		mb := int(maxBody)
		resp, keep, err := readScripted(t, b.Bytes(), 64<<10, mb)
		if err != nil {
			t.Fatalf("valid response refused: %v\n%q", err, b.Bytes())
		}
		if resp.Status != st {
			t.Fatalf("status %d, wrote %d", resp.Status, st)
		}
		if got := resp.Header.Get(name); got != value {
			t.Fatalf("field %q = %q, wrote %q", name, got, value)
		}
		want, cut := body, false
		if len(body) > mb {
			want, cut = body[:mb], true
		}
		if !bytes.Equal(resp.RawBody, want) || resp.Truncated != cut {
			t.Fatalf("body %q (truncated %v), want %q (%v)", resp.RawBody, resp.Truncated, want, cut)
		}
		if keep != (mode != 2 && !cut) {
			t.Fatalf("keep = %v for framing %d, cut %v", keep, mode, cut)
		}
		if mode == 1 && bytes.Contains(bytes.ToLower(resp.RawHeader), []byte("transfer-encoding")) {
			t.Fatalf("chunked framing left in the stored header %q", resp.RawHeader)
		}
	})
}

func validFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

var codingNames = []string{"gzip", "x-gzip", "deflate", "deflate-raw", "br", "identity"}

// Encoders reused across fuzz inputs (a fresh brotli or flate writer allocates megabytes,
// which made each input cost most of a second).
var (
	fuzzGzipW     = gzip.NewWriter(nil)
	fuzzZlibW     = zlib.NewWriter(nil)
	fuzzFlateW, _ = flate.NewWriter(nil, flate.BestSpeed)
	fuzzBrW       = brotli.NewWriterOptions(nil, brotli.WriterOptions{Quality: 1, LGWin: 16})
)

// encodeWith applies one content coding; "deflate-raw" is deflate without the zlib
// wrapper, which some servers send as "deflate".
func encodeWith(t *testing.T, coding string, data []byte) []byte {
	var b bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip", "x-gzip":
		fuzzGzipW.Reset(&b)
		w = fuzzGzipW
	case "deflate":
		fuzzZlibW.Reset(&b)
		w = fuzzZlibW
	case "deflate-raw":
		fuzzFlateW.Reset(&b)
		w = fuzzFlateW
	case "br":
		fuzzBrW.Reset(&b)
		w = fuzzBrW
	default:
		return data
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// FuzzDecodeBody: content decoding of arbitrary bytes under every coding never returns
// more than the limit and fails with an error, not a panic; data encoded with one or two
// codings decodes back to itself (cut at the limit, and marked so).
//
//	go test -run '^$' -fuzz '^FuzzDecodeBody$' -fuzztime 60s -parallel 1 ./fetch
func FuzzDecodeBody(f *testing.F) {
	f.Add([]byte("<html><body>hello</body></html>"), uint8(0), uint8(5), uint16(1000))
	f.Add(bytes.Repeat([]byte("a"), 5000), uint8(4), uint8(0), uint16(100))
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"), uint8(2), uint8(3), uint16(10))
	f.Add([]byte{}, uint8(3), uint8(1), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, c1, c2 uint8, limit uint16) {
		lim := int(limit)
		first := codingNames[int(c1)%len(codingNames)]
		second := codingNames[int(c2)%len(codingNames)]
		header := func(cs ...string) []string {
			var out []string
			for _, c := range cs {
				if c == "deflate-raw" {
					c = "deflate"
				}
				out = append(out, c)
			}
			return out
		}

		// Arbitrary bytes under each coding.
		for _, c := range codingNames {
			out, trunc, err := decodeBody(header(c), data, lim, false)
			if len(out) > lim && c != "identity" {
				t.Fatalf("%s: decoded %d bytes, limit %d", c, len(out), lim)
			}
			if err != nil && (out != nil || trunc) {
				t.Fatalf("%s: error %v with output", c, err)
			}
			if out2, _, err2 := decodeBody(header(c), data, lim, true); err2 == nil && len(out2) > lim && c != "identity" {
				t.Fatalf("%s: truncated input decoded beyond the limit", c)
			}
		}

		// One coding: round trip.
		enc := encodeWith(t, first, data)
		out, trunc, err := decodeBody(header(first), enc, lim, false)
		if err != nil {
			t.Fatalf("%s: %v", first, err)
		}
		if first == "identity" {
			if !bytes.Equal(out, data) || trunc {
				t.Fatalf("identity changed the body")
			}
		} else {
			want, cut := data, false
			if len(data) > lim {
				want, cut = data[:lim], true
			}
			if !bytes.Equal(out, want) || trunc != cut {
				t.Fatalf("%s: got %d bytes (cut %v), want %d (cut %v)", first, len(out), trunc, len(want), cut)
			}
			pub, err := Decode(header(first), enc, lim)
			if err != nil || !bytes.Equal(pub, want) {
				t.Fatalf("Decode: %v, %d bytes, want %d", err, len(pub), len(want))
			}
		}

		// Two codings, applied in header order: decoded back when it fits, else an error or
		// a prefix within the limit.
		enc2 := encodeWith(t, second, encodeWith(t, first, data))
		out, _, err = decodeBody(header(first, second), enc2, lim, false)
		if err == nil && (len(out) > max(lim, len(data)) || !bytes.HasPrefix(data, out)) {
			t.Fatalf("%s, %s: got %d bytes not a prefix of the %d written", first, second, len(out), len(data))
		}
		if err == nil && len(enc) <= lim && len(data) <= lim && !bytes.Equal(out, data) {
			t.Fatalf("%s, %s: round trip lost data", first, second)
		}
	})
}

// FuzzRobotsUnmarshal reads arbitrary bytes as a stored robots.txt verdict (the frontier
// keeps them on disk and partition streams carry them): an error or a Robots whose
// encoding is a fixed point (encode, decode, encode gives the same bytes and answers).
//
//	go test -run '^$' -fuzz '^FuzzRobotsUnmarshal$' -fuzztime 60s -parallel 1 ./fetch
func FuzzRobotsUnmarshal(f *testing.F) {
	at := time.Unix(1700000000, 0)
	for _, r := range []*Robots{
		ParseRobots(200, []byte("User-agent: *\nDisallow: /private/\nCrawl-delay: 3\nSitemap: http://h.test/s.xml\n"), at),
		ParseRobots(404, nil, at),
		ParseRobots(503, nil, at),
		UnreachableRobots(at),
		ParseRobots(200, []byte("User-agent: crawlnode\nDisallow: /\n"), at),
	} {
		b, err := r.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "/private/x")
	}
	const ua = "crawlnode/0.1 (+https://github.com/crawlnode/crawlnode)"
	f.Fuzz(func(t *testing.T, stored []byte, path string) {
		var r Robots
		if err := r.UnmarshalBinary(stored); err != nil {
			if !errors.Is(err, errRobotsCodec) {
				t.Fatalf("error %v does not wrap errRobotsCodec", err)
			}
			return
		}
		b1, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var back Robots
		if err := back.UnmarshalBinary(b1); err != nil {
			t.Fatalf("own encoding refused: %v", err)
		}
		b2, _ := back.MarshalBinary()
		if !bytes.Equal(b1, b2) {
			t.Fatalf("encoding not stable:\n%q\n%q", b1, b2)
		}
		u := "http://h.test/" + strconv.Quote(path)[1:]
		d1, ok1 := r.CrawlDelay(ua)
		d2, ok2 := back.CrawlDelay(ua)
		if r.Allowed(ua, u) != back.Allowed(ua, u) || d1 != d2 || ok1 != ok2 ||
			len(r.Sitemaps()) != len(back.Sitemaps()) {
			t.Fatalf("answers changed in the round trip for %q", u)
		}
		if d := d1; d < 0 || d > MaxCrawlDelay {
			t.Fatalf("crawl delay %v outside [0, %v]", d, MaxCrawlDelay)
		}
		if len(r.Sitemaps()) > maxSitemaps {
			t.Fatalf("%d sitemaps kept, bound %d", len(r.Sitemaps()), maxSitemaps)
		}
		if !r.Allowed(ua, "http://h.test/robots.txt") {
			t.Fatal("/robots.txt disallowed")
		}
	})
}
