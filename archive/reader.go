package archive

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
)

// Record is one WARC record read back.
type Record struct {
	Type      string            // WARC-Type: warcinfo, response, request, revisit, ...
	ID        string            // WARC-Record-ID with its angle brackets
	TargetURI string            // WARC-Target-URI ("" for warcinfo)
	Date      time.Time         // WARC-Date
	Headers   map[string]string // every WARC header field, name as written; first value of a repeated name
	// HTTPStatus and HTTPHeader are parsed from an application/http response block (also the
	// header-only block of a revisit); zero/nil otherwise or when the stored header is unparsable.
	HTTPStatus int
	HTTPHeader http.Header
	// Payload is the HTTP body as stored for application/http blocks (empty for revisits), the
	// whole block for other records.
	Payload []byte
}

// ReadResponse reads the record at loc (a response or revisit record as located by
// WriteExchange/WriteRevisit) from the file loc.File inside dir, and verifies its block digest
// (and payload digest, except for revisits). A digest mismatch wraps ErrDigest; a missing file
// ErrNotFound; a damaged member ErrCorrupt or ErrTruncated.
func ReadResponse(dir string, loc Location) (*Record, error) {
	if loc.File == "" || filepath.Base(loc.File) != loc.File || loc.Offset < 0 || loc.Length <= 0 {
		return nil, fmt.Errorf("%w: bad location %+v", ErrInvalid, loc)
	}
	path := filepath.Join(dir, loc.File)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s: %w", ErrNotFound, path, err)
	}
	if err != nil {
		return nil, ioErr("open", path, err)
	}
	defer func() { _ = f.Close() }()
	// A location from a damaged index or store may name any length: allocate only what the
	// file can hold.
	st, err := f.Stat()
	if err != nil {
		return nil, ioErr("stat", path, err)
	}
	if loc.Offset > st.Size() || loc.Length > st.Size()-loc.Offset {
		return nil, fmt.Errorf("%w: %s at offset %d: file ends inside the record", ErrTruncated, path, loc.Offset)
	}
	raw := make([]byte, loc.Length)
	if n, err := f.ReadAt(raw, loc.Offset); n < len(raw) {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s at offset %d: file ends inside the record", ErrTruncated, path, loc.Offset)
		}
		return nil, ioErr("read", path, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, memberErr(path, loc.Offset, err)
	}
	zr.Multistream(false)
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, memberErr(path, loc.Offset, err)
	}
	rec, err := parseRecord(data)
	if err != nil {
		return nil, fmt.Errorf("%s at offset %d: %w", path, loc.Offset, err)
	}
	return rec, nil
}

// Scan calls fn for every record of the WARC file at path, in order, with the offset of its
// gzip member. Each record is parsed and its digests verified before fn sees it. On damage Scan
// first delivers every good record before it, then returns an error naming the file and the
// offset, wrapping ErrTruncated (the file ends inside a record) or ErrCorrupt (bytes that are
// not a valid gzip member holding one valid WARC record; also ErrDigest on a digest mismatch).
// An error returned by fn stops the scan and is returned as is.
func Scan(path string, fn func(off int64, r *Record) error) error {
	_, err := scanFile(path, func(off, _ int64, r *Record) error { return fn(off, r) })
	return err
}

// Index calls fn with the target URI and Location of every response and revisit record of the
// WARC file at path: the URL -> (file, offset) index, rebuilt from the file. Errors as Scan.
func Index(path string, fn func(uri string, r *Record, loc Location) error) error {
	name := filepath.Base(path)
	_, err := scanFile(path, func(off, n int64, r *Record) error {
		if r.Type != "response" && r.Type != "revisit" {
			return nil
		}
		return fn(r.TargetURI, r, Location{File: name, Offset: off, Length: n})
	})
	return err
}

// errStop marks an error returned by a scan callback, passed through unwrapped.
type errStop struct{ err error }

func (e errStop) Error() string { return e.err.Error() }

