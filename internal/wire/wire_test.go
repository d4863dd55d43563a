package wire

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"
)

// TestFixedBytes: the encoding of a field is a uvarint length and the bytes, the same
// appended to a slice and written to a stream (the bytes both streams put on the wire).
func TestFixedBytes(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		field string
		want  string // hex
	}{
		{"", "00"},
		{"ab", "026162"},
		{long, "ac02" + hex.EncodeToString([]byte(long))},
	} {
		want, _ := hex.DecodeString(c.want)
		if got := AppendBytes([]byte{0xff}, []byte(c.field)); !bytes.Equal(got, append([]byte{0xff}, want...)) {
			t.Errorf("AppendBytes(%d bytes) = %x, want ff%x", len(c.field), got, want)
		}
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		if err := WriteBytes(w, []byte(c.field)); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("WriteBytes(%d bytes) = %x, want %x", len(c.field), buf.Bytes(), want)
		}
		field, rest, ok := CutBytes(append(want, 7), 1<<10)
		if !ok || string(field) != c.field || !bytes.Equal(rest, []byte{7}) {
			t.Errorf("CutBytes(%x) = %q, %x, %v", want, field, rest, ok)
		}
		got, err := ReadBytes(bufio.NewReader(bytes.NewReader(want)), nil, 1<<10)
		if err != nil || string(got) != c.field {
			t.Errorf("ReadBytes(%x) = %q, %v", want, got, err)
		}
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	WriteUvarint(w, 0)
	WriteUvarint(w, 127)
	WriteUvarint(w, 128)
	WriteUvarint(w, 1<<32)
	w.Flush()
	if got, want := hex.EncodeToString(buf.Bytes()), "00"+"7f"+"8001"+"8080808010"; got != want {
		t.Errorf("WriteUvarint: %s, want %s", got, want)
	}
}

// TestBounds: a field over the reader's bound, or cut short, is refused.
func TestBounds(t *testing.T) {
	enc := AppendBytes(nil, []byte("hello"))
	if _, _, ok := CutBytes(enc, 4); ok {
		t.Error("CutBytes took a field over its bound")
	}
	if _, _, ok := CutBytes(enc[:4], 10); ok {
		t.Error("CutBytes took a field cut short")
	}
	if _, _, ok := CutBytes(nil, 10); ok {
		t.Error("CutBytes took an empty slice")
	}
	if _, err := ReadBytes(bufio.NewReader(bytes.NewReader(enc)), nil, 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadBytes over the bound: %v", err)
	}
	if _, err := ReadBytes(bufio.NewReader(bytes.NewReader(enc[:4])), nil, 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadBytes cut short: %v", err)
	}
	buf := make([]byte, 0, 16)
	got, err := ReadBytes(bufio.NewReader(bytes.NewReader(enc)), buf, 10)
	if err != nil || &got[0] != &buf[:1][0] {
		t.Errorf("ReadBytes did not reuse a large enough buffer (%v)", err)
	}
}

func TestCounter(t *testing.T) {
	var buf bytes.Buffer
	c := &Counter{W: &buf, Sum: crc32.NewIEEE()}
	c.Write([]byte("abc"))
	c.Write([]byte("de"))
	if c.N != 5 || buf.String() != "abcde" {
		t.Errorf("counted %d, wrote %q", c.N, buf.String())
	}
	if got, want := c.Sum.(interface{ Sum32() uint32 }).Sum32(), crc32.ChecksumIEEE([]byte("abcde")); got != want {
		t.Errorf("sum %08x, want %08x", got, want)
	}
	plain := &Counter{W: io.Discard}
	plain.Write(make([]byte, 9))
	if plain.N != 9 {
		t.Errorf("counted %d, want 9", plain.N)
	}
}
