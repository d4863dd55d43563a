package node

import (
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/corpus"
)

// A member lists and serves closed WARC files whole with their indexes, the open one up to
// its last fsync and without an index, and corpus shards; names outside its directories
// are not found.
func TestExportFilesDurable(t *testing.T) {
	dir := &DataDir{Path: t.TempDir()}
	w, err := archive.Open(archive.Config{Dir: dir.WARCDir(), NodeName: "n1", MaxFileSize: 4 << 10, SyncInterval: time.Hour,
		Now: func() time.Time { return memberT0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	write := func(i int) {
		var sb strings.Builder // random text: barely compresses
		for range i {
			sb.WriteString(rand.Text())
		}
		body := sb.String()
		if _, _, err := w.WriteExchange(archive.Exchange{URL: "http://a.test/" + strings.Repeat("x", i), Date: memberT0,
			ResponseHeader: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"), ResponseBody: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		write(120 + i) // about 2.4 KB a record: rotates by size
	}
	if name, _ := w.Durable(); name == "" {
		write(120) // the last write rotated: open a file
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	openName, synced := w.Durable()
	write(1) // small, written, not synced: not served
	if err := os.MkdirAll(dir.CorpusDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	leftover := corpus.ShardName("n1", 3) + ".partial"
	os.WriteFile(filepath.Join(dir.CorpusDir(), leftover), []byte("zstd bytes"), 0o644)
	os.WriteFile(filepath.Join(dir.CorpusDir(), "notes.txt"), []byte("x"), 0o644)

	n := &Node{dir: dir, warc: w}
	files, err := n.ExportFiles()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, f := range files {
		kinds[f.Kind]++
		fi, err := os.Stat(filepath.Join(n.exportDir(f.Kind), f.Name))
		if err != nil {
			t.Fatalf("listed %s/%s: %v", f.Kind, f.Name, err)
		}
		switch {
		case f.Name == openName:
			if !f.Open || f.Size != synced || fi.Size() <= synced {
				t.Errorf("open file %s: listed %+v, synced %d, on disk %d", f.Name, f, synced, fi.Size())
			}
		case f.Size != fi.Size() || f.Open:
			t.Errorf("%s/%s: listed %+v, on disk %d", f.Kind, f.Name, f, fi.Size())
		}
		if f.Kind == api.ExportKindCDXJ && strings.TrimSuffix(f.Name, ".cdxj") == openName {
			t.Errorf("the open file's index is listed")
		}
	}
	if kinds[api.ExportKindWARC] < 2 || kinds[api.ExportKindCDXJ] != kinds[api.ExportKindWARC]-1 || kinds[api.ExportKindCorpus] != 1 {
		t.Fatalf("listing by kind %v: %+v", kinds, files)
	}

	r, size, _, err := n.OpenExportFile(api.ExportKindWARC, openName)
	if err != nil || size != synced {
		t.Fatalf("open file: size %d (synced %d), %v", size, synced, err)
	}
	b, _ := io.ReadAll(io.NewSectionReader(r, 0, size))
	r.Close()
	cut := filepath.Join(t.TempDir(), openName)
	os.WriteFile(cut, b, 0o644)
	if err := archive.Scan(cut, func(int64, *archive.Record) error { return nil }); err != nil {
		t.Errorf("the served part of the open file is not whole records: %v", err)
	}
	for _, bad := range [][2]string{
		{api.ExportKindWARC, "../badger/MANIFEST"},
		{api.ExportKindCorpus, "notes.txt"},
		{api.ExportKindWARC, "missing-n1.warc.gz"},
		{api.ExportKindCDXJ, openName + ".cdxj"},
	} {
		if _, _, _, err := n.OpenExportFile(bad[0], bad[1]); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("OpenExportFile(%s, %s): %v, want not found", bad[0], bad[1], err)
		}
	}
}
