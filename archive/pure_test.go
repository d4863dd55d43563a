package archive

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"
	"time"
)

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}

func TestLocationBinary(t *testing.T) {
	for _, l := range []Location{
		{},
		{File: "crawlnode-20250304050607-00001-n1.warc.gz", Offset: 123456789012, Length: 40000},
		{File: "x", Offset: 1 << 40, Length: 1},
	} {
		b, err := l.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > len(l.File)+1+3*10 {
			t.Fatalf("%d bytes is not compact", len(b))
		}
		var got Location
		if err := got.UnmarshalBinary(b); err != nil || got != l {
			t.Fatalf("round trip %+v -> %+v, %v", l, got, err)
		}
	}
	good, _ := Location{File: "abc", Offset: 5, Length: 6}.MarshalBinary()
	for name, b := range map[string][]byte{
		"empty":       nil,
		"version":     append([]byte{9}, good[1:]...),
		"short name":  good[:len(good)-1],
		"long name":   append(bytes.Clone(good), 'x'),
		"bad varint":  {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"cut varints": {1, 5},
	} {
		var l Location
		if err := l.UnmarshalBinary(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := (Location{Offset: -1}).MarshalBinary(); err == nil {
		t.Fatal("negative offset marshalled")
	}
}

func TestFileNames(t *testing.T) {
	n := fileName("crawlnode", "node-a.1", time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)), 7)
	if n != "crawlnode-20250102020405-00007-node-a.1.warc.gz" {
		t.Fatal(n)
	}
	p, ok := parseFileName(n)
	if !ok || p.prefix != "crawlnode" || p.seq != 7 || p.node != "node-a.1" {
		t.Fatalf("%+v", p)
	}
	for _, c := range []struct {
		names  []string
		newest string
		next   int
	}{
		{nil, "", 0},
		{[]string{"other.txt", "crawlnode-20250102020405-00003-n1.warc.gz"}, "crawlnode-20250102020405-00003-n1.warc.gz", 4},
		{[]string{
			"crawlnode-20250102020405-00003-n1.warc.gz",
			"crawlnode-20240102020405-00010-n1.warc.gz", // older clock, higher sequence: newer
			"crawlnode-20260102020405-00012-n2.warc.gz", // another node: counts for the sequence only
			"other-20260102020405-00099-n1.warc.gz",     // another prefix: ignored
		}, "crawlnode-20240102020405-00010-n1.warc.gz", 13},
		{[]string{"crawlnode-20260102020405-00012-n2.warc.gz"}, "", 13},
	} {
		newest, next := planFiles(c.names, "crawlnode", "n1")
		if newest != c.newest || next != c.next {
			t.Errorf("%v: got %q %d, want %q %d", c.names, newest, next, c.newest, c.next)
		}
	}
}

func TestParseRecordGrammar(t *testing.T) {
	block := []byte("HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody")
	rec := func(extra string, blk []byte, tail string) []byte {
		return []byte("WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:x>\r\nWARC-Date: 2025-01-01T00:00:00Z\r\n" +
			"Content-Type: application/http; msgtype=response\r\n" + extra + "Content-Length: " +
			itoa(len(blk)) + "\r\n\r\n" + string(blk) + tail)
	}
	cases := []struct {
		name string
		data []byte
		err  error
	}{
		{"ok", rec("WARC-Block-Digest: "+tSHA1(block)+"\r\nWARC-Payload-Digest: "+tSHA1([]byte("body"))+"\r\n", block, "\r\n\r\n"), nil},
		{"ok base16", rec("WARC-Block-Digest: sha1:"+hexSHA1(block)+"\r\n", block, "\r\n\r\n"), nil},
		{"continuation", rec("X-Long: a\r\n  b\r\n", block, "\r\n\r\n"), nil},
		{"bad block digest", rec("WARC-Block-Digest: "+tSHA1([]byte("x"))+"\r\n", block, "\r\n\r\n"), ErrDigest},
		{"bad payload digest", rec("WARC-Payload-Digest: "+tSHA1([]byte("x"))+"\r\n", block, "\r\n\r\n"), ErrDigest},
		{"no trailer", rec("", block, ""), ErrCorrupt},
		{"extra after", rec("", block, "\r\n\r\nWARC/1.1"), ErrCorrupt},
		{"version", append([]byte("WARC/0.9\r\n"), rec("", block, "\r\n\r\n")[10:]...), ErrCorrupt},
		{"bad line", rec("nocolon\r\n", block, "\r\n\r\n"), ErrCorrupt},
	}
	for _, c := range cases {
		r, err := parseRecord(c.data)
		if c.err == nil {
			if err != nil || string(r.Payload) != "body" || r.HTTPStatus != 200 || r.HTTPHeader.Get("A") != "b" {
				t.Errorf("%s: %v %+v", c.name, err, r)
			}
			continue
		}
		if !errors.Is(err, c.err) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.err)
		}
	}
}

func TestWithHeaderEnd(t *testing.T) {
	for in, want := range map[string]string{
		"HTTP/1.1 200 OK":                 "HTTP/1.1 200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\n":             "HTTP/1.1 200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nA: b\r\n\r\n": "HTTP/1.1 200 OK\r\nA: b\r\n\r\n",
	} {
		src := make([]byte, len(in), len(in)+10)
		copy(src, in)
		got := withHeaderEnd(src)
		if string(got) != want {
			t.Errorf("%q -> %q", in, got)
		}
		if string(src[:cap(src)][:len(in)]) != in || (len(got) > len(in) && &got[0] == &src[0]) {
			t.Errorf("%q: caller's array modified", in)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func hexSHA1(b []byte) string { s := sha1.Sum(b); return hex.EncodeToString(s[:]) }
