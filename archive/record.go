package archive

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/nlnwa/gowarc"
)

// Exchange is one fetched response and the request that produced it, as raw bytes.
type Exchange struct {
	URL  string    // target URI (WARC-Target-URI); required, no whitespace or control bytes
	Date time.Time // fetch time (WARC-Date, second precision, UTC); zero means Config.Now()
	IP   string    // peer IP address (WARC-IP-Address); optional, must parse if set

	// Request is the raw HTTP request: request line + headers + CRLF CRLF (+ body, if any).
	// Optional: when empty no request record is written.
	Request []byte

	// ResponseHeader is the raw status line + headers; a missing final CRLF CRLF is added.
	// It must describe ResponseBody as stored: if the fetcher removed a chunked transfer coding,
	// the header should not still say "Transfer-Encoding: chunked" (replay tools would try to
	// de-chunk again).
	ResponseHeader []byte

	// ResponseBody is the payload as received (may be content-encoded). WARC-Payload-Digest is
	// the SHA-1 of exactly these bytes.
	ResponseBody []byte

	// Truncated is "" or the WARC-Truncated reason: "length", "time", "disconnect",
	// "unspecified".
	Truncated string

	// PayloadDigest, when set, is PayloadDigest(ResponseBody), computed by a caller that
	// needed it anyway; the writer then hashes the body once (for WARC-Block-Digest) instead
	// of twice. Empty: the writer computes it.
	PayloadDigest string

	// PayloadCompressed says ResponseBody is compressed already (CompressedPayload of its
	// Content-Encoding and media type, which the fetcher has parsed): the response record is
	// then written with stored deflate blocks instead of deflated again.
	PayloadCompressed bool
}

// Revisit profiles (WARC 1.1).
const (
	ProfileServerNotModified      = gowarc.ProfileServerNotModifiedV1_1
	ProfileIdenticalPayloadDigest = gowarc.ProfileIdenticalPayloadDigestV1_1
)

// Revisit says what a revisit record refers to.
type Revisit struct {
	Profile       string    // ProfileServerNotModified or ProfileIdenticalPayloadDigest
	RefersToURI   string    // WARC-Refers-To-Target-URI: the URI of the earlier capture
	RefersToDate  time.Time // WARC-Refers-To-Date: the WARC-Date of the earlier capture
	RefersToID    string    // optional WARC-Refers-To: record id of the earlier capture
	PayloadDigest string    // "sha1:BASE32" of the earlier payload; required for identical-payload-digest
}

// WARC-Type values.
const (
	rtResponse = "response"
	rtRequest  = "request"
	rtRevisit  = "revisit"
	rtWarcinfo = "warcinfo"
)

const (
	ctHTTPResponse = "application/http; msgtype=response"
	ctHTTPRequest  = "application/http; msgtype=request"
	ctWarcFields   = "application/warc-fields"
)

// newRecordID returns a fresh "<urn:uuid:...>" (random, version 4).
func newRecordID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // never fails since Go 1.24
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return "<urn:uuid:" + string(s[:]) + ">"
}

