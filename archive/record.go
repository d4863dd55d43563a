package archive

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"sync"
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

// field is one WARC header field to add.
type field struct{ name, value string }

// encoded is one or more records, each its own gzip member, ready to append to a file.
type encoded struct {
	buf              *bytes.Buffer
	mainOff, mainLen int64  // the response (or revisit) member inside buf
	payloadDigest    string // of the response record
	records          int64
	gen              uint64 // segment generation whose warcinfo id the records carry
}

// newBuilderMu serializes gowarc.NewRecordBuilder: in gowarc v1.2.0 it calls
// uuid.EnableRandPool(), an unsynchronized write of a package variable, on every call, which the
// race detector reports when fetch workers build records at once. Building and marshalling are
// not serialized.
var newBuilderMu sync.Mutex

// encodeRecord builds one record with gowarc's record builder (which adds Content-Length,
// WARC-Block-Digest and, for HTTP blocks, WARC-Payload-Digest as sha1:BASE32 and validates the
// header) and marshals it with gowarc's Marshaler into a new gzip member appended to buf. It
// returns the record's header so callers can read computed fields.
func encodeRecord(buf *bytes.Buffer, gz *gzip.Writer, rt gowarc.RecordType, fields []field, blocks ...[]byte) (*gowarc.WarcFields, error) {
	size := 0
	for _, b := range blocks {
		size += len(b)
	}
	// Keep the whole block in memory: it is in memory already, and gowarc would otherwise spill
	// blocks over 1 MiB to a temporary file.
	newBuilderMu.Lock() // see newBuilderMu
	rb := gowarc.NewRecordBuilder(rt, gowarc.WithBufferMaxMemBytes(int64(size)+1),
		gowarc.WithAddMissingRecordId(false), gowarc.WithDefaultDigestAlgorithm("sha1"),
		gowarc.WithDefaultDigestEncoding(gowarc.Base32))
	newBuilderMu.Unlock()
	for _, f := range fields {
		rb.AddWarcHeader(f.name, f.value)
	}
	for _, b := range blocks {
		if _, err := rb.Write(b); err != nil {
			_ = rb.Close()
			return nil, fmt.Errorf("%w: build %s record: %w", ErrInvalid, rt, err)
		}
	}
	rec, _, err := rb.Build() // validation warnings are fixed by gowarc (digests, length); raw bytes are kept as received
	if err != nil {
		if rec != nil {
			_ = rec.Close()
		}
		_ = rb.Close()
		return nil, fmt.Errorf("%w: build %s record: %w", ErrInvalid, rt, err)
	}
	defer func() { _ = rec.Close() }()
	gz.Reset(buf)
	if _, _, err := gowarc.NewMarshaler().Marshal(gz, rec, 0); err != nil {
		return nil, fmt.Errorf("%w: marshal %s record: %w", ErrInvalid, rt, err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("%w: gzip %s record: %w", ErrInvalid, rt, err)
	}
	return rec.WarcHeader(), nil
}

// encodeExchange encodes the response (or, with ref, revisit) record followed by the request
// record into buf, both pointing at each other with WARC-Concurrent-To and at the file's
// warcinfo record with WARC-Warcinfo-ID. Pure apart from the record ids it draws.
func encodeExchange(buf *bytes.Buffer, gz *gzip.Writer, ex *Exchange, ref *Revisit, infoID string, now func() time.Time) (*encoded, error) {
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
	enc := &encoded{buf: buf}

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
		h, err := encodeRecord(buf, gz, gowarc.Response, fields, hdr, ex.ResponseBody)
		if err != nil {
			return nil, err
		}
		enc.payloadDigest = h.Get(gowarc.WarcPayloadDigest)
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
		if _, err := encodeRecord(buf, gz, gowarc.Revisit, fields, hdr); err != nil {
			return nil, err
		}
		enc.payloadDigest = ref.PayloadDigest
	}
	enc.mainLen = int64(buf.Len()) - enc.mainOff
	enc.records = 1

	if reqID != "" {
		fields := append(common(reqID), field{gowarc.WarcConcurrentTo, respID}, field{gowarc.ContentType, ctHTTPRequest})
		if _, err := encodeRecord(buf, gz, gowarc.Request, fields, withHeaderEnd(ex.Request)); err != nil {
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
	_, err := encodeRecord(buf, gz, gowarc.Warcinfo, fields, b.Bytes())
	return err
}
