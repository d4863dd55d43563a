package snapshot

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/crawlnode/crawlnode/internal/wire"
)

// Sentinel errors.
var (
	// ErrCorrupt: a checksum, count, length or structure in the stream is wrong.
	ErrCorrupt = errors.New("snapshot: corrupt stream")
	// ErrTruncated: the stream ended before its verified trailer.
	ErrTruncated = errors.New("snapshot: truncated stream")
	// ErrVersion: the stream's format version is not one this build reads.
	ErrVersion = errors.New("snapshot: unsupported format version")
	// ErrTooLarge: Write was given a key or value over the limits.
	ErrTooLarge = errors.New("snapshot: record too large")
	// ErrWrongPartition and ErrStaleEpoch are for the receiver's expect callback to
	// return: it does not own that partition, or not at that epoch.
	ErrWrongPartition = errors.New("snapshot: partition not owned by the receiver")
	ErrStaleEpoch     = errors.New("snapshot: stale epoch")
)

// Limits and sizes.
const (
	// Version is the format version Write produces and Read accepts.
	Version = 1
	// MaxKey and MaxValue bound one record; Write refuses larger ones, Read treats them
	// as corruption.
	MaxKey   = 4 << 10
	MaxValue = 16 << 20
	// BlockSize is the raw size at which Write closes a block (1 MiB). A block exceeds it
	// only by its last record.
	BlockSize = 1 << 20
	// MaxBlock is the largest raw block a reader accepts: BlockSize plus one largest record.
	MaxBlock = BlockSize + MaxKey + MaxValue + 32

	maxHeader  = 4 << 10
	maxName    = 1 << 10
	maxComp    = MaxBlock + MaxBlock/64 + 1<<10 // zstd's worst-case expansion is far below this
	magic      = "CRWLSNAP"
	tagBlock   = 'B'
	tagTrailer = 'T'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header says what a stream holds and for whom.
type Header struct {
	Partition     uint16
	Epoch         uint64 // the lease epoch the transfer belongs to
	From, To      string // node names (at most 1 KiB each)
	Created       time.Time
	FormatVersion int // set by Write to Version, by Read to the stream's version
}

// Stats count one stream.
type Stats struct {
	Records  int64 // records
	Blocks   int64 // zstd blocks
	RawBytes int64 // record bytes before compression (framing included)
	Bytes    int64 // bytes on the wire, header and trailer included
}

// Write writes a snapshot stream to w: the header h, then every record export yields,
// then the trailer. export calls fn once per record; key and value need only be valid
// during the call. An error from export or fn stops the stream (no trailer is written, so
// a reader reports it truncated) and is returned.
func Write(w io.Writer, h Header, export func(fn func(family byte, key, value []byte) error) error) (Stats, error) {
	var st Stats
	if h.FormatVersion != 0 && h.FormatVersion != Version {
		return st, fmt.Errorf("%w: %d", ErrVersion, h.FormatVersion)
	}
	if len(h.From) > maxName || len(h.To) > maxName {
		return st, fmt.Errorf("%w: node name over %d bytes", ErrTooLarge, maxName)
	}
	crc := crc32.New(castagnoli)
	cw := &wire.Counter{W: w, Sum: crc}
	bw := bufio.NewWriterSize(cw, 64<<10)
	flushStats := func() { st.Bytes = cw.N }

	hdr := make([]byte, 0, 64+len(h.From)+len(h.To))
	hdr = binary.BigEndian.AppendUint16(hdr, h.Partition)
	hdr = binary.BigEndian.AppendUint64(hdr, h.Epoch)
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(h.Created.UnixNano()))
	hdr = wire.AppendBytes(hdr, []byte(h.From))
	hdr = wire.AppendBytes(hdr, []byte(h.To))
	pre := make([]byte, 0, 18+len(hdr)+4)
	pre = append(pre, magic...)
	pre = binary.BigEndian.AppendUint16(pre, Version)
	pre = binary.BigEndian.AppendUint32(pre, uint32(len(hdr)))
	pre = append(pre, hdr...)
	pre = binary.BigEndian.AppendUint32(pre, crc32.Checksum(pre, castagnoli))
	if _, err := bw.Write(pre); err != nil {
		return st, fmt.Errorf("snapshot: write header: %w", err)
	}

	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return st, fmt.Errorf("snapshot: zstd: %w", err)
	}
	defer enc.Close()
	raw := make([]byte, 0, BlockSize+BlockSize/8)
	var comp []byte
	var inBlock uint32
	flush := func() error {
		if inBlock == 0 {
			return nil
		}
		comp = enc.EncodeAll(raw, comp[:0])
		var bh [21]byte
		bh[0] = tagBlock
		binary.BigEndian.PutUint32(bh[1:], uint32(len(raw)))
		binary.BigEndian.PutUint32(bh[5:], inBlock)
		binary.BigEndian.PutUint32(bh[9:], uint32(len(comp)))
		binary.BigEndian.PutUint32(bh[13:], crc32.Checksum(bh[1:13], castagnoli))
		binary.BigEndian.PutUint32(bh[17:], crc32.Checksum(comp, castagnoli))
		if _, err := bw.Write(bh[:]); err != nil {
			return err
		}
		if _, err := bw.Write(comp); err != nil {
			return err
		}
		st.Blocks++
		st.RawBytes += int64(len(raw))
		raw, inBlock = raw[:0], 0
		return nil
	}
	err = export(func(fam byte, k, v []byte) error {
		if len(k) == 0 || len(k) > MaxKey || len(v) > MaxValue {
			return fmt.Errorf("%w: key %d bytes, value %d bytes", ErrTooLarge, len(k), len(v))
		}
		raw = append(raw, fam)
		raw = wire.AppendBytes(raw, k)
		raw = wire.AppendBytes(raw, v)
		inBlock++
		st.Records++
		if len(raw) >= BlockSize {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		_ = bw.Flush()
		flushStats()
		return st, fmt.Errorf("snapshot: write: %w", err)
	}
	if err := bw.Flush(); err != nil {
		flushStats()
		return st, fmt.Errorf("snapshot: write: %w", err)
	}
	var tr [33]byte
	tr[0] = tagTrailer
	binary.BigEndian.PutUint64(tr[1:], uint64(st.Records))
	binary.BigEndian.PutUint64(tr[9:], uint64(st.Blocks))
	binary.BigEndian.PutUint64(tr[17:], uint64(st.RawBytes))
	binary.BigEndian.PutUint32(tr[25:], crc.Sum32())
	binary.BigEndian.PutUint32(tr[29:], crc32.Checksum(tr[:29], castagnoli))
	if _, err := cw.Write(tr[:]); err != nil {
		flushStats()
		return st, fmt.Errorf("snapshot: write trailer: %w", err)
	}
	flushStats()
	return st, nil
}

// Reader reads one snapshot stream. It is not safe for concurrent use.
type Reader struct {
	br     *bufio.Reader
	hdr    Header
	dec    *zstd.Decoder
	comp   []byte
	raw    []byte
	rest   []byte // unread records of the current block
	left   uint32 // records the current block still claims
	st     Stats
	err    error  // sticky: io.EOF after the trailer, or the first failure
	stream uint32 // CRC32C of every byte consumed so far
	n      int64  // bytes consumed
}

// Read reads and verifies the header of a stream, then calls expect (if not nil) with it;
// an error from expect (ErrWrongPartition, ErrStaleEpoch...) refuses the stream and is
// returned wrapped. The returned Reader yields the records with Next.
func Read(r io.Reader, expect func(Header) error) (*Reader, error) {
	rd := &Reader{br: bufio.NewReaderSize(r, 64<<10)}
	var pre [14]byte
	if err := rd.full(pre[:]); err != nil {
		return nil, fmt.Errorf("snapshot: header: %w", err)
	}
	if string(pre[:8]) != magic {
		return nil, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	v := int(binary.BigEndian.Uint16(pre[8:10]))
	if v != Version {
		return nil, fmt.Errorf("%w: %d (this build reads %d)", ErrVersion, v, Version)
	}
	n := binary.BigEndian.Uint32(pre[10:14])
	if n > maxHeader || n < 18+2 {
		return nil, fmt.Errorf("%w: header length %d", ErrCorrupt, n)
	}
	hdr := make([]byte, n+4)
	if err := rd.full(hdr); err != nil {
		return nil, fmt.Errorf("snapshot: header: %w", err)
	}
	c := crc32.Update(crc32.Checksum(pre[:], castagnoli), castagnoli, hdr[:n])
	if c != binary.BigEndian.Uint32(hdr[n:]) {
		return nil, fmt.Errorf("%w: header checksum", ErrCorrupt)
	}
	h, err := parseHeader(hdr[:n])
	if err != nil {
		return nil, err
	}
	h.FormatVersion = v
	rd.hdr = h
	if expect != nil {
		if err := expect(h); err != nil {
			return nil, fmt.Errorf("snapshot: refused partition %d epoch %d from %q: %w", h.Partition, h.Epoch, h.From, err)
		}
	}
	return rd, nil
}

func parseHeader(b []byte) (Header, error) {
	var h Header
	h.Partition = binary.BigEndian.Uint16(b)
	h.Epoch = binary.BigEndian.Uint64(b[2:])
	h.Created = time.Unix(0, int64(binary.BigEndian.Uint64(b[10:])))
	b = b[18:]
	str := func() (string, bool) {
		f, rest, ok := wire.CutBytes(b, maxName)
		b = rest
		return string(f), ok
	}
	var ok1, ok2 bool
	h.From, ok1 = str()
	h.To, ok2 = str()
	if !ok1 || !ok2 || len(b) != 0 {
		return Header{}, fmt.Errorf("%w: header fields", ErrCorrupt)
	}
	return h, nil
}

// full reads len(b) bytes; an early end is ErrTruncated.
func (rd *Reader) full(b []byte) error {
	n, err := io.ReadFull(rd.br, b)
	rd.stream = crc32.Update(rd.stream, castagnoli, b[:n])
	rd.n += int64(n)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// Not wrapping io.EOF: a truncation must never look like the clean end.
		return fmt.Errorf("%w: stream ended after %d bytes", ErrTruncated, rd.n)
	}
	return err
}

// Header returns the stream's header.
func (rd *Reader) Header() Header { return rd.hdr }

// Stats returns what was read so far (all of it after Next returned io.EOF).
func (rd *Reader) Stats() Stats {
	s := rd.st
	s.Bytes = rd.n
	return s
}

// Close releases the decoder. Next calls it itself at the end or on an error; call it
// when abandoning a stream early. Idempotent.
func (rd *Reader) Close() {
	if rd.dec != nil {
		rd.dec.Close()
		rd.dec = nil
	}
	rd.comp, rd.raw, rd.rest = nil, nil, nil
	if rd.err == nil {
		rd.err = errors.New("snapshot: reader closed")
	}
}

// Next returns the next record. key and value are valid until the next call. It returns
// io.EOF after the trailer verified (counts and the whole-stream checksum), and an error
// wrapping ErrCorrupt or ErrTruncated for a damaged stream; errors are sticky.
func (rd *Reader) Next() (family byte, key, value []byte, err error) {
	if rd.err != nil {
		return 0, nil, nil, rd.err
	}
	for len(rd.rest) == 0 {
		if rd.left != 0 {
			return rd.fail(fmt.Errorf("%w: block holds fewer records than its header says", ErrCorrupt))
		}
		if err := rd.nextBlock(); err != nil {
			return rd.fail(err)
		}
	}
	b := rd.rest
	if rd.left == 0 {
		return rd.fail(fmt.Errorf("%w: block holds more records than its header says", ErrCorrupt))
	}
	fam := b[0]
	b = b[1:]
	k, b, ok := wire.CutBytes(b, MaxKey)
	if !ok || len(k) == 0 {
		return rd.fail(fmt.Errorf("%w: key length", ErrCorrupt))
	}
	v, b, ok := wire.CutBytes(b, MaxValue)
	if !ok {
		return rd.fail(fmt.Errorf("%w: value length", ErrCorrupt))
	}
	rd.rest = b
	rd.left--
	rd.st.Records++
	return fam, k, v, nil
}

func (rd *Reader) fail(err error) (byte, []byte, []byte, error) {
	if rd.dec != nil {
		rd.dec.Close()
		rd.dec = nil
	}
	rd.comp, rd.raw, rd.rest = nil, nil, nil
	rd.err = err
	return 0, nil, nil, err
}

// nextBlock reads the next block into rd.rest, or the trailer (then io.EOF).
func (rd *Reader) nextBlock() error {
	// The stream checksum covers every byte before the trailer's tag.
	before := rd.stream
	var tb [1]byte
	if err := rd.full(tb[:]); err != nil {
		if errors.Is(err, ErrTruncated) {
			return fmt.Errorf("%w: no trailer", ErrTruncated)
		}
		return err
	}
	tag := tb[0]
	switch tag {
	case tagTrailer:
		return rd.trailer(before)
	case tagBlock:
	default:
		return fmt.Errorf("%w: unknown tag %#x", ErrCorrupt, tag)
	}
	var bh [20]byte
	if err := rd.full(bh[:]); err != nil {
		return err
	}
	if crc32.Checksum(bh[:12], castagnoli) != binary.BigEndian.Uint32(bh[12:]) {
		return fmt.Errorf("%w: block %d header checksum", ErrCorrupt, rd.st.Blocks)
	}
	rawLen := binary.BigEndian.Uint32(bh[0:])
	recs := binary.BigEndian.Uint32(bh[4:])
	compLen := binary.BigEndian.Uint32(bh[8:])
	var err error
	if rawLen == 0 || rawLen > MaxBlock || compLen == 0 || compLen > maxComp || recs == 0 || recs > rawLen/4 {
		return fmt.Errorf("%w: block lengths raw %d comp %d records %d", ErrCorrupt, rawLen, compLen, recs)
	}
	// Read the compressed bytes as they arrive: a lying compLen on a short stream costs
	// an error, not compLen bytes of memory.
	rd.comp = rd.comp[:0]
	for need := int(compLen); need > 0; {
		chunk := min(need, 256<<10)
		l := len(rd.comp)
		rd.comp = append(rd.comp, make([]byte, chunk)...)
		if err := rd.full(rd.comp[l:]); err != nil {
			return err
		}
		need -= chunk
	}
	if crc32.Checksum(rd.comp, castagnoli) != binary.BigEndian.Uint32(bh[16:]) {
		return fmt.Errorf("%w: block %d checksum", ErrCorrupt, rd.st.Blocks)
	}
	if rd.dec == nil {
		rd.dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(MaxBlock), zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			return fmt.Errorf("snapshot: zstd: %w", err)
		}
	}
	if cap(rd.raw) < int(rawLen) {
		rd.raw = make([]byte, 0, rawLen)
	}
	raw, err := rd.dec.DecodeAll(rd.comp, rd.raw[:0:rawLen])
	if err != nil {
		return fmt.Errorf("%w: block %d: %w", ErrCorrupt, rd.st.Blocks, err)
	}
	if len(raw) != int(rawLen) {
		return fmt.Errorf("%w: block %d decodes to %d bytes, header says %d", ErrCorrupt, rd.st.Blocks, len(raw), rawLen)
	}
	rd.raw = raw
	rd.rest, rd.left = raw, recs
	rd.st.Blocks++
	rd.st.RawBytes += int64(rawLen)
	return nil
}

