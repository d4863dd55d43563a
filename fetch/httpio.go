package fetch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"time"
)

// roundTrip writes one request on a connection and reads the response.
type roundTrip struct {
	c        *Client
	conn     net.Conn
	maxBody  int
	deadline time.Time
}

var (
	errFirstByte = errors.New("no first byte within FirstByteTimeout")
	errBadStatus = errors.New("malformed status line")
	errBadHeader = errors.New("malformed header line")
)

// run returns whether the connection may be reused, whether any response
// byte arrived, and the error.
func (rt *roundTrip) run(resp *Response) (keep, gotBytes bool, err error) {
	conn := rt.conn
	if err := conn.SetDeadline(rt.deadline); err != nil {
		return false, false, err
	}
	if _, err := conn.Write(resp.RawRequest); err != nil {
		return false, false, err
	}
	fb := time.Now().Add(rt.c.cfg.FirstByteTimeout)
	firstByteBounded := fb.Before(rt.deadline)
	if firstByteBounded {
		if err := conn.SetReadDeadline(fb); err != nil {
			return false, false, err
		}
	}
	br := rt.c.readers.Get().(*bufio.Reader)
	br.Reset(conn)
	defer func() {
		if br.Buffered() > 0 {
			keep = false // unsolicited bytes after the response
		}
		br.Reset(nil)
		rt.c.readers.Put(br)
	}()
	if _, err := br.Peek(1); err != nil {
		if firstByteBounded && errors.Is(err, os.ErrDeadlineExceeded) && time.Now().Before(rt.deadline) {
			return false, false, fmt.Errorf("%w: %w", ErrTimeout, errFirstByte)
		}
		return false, false, err
	}
	if firstByteBounded {
		if err := conn.SetReadDeadline(rt.deadline); err != nil {
			return false, true, err
		}
	}

	// Status line and headers; interim 1xx responses are skipped.
	scratch := rt.c.scratch.Get().(*[]byte)
	defer rt.c.scratch.Put(scratch)
	raw := (*scratch)[:0]
	var proto string
	for i := 0; ; i++ {
		raw, err = readHeaderBlock(br, rt.c.cfg.MaxHeaderSize, raw[:0], false)
		if cap(raw) <= 64<<10 {
			*scratch = raw
		}
		if err != nil {
			return false, true, err
		}
		proto, resp.Status, resp.Header, err = parseHeaderBlock(string(raw))
		if err != nil {
			return false, true, fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		if resp.Status >= 200 || resp.Status == 101 {
			break
		}
		if i >= 4 {
			return false, true, fmt.Errorf("%w: too many interim responses", ErrProtocol)
		}
	}
	keep = proto == "HTTP/1.1" && !headerHasToken(resp.Header["Connection"], "close")
	if resp.Status == 101 {
		return false, true, fmt.Errorf("%w: unexpected 101 switching protocols", ErrProtocol)
	}

	// Body framing per RFC 9112 section 6.3.
	var body io.Reader
	var hint int64
	chunked := false
	if resp.Status == 204 || resp.Status == 304 {
		body = nil
	} else if te := resp.Header["Transfer-Encoding"]; len(te) > 0 {
		if lastToken(te) == "chunked" {
			chunked = true
			body = httputil.NewChunkedReader(br)
		} else {
			body, keep = br, false
		}
		keep = keep && resp.Header.Get("Content-Length") == ""
	} else if cls := resp.Header["Content-Length"]; len(cls) > 0 {
		n, err := parseContentLength(cls)
		if err != nil {
			return false, true, fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		if n > 0 {
			hint = n
			body = io.LimitReader(br, n)
		}
	} else {
		body, keep = br, false
	}

	if chunked {
		raw = stripHeaderLines(raw, "transfer-encoding")
	}
	resp.RawHeader = bytes.Clone(raw)
	if body == nil {
		return keep, true, nil
	}
	buf, truncated, err := readCapped(body, rt.maxBody, hint)
	resp.RawBody, resp.Truncated = buf, truncated
	if err != nil {
		if classifyRaw(err) == ClassOther {
			err = fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		return false, true, err
	}
	if truncated {
		return false, true, nil // not drained: the connection cannot be reused
	}
	if hint > 0 && int64(len(buf)) < hint {
		return false, true, fmt.Errorf("body shorter than Content-Length (%d < %d): %w", len(buf), hint, io.ErrUnexpectedEOF)
	}
	if chunked {
		// Trailer section, up to its blank line.
		if _, err := readHeaderBlock(br, rt.c.cfg.MaxHeaderSize, nil, true); err != nil {
			return false, true, err
		}
	}
	return keep, true, nil
}

// readHeaderBlock appends lines to dst up to and including the blank line
// that ends a header (or trailer) section, failing with ErrHeaderTooLarge
// past max bytes. Blank lines before a status line are skipped (RFC 9112
// section 2.2); with trailer set, a leading blank line ends the block.
func readHeaderBlock(br *bufio.Reader, max int, dst []byte, trailer bool) ([]byte, error) {
	lineStart := len(dst)
	skipped := 0
	for {
		frag, err := br.ReadSlice('\n')
		if len(dst)+len(frag) > max {
			return dst, fmt.Errorf("%w: more than %d bytes", ErrHeaderTooLarge, max)
		}
		dst = append(dst, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return dst, err
		}
		line := dst[lineStart:]
		if len(line) == 1 || (len(line) == 2 && line[0] == '\r') {
			if lineStart == 0 && !trailer {
				if skipped++; skipped > 4 {
					return dst, fmt.Errorf("%w: blank lines before status", ErrProtocol)
				}
				dst = dst[:0]
				continue
			}
			return dst, nil
		}
		lineStart = len(dst)
	}
}

// parseHeaderBlock parses a status line and header fields. Keys and values
// are substrings of raw (one allocation for the block, not one per field).
func parseHeaderBlock(raw string) (proto string, status int, h http.Header, err error) {
	line, rest, _ := strings.Cut(raw, "\n")
	line = strings.TrimRight(line, "\r")
	if len(line) < 12 || !strings.HasPrefix(line, "HTTP/1.") || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return "", 0, nil, fmt.Errorf("%w: %.40q", errBadStatus, line)
	}
	proto = line[:8]
	code := line[9:12]
	for i := 0; i < 3; i++ {
		if code[i] < '0' || code[i] > '9' {
			return "", 0, nil, fmt.Errorf("%w: %.40q", errBadStatus, line)
		}
	}
	status = int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0')
	if status < 100 {
		return "", 0, nil, fmt.Errorf("%w: %.40q", errBadStatus, line)
	}
	n := strings.Count(rest, "\n")
	h = make(http.Header, n)
	vals := make([]string, 0, n) // one backing array for all single values
	var lastKey string
	for len(rest) > 0 {
		line, rest, _ = strings.Cut(rest, "\n")
		line = strings.TrimRight(line, "\r")
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' { // obs-fold
			if lastKey == "" {
				return "", 0, nil, fmt.Errorf("%w: continuation without field", errBadHeader)
			}
			vs := h[lastKey]
			vs[len(vs)-1] += " " + strings.TrimSpace(line)
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.TrimRight(name, " \t")
		if !ok || len(name) == 0 || strings.ContainsAny(name, " \t") {
			return "", 0, nil, fmt.Errorf("%w: %.40q", errBadHeader, line)
		}
		lastKey = textproto.CanonicalMIMEHeaderKey(name)
		value = strings.Trim(value, " \t")
		if old, dup := h[lastKey]; dup {
			h[lastKey] = append(old, value)
			continue
		}
		vals = append(vals, value)
		h[lastKey] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	return proto, status, h, nil
}

func parseContentLength(vals []string) (int64, error) {
	var n int64 = -1
	for _, v := range vals {
		for _, part := range strings.Split(v, ",") {
			m, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
			if err != nil || m < 0 {
				return 0, fmt.Errorf("bad Content-Length %q", v)
			}
			if n >= 0 && m != n {
				return 0, fmt.Errorf("conflicting Content-Length values %q", vals)
			}
			n = m
		}
	}
	return n, nil
}

func lastToken(vals []string) string {
	v := vals[len(vals)-1]
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return strings.ToLower(strings.TrimSpace(v))
}

func headerHasToken(vals []string, tok string) bool {
	for _, v := range vals {
		for _, part := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), tok) {
				return true
			}
		}
	}
	return false
}

