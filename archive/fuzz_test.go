package archive

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fuzzWARCRecord builds one valid WARC response record around an HTTP block.
func fuzzWARCRecord(uri string, block []byte) []byte {
	payload := block
	if i := bytes.Index(block, []byte("\r\n\r\n")); i >= 0 {
		payload = block[i+4:]
	}
	return []byte("WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:0f0e0d0c-0b0a-0908-0706-050403020100>\r\n" +
		"WARC-Date: 2026-12-03T10:00:00.123Z\r\nWARC-Target-URI: " + uri + "\r\n" +
		"Content-Type: application/http; msgtype=response\r\nWARC-Block-Digest: " + tSHA1(block) + "\r\n" +
		"WARC-Payload-Digest: " + tSHA1(payload) + "\r\nContent-Length: " + itoa(len(block)) + "\r\n\r\n" +
		string(block) + "\r\n\r\n")
}

// FuzzWARCRecord reads a WARC file whose first and last gzip members hold arbitrary record
// bytes a and b, with arbitrary bytes junk between them, through every reader: parseRecord,
// Scan, ScanSalvage, IndexLines, ReadResponse. Errors are the documented classes, never
// panics; Scan's records are a prefix of what ScanSalvage finds; a record that parses on its
// own is found by the salvage scan at its offset, reads back at its Location, and its CDXJ
// line parses back to the same entry.
//
//	go test -run '^$' -fuzz '^FuzzWARCRecord$' -fuzztime 60s -parallel 1 ./archive
func FuzzWARCRecord(f *testing.F) {
	r1 := fuzzWARCRecord("http://h.test/a?b=1", []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>hi</p>"))
	r2 := fuzzWARCRecord("https://h.test:8443/x y", []byte("HTTP/1.1 404 Not Found\r\n\r\n"))
	revisit := []byte("WARC/1.0\r\nWARC-Type: revisit\r\nWARC-Record-ID: <urn:x>\r\nWARC-Date: 2026-12-03T10:00:00Z\r\n" +
		"WARC-Target-URI: http://h.test/a\r\nContent-Type: application/http\r\nContent-Length: 0\r\n\r\n\r\n\r\n")
	f.Add(r1, []byte{}, r2)
	f.Add(r1, []byte("\x1f\x8b\x08garbage"), revisit)
	f.Add(r1[:len(r1)/2], []byte{0, 0, 0}, r1)
	f.Fuzz(func(t *testing.T, a, junk, b []byte) {
		ra, errA := parseRecord(a)
		rb, errB := parseRecord(b)
		for _, e := range []error{errA, errB} {
			if e != nil && !errors.Is(e, ErrCorrupt) {
				t.Fatalf("parseRecord error %v is not ErrCorrupt", e)
			}
		}
		for _, r := range []*Record{ra, rb} {
			if r != nil && (r.Type == "" || r.ID == "") {
				t.Fatalf("record without type or id: %+v", r)
			}
		}

		dir := t.TempDir()
		path := filepath.Join(dir, "f.warc.gz")
		ga := gz(t, a)
		gb := gz(t, b)
		file := append(append(append([]byte(nil), ga...), junk...), gb...)
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		offB := int64(len(ga) + len(junk))

		var scanned []int64
		err := Scan(path, func(off int64, r *Record) error {
			scanned = append(scanned, off)
			return nil
		})
		if err != nil && !isDamage(err) {
			t.Fatalf("Scan: unexpected error class %v", err)
		}
		if errA == nil && (len(scanned) == 0 || scanned[0] != 0) {
			t.Fatalf("Scan missed the first record (%v)", err)
		}

		type got struct{ off, n int64 }
		var salvaged []got
		var damages []Damage
		err = ScanSalvage(path, func(off, n int64, r *Record) error {
			if off < 0 || n <= 0 || off+n > int64(len(file)) {
				t.Fatalf("record at %d+%d outside a file of %d bytes", off, n, len(file))
			}
			if len(salvaged) > 0 && off < salvaged[len(salvaged)-1].off+salvaged[len(salvaged)-1].n {
				t.Fatalf("record at %d overlaps the one before", off)
			}
			salvaged = append(salvaged, got{off, n})
			return nil
		}, func(d Damage) { damages = append(damages, d) })
		if err != nil {
			t.Fatalf("ScanSalvage: %v", err)
		}
		if len(salvaged) < len(scanned) {
			t.Fatalf("salvage found %d records, Scan %d", len(salvaged), len(scanned))
		}
		for i, off := range scanned {
			if salvaged[i].off != off {
				t.Fatalf("record %d: Scan at %d, salvage at %d", i, off, salvaged[i].off)
			}
		}
		foundB := false
		for _, s := range salvaged {
			if s.off == offB && s.n == int64(len(gb)) {
				foundB = true
			}
		}
		if errB == nil && !foundB {
			t.Fatalf("salvage missed the last record at %d (found %v, damage %v)", offB, salvaged, damages)
		}

		// Read back each found record at its Location.
		for _, s := range salvaged {
			rec, err := ReadResponse(dir, Location{File: "f.warc.gz", Offset: s.off, Length: s.n})
			if err != nil {
				t.Fatalf("ReadResponse at %d+%d: %v", s.off, s.n, err)
			}
			if rec.Type == "" {
				t.Fatal("empty type")
			}
		}

		// CDXJ lines round trip.
		lines, err := IndexLines(path)
		if err != nil && !isDamage(err) {
			t.Fatalf("IndexLines: %v", err)
		}
		for _, line := range lines {
			_, _, e, perr := ParseIndexLine(line)
			if perr != nil {
				t.Fatalf("own CDXJ line %q does not parse: %v", line, perr)
			}
			if e.Line() != line {
				t.Fatalf("CDXJ round trip:\n%q\n%q", line, e.Line())
			}
			if e.Filename != "f.warc.gz" || e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > int64(len(file)) {
				t.Fatalf("CDXJ entry locates nothing: %+v", e)
			}
		}
	})
}

// FuzzParseIndexLine reads arbitrary CDXJ lines (index files on disk, merged from other
// nodes): an error wrapping ErrCorrupt, or an entry whose own line parses to the same entry;
// and ReadResponse at the location such a line names, in a directory holding one small WARC
// file, returns an error or a record, never a panic or an allocation beyond the file.
//
//	go test -run '^$' -fuzz '^FuzzParseIndexLine$' -fuzztime 60s -parallel 1 ./archive
func FuzzParseIndexLine(f *testing.F) {
	e := IndexEntry{URL: "http://h.test/a?b=1", Time: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC), Mime: "text/html",
		Status: 200, Digest: "sha1:AAAA", Offset: 0, Length: 10, Filename: "f.warc.gz"}
	f.Add(e.Line())
	f.Add(`h,test)/ 20261203100000 {"url":"http://h.test/","length":"12","offset":"-1","filename":"f.warc.gz"}`)
	f.Add("x 2026 {}")
	dir := f.TempDir()
	warc := gz(f, fuzzWARCRecord("http://h.test/a", []byte("HTTP/1.1 200 OK\r\n\r\nbody")))
	if err := os.WriteFile(filepath.Join(dir, "f.warc.gz"), warc, 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line string) {
		_, _, e, err := ParseIndexLine(line)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		l2 := e.Line()
		_, _, e2, err := ParseIndexLine(l2)
		if err != nil {
			t.Fatalf("own line %q does not parse: %v", l2, err)
		}
		if e2.Line() != l2 {
			t.Fatalf("CDXJ round trip:\n%q\n%q", l2, e2.Line())
		}
		rec, err := ReadResponse(dir, Location{File: e.Filename, Offset: e.Offset, Length: e.Length})
		if err == nil && rec == nil {
			t.Fatal("no record and no error")
		}
	})
}
