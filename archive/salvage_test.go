package archive

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A byte flipped in the middle of a file (a bad sector): ScanSalvage delivers every record
// before and after the damaged one and reports the region.
func TestScanSalvageSkipsMidFileDamage(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(Config{Dir: dir, NodeName: "n1", Now: func() time.Time { return time.Unix(1700000000, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	var locs []Location
	for i := 0; i < 9; i++ {
		loc, _, err := w.WriteExchange(Exchange{
			URL: "http://h.test/p" + string(rune('0'+i)), Date: time.Unix(1700000000, 0),
			Request:        []byte("GET /p HTTP/1.1\r\nHost: h.test\r\n\r\n"),
			ResponseHeader: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"),
			ResponseBody:   []byte("<html><body>page body " + string(rune('0'+i)) + "</body></html>"),
		})
		if err != nil {
			t.Fatal(err)
		}
		locs = append(locs, loc)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, locs[0].File)
	count := func() (recs int, damages []Damage) {
		err := ScanSalvage(path, func(off, length int64, r *Record) error { recs++; return nil }, func(d Damage) { damages = append(damages, d) })
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	all, dmg := count()
	if len(dmg) != 0 {
		t.Fatalf("clean file reported damage %v", dmg)
	}
	// Flip a byte inside the 5th response record's member.
	mid := locs[4]
	f, _ := os.OpenFile(path, os.O_RDWR, 0)
	b := []byte{0}
	f.ReadAt(b, mid.Offset+mid.Length/2)
	f.WriteAt([]byte{b[0] ^ 0x55}, mid.Offset+mid.Length/2)
	f.Close()
	got, dmg := count()
	if len(dmg) != 1 {
		t.Fatalf("damages %v, want one", dmg)
	}
	if dmg[0].Offset != mid.Offset || dmg[0].Resume != mid.Offset+mid.Length {
		t.Errorf("damage %+v, want offset %d resume %d", dmg[0], mid.Offset, mid.Offset+mid.Length)
	}
	if got != all-1 {
		t.Errorf("salvaged %d of %d records, want all but the damaged one", got, all)
	}
	// Scan stops at the damage.
	n := 0
	if err := Scan(path, func(int64, *Record) error { n++; return nil }); err == nil || n >= got {
		t.Errorf("Scan read %d records, err %v", n, err)
	}
}

// A damaged region dense with gzip magic bytes (a candidate member every 3 bytes, as
// FuzzWARCRecord generated) costs salvage time linear in its size: each candidate once read
// a 1 MiB window and allocated a 256 KiB reader, and 9 KB took 7 s. 60 KB must now take
// well under a minute (about 1 s on the 2-core VM; the old code needed minutes).
func TestScanSalvageDenseMagicIsLinear(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.warc.gz")
	rec := gz(t, fuzzWARCRecord("http://h.test/a", []byte("HTTP/1.1 200 OK\r\n\r\nx")))
	file := append(append(append([]byte(nil), rec...), bytes.Repeat([]byte("\x1f\x8b\x08"), 20000)...), rec...)
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var offs []int64
	var damage []Damage
	err := ScanSalvage(path, func(off, _ int64, _ *Record) error {
		offs = append(offs, off)
		return nil
	}, func(d Damage) { damage = append(damage, d) })
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 2 || offs[1] != int64(len(file)-len(rec)) || len(damage) != 1 || damage[0].Resume != offs[1] {
		t.Fatalf("records at %v, damage %+v", offs, damage)
	}
	if took > 60*time.Second {
		t.Fatalf("salvage of %d bytes took %v", len(file), took)
	}
	t.Logf("salvage of %d bytes with %d candidates: %v", len(file), 20000, took)
}
