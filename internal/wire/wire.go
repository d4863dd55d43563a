package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
)

// ErrTooLarge: a field's length is over the bound the reader gave.
var ErrTooLarge = errors.New("wire: field too large")

// AppendBytes appends field to b as a uvarint length and the bytes.
func AppendBytes(b, field []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(field)))
	return append(b, field...)
}

// WriteUvarint writes v as a uvarint.
func WriteUvarint(w *bufio.Writer, v uint64) error {
	var b [binary.MaxVarintLen64]byte
	_, err := w.Write(b[:binary.PutUvarint(b[:], v)])
	return err
}

// WriteBytes writes field as a uvarint length and the bytes.
func WriteBytes(w *bufio.Writer, field []byte) error {
	if err := WriteUvarint(w, uint64(len(field))); err != nil {
		return err
	}
	_, err := w.Write(field)
	return err
}

// ReadBytes reads a field WriteBytes wrote, into buf when it is large enough (the result
// is valid until buf's next use). A length over limit is ErrTooLarge; a stream that ends
// within the field is io.ErrUnexpectedEOF (or io.EOF before its length).
func ReadBytes(r *bufio.Reader, buf []byte, limit uint64) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, n, limit)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err = io.ReadFull(r, buf)
	return buf, err
}

// CutBytes cuts a field AppendBytes appended from the front of b: the field (a subslice of
// b) and what follows it. ok is false when b does not start with a whole field of at most
// limit bytes.
func CutBytes(b []byte, limit uint64) (field, rest []byte, ok bool) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > limit || l > uint64(len(b)-n) {
		return nil, b, false
	}
	return b[n : n+int(l)], b[n+int(l):], true
}

// Counter counts the bytes written through it to W, and adds them to Sum when set.
type Counter struct {
	W   io.Writer
	N   int64     // bytes W took
	Sum hash.Hash // nil: no checksum
}

func (c *Counter) Write(b []byte) (int, error) {
	n, err := c.W.Write(b)
	c.N += int64(n)
	if c.Sum != nil {
		c.Sum.Write(b[:n])
	}
	return n, err
}