// scanFile runs the member scanner over path. goodEnd is the end offset of the last record
// that parsed and verified.
func scanFile(path string, fn func(off, length int64, r *Record) error) (goodEnd int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, ioErr("open", path, err)
	}
	defer func() { _ = f.Close() }()
	return scanMembers(f, path, 0, fn)
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// scanMembers reads r (positioned at file offset base) as a sequence of gzip members, one WARC
// record each. The gzip reader reads through a bufio.Reader (an io.ByteReader), so it never
// consumes past the end of a member and member boundaries are exact: bytes read minus bytes
// still buffered.
func scanMembers(r io.Reader, path string, base int64, fn func(off, length int64, r *Record) error) (goodEnd int64, err error) {
	var zr *gzip.Reader
	return scanMembersWith(bufio.NewReaderSize(nil, 256<<10), &zr, r, path, base, fn)
}

// scanMembersWith is scanMembers reading through br (reset to r) and the gzip reader *zrp
// (created when nil), so that salvage probes, one per candidate offset, allocate nothing.
func scanMembersWith(br *bufio.Reader, zrp **gzip.Reader, r io.Reader, path string, base int64, fn func(off, length int64, r *Record) error) (goodEnd int64, err error) {
	cr := &countReader{r: r}
	br.Reset(cr)
	defer br.Reset(nil)
	pos := func() int64 { return base + cr.n - int64(br.Buffered()) }
	goodEnd = base
	for {
		off := pos()
		if *zrp == nil {
			var nz *gzip.Reader
			if nz, err = gzip.NewReader(br); err == nil {
				*zrp = nz
			}
		} else {
			err = (*zrp).Reset(br)
		}
		zr := *zrp
		if err == io.EOF {
			return goodEnd, nil
		}
		if err != nil {
			return goodEnd, memberErr(path, off, err)
		}
		zr.Multistream(false)
		data, err := io.ReadAll(zr)
		if err != nil {
			return goodEnd, memberErr(path, off, err)
		}
		rec, err := parseRecord(data)
		if err != nil {
			return goodEnd, fmt.Errorf("%s at offset %d: %w", path, off, err)
		}
		end := pos()
		if err := fn(off, end-off, rec); err != nil {
			return goodEnd, err
		}
		goodEnd = end
	}
}

// memberErr classifies a gzip error at off: the data ending early is truncation, anything
// else (bad magic, bad checksum, bad deflate stream, a non-EOF read error) corruption.
func memberErr(path string, off int64, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %s at offset %d: %w", ErrTruncated, path, off, err)
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return ioErr("read", path, err)
	}
	return fmt.Errorf("%w: %s at offset %d: %w", ErrCorrupt, path, off, err)
}

