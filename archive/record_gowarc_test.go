package archive

import (
	"bytes"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/nlnwa/gowarc"
)

// encodeRecordGowarc is the reference encoder: gowarc v1.2.0's record builder and marshaler,
// as the writer used before it wrote records directly.
func encodeRecordGowarc(buf *bytes.Buffer, gz *gzip.Writer, rt gowarc.RecordType, fields []field, blocks ...[]byte) error {
	size := 0
	for _, b := range blocks {
		size += len(b)
	}
	rb := gowarc.NewRecordBuilder(rt, gowarc.WithBufferMaxMemBytes(int64(size)+1),
		gowarc.WithAddMissingRecordId(false), gowarc.WithDefaultDigestAlgorithm("sha1"),
		gowarc.WithDefaultDigestEncoding(gowarc.Base32))
	for _, f := range fields {
		rb.AddWarcHeader(f.name, f.value)
	}
	for _, b := range blocks {
		if _, err := rb.Write(b); err != nil {
			return err
		}
	}
	rec, _, err := rb.Build()
	if err != nil {
		return err
	}
	defer rec.Close()
	gz.Reset(buf)
	if _, _, err := gowarc.NewMarshaler().Marshal(gz, rec, 0); err != nil {
		return err
	}
	return gz.Close()
}

func gunzipAll(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEncodeRecordMatchesGowarc holds the direct encoder to gowarc's output, byte for byte
// (uncompressed), over every record shape the writer produces.
func TestEncodeRecordMatchesGowarc(t *testing.T) {
	common := []field{
		{gowarc.WarcRecordID, "<urn:uuid:0b1f7c4e-8d7e-4a53-9b8e-1f2d3c4b5a69>"},
		{gowarc.WarcDate, "2026-11-25T08:00:00Z"},
		{gowarc.WarcTargetURI, "http://h1.sim.test/a?b=c"},
		{gowarc.WarcIPAddress, "127.0.0.1"},
		{gowarc.WarcWarcinfoID, "<urn:uuid:1b1f7c4e-8d7e-4a53-9b8e-1f2d3c4b5a69>"},
	}
	big := bytes.Repeat([]byte("<p>lorem ipsum dolor sit amet</p>\n"), 3000)
	cases := []struct {
		name   string
		rt     gowarc.RecordType
		fields []field
		blocks [][]byte
	}{
		{"response", gowarc.Response, append(append([]field{}, common...), field{gowarc.ContentType, ctHTTPResponse}),
			[][]byte{[]byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"), big}},
		{"response-empty-body", gowarc.Response, append(append([]field{}, common...), field{gowarc.ContentType, ctHTTPResponse}),
			[][]byte{[]byte("HTTP/1.1 204 No Content\r\n\r\n"), nil}},
		{"response-truncated", gowarc.Response, append(append([]field{}, common...), field{gowarc.WarcTruncated, "length"}, field{gowarc.ContentType, ctHTTPResponse}),
			[][]byte{[]byte("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n"), {0x1f, 0x8b, 0, 1, 2, '\r', '\n', '\r', '\n', 3}}},
		{"revisit", gowarc.Revisit, append(append([]field{}, common...), field{gowarc.ContentType, ctHTTPResponse},
			field{gowarc.WarcProfile, ProfileIdenticalPayloadDigest}, field{gowarc.WarcRefersToTargetURI, "http://h2.sim.test/"},
			field{gowarc.WarcRefersToDate, "2026-11-25T07:00:00Z"}, field{gowarc.WarcPayloadDigest, "sha1:JEXJR23VJNMISKZO2PJJFAYRPVKZAOS5"}),
			[][]byte{[]byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n")}},
		{"request", gowarc.Request, append(append([]field{}, common...), field{gowarc.ContentType, ctHTTPRequest}),
			[][]byte{[]byte("GET /a?b=c HTTP/1.1\r\nHost: h1.sim.test\r\nUser-Agent: crawlnode/0.1\r\n\r\n")}},
		{"request-with-body", gowarc.Request, append(append([]field{}, common...), field{gowarc.ContentType, ctHTTPRequest}),
			[][]byte{[]byte("POST /f HTTP/1.1\r\nHost: h1.sim.test\r\nContent-Length: 3\r\n\r\nabc")}},
		{"warcinfo", gowarc.Warcinfo, []field{{gowarc.WarcRecordID, "<urn:uuid:i>"}, {gowarc.WarcDate, "2026-11-25T08:00:00Z"},
			{gowarc.WarcFilename, "f.warc.gz"}, {gowarc.ContentType, ctWarcFields}},
			[][]byte{[]byte("software: x\r\nformat: WARC File Format 1.1\r\n")}},
	}
	gz, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want, got bytes.Buffer
			if err := encodeRecordGowarc(&want, gz, c.rt, c.fields, c.blocks...); err != nil {
				t.Fatal(err)
			}
			rt := map[gowarc.RecordType]string{gowarc.Response: rtResponse, gowarc.Request: rtRequest,
				gowarc.Revisit: rtRevisit, gowarc.Warcinfo: rtWarcinfo}[c.rt]
			pd, err := encodeRecord(&got, gz, rt, c.fields, "", c.blocks...)
			if err != nil {
				t.Fatal(err)
			}
			w, g := gunzipAll(t, want.Bytes()), gunzipAll(t, got.Bytes())
			if !bytes.Equal(w, g) {
				n := min(len(w), len(g), 2000)
				t.Fatalf("records differ\ngowarc: %q\ndirect: %q", w[:n], g[:n])
			}
			if c.rt == gowarc.Response {
				if want := PayloadDigest(c.blocks[1]); pd != want {
					t.Errorf("payload digest %s, want %s", pd, want)
				}
				// A caller's precomputed digest gives the same record.
				var again bytes.Buffer
				if _, err := encodeRecord(&again, gz, rt, c.fields, pd, c.blocks...); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(gunzipAll(t, again.Bytes()), w) {
					t.Error("record with a precomputed payload digest differs")
				}
			}
		})
	}
	// A line break in a field value would inject header lines.
	var b bytes.Buffer
	if _, err := encodeRecord(&b, gz, rtResponse, []field{{gowarc.WarcTargetURI, "http://a/\r\nX: y"}}, "", []byte("HTTP/1.1 200 OK\r\n\r\n")); err == nil {
		t.Error("a CR LF in a field value was accepted")
	}
}
