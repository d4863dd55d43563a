package forward

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestWireRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		b    Batch
	}{
		{"empty", Batch{From: "n1", Partitions: []PartitionLinks{}}},
		{"empty partition", Batch{From: "n1", Partitions: []PartitionLinks{{Partition: 3, Epoch: 9, Links: []Link{}}}}},
		{"one link", Batch{From: "node-a", Partitions: []PartitionLinks{{Partition: 270, Epoch: 1 << 40,
			Links: []Link{{URL: "http://h1.sim.test/", Depth: 65535, Hops: 65535, Priority: 255}}}}}},
		{"sorted with duplicates", Batch{From: "x", Partitions: []PartitionLinks{
			{Partition: 0, Epoch: 0, Links: []Link{
				{URL: "http://a/1", Depth: 1}, {URL: "http://a/1", Depth: 2}, {URL: "http://a/10"}, {URL: "http://b/"}}},
			{Partition: 5, Epoch: 7, Links: []Link{{URL: "https://h2.sim.test:8080/x?a=1&b=2", Priority: 1}}},
		}}},
		{"long url", Batch{Partitions: []PartitionLinks{{Partition: 1, Links: []Link{
			{URL: "http://h/" + strings.Repeat("a", MaxURLLength-9)}, {URL: "http://h/" + strings.Repeat("a", MaxURLLength-10) + "b"}}}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			enc, err := Encode(c.b)
			if err != nil {
				t.Fatal(err)
			}
			if enc[0] != WireVersion {
				t.Fatalf("version byte %d", enc[0])
			}
			got, err := Decode(enc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.b) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, c.b)
			}
		})
	}
}

