package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// seedStreams are the valid streams the fuzz corpus starts from.
func seedStreams(t testing.TB) [][]byte {
	var out [][]byte
	for _, n := range []int{0, 1, 3, 40} {
		data, _ := encode(t, genRecs(n, uint64(n)+9))
		out = append(out, data)
	}
	return out
}

// FuzzRead: whatever the bytes, Read and Next return records or an error (never panic),
// and a stream that ends with io.EOF re-encodes to the same records.
func FuzzRead(f *testing.F) {
	for _, s := range seedStreams(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rd, err := Read(bytes.NewReader(data), nil)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrVersion) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		defer rd.Close()
		var recs []rec
		for {
			fam, k, v, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
					t.Fatalf("unclassified error: %v", err)
				}
				return
			}
			if len(k) == 0 || len(k) > MaxKey || len(v) > MaxValue {
				t.Fatalf("record over the limits: key %d value %d", len(k), len(v))
			}
			recs = append(recs, rec{fam, bytes.Clone(k), bytes.Clone(v)})
		}
		// A verified stream round-trips.
		var buf bytes.Buffer
		if _, err := Write(&buf, rd.Header(), exporter(recs)); err != nil {
			t.Fatal(err)
		}
		again, err := readAll(buf.Bytes(), nil)
		if err != nil || len(again) != len(recs) {
			t.Fatalf("re-encoded stream: %v, %d records want %d", err, len(again), len(recs))
		}
	})
}

// TestWriteSeedCorpus regenerates testdata/fuzz/FuzzRead (run with SNAPSHOT_WRITE_CORPUS=1
// after a format change). It also checks that the committed seeds still parse.
func TestWriteSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzRead")
	if os.Getenv("SNAPSHOT_WRITE_CORPUS") == "1" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		streams := seedStreams(t)
		// plus damaged ones: a cut block, a flipped payload byte
		streams = append(streams, streams[3][:len(streams[3])/2], func() []byte {
			d := bytes.Clone(streams[3])
			d[len(d)/2] ^= 1
			return d
		}())
		for i, s := range streams {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) < 4 {
		t.Fatalf("seed corpus missing (%v); run with SNAPSHOT_WRITE_CORPUS=1", err)
	}
}
