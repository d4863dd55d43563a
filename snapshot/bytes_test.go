package snapshot

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestWireBytesFixed: the stream's bytes, written out by hand from the format in the
// package doc, so that a change to the framing (internal/wire) cannot go unnoticed: the
// header with its CRC, the block header, the raw records (family, uvarint lengths), and
// the trailer. Only the compressed payload is not compared byte for byte (it is the zstd
// library's); it is decompressed and compared.
func TestWireBytesFixed(t *testing.T) {
	recs := []rec{
		{'q', []byte("q\x00\x07a"), []byte("v1")},
		{'s', []byte("s\x00\x07" + string(bytes.Repeat([]byte{'k'}, 200))), nil},
	}
	data, st := encode(t, recs)

	hdr, _ := hex.DecodeString("0007" + // partition
		"000000000000002a" + // epoch
		"18867251edfa007b" + // created, unix ns
		"06" + hex.EncodeToString([]byte("node-a")) + "06" + hex.EncodeToString([]byte("node-b")))
	pre := append([]byte("CRWLSNAP"), 0, 1) // version 1
	pre = binary.BigEndian.AppendUint32(pre, uint32(len(hdr)))
	pre = append(pre, hdr...)
	pre = binary.BigEndian.AppendUint32(pre, crc32.Checksum(pre, castagnoli))
	if !bytes.Equal(data[:len(pre)], pre) {
		t.Fatalf("header:\n got %x\nwant %x", data[:len(pre)], pre)
	}

	raw, _ := hex.DecodeString("71" + "04" + "71000761" + "02" + "7631" +
		"73" + "cb01" + "730007" + hex.EncodeToString(bytes.Repeat([]byte{'k'}, 200)) + "00")
	l := parseLayout(t, data)
	if len(l.blocks) != 1 || l.blocks[0] != len(pre) {
		t.Fatalf("layout %+v, header ends at %d", l, len(pre))
	}
	bh := data[l.blocks[0] : l.blocks[0]+21]
	if bh[0] != 'B' || binary.BigEndian.Uint32(bh[1:]) != uint32(len(raw)) || binary.BigEndian.Uint32(bh[5:]) != 2 ||
		binary.BigEndian.Uint32(bh[13:]) != crc32.Checksum(bh[1:13], castagnoli) {
		t.Fatalf("block header %x (raw %d bytes)", bh, len(raw))
	}
	comp := data[l.blocks[0]+21 : l.trailer]
	if binary.BigEndian.Uint32(bh[9:]) != uint32(len(comp)) || binary.BigEndian.Uint32(bh[17:]) != crc32.Checksum(comp, castagnoli) {
		t.Fatalf("block header %x: compressed length or checksum", bh)
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	got, err := dec.DecodeAll(comp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, raw) {
		t.Fatalf("raw block:\n got %x\nwant %x", got, raw)
	}

	tr := []byte{'T'}
	tr = binary.BigEndian.AppendUint64(tr, 2) // records
	tr = binary.BigEndian.AppendUint64(tr, 1) // blocks
	tr = binary.BigEndian.AppendUint64(tr, uint64(len(raw)))
	tr = binary.BigEndian.AppendUint32(tr, crc32.Checksum(data[:l.trailer], castagnoli))
	tr = binary.BigEndian.AppendUint32(tr, crc32.Checksum(tr, castagnoli))
	if !bytes.Equal(data[l.trailer:], tr) {
		t.Fatalf("trailer:\n got %x\nwant %x", data[l.trailer:], tr)
	}
	if st.Bytes != int64(len(data)) || st.Records != 2 || st.RawBytes != int64(len(raw)) {
		t.Errorf("stats %+v for %d bytes", st, len(data))
	}
}
