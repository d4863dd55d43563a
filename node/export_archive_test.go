package node

import (
	"archive/zip"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/archive"
)

// archiveDataDir makes a data directory holding WARC files written by the archive writer
// (rotated by size into several files, one left without its index) and returns it with
// the index lines the writer wrote at close.
func archiveDataDir(t *testing.T) (string, []string) {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	dd, err := OpenDataDir(data, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if err := dd.Close(); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w, err := archive.Open(archive.Config{Dir: dd.WARCDir(), NodeName: "n1", MaxFileSize: 8 << 10,
		Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		body := strings.Repeat(fmt.Sprintf("<p>page %d</p>", i), 200+i)
		_, _, err := w.WriteExchange(archive.Exchange{URL: fmt.Sprintf("http://h%d.example/p/%d", i%4, i),
			Date:           at.Add(time.Duration(i) * time.Second),
			ResponseHeader: []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n", len(body))),
			ResponseBody:   []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dd.WARCDir(), "*.warc.gz"))
	if len(files) < 2 {
		t.Fatalf("%d WARC files, want several", len(files))
	}
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(f + archive.IndexSuffix)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
	}
	if err := os.Remove(files[0] + archive.IndexSuffix); err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return data, lines
}

func TestExportCDXJMergesEveryFile(t *testing.T) {
	data, want := archiveDataDir(t)
	out := filepath.Join(t.TempDir(), "all.cdxj")
	st, err := Export(ExportOptions{DataDir: data, Format: ExportCDXJ, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if !slices.Equal(got, want) || st.Records != len(want) || len(want) != 30 {
		t.Fatalf("export has %d lines (%d counted), want the %d lines written at close, sorted", len(got), st.Records, len(want))
	}
}

func TestExportWACZ(t *testing.T) {
	data, want := archiveDataDir(t)
	out := filepath.Join(t.TempDir(), "crawl.wacz")
	if _, err := Export(ExportOptions{DataDir: data, Format: ExportWACZ, Out: out}); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.OpenReader(out)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	names := map[string]bool{}
	for _, f := range zr.File {
		names[f.Name] = true
	}
	warcs, _ := filepath.Glob(filepath.Join(data, "warc", "*.warc.gz"))
	for _, p := range warcs {
		if !names["archive/"+filepath.Base(p)] {
			t.Errorf("wacz lacks archive/%s", filepath.Base(p))
		}
	}
	for _, n := range []string{"indexes/index.cdxj", "pages/pages.jsonl", "datapackage.json", "datapackage-digest.json"} {
		if !names[n] {
			t.Errorf("wacz lacks %s", n)
		}
	}
	if len(want) != 30 {
		t.Fatalf("%d index lines written", len(want))
	}
}
