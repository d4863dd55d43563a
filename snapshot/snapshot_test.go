package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"
)

type rec struct {
	fam  byte
	k, v []byte
}

func genRecs(n int, seed uint64) []rec {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]rec, n)
	for i := range out {
		fam := []byte("qrsdh")[i%5]
		k := fmt.Appendf(nil, "%c\x00\x07host%d.test/%08d", fam, i%37, i)
		v := make([]byte, r.IntN(300))
		for j := range v {
			v[j] = byte('a' + r.IntN(8)) // compressible, like URLs
		}
		out[i] = rec{fam, k, v}
	}
	return out
}

func exporter(recs []rec) func(fn func(byte, []byte, []byte) error) error {
	return func(fn func(byte, []byte, []byte) error) error {
		for _, r := range recs {
			if err := fn(r.fam, r.k, r.v); err != nil {
				return err
			}
		}
		return nil
	}
}

var testHeader = Header{Partition: 7, Epoch: 42, From: "node-a", To: "node-b", Created: time.Unix(1767225600, 123)}

func encode(t testing.TB, recs []rec) ([]byte, Stats) {
	t.Helper()
	var buf bytes.Buffer
	st, err := Write(&buf, testHeader, exporter(recs))
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), st
}

// readAll reads a whole stream; it returns the records and the error that ended it
// (nil when the trailer verified).
func readAll(data []byte, expect func(Header) error) ([]rec, error) {
	rd, err := Read(bytes.NewReader(data), expect)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []rec
	for {
		fam, k, v, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec{fam, bytes.Clone(k), bytes.Clone(v)})
	}
}

func TestRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 5000, 20000} { // 20000 records span several 1 MiB blocks
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			recs := genRecs(n, uint64(n))
			data, st := encode(t, recs)
			if st.Records != int64(n) || st.Bytes != int64(len(data)) {
				t.Fatalf("stats %+v, len %d", st, len(data))
			}
			if n == 20000 && st.Blocks < 2 {
				t.Fatalf("want several blocks, got %d", st.Blocks)
			}
			var got Header
			out, err := readAll(data, func(h Header) error { got = h; return nil })
			if err != nil {
				t.Fatal(err)
			}
			want := testHeader
			want.FormatVersion = Version
			if got.Partition != want.Partition || got.Epoch != want.Epoch || got.From != want.From ||
				got.To != want.To || !got.Created.Equal(want.Created) || got.FormatVersion != Version {
				t.Fatalf("header %+v, want %+v", got, want)
			}
			if len(out) != n {
				t.Fatalf("read %d records, want %d", len(out), n)
			}
			for i := range out {
				if out[i].fam != recs[i].fam || !bytes.Equal(out[i].k, recs[i].k) || !bytes.Equal(out[i].v, recs[i].v) {
					t.Fatalf("record %d differs", i)
				}
			}
		})
	}
}

func TestLargeRecordAndLimits(t *testing.T) {
	big := bytes.Repeat([]byte{'x'}, 3<<20) // larger than a block
	recs := []rec{{'s', []byte("k1"), []byte("small")}, {'h', []byte("k2"), big}, {'q', []byte("k3"), nil}}
	data, _ := encode(t, recs)
	out, err := readAll(data, nil)
	if err != nil || len(out) != 3 || !bytes.Equal(out[1].v, big) || len(out[2].v) != 0 {
		t.Fatalf("err %v, %d records", err, len(out))
	}
	for _, r := range []rec{{'q', nil, nil}, {'q', make([]byte, MaxKey+1), nil}, {'q', []byte("k"), make([]byte, MaxValue+1)}} {
		if _, err := Write(io.Discard, testHeader, exporter([]rec{r})); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("key %d value %d: err %v, want ErrTooLarge", len(r.k), len(r.v), err)
		}
	}
}

func TestExpectRefuses(t *testing.T) {
	data, _ := encode(t, genRecs(10, 1))
	owns := func(part uint16, epoch uint64) func(Header) error {
		return func(h Header) error {
			if h.Partition != part {
				return ErrWrongPartition
			}
			if h.Epoch < epoch {
				return ErrStaleEpoch
			}
			return nil
		}
	}
	if _, err := Read(bytes.NewReader(data), owns(8, 1)); !errors.Is(err, ErrWrongPartition) {
		t.Fatalf("err %v, want ErrWrongPartition", err)
	}
	if _, err := Read(bytes.NewReader(data), owns(7, 43)); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("err %v, want ErrStaleEpoch", err)
	}
	if _, err := readAll(data, owns(7, 42)); err != nil {
		t.Fatal(err)
	}
}

