package corpus

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// FuzzParseHTMLCharset parses arbitrary page bytes under an arbitrary Content-Type (charset
// label, BOM or <meta charset> decide the decoding): no panic, and every text node and
// attribute value of the tree is valid UTF-8, since the corpus is UTF-8 JSON.
//
//	go test -run '^$' -fuzz '^FuzzParseHTMLCharset$' -fuzztime 60s -parallel 1 ./corpus
func FuzzParseHTMLCharset(f *testing.F) {
	f.Add([]byte("<html><head><title>caf\xe9</title></head><body><p>na\xefve</p></body></html>"), "text/html; charset=iso-8859-1")
	f.Add([]byte("<meta charset=\"windows-1251\"><p>\xcf\xf0\xe8\xe2\xe5\xf2</p>"), "text/html")
	f.Add([]byte("\xff\xfe<\x00p\x00>\x00h\x00i\x00"), "text/html")
	f.Add([]byte("<p>\x82\xa0\x82\xa2</p>"), "text/html; charset=shift_jis")
	f.Add([]byte("<p title=\"\xc3\x28\">\xe2\x82</p>"), "text/html; charset=utf-8")
	f.Add([]byte("<p>\x1b$B$3$s$K$A$O\x1b(B</p>"), "text/html; charset=iso-2022-jp")
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		doc, err := parseHTML(body, contentType)
		if err != nil {
			return
		}
		var walk func(n *html.Node)
		walk = func(n *html.Node) {
			if n.Type == html.TextNode && !utf8.ValidString(n.Data) {
				t.Fatalf("text %q is not UTF-8", n.Data)
			}
			for _, a := range n.Attr {
				if !utf8.ValidString(a.Val) {
					t.Fatalf("attribute %s=%q is not UTF-8", a.Key, a.Val)
				}
			}
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				walk(c)
			}
		}
		walk(doc)
	})
}

// FuzzShardRoundTrip writes lines through the shard writer (zstd), flushing after the
// first k, and reads them back: a closed shard gives every line back; a .partial shard cut
// anywhere after the flush gives, read tolerantly, at least the flushed lines and only whole
// lines as written. Arbitrary bytes read as a shard give an error or whole lines.
//
//	go test -run '^$' -fuzz '^FuzzShardRoundTrip$' -fuzztime 60s -parallel 1 ./corpus
func FuzzShardRoundTrip(f *testing.F) {
	f.Add("{\"url\":\"http://h.test/a\"}\n{\"url\":\"http://h.test/b\",\"text\":\"caf\u00e9\"}\n", uint8(1), uint16(3))
	f.Add(strings.Repeat("{\"x\":1}\n", 200), uint8(100), uint16(0))
	f.Add("no newline at the end", uint8(0), uint16(7))
	f.Add("", uint8(0), uint16(0))
	f.Fuzz(func(t *testing.T, text string, k uint8, cut uint16) {
		var lines []string
		for _, l := range strings.SplitAfter(text, "\n") {
			if l == "" {
				continue
			}
			if !strings.HasSuffix(l, "\n") {
				l += "\n"
			}
			lines = append(lines, l)
		}
		flushAt := min(int(k), len(lines))
		dir := t.TempDir()
		s, err := openShard(dir, "n1", 1, time.Unix(1700000000, 0))
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range lines {
			if i == flushAt {
				if err := s.flush(); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.write([]byte(l)); err != nil {
				t.Fatal(err)
			}
		}
		if flushAt == len(lines) {
			if err := s.flush(); err != nil {
				t.Fatal(err)
			}
		}
		partial := s.path + partialExt
		// The flushed prefix, then a cut somewhere after it.
		flushed, err := os.ReadFile(partial)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
		whole, err := os.ReadFile(s.path)
		if err != nil {
			t.Fatal(err)
		}

		read := func(path string, tolerant bool) ([]string, error) {
			var got []string
			err := readShardLines(path, tolerant, func(line []byte) error {
				got = append(got, string(line))
				return nil
			})
			return got, err
		}
		got, err := read(s.path, false)
		if err != nil {
			t.Fatalf("closed shard: %v", err)
		}
		if strings.Join(got, "") != strings.Join(lines, "") {
			t.Fatalf("closed shard gave %d lines back, wrote %d", len(got), len(lines))
		}

		n := len(flushed) + int(cut)%(len(whole)-len(flushed)+1)
		cutPath := filepath.Join(dir, "cut.jsonl.zst.partial")
		if err := os.WriteFile(cutPath, whole[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		got, err = read(cutPath, true)
		if err != nil {
			t.Fatalf("cut shard read tolerantly: %v", err)
		}
		if len(got) < flushAt || len(got) > len(lines) {
			t.Fatalf("cut at %d of %d bytes: %d lines, %d flushed, %d written", n, len(whole), len(got), flushAt, len(lines))
		}
		for i, l := range got {
			if l != lines[i] {
				t.Fatalf("cut shard line %d is %q, wrote %q", i, l, lines[i])
			}
		}

		// Arbitrary bytes as a shard.
		junk := filepath.Join(dir, "junk.jsonl.zst")
		if err := os.WriteFile(junk, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, tol := range []bool{false, true} {
			got, _ := read(junk, tol)
			for _, l := range got {
				if !strings.HasSuffix(l, "\n") || strings.Count(l, "\n") != 1 {
					t.Fatalf("junk shard gave a partial line %q", l)
				}
			}
		}
	})
}
