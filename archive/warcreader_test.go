package archive

// An independent reader of the ISO 28500 (WARC 1.1) grammar used to check what the Writer
// produces. It deliberately shares no code with the package (and does not use gowarc): it uses
// the standard library's compress/gzip, its own header parser and its own digest code.
//
//	warc-file   = 1*warc-record            (here: one gzip member per record)
//	warc-record = header CRLF block CRLF CRLF
//	header      = version warc-fields
//	version     = "WARC/1.1" CRLF
//	warc-fields = *named-field CRLF        named-field = field-name ":" [ field-value ] CRLF

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

type tRecord struct {
	off, length int64 // gzip member
	version     string
	fields      []tField
	block       []byte
}

type tField struct{ name, value string }

// get returns the first value of a field, case-insensitively, and whether it exists.
func (r *tRecord) get(name string) (string, bool) {
	for _, f := range r.fields {
		if strings.EqualFold(f.name, name) {
			return f.value, true
		}
	}
	return "", false
}

func (r *tRecord) val(name string) string { v, _ := r.get(name); return v }

type tCounter struct {
	r io.Reader
	n int64
}

func (c *tCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// tReadWARC reads every gzip member of path as exactly one WARC record.
func tReadWARC(path string) ([]tRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cnt := &tCounter{r: f}
	br := bufio.NewReader(cnt)
	var out []tRecord
	for {
		off := cnt.n - int64(br.Buffered())
		if _, err := br.Peek(1); err == io.EOF {
			return out, nil
		}
		zr, err := gzip.NewReader(br)
		if err != nil {
			return out, fmt.Errorf("member at %d: %v", off, err)
		}
		zr.Multistream(false)
		data, err := io.ReadAll(zr)
		if err != nil {
			return out, fmt.Errorf("member at %d: %v", off, err)
		}
		rec, rest, err := tParseRecord(data)
		if err != nil {
			return out, fmt.Errorf("member at %d: %v", off, err)
		}
		if len(rest) != 0 {
			return out, fmt.Errorf("member at %d: %d bytes after the record", off, len(rest))
		}
		rec.off = off
		rec.length = cnt.n - int64(br.Buffered()) - off
		out = append(out, rec)
	}
}

func tParseRecord(data []byte) (tRecord, []byte, error) {
	var rec tRecord
	readLine := func() (string, error) {
		i := bytes.Index(data, []byte("\r\n"))
		if i < 0 {
			return "", fmt.Errorf("line without CRLF")
		}
		l := string(data[:i])
		data = data[i+2:]
		return l, nil
	}
	v, err := readLine()
	if err != nil {
		return rec, nil, err
	}
	if v != "WARC/1.1" {
		return rec, nil, fmt.Errorf("version line %q", v)
	}
	rec.version = v
	for {
		l, err := readLine()
		if err != nil {
			return rec, nil, err
		}
		if l == "" {
			break
		}
		if l[0] == ' ' || l[0] == '\t' {
			if len(rec.fields) == 0 {
				return rec, nil, fmt.Errorf("continuation line first")
			}
			rec.fields[len(rec.fields)-1].value += " " + strings.TrimSpace(l)
			continue
		}
		colon := strings.IndexByte(l, ':')
		if colon <= 0 {
			return rec, nil, fmt.Errorf("bad field line %q", l)
		}
		name := l[:colon]
		for _, c := range name { // token characters only
			if c <= ' ' || c >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", c) {
				return rec, nil, fmt.Errorf("bad field name %q", name)
			}
		}
		rec.fields = append(rec.fields, tField{name, strings.TrimSpace(l[colon+1:])})
	}
	cl, ok := rec.get("Content-Length")
	if !ok {
		return rec, nil, fmt.Errorf("no Content-Length")
	}
	n, err := strconv.Atoi(cl)
	if err != nil || n < 0 || n+4 > len(data) {
		return rec, nil, fmt.Errorf("bad Content-Length %q for %d bytes", cl, len(data))
	}
	rec.block = data[:n]
	if string(data[n:n+4]) != "\r\n\r\n" {
		return rec, nil, fmt.Errorf("block not followed by CRLF CRLF")
	}
	for _, must := range []string{"WARC-Record-ID", "WARC-Type", "WARC-Date"} {
		if _, ok := rec.get(must); !ok {
			return rec, nil, fmt.Errorf("missing %s", must)
		}
	}
	return rec, data[n+4:], nil
}

// tSHA1 is "sha1:" + base32 of the SHA-1 of b, the form replay tools expect.
func tSHA1(b []byte) string {
	s := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(s[:])
}

// tHTTPBody returns what follows the first CRLF CRLF of an HTTP message.
func tHTTPBody(b []byte) []byte {
	i := bytes.Index(b, []byte("\r\n\r\n"))
	if i < 0 {
		return nil
	}
	return b[i+4:]
}

// tVerifyDigests checks the block digest of every record and the payload digest of every
// request/response record.
func tVerifyDigests(rec *tRecord) error {
	bd, ok := rec.get("WARC-Block-Digest")
	if !ok {
		return fmt.Errorf("%s: no WARC-Block-Digest", rec.val("WARC-Record-ID"))
	}
	if got := tSHA1(rec.block); bd != got {
		return fmt.Errorf("%s: block digest %s, computed %s", rec.val("WARC-Record-ID"), bd, got)
	}
	switch rec.val("WARC-Type") {
	case "response", "request":
		pd, ok := rec.get("WARC-Payload-Digest")
		if !ok {
			return fmt.Errorf("%s: no WARC-Payload-Digest", rec.val("WARC-Record-ID"))
		}
		if got := tSHA1(tHTTPBody(rec.block)); pd != got {
			return fmt.Errorf("%s: payload digest %s, computed %s", rec.val("WARC-Record-ID"), pd, got)
		}
	}
	return nil
}