// warcDate formats t as a WARC-Date (W3C ISO 8601, UTC, second precision: the form every replay
// tool reads; revisits must quote the referred date exactly as written).
func warcDate(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// safeFieldValue reports whether s can go into a WARC header field as is: non-empty, no
// whitespace or control bytes (a CR LF in a URL would inject header lines).
func safeFieldValue(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// checkExchange validates ex (pure).
func checkExchange(ex *Exchange) error {
	switch {
	case !safeFieldValue(ex.URL):
		return fmt.Errorf("%w: url %q is empty or has whitespace/control bytes", ErrInvalid, ex.URL)
	case ex.IP != "" && net.ParseIP(ex.IP) == nil:
		return fmt.Errorf("%w: ip %q", ErrInvalid, ex.IP)
	case !bytes.HasPrefix(ex.ResponseHeader, []byte("HTTP/")):
		return fmt.Errorf("%w: response header does not start with HTTP/", ErrInvalid)
	}
	switch ex.Truncated {
	case "", "length", "time", "disconnect", "unspecified":
	default:
		return fmt.Errorf("%w: truncated reason %q", ErrInvalid, ex.Truncated)
	}
	return nil
}

// checkRevisit validates ref (pure).
func checkRevisit(ref *Revisit) error {
	switch ref.Profile {
	case ProfileServerNotModified, ProfileIdenticalPayloadDigest:
	default:
		return fmt.Errorf("%w: revisit profile %q", ErrInvalid, ref.Profile)
	}
	if !safeFieldValue(ref.RefersToURI) {
		return fmt.Errorf("%w: revisit refers-to uri %q", ErrInvalid, ref.RefersToURI)
	}
	if ref.PayloadDigest == "" && ref.Profile == ProfileIdenticalPayloadDigest {
		return fmt.Errorf("%w: identical-payload-digest revisit needs a payload digest", ErrInvalid)
	}
	if ref.PayloadDigest != "" && (!safeFieldValue(ref.PayloadDigest) || !bytes.ContainsRune([]byte(ref.PayloadDigest), ':')) {
		return fmt.Errorf("%w: payload digest %q is not algorithm:value", ErrInvalid, ref.PayloadDigest)
	}
	if ref.RefersToID != "" && !safeFieldValue(ref.RefersToID) {
		return fmt.Errorf("%w: refers-to id %q", ErrInvalid, ref.RefersToID)
	}
	return nil
}

// withHeaderEnd returns h ending in an empty line, copying rather than appending into the
// caller's array.
func withHeaderEnd(h []byte) []byte {
	switch {
	case bytes.HasSuffix(h, []byte("\r\n\r\n")), bytes.HasSuffix(h, []byte("\n\n")):
		return h
	case bytes.HasSuffix(h, []byte("\r\n")):
		return append(h[:len(h):len(h)], '\r', '\n')
	default:
		return append(h[:len(h):len(h)], '\r', '\n', '\r', '\n')
	}
}

// minStoredPayload is the payload size from which a compressed payload's record is stored
// rather than compressed: below it the HTTP and WARC headers, which do compress, weigh more.
const minStoredPayload = 2048

// CompressedPayload reports whether an HTTP payload with this Content-Encoding value and
// media type (lower case, no parameters, as fetch.Response.ContentType has it) is compressed
// already: a Content-Encoding other than identity (gzip, br, deflate, zstd: what servers send
// to a crawler that asks for them, and what most HTML on the web arrives as) or a media type
// that is a compressed format. Deflating such a payload again costs as much CPU as text (the
// encoder still hashes every position) and saves next to nothing, so its record member is
// written with stored deflate blocks (Exchange.PayloadCompressed): still one gzip member per
// record, readable by every WARC tool, at the cost of leaving the few hundred bytes of
// headers uncompressed.
func CompressedPayload(contentEncoding, mediaType string) bool {
	if e := strings.TrimSpace(contentEncoding); e != "" && !strings.EqualFold(e, "identity") {
		return true
	}
	return compressedMediaType(mediaType)
}

// compressedMediaType reports whether a media type names a format whose bytes are
// compressed already (images, audio, video, archives). SVG and other XML-based image types
// are text and stay compressed by gzip.
func compressedMediaType(t string) bool {
	switch {
	case strings.HasSuffix(t, "+xml"), t == "image/bmp", t == "image/x-icon", t == "image/vnd.microsoft.icon", t == "audio/wav", t == "audio/x-wav":
		return false
	case strings.HasPrefix(t, "image/"), strings.HasPrefix(t, "video/"), strings.HasPrefix(t, "audio/"), strings.HasPrefix(t, "font/woff"):
		return true
	}
	switch t {
	case "application/zip", "application/gzip", "application/x-gzip", "application/x-bzip2",
		"application/x-xz", "application/zstd", "application/x-7z-compressed",
		"application/x-rar-compressed", "application/vnd.rar", "application/x-brotli",
		"application/epub+zip", "application/java-archive", "application/vnd.android.package-archive",
		"application/font-woff", "application/x-font-woff":
		return true
	}
	return strings.HasPrefix(t, "application/vnd.openxmlformats-") || strings.HasPrefix(t, "application/vnd.oasis.opendocument.")
}

// field is one WARC header field to add.
type field struct{ name, value string }

// encoded is one or more records, each its own gzip member, ready to append to a file.
type encoded struct {
	buf              *bytes.Buffer
	mainOff, mainLen int64  // the response (or revisit) member inside buf
	payloadDigest    string // of the response record
	records          int64
	gen              uint64    // segment generation whose warcinfo id the records carry
	date             time.Time // WARC-Date of the records
	indexPrefix      string    // CDXJ line of the main record up to its offset (linePrefix)
}

// encodeRecord writes one record as a new gzip member appended to buf: "WARC/1.1", WARC-Type,
// fields in the order given, Content-Length, WARC-Block-Digest and, for request and response
// records, WARC-Payload-Digest (sha1:BASE32), then the block and the closing CRLF CRLF. The
// layout and field order are gowarc v1.2.0's (TestEncodeRecordMatchesGowarc holds the two
// byte for byte), written directly: building a gowarc record copied every block twice, hashed
// it twice more to validate it and parsed its own header back, which cost more CPU than the
// compression. payloadDigest, when not empty, is the caller's sha1:BASE32 of the HTTP payload
// (it hashed the body already); otherwise it is computed. It returns the payload digest
// written ("" for records without one).
func encodeRecord(buf *bytes.Buffer, gz *gzip.Writer, rt string, fields []field, payloadDigest string, blocks ...[]byte) (string, error) {
	size := 0
	for _, b := range blocks {
		size += len(b)
	}
	hasPayloadField := false
	for _, f := range fields {
		if strings.ContainsAny(f.value, "\r\n") || f.value == "" {
			return "", fmt.Errorf("%w: %s record: field %s value %q", ErrInvalid, rt, f.name, f.value)
		}
		if f.name == gowarc.WarcPayloadDigest {
			hasPayloadField = true
		}
	}
	h := sha1.New()
	for _, b := range blocks {
		h.Write(b)
	}
	var sum [sha1.Size]byte
	blockDigest := sha1Base32(h.Sum(sum[:0]))
	wantPayload := !hasPayloadField && (rt == rtResponse || rt == rtRequest)
	if wantPayload && payloadDigest == "" {
		h.Reset()
		writePayload(h, blocks)
		payloadDigest = sha1Base32(h.Sum(sum[:0]))
	}

	var hb [1024]byte
	b := append(hb[:0], "WARC/1.1\r\nWARC-Type: "...)
	b = append(b, rt...)
	b = append(b, "\r\n"...)
	for _, f := range fields {
		b = append(b, f.name...)
		b = append(b, ": "...)
		b = append(b, f.value...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(size), 10)
	b = append(b, "\r\nWARC-Block-Digest: "...)
	b = append(b, blockDigest...)
	b = append(b, "\r\n"...)
	if wantPayload {
		b = append(b, "WARC-Payload-Digest: "...)
		b = append(b, payloadDigest...)
		b = append(b, "\r\n"...)
	} else if !hasPayloadField {
		payloadDigest = ""
	}
	b = append(b, "\r\n"...)

	gz.Reset(buf)
	if _, err := gz.Write(b); err != nil {
		return "", fmt.Errorf("%w: gzip %s record: %w", ErrInvalid, rt, err)
	}
	for _, blk := range blocks {
		if _, err := gz.Write(blk); err != nil {
			return "", fmt.Errorf("%w: gzip %s record: %w", ErrInvalid, rt, err)
		}
	}
	if _, err := gz.Write([]byte("\r\n\r\n")); err != nil {
		return "", fmt.Errorf("%w: gzip %s record: %w", ErrInvalid, rt, err)
	}
	if err := gz.Close(); err != nil {
		return "", fmt.Errorf("%w: gzip %s record: %w", ErrInvalid, rt, err)
	}
	return payloadDigest, nil
}

// writePayload writes the HTTP payload of an application/http block (the bytes after the
// header's empty line) to w. The block is given in pieces; the header ends in the first.
func writePayload(w io.Writer, blocks [][]byte) {
	if len(blocks) == 0 {
		return
	}
	first := blocks[0]
	end := -1
	if i := bytes.Index(first, []byte("\r\n\r\n")); i >= 0 {
		end = i + 4
	}
	if i := bytes.Index(first, []byte("\n\n")); i >= 0 && (end < 0 || i+2 < end) {
		end = i + 2
	}
	if end < 0 {
		return // no header end: no payload
	}
	w.Write(first[end:])
	for _, b := range blocks[1:] {
		w.Write(b)
	}
}

// sha1Base32 is the WARC digest form of a SHA-1 sum.
func sha1Base32(sum []byte) string {
	var out [len("sha1:") + 32]byte
	copy(out[:], "sha1:")
	base32.StdEncoding.Encode(out[5:], sum)
	return string(out[:])
}

// PayloadDigest returns the WARC-Payload-Digest ("sha1:BASE32") of body: pass it as
// Exchange.PayloadDigest when the caller needs it anyway (deduplication), so the body is
// hashed once.
func PayloadDigest(body []byte) string {
	sum := sha1.Sum(body)
	return sha1Base32(sum[:])
}

// encodeExchange encodes the response (or, with ref, revisit) record followed by the request
// record into buf, both pointing at each other with WARC-Concurrent-To and at the file's
// warcinfo record with WARC-Warcinfo-ID. Pure apart from the record ids it draws.
//
// store, when not nil, is a writer at gzip.NoCompression: the response record goes through it
// instead of gz when ex.PayloadCompressed (and the payload is past minStoredPayload).
func encodeExchange(buf *bytes.Buffer, gz, store *gzip.Writer, ex *Exchange, ref *Revisit, infoID string, now func() time.Time) (*encoded, error) {
	date := ex.Date
	if date.IsZero() {
		date = now()
	}
	respID := newRecordID()
	reqID := ""
	if len(ex.Request) > 0 {
		reqID = newRecordID()
	}
	common := func(id string) []field {
		f := []field{
			{gowarc.WarcRecordID, id},
			{gowarc.WarcDate, warcDate(date)},
			{gowarc.WarcTargetURI, ex.URL},
		}
		if ex.IP != "" {
			f = append(f, field{gowarc.WarcIPAddress, ex.IP})
		}
		return append(f, field{gowarc.WarcWarcinfoID, infoID})
	}
	enc := &encoded{buf: buf, date: date}

	hdr := withHeaderEnd(ex.ResponseHeader)
	fields := common(respID)
	if reqID != "" {
		fields = append(fields, field{gowarc.WarcConcurrentTo, reqID})
	}
	if ex.Truncated != "" {
		fields = append(fields, field{gowarc.WarcTruncated, ex.Truncated})
	}
	fields = append(fields, field{gowarc.ContentType, ctHTTPResponse})
	enc.mainOff = int64(buf.Len())
	if ref == nil {
		rgz := gz
		if store != nil && ex.PayloadCompressed && len(ex.ResponseBody) >= minStoredPayload {
			rgz = store
		}
		pd, err := encodeRecord(buf, rgz, rtResponse, fields, ex.PayloadDigest, hdr, ex.ResponseBody)
		if err != nil {
			return nil, err
		}
		enc.payloadDigest = pd
	} else {
		fields = append(fields,
			field{gowarc.WarcProfile, ref.Profile},
			field{gowarc.WarcRefersToTargetURI, ref.RefersToURI},
			field{gowarc.WarcRefersToDate, warcDate(ref.RefersToDate)})
		if ref.RefersToID != "" {
			id := ref.RefersToID
			if id[0] != '<' {
				id = "<" + id + ">"
			}
			fields = append(fields, field{gowarc.WarcRefersTo, id})
		}
		if ref.PayloadDigest != "" {
			fields = append(fields, field{gowarc.WarcPayloadDigest, ref.PayloadDigest})
		}
		if _, err := encodeRecord(buf, gz, rtRevisit, fields, "", hdr); err != nil {
			return nil, err
		}
		enc.payloadDigest = ref.PayloadDigest
	}
	enc.mainLen = int64(buf.Len()) - enc.mainOff
	enc.records = 1

	if reqID != "" {
		fields := append(common(reqID), field{gowarc.WarcConcurrentTo, respID}, field{gowarc.ContentType, ctHTTPRequest})
		if _, err := encodeRecord(buf, gz, rtRequest, fields, "", withHeaderEnd(ex.Request)); err != nil {
			return nil, err
		}
		enc.records++
	}
	return enc, nil
}

// encodeWarcinfo encodes the warcinfo record that heads a file.
func encodeWarcinfo(buf *bytes.Buffer, gz *gzip.Writer, cfg *Config, id, name string, date time.Time) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "software: %s\r\n", cfg.Software)
	fmt.Fprintf(&b, "format: WARC File Format 1.1\r\n")
	fmt.Fprintf(&b, "conformsTo: https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n")
	if cfg.Operator != "" {
		fmt.Fprintf(&b, "operator: %s\r\n", cfg.Operator)
	}
	fmt.Fprintf(&b, "hostname: %s\r\n", cfg.NodeName)
	fields := []field{
		{gowarc.WarcRecordID, id},
		{gowarc.WarcDate, warcDate(date)},
		{gowarc.WarcFilename, name},
		{gowarc.ContentType, ctWarcFields},
	}
	_, err := encodeRecord(buf, gz, rtWarcinfo, fields, "", b.Bytes())
	return err
}
