package forward

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// seedBatches are the encoded batches behind testdata/fuzz/FuzzDecode (regenerate the
// files with FORWARD_WRITE_SEEDS=1 go test -run TestWriteFuzzSeeds).
func seedBatches() [][]byte {
	var out [][]byte
	for _, b := range []Batch{
		{},
		{From: "n1", Partitions: []PartitionLinks{{Partition: 0, Epoch: 1, Links: []Link{{URL: "http://h1.sim.test/"}}}}},
		{From: "node-2", Partitions: []PartitionLinks{
			{Partition: 17, Epoch: 3, Links: simLinks(20, 2, 1)},
			{Partition: 270, Epoch: 1 << 50, Links: []Link{{URL: "https://h9.sim.test:8443/a?x=1", Depth: 65535, Hops: 9, Priority: 255}}},
		}},
		{From: "n3", Partitions: []PartitionLinks{{Partition: 5, Links: []Link{{URL: "http://a/x"}, {URL: "http://a/x"}, {URL: "http://a/xy"}}}}},
	} {
		enc, err := Encode(b)
		if err != nil {
			panic(err)
		}
		out = append(out, enc)
	}
	// Hand-made bodies that must fail: unsorted, shared too long, count over body.
	out = append(out,
		rawSeed(body("n", 1, []int{0, 0}, []int{1, 1}, "ba", 0, 0, 0, 0, 0, 0)),
		rawSeed(body("n", 1, []int{0, 5}, []int{1, 1}, "ab", 0, 0, 0, 0, 0, 0)),
		rawSeed([]byte{1, 'n', 1, 0, 1, 0, 0xff, 0xff, 0x03}),
		[]byte{WireVersion},
		[]byte{0xff, 0x28, 0xb5, 0x2f, 0xfd},
	)
	return out
}

func rawSeed(body []byte) []byte {
	enc, err := encoderOnce()
	if err != nil {
		panic(err)
	}
	return enc.EncodeAll(body, []byte{WireVersion})
}

func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("FORWARD_WRITE_SEEDS") == "" {
		t.Skip("set FORWARD_WRITE_SEEDS=1 to rewrite testdata/fuzz/FuzzDecode")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range seedBatches() {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzDecode: Decode never panics, errors are ErrCorrupt or ErrTooLarge, and a batch that
// decodes encodes again to bytes that decode to the same batch.
func FuzzDecode(f *testing.F) {
	for _, s := range seedBatches() {
		f.Add(s)
	}
	// Raw bodies too, so the fuzzer mutates the structure and not only the zstd frame.
	f.Add(rawSeed(binary.AppendUvarint(nil, 0)))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		enc, err := Encode(b)
		if err != nil {
			t.Fatalf("a decoded batch does not encode: %v", err)
		}
		b2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		if !reflect.DeepEqual(b, b2) {
			t.Fatalf("round trip differs:\n%+v\n%+v", b, b2)
		}
	})
}