// parseRecord parses data as exactly one WARC record (version line, named fields, empty line,
// Content-Length block, CRLF CRLF) and verifies its digests. Pure.
func parseRecord(data []byte) (*Record, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, a...)...)
	}
	line, rest, ok := bytes.Cut(data, []byte("\r\n"))
	if !ok || !(string(line) == "WARC/1.1" || string(line) == "WARC/1.0") {
		return nil, bad("no WARC version line")
	}
	rec := &Record{Headers: map[string]string{}}
	last := ""
	for {
		line, rest, ok = bytes.Cut(rest, []byte("\r\n"))
		if !ok {
			return nil, bad("header not terminated")
		}
		if len(line) == 0 {
			break
		}
		if (line[0] == ' ' || line[0] == '\t') && last != "" {
			rec.Headers[last] += " " + strings.TrimSpace(string(line))
			continue
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(name) == 0 {
			return nil, bad("malformed header line %q", line)
		}
		last = string(name)
		if _, dup := rec.Headers[last]; !dup {
			rec.Headers[last] = strings.TrimSpace(string(value))
		}
	}
	get := func(name string) string {
		if v, ok := rec.Headers[name]; ok {
			return v
		}
		for k, v := range rec.Headers {
			if strings.EqualFold(k, name) {
				return v
			}
		}
		return ""
	}
	n, err := strconv.ParseInt(get("Content-Length"), 10, 64)
	if err != nil || n < 0 {
		return nil, bad("bad Content-Length %q", get("Content-Length"))
	}
	if n > int64(len(rest))-4 || !bytes.Equal(rest[n:], []byte("\r\n\r\n")) { // no n+4: it overflows
		return nil, bad("block of %d bytes not followed by CRLF CRLF at end of member", n)
	}
	block := rest[:n]
	rec.Type = get("WARC-Type")
	rec.ID = get("WARC-Record-ID")
	rec.TargetURI = get("WARC-Target-URI")
	if rec.Type == "" || rec.ID == "" {
		return nil, bad("missing WARC-Type or WARC-Record-ID")
	}
	if rec.Date, err = time.Parse(time.RFC3339, get("WARC-Date")); err != nil {
		return nil, bad("bad WARC-Date %q", get("WARC-Date"))
	}
	if d := get("WARC-Block-Digest"); d != "" {
		if err := verifyDigest(d, block); err != nil {
			return nil, fmt.Errorf("%w: %w: block: %w", ErrCorrupt, ErrDigest, err)
		}
	}
	rec.Payload = block
	if strings.HasPrefix(strings.ToLower(get("Content-Type")), "application/http") {
		hdr, body := splitHTTP(block)
		rec.Payload = body
		if bytes.HasPrefix(hdr, []byte("HTTP/")) {
			rec.HTTPStatus, rec.HTTPHeader = parseHTTPHeader(hdr)
		}
	}
	if d := get("WARC-Payload-Digest"); d != "" && rec.Type != "revisit" {
		if err := verifyDigest(d, rec.Payload); err != nil {
			return nil, fmt.Errorf("%w: %w: payload: %w", ErrCorrupt, ErrDigest, err)
		}
	}
	return rec, nil
}

// splitHTTP splits an HTTP message at the first empty line (CRLF CRLF, or bare LF LF).
func splitHTTP(b []byte) (hdr, body []byte) {
	if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
		return b[:i+4], b[i+4:]
	}
	if i := bytes.Index(b, []byte("\n\n")); i >= 0 {
		return b[:i+2], b[i+2:]
	}
	return b, nil
}

// parseHTTPHeader parses a status line and header fields leniently: what parses is returned.
func parseHTTPHeader(hdr []byte) (int, http.Header) {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(hdr)))
	status, err := tp.ReadLine()
	if err != nil {
		return 0, nil
	}
	parts := strings.SplitN(status, " ", 3)
	code := 0
	if len(parts) >= 2 {
		code, _ = strconv.Atoi(parts[1])
	}
	mh, _ := tp.ReadMIMEHeader()
	return code, http.Header(mh)
}

// verifyDigest checks a WARC digest field ("sha1:BASE32", also base16 and sha256) against data.
func verifyDigest(field string, data []byte) error {
	alg, val, ok := strings.Cut(field, ":")
	if !ok {
		return fmt.Errorf("malformed digest %q", field)
	}
	var h hash.Hash
	switch strings.ToLower(alg) {
	case "sha1", "sha-1":
		h = sha1.New()
	case "sha256", "sha-256":
		h = sha256.New()
	default:
		return fmt.Errorf("unsupported digest algorithm %q", alg)
	}
	h.Write(data)
	sum := h.Sum(nil)
	var want []byte
	var err error
	switch len(val) {
	case hex.EncodedLen(len(sum)):
		want, err = hex.DecodeString(val)
	case base32.StdEncoding.EncodedLen(len(sum)):
		want, err = base32.StdEncoding.DecodeString(strings.ToUpper(val))
	default:
		return fmt.Errorf("digest %q has the wrong length", field)
	}
	if err != nil || !bytes.Equal(want, sum) {
		return fmt.Errorf("recorded %s, computed %s:%s", field, alg, base32.StdEncoding.EncodeToString(sum))
	}
	return nil
}