// trailer verifies the trailer; want is the CRC of every byte before it.
func (rd *Reader) trailer(want uint32) error {
	var tr [32]byte
	if err := rd.full(tr[:]); err != nil {
		return err
	}
	full := make([]byte, 0, 33)
	full = append(full, tagTrailer)
	full = append(full, tr[:28]...)
	if crc32.Checksum(full, castagnoli) != binary.BigEndian.Uint32(tr[28:]) {
		return fmt.Errorf("%w: trailer checksum", ErrCorrupt)
	}
	recs := binary.BigEndian.Uint64(tr[0:])
	blocks := binary.BigEndian.Uint64(tr[8:])
	rawBytes := binary.BigEndian.Uint64(tr[16:])
	if recs != uint64(rd.st.Records) || blocks != uint64(rd.st.Blocks) || rawBytes != uint64(rd.st.RawBytes) {
		return fmt.Errorf("%w: trailer counts %d records %d blocks, read %d and %d", ErrCorrupt, recs, blocks, rd.st.Records, rd.st.Blocks)
	}
	if binary.BigEndian.Uint32(tr[24:]) != want {
		return fmt.Errorf("%w: stream checksum", ErrCorrupt)
	}
	if _, err := rd.br.ReadByte(); !errors.Is(err, io.EOF) {
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: bytes after the trailer", ErrCorrupt)
	}
	rd.st.Bytes = rd.n
	if rd.dec != nil {
		rd.dec.Close()
		rd.dec = nil
	}
	return io.EOF
}
