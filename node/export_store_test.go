package node

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/crawlnode/crawlnode/outstore"
)

// TestStoreOnlyFiles: the files the manifest copy lists but the data directory no longer
// holds (removed after upload) are named, with the store they are in.
func TestStoreOnlyFiles(t *testing.T) {
	dir := t.TempDir()
	d := &DataDir{Path: dir}
	os.MkdirAll(d.WARCDir(), 0o755)
	os.MkdirAll(d.CorpusDir(), 0o755)
	if target, names, err := StoreOnlyFiles(dir); err != nil || target != "" || names != nil {
		t.Fatalf("no output store: %q %v %v", target, names, err)
	}
	os.WriteFile(filepath.Join(d.WARCDir(), "kept.warc.gz"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(d.CorpusDir(), "corpus-n-000001.jsonl.zst"), []byte("x"), 0o644)
	st := outstore.State{Target: "s3://b/p", Entries: []outstore.Entry{
		{Name: "gone.warc.gz", Kind: outstore.KindWARC}, {Name: "gone.warc.gz.cdxj", Kind: outstore.KindCDXJ},
		{Name: "kept.warc.gz", Kind: outstore.KindWARC},
		{Name: "corpus-n-000000.jsonl.zst", Kind: outstore.KindCorpus},
		{Name: "corpus-n-000001.jsonl.zst", Kind: outstore.KindCorpus},
	}}
	b, _ := json.Marshal(st)
	os.WriteFile(filepath.Join(dir, OutputStoreStateFile), b, 0o644)
	target, names, err := StoreOnlyFiles(dir)
	if err != nil || target != "s3://b/p" {
		t.Fatalf("%q %v", target, err)
	}
	want := []string{"gone.warc.gz", "gone.warc.gz.cdxj", "corpus-n-000000.jsonl.zst"}
	if !slices.Equal(names, want) {
		t.Fatalf("store-only %v, want %v", names, want)
	}
}