// stripHeaderLines removes the header lines named name (lower case) from a
// raw header block, in place.
func stripHeaderLines(raw []byte, name string) []byte {
	out := raw[:0]
	for i := 0; i < len(raw); {
		j := bytes.IndexByte(raw[i:], '\n')
		end := len(raw)
		if j >= 0 {
			end = i + j + 1
		}
		line := raw[i:end]
		drop := false
		if i > 0 && len(line) > len(name) && line[len(name)] == ':' && strings.EqualFold(string(line[:len(name)]), name) {
			drop = true
		}
		if !drop {
			out = append(out, line...)
		}
		i = end
	}
	return out
}

// readCapped reads r to EOF keeping at most limit bytes; truncated reports
// that more than limit bytes were available (reading stops there).
func readCapped(r io.Reader, limit int, hint int64) (buf []byte, truncated bool, err error) {
	// The first buffer fits a body of the announced length (+1 so that it
	// ends with EOF, not a grow), but a claimed length is trusted only up to
	// 1 MiB: a server announcing 10 MiB and sending nothing must not cost
	// 10 MiB per connection up front.
	c := int64(limit) + 1
	if hint > 0 {
		c = min(c, hint+1, 1<<20)
	} else {
		c = min(c, 32<<10)
	}
	buf = make([]byte, 0, c)
	for {
		if len(buf) == cap(buf) {
			n := 2 * cap(buf)
			if n > limit+1 {
				n = limit + 1
			}
			nb := make([]byte, len(buf), n)
			copy(nb, buf)
			buf = nb
		}
		n, rerr := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return buf[:limit], true, nil
		}
		if rerr == io.EOF {
			return buf, false, nil
		}
		if rerr != nil {
			return buf, false, rerr
		}
	}
}

// parseRetryAfter reads delta-seconds or an HTTP date relative to now.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		const maxSecs = int64(30 * 24 * 3600)
		if n > maxSecs {
			n = maxSecs
		}
		return time.Duration(n) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	if d := t.Sub(now); d > 0 {
		return d
	}
	return 0
}