func TestEncodeSortsWithoutModifyingInput(t *testing.T) {
	links := []Link{{URL: "http://h/c", Depth: 3}, {URL: "http://h/a", Depth: 1}, {URL: "http://h/b", Depth: 2}, {URL: "http://h/a", Depth: 9}}
	orig := slices.Clone(links)
	enc, err := Encode(Batch{From: "n", Partitions: []PartitionLinks{{Partition: 2, Epoch: 4, Links: links}}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(links, orig) {
		t.Fatal("Encode modified its input")
	}
	got, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	want := []Link{{URL: "http://h/a", Depth: 1}, {URL: "http://h/a", Depth: 9}, {URL: "http://h/b", Depth: 2}, {URL: "http://h/c", Depth: 3}}
	if !reflect.DeepEqual(got.Partitions[0].Links, want) {
		t.Fatalf("got %+v, want %+v (sorted, stable)", got.Partitions[0].Links, want)
	}
}

func TestEncodeLimits(t *testing.T) {
	many := make([]Link, MaxBatchLinks+1)
	for i := range many {
		many[i].URL = fmt.Sprintf("http://h/%d", i)
	}
	long := make([]Link, MaxBatchURLBytes/MaxURLLength+1)
	for i := range long {
		long[i].URL = fmt.Sprintf("http://h/%05d", i) + strings.Repeat("x", MaxURLLength-14)
	}
	cases := []struct {
		name string
		b    Batch
		want error
	}{
		{"empty url", Batch{Partitions: []PartitionLinks{{Links: []Link{{URL: ""}}}}}, ErrInvalidLink},
		{"url too long", Batch{Partitions: []PartitionLinks{{Links: []Link{{URL: strings.Repeat("a", MaxURLLength+1)}}}}}, ErrInvalidLink},
		{"partition out of range", Batch{Partitions: []PartitionLinks{{Partition: 271}}}, ErrInvalidLink},
		{"too many links", Batch{Partitions: []PartitionLinks{{Links: many}}}, ErrTooLarge},
		{"too many url bytes", Batch{Partitions: []PartitionLinks{{Links: long}}}, ErrTooLarge},
		{"from too long", Batch{From: strings.Repeat("n", MaxPeerName+1)}, ErrTooLarge},
		{"too many partitions", Batch{Partitions: make([]PartitionLinks, 272)}, ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Encode(c.b)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// rawBatch compresses a hand-made body behind the version byte.
func rawBatch(t testing.TB, body []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(body, []byte{WireVersion})
}

// body builds a body with one partition from explicit columns.
func body(from string, part uint16, shared, suffix []int, sufBytes string, nums ...int) []byte {
	b := binary.AppendUvarint(nil, uint64(len(from)))
	b = append(b, from...)
	b = binary.AppendUvarint(b, 1)
	b = binary.BigEndian.AppendUint16(b, part)
	b = binary.AppendUvarint(b, 1) // epoch
	b = binary.AppendUvarint(b, uint64(len(shared)))
	for _, s := range shared {
		b = binary.AppendUvarint(b, uint64(s))
	}
	for _, s := range suffix {
		b = binary.AppendUvarint(b, uint64(s))
	}
	b = append(b, sufBytes...)
	for _, n := range nums {
		b = binary.AppendUvarint(b, uint64(n))
	}
	return b
}

func TestDecodeErrors(t *testing.T) {
	good, err := Encode(Batch{From: "n", Partitions: []PartitionLinks{{Partition: 1, Links: []Link{{URL: "http://h/a"}, {URL: "http://h/b"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	// Expansion attack: each URL shares 8000 bytes with the previous one and adds one byte,
	// so a few KB of body would decode to many MB of strings.
	n := MaxBatchURLBytes/8000 + 10
	shared, suffix := make([]int, n), make([]int, n)
	var sb strings.Builder
	sb.WriteString(strings.Repeat("a", 8000))
	suffix[0] = 8000
	for i := 1; i < n; i++ {
		// 8000 bytes of the previous URL plus one 'a': 8001 'a's each, sorted (equal).
		shared[i], suffix[i] = 8000, 1
		sb.WriteByte('a')
	}
	expansion := body("n", 1, shared, suffix, sb.String(), make([]int, 3*n)...)

	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrCorrupt},
		{"bad version", append([]byte{3}, good[1:]...), ErrCorrupt},
		{"not zstd", []byte{WireVersion, 1, 2, 3, 4, 5}, ErrCorrupt},
		{"truncated frame", good[:len(good)-3], ErrCorrupt},
		{"trailing bytes", rawBatch(t, append(body("n", 1, []int{0}, []int{3}, "abc", 0, 0, 0, 0), 0)), ErrCorrupt},
		{"negative cash", rawBatch(t, body("n", 1, []int{0}, []int{3}, "abc", 0, 0, 0, int(math.Float32bits(-1)))), ErrCorrupt},
		{"truncated body", rawBatch(t, body("n", 1, []int{0}, []int{3}, "ab")), ErrCorrupt},
		{"unsorted", rawBatch(t, body("n", 1, []int{0, 0}, []int{1, 1}, "ba", 0, 0, 0, 0, 0, 0)), ErrCorrupt},
		{"shared too long", rawBatch(t, body("n", 1, []int{0, 5}, []int{1, 1}, "ab", 0, 0, 0, 0, 0, 0)), ErrCorrupt},
		{"empty url", rawBatch(t, body("n", 1, []int{0}, []int{0}, "", 0, 0, 0, 0, 0)), ErrCorrupt},
		{"url too long", rawBatch(t, body("n", 1, []int{0}, []int{MaxURLLength + 1}, strings.Repeat("a", MaxURLLength+1), 0, 0, 0)), ErrCorrupt},
		{"depth overflow", rawBatch(t, body("n", 1, []int{0}, []int{1}, "a", 70000, 0, 0)), ErrCorrupt},
		{"priority overflow", rawBatch(t, body("n", 1, []int{0}, []int{1}, "a", 0, 0, 256)), ErrCorrupt},
		{"partition out of range", rawBatch(t, body("n", 271, []int{0}, []int{1}, "a", 0, 0, 0)), ErrCorrupt},
		{"link count over body", rawBatch(t, []byte{1, 'n', 1, 0, 1, 0, 0xff, 0xff, 0x03}), ErrCorrupt},
		{"from too long", rawBatch(t, binary.AppendUvarint(nil, MaxPeerName+1)), ErrCorrupt},
		{"url bytes expansion", rawBatch(t, expansion), ErrCorrupt},
		{"decompressed too large", rawBatch(t, make([]byte, MaxBodyBytes+1)), ErrTooLarge},
		{"wire too large", make([]byte, MaxWireBytes+1), ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.data)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if c.name == "url bytes expansion" && !strings.Contains(err.Error(), "URL bytes") {
				t.Fatalf("expansion refused for another reason: %v", err)
			}
		})
	}
	if len(expansion) > 64<<10 {
		t.Fatalf("expansion body is %d bytes; the case should be small", len(expansion))
	}
}

// TestBytesPerLink measures wire bytes per link on simweb-like links: 10,000 links over 50
// hosts, shipped in batches as the outbox builds them (one peer owning a third of the
// partitions; links grouped by partition within a batch).
func TestBytesPerLink(t *testing.T) {
	links := simLinks(40000, 50, 42)
	var mine []Link // the links of partitions a peer owns (every third partition)
	for _, l := range links {
		if p, _ := PartitionOfURL(l.URL); p%3 == 0 {
			mine = append(mine, l)
		}
	}
	if len(mine) > 10000 {
		mine = mine[:10000]
	}
	raw := 0
	for _, l := range mine {
		raw += len(l.URL) + 4
	}
	if len(mine) != 10000 {
		t.Fatalf("want 10000 links, have %d", len(mine))
	}
	plain := 0
	byPart := map[uint16][]Link{}
	for _, l := range mine {
		p, _ := PartitionOfURL(l.URL)
		byPart[p] = append(byPart[p], l)
	}
	for _, ls := range byPart {
		plain += len(appendLinks(nil, ls, true))
	}
	t.Logf("links=%d over 50 hosts: raw URL+fields %.1f bytes/link; front-coded, uncompressed, all in one batch %.1f",
		len(mine), float64(raw)/float64(len(mine)), float64(plain)/float64(len(mine)))
	for _, size := range []int{100, 500, 2000} {
		total := 0
		for start := 0; start < len(mine); start += size {
			chunk := mine[start:min(start+size, len(mine))]
			byPart := map[uint16][]Link{}
			var order []uint16
			for _, l := range chunk {
				p, _ := PartitionOfURL(l.URL)
				if byPart[p] == nil {
					order = append(order, p)
				}
				byPart[p] = append(byPart[p], l)
			}
			b := Batch{From: "node-2"}
			for _, p := range order {
				b.Partitions = append(b.Partitions, PartitionLinks{Partition: p, Epoch: 3, Links: byPart[p]})
			}
			enc, err := Encode(b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(enc)
			if err != nil || got.NumLinks() != len(chunk) {
				t.Fatalf("decode: %v, %d links", err, got.NumLinks())
			}
			total += len(enc)
		}
		per := float64(total) / float64(len(mine))
		t.Logf("batch %5d links: %6.2f wire bytes/link", size, per)
		if per > 30 {
			t.Errorf("batch %d: %.2f bytes/link > 30", size, per)
		}
	}
}

func TestDecodeDoesNotAliasInput(t *testing.T) {
	enc, err := Encode(Batch{From: "n", Partitions: []PartitionLinks{{Partition: 1, Links: []Link{{URL: "http://h/a"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	// Decode more batches (reusing pooled buffers): b must not change.
	for range 10 {
		other, _ := Encode(Batch{From: "zzzzzz", Partitions: []PartitionLinks{{Partition: 2, Links: []Link{{URL: "http://zzzzzzzz/zzz"}}}}})
		if _, err := Decode(other); err != nil {
			t.Fatal(err)
		}
	}
	if b.From != "n" || b.Partitions[0].Links[0].URL != "http://h/a" {
		t.Fatalf("decoded batch changed: %+v", b)
	}
	if !bytes.Equal(enc[:1], []byte{WireVersion}) {
		t.Fatal("version")
	}
}

func TestCashTravelsAndVersion1StillDecodes(t *testing.T) {
	links := []Link{{URL: "http://a.test/x", Depth: 2, Cash: 0.125}, {URL: "http://a.test/y", Priority: 1, Cash: 3.5}, {URL: "http://a.test/z"}}
	enc, err := Encode(Batch{From: "n", Partitions: []PartitionLinks{{Partition: 7, Epoch: 2, Links: links}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Partitions[0].Links; len(got) != 3 || got[0].Cash != 0.125 || got[1].Cash != 3.5 || got[2].Cash != 0 {
		t.Fatalf("links %+v", got)
	}
	// A batch from a node of the previous version: no cash column.
	var body []byte
	body = binary.AppendUvarint(body, 1)
	body = append(body, 'n')
	body = binary.AppendUvarint(body, 1)
	body = append(body, 0, 7)
	body = binary.AppendUvarint(body, 2)
	body = appendLinks(body, links, false)
	enc1 := append([]byte{1}, mustZstd(t, body)...)
	b, err = Decode(enc1)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Partitions[0].Links; len(got) != 3 || got[1].URL != "http://a.test/y" || got[1].Priority != 1 || got[1].Cash != 0 {
		t.Fatalf("version 1 links %+v", got)
	}
	// Outbox entries of version 1 decode too.
	old := appendLinks([]byte{1}, links, false)
	if got, err := decodeEntry(old); err != nil || len(got) != 3 || got[0].Depth != 2 {
		t.Fatalf("version 1 entry: %v %+v", err, got)
	}
	// Deduplication sums the cash of one URL.
	d := dedupLinks([]Link{{URL: "http://a.test/x", Cash: 1}, {URL: "http://a.test/x", Cash: 0.5, Priority: 1}, {URL: "http://a.test/w"}})
	if len(d) != 2 || d[1].Cash != 1.5 || d[1].Priority != 0 {
		t.Fatalf("dedup %+v", d)
	}
}

func mustZstd(t *testing.T, body []byte) []byte {
	t.Helper()
	enc, err := encoderOnce()
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeAll(body, nil)
}