func TestExportErrorLeavesNoTrailer(t *testing.T) {
	boom := errors.New("lease table changed")
	var buf bytes.Buffer
	_, err := Write(&buf, testHeader, func(fn func(byte, []byte, []byte) error) error {
		for i := range 5000 {
			if err := fn('q', fmt.Appendf(nil, "k%d", i), bytes.Repeat([]byte("v"), 400)); err != nil {
				return err
			}
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	out, err := readAll(buf.Bytes(), nil)
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("err %v after %d records, want ErrTruncated", err, len(out))
	}
}

// layout finds the offsets of a stream's parts.
type layout struct {
	hdrEnd  int   // end of the header CRC
	blocks  []int // offset of each block tag
	trailer int   // offset of the trailer tag
}

func parseLayout(t *testing.T, data []byte) layout {
	t.Helper()
	var l layout
	hl := int(binary.BigEndian.Uint32(data[10:14]))
	l.hdrEnd = 14 + hl + 4
	off := l.hdrEnd
	for data[off] == tagBlock {
		l.blocks = append(l.blocks, off)
		off += 21 + int(binary.BigEndian.Uint32(data[off+9:]))
	}
	l.trailer = off
	if data[off] != tagTrailer || len(data) != off+33 {
		t.Fatalf("bad layout")
	}
	return l
}

func TestCorruptionDetected(t *testing.T) {
	data, st := encode(t, genRecs(12000, 3))
	if st.Blocks < 2 {
		t.Fatalf("want >= 2 blocks, got %d", st.Blocks)
	}
	l := parseLayout(t, data)
	flip := func(off int) []byte {
		d := bytes.Clone(data)
		d[off] ^= 0x40
		return d
	}
	b1 := l.blocks[1]
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"magic", flip(0), ErrCorrupt},
		{"version", flip(9), ErrVersion},
		{"header length", flip(12), ErrCorrupt},
		{"header partition", flip(15), ErrCorrupt},
		{"header name", flip(l.hdrEnd - 6), ErrCorrupt},
		{"header crc", flip(l.hdrEnd - 1), ErrCorrupt},
		{"block tag", flip(b1), ErrCorrupt},
		{"block raw length", flip(b1 + 3), ErrCorrupt},
		{"block record count", flip(b1 + 8), ErrCorrupt},
		{"block comp length", flip(b1 + 11), ErrCorrupt},
		{"block header crc", flip(b1 + 14), ErrCorrupt},
		{"block data crc", flip(b1 + 18), ErrCorrupt},
		{"block payload", flip(b1 + 21 + 100), ErrCorrupt},
		{"trailer tag", flip(l.trailer), ErrCorrupt},
		{"trailer count", flip(l.trailer + 8), ErrCorrupt},
		{"trailer stream crc", flip(l.trailer + 27), ErrCorrupt},
		{"trailer crc", flip(l.trailer + 31), ErrCorrupt},
		{"block dropped", append(bytes.Clone(data[:b1]), data[l.blocks[2]:]...), ErrCorrupt},
		{"block repeated", append(bytes.Clone(data[:l.blocks[2]]), data[b1:]...), ErrCorrupt},
		{"trailing garbage", append(bytes.Clone(data), 0), ErrCorrupt},
		{"empty", nil, ErrTruncated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAll(tc.data, nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
	// Truncation anywhere is an error, never a clean io.EOF.
	cuts := []int{l.trailer, l.trailer + 1, l.blocks[1], l.blocks[1] + 21, l.hdrEnd, l.hdrEnd - 1, len(data) - 1}
	for c := 0; c < 64; c++ {
		cuts = append(cuts, c)
	}
	for c := 0; c < len(data); c += max(1, len(data)/150) {
		cuts = append(cuts, c)
	}
	for _, c := range cuts {
		if _, err := readAll(data[:c], nil); !errors.Is(err, ErrTruncated) {
			t.Fatalf("cut at %d of %d: err %v, want ErrTruncated", c, len(data), err)
		}
	}
}

// A reader that fails mid-stream passes its error through.
func TestReadError(t *testing.T) {
	data, _ := encode(t, genRecs(3000, 4))
	boom := errors.New("connection reset")
	r := io.MultiReader(bytes.NewReader(data[:len(data)/2]), iotestErr{boom})
	rd, err := Read(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for {
		_, _, _, err := rd.Next()
		if err == nil {
			continue
		}
		if !errors.Is(err, boom) {
			t.Fatalf("err %v", err)
		}
		if _, _, _, err2 := rd.Next(); !errors.Is(err2, boom) {
			t.Fatalf("not sticky: %v", err2)
		}
		return
	}
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }
