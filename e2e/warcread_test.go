package e2e

// An independent reader of WARC files (ISO 28500:2017, WARC/1.0 and WARC/1.1), written from
// the grammar with the standard library only, so that the crawler's own reader (package
// archive) and writer library (gowarc) are not their own judges:
//
//	warc-file   = *warc-record                      ; here: gzip, one or more members
//	warc-record = header CRLF block CRLF CRLF
//	header      = version warc-fields
//	version     = "WARC/1.1" CRLF | "WARC/1.0" CRLF
//	warc-fields = *named-field CRLF
//	named-field = field-name ":" [ field-value ] CRLF    ; continuation lines start with SP/HT
//	block       = *OCTET                                ; exactly Content-Length octets
//
// Digests are "algorithm:value" with sha1 (base32, or hex) or sha256 (hex or base32). The
// payload of an application/http block is what follows the HTTP header's empty line.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

var (
	errWARCTruncated = errors.New("warc: truncated")
	errWARCCorrupt   = errors.New("warc: corrupt")
)

// warcField is one named field as written.
type warcField struct{ Name, Value string }

// warcRec is one record read back, with where its gzip member sits in the file.
type warcRec struct {
	Offset, MemberLen int64 // gzip member holding the record (all records of a member share it)
	Version           string
	Fields            []warcField
	Block             []byte
}

// Get returns the first value of a field (names compare case-insensitively).
func (r *warcRec) Get(name string) string {
	for _, f := range r.Fields {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

func (r *warcRec) Type() string { return r.Get("WARC-Type") }

// countingByteReader gives gzip an io.ByteReader (so it reads no byte past a member's end)
// and counts the bytes it consumed, which gives exact member offsets.
type countingByteReader struct {
	br *bufio.Reader
	n  int64
}

func (c *countingByteReader) Read(p []byte) (int, error) {
	n, err := c.br.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingByteReader) ReadByte() (byte, error) {
	b, err := c.br.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// readWARC calls fn for every record of a gzip WARC stream, member by member. It returns nil
// at a clean end; on damage it has delivered every record before it and returns an error
// wrapping errWARCTruncated (the data ends inside a member) or errWARCCorrupt (not gzip, a bad
// checksum, bad WARC grammar or a digest mismatch when verify is set), naming the offset.
func readWARC(r io.Reader, name string, verify bool, fn func(*warcRec) error) error {
	cr := &countingByteReader{br: bufio.NewReaderSize(r, 1<<16)}
	for {
		off := cr.n
		if _, err := cr.br.Peek(1); err == io.EOF {
			return nil
		}
		zr, err := gzip.NewReader(cr)
		if err != nil {
			return memberError(name, off, err)
		}
		zr.Multistream(false)
		data, err := io.ReadAll(zr)
		if err != nil {
			return memberError(name, off, err)
		}
		end := cr.n
		if len(data) == 0 {
			return fmt.Errorf("%w: %s at offset %d: empty gzip member", errWARCCorrupt, name, off)
		}
		for len(data) > 0 {
			rec, rest, err := parseWARCRecord(data)
			if err != nil {
				return fmt.Errorf("%s at offset %d: %w", name, off, err)
			}
			rec.Offset, rec.MemberLen = off, end-off
			if verify {
				if err := rec.verifyDigests(); err != nil {
					return fmt.Errorf("%w: %s at offset %d (%s %s): %v", errWARCCorrupt, name, off, rec.Type(), rec.Get("WARC-Target-URI"), err)
				}
			}
			if err := fn(rec); err != nil {
				return err
			}
			data = rest
		}
	}
}

func memberError(name string, off int64, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %s at offset %d: %v", errWARCTruncated, name, off, err)
	}
	return fmt.Errorf("%w: %s at offset %d: %v", errWARCCorrupt, name, off, err)
}

// readWARCFile is readWARC over a file.
func readWARCFile(path string, verify bool, fn func(*warcRec) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return readWARC(f, path, verify, fn)
}

// parseWARCRecord parses one record at the head of data and returns the rest.
func parseWARCRecord(data []byte) (*warcRec, []byte, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errWARCCorrupt}, a...)...)
	}
	line, rest, ok := bytes.Cut(data, []byte("\r\n"))
	if !ok {
		return nil, nil, bad("no version line")
	}
	rec := &warcRec{Version: string(line)}
	if rec.Version != "WARC/1.1" && rec.Version != "WARC/1.0" {
		return nil, nil, bad("version line %q", truncate(string(line), 40))
	}
	for {
		line, rest, ok = bytes.Cut(rest, []byte("\r\n"))
		if !ok {
			return nil, nil, bad("header does not end in CRLF CRLF")
		}
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' { // continuation of the previous field
			if len(rec.Fields) == 0 {
				return nil, nil, bad("continuation line before any field")
			}
			last := &rec.Fields[len(rec.Fields)-1]
			last.Value += " " + strings.TrimSpace(string(line))
			continue
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(name) == 0 || !isToken(name) {
			return nil, nil, bad("bad named field %q", truncate(string(line), 60))
		}
		rec.Fields = append(rec.Fields, warcField{string(name), strings.TrimSpace(string(value))})
	}
	for _, mandatory := range []string{"WARC-Record-ID", "Content-Length", "WARC-Date", "WARC-Type"} {
		if rec.Get(mandatory) == "" {
			return nil, nil, bad("mandatory field %s missing", mandatory)
		}
	}
	n, err := strconv.ParseInt(rec.Get("Content-Length"), 10, 64)
	if err != nil || n < 0 {
		return nil, nil, bad("Content-Length %q", rec.Get("Content-Length"))
	}
	if int64(len(rest)) < n+4 {
		return nil, nil, bad("block of %d bytes plus CRLF CRLF exceeds the %d bytes left", n, len(rest))
	}
	rec.Block = rest[:n]
	if string(rest[n:n+4]) != "\r\n\r\n" {
		return nil, nil, bad("block not followed by CRLF CRLF")
	}
	return rec, rest[n+4:], nil
}

// isToken: field names are RFC 2616 tokens.
func isToken(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// isHTTPBlock reports whether the block is an HTTP message (application/http).
func (r *warcRec) isHTTPBlock() bool {
	return strings.HasPrefix(strings.ToLower(r.Get("Content-Type")), "application/http")
}

// httpParts splits an application/http block into its header (through the empty line) and
// payload. ok is false when the header has no end.
func httpParts(block []byte) (header, payload []byte, ok bool) {
	if i := bytes.Index(block, []byte("\r\n\r\n")); i >= 0 {
		return block[:i+4], block[i+4:], true
	}
	if i := bytes.Index(block, []byte("\n\n")); i >= 0 {
		return block[:i+2], block[i+2:], true
	}
	return block, nil, false
}

// payload is the record's payload: the HTTP body for HTTP blocks, else the whole block.
func (r *warcRec) payload() []byte {
	if !r.isHTTPBlock() {
		return r.Block
	}
	_, p, _ := httpParts(r.Block)
	return p
}

// verifyDigests checks WARC-Block-Digest over the block and, except for revisits (whose
// payload digest names the payload of the record they refer to), WARC-Payload-Digest over
// the payload.
func (r *warcRec) verifyDigests() error {
	if d := r.Get("WARC-Block-Digest"); d != "" {
		if err := checkDigest(d, r.Block); err != nil {
			return fmt.Errorf("block digest: %w", err)
		}
	}
	if d := r.Get("WARC-Payload-Digest"); d != "" && r.Type() != "revisit" {
		if err := checkDigest(d, r.payload()); err != nil {
			return fmt.Errorf("payload digest: %w", err)
		}
	}
	return nil
}

// checkDigest verifies "algorithm:value" over data.
func checkDigest(field string, data []byte) error {
	alg, val, ok := strings.Cut(field, ":")
	if !ok {
		return fmt.Errorf("digest %q has no algorithm", field)
	}
	var h hash.Hash
	switch strings.ToLower(alg) {
	case "sha1":
		h = sha1.New()
	case "sha256", "sha-256":
		h = sha256.New()
	default:
		return fmt.Errorf("digest algorithm %q unknown to the test reader", alg)
	}
	h.Write(data)
	sum := h.Sum(nil)
	var want []byte
	var err error
	switch len(val) {
	case base32.StdEncoding.EncodedLen(len(sum)):
		want, err = base32.StdEncoding.DecodeString(strings.ToUpper(val))
	case hex.EncodedLen(len(sum)):
		want, err = hex.DecodeString(val)
	default:
		return fmt.Errorf("digest %q has the wrong length", field)
	}
	if err != nil || !bytes.Equal(want, sum) {
		return fmt.Errorf("recorded %s, computed %s:%s", field, alg, base32.StdEncoding.EncodeToString(sum))
	}
	return nil
}

// sha1Base32 is the WARC digest form of data.
func sha1Base32(data []byte) string {
	sum := sha1.Sum(data)
	return "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
}

// TestWARCReaderGrammar holds the test reader itself to the grammar and to damage, so the
// checks built on it can fail: good records parse and verify; a flipped payload byte, a
// missing CRLF CRLF, a short block, a cut member and garbage between members are errors that
// come after every good record before them.
func TestWARCReaderGrammar(t *testing.T) {
	mk := func(typ, block string, extra ...string) []byte {
		h := "WARC/1.1\r\nWARC-Type: " + typ + "\r\nWARC-Record-ID: <urn:uuid:1>\r\nWARC-Date: 2026-01-01T00:00:00Z\r\n" +
			"Content-Type: application/http; msgtype=response\r\n"
		_, p, _ := httpParts([]byte(block))
		h += "WARC-Block-Digest: " + sha1Base32([]byte(block)) + "\r\nWARC-Payload-Digest: " + sha1Base32(p) + "\r\n"
		for _, e := range extra {
			h += e + "\r\n"
		}
		return []byte(h + "Content-Length: " + strconv.Itoa(len(block)) + "\r\n\r\n" + block + "\r\n\r\n")
	}
	gz := func(recs ...[]byte) []byte {
		var b bytes.Buffer
		for _, r := range recs {
			w := gzip.NewWriter(&b)
			w.Write(r)
			w.Close()
		}
		return b.Bytes()
	}
	body := "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>hello</p>"
	good := mk("response", body, "X-Folded: a", " b")
	badPayload := bytes.Replace(good, []byte("hello"), []byte("hellO"), 1)
	noEnd := bytes.TrimSuffix(good, []byte("\r\n\r\n"))
	shortBlock := bytes.Replace(good, []byte("Content-Length: "+strconv.Itoa(len(body))), []byte("Content-Length: "+strconv.Itoa(len(body)+9)), 1)
	two := gz(good, good)
	cases := []struct {
		name    string
		data    []byte
		records int
		want    error
	}{
		{"two good", two, 2, nil},
		{"payload byte flipped", gz(good, badPayload), 1, errWARCCorrupt},
		{"no CRLF CRLF", gz(good, noEnd), 1, errWARCCorrupt},
		{"short block", gz(good, shortBlock), 1, errWARCCorrupt},
		{"cut member", two[:len(two)-10], 1, errWARCTruncated},
		{"garbage between", append(append(gz(good), "garbage!"...), gz(good)...), 1, errWARCCorrupt},
		{"two records in one member", gz(append(append([]byte{}, good...), good...)), 2, nil},
	}
	for _, c := range cases {
		n := 0
		err := readWARC(bytes.NewReader(c.data), c.name, true, func(r *warcRec) error {
			n++
			if r.Get("x-folded") != "a b" || string(r.payload()) != "<p>hello</p>" {
				t.Errorf("%s: folded %q payload %q", c.name, r.Get("x-folded"), r.payload())
			}
			return nil
		})
		if n != c.records || (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %d records, err %v; want %d records, err %v", c.name, n, err, c.records, c.want)
		}
	}
	// Member offsets are exact: the second member starts where the first ends.
	var offs []int64
	readWARC(bytes.NewReader(two), "two", true, func(r *warcRec) error { offs = append(offs, r.Offset, r.MemberLen); return nil })
	if len(offs) != 4 || offs[2] != offs[1] || offs[2]+offs[3] != int64(len(two)) {
		t.Errorf("member offsets %v for %d bytes", offs, len(two))
	}
}
