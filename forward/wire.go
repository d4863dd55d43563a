package forward

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/crawlnode/crawlnode/ring"
)

// Wire limits. Encode refuses what Decode would refuse, so whatever Encode returns decodes.
const (
	// WireVersion is the first byte of every encoded batch. Version 2 added the cash
	// column; Decode still reads version 1 (no cash).
	WireVersion = 2
	// MaxBatchLinks is the most links one batch may carry (all partitions together).
	MaxBatchLinks = 50_000
	// MaxURLLength is the longest URL a link may have, in bytes.
	MaxURLLength = 8 << 10
	// MaxBatchURLBytes bounds the sum of URL lengths in a batch: front coding lets a small
	// body expand into long URLs, so the decoded strings are bounded by this, not by the body.
	MaxBatchURLBytes = 16 << 20
	// MaxBodyBytes bounds the decompressed body.
	MaxBodyBytes = 24 << 20
	// MaxWireBytes bounds an encoded batch (version byte + zstd frame): the HTTP body limit.
	MaxWireBytes = MaxBodyBytes + 1<<20
	// MaxPeerName bounds Batch.From, in bytes.
	MaxPeerName = 256

	// minLinkBytes is the fewest body bytes one link takes (shared, suffix length, depth,
	// hops, priority: one byte each at least); it bounds slice allocations by the body size.
	minLinkBytes = 5
)

// Batch is what one Send carries to one peer: links of one or more partitions, each with the
// epoch of the lease the sender believes the peer holds (STYLE 9).
type Batch struct {
	From       string // the sending node's name; the receiver holds it against the authenticated caller
	Partitions []PartitionLinks

	// enc caches Encode(b) when the outbox already encoded the batch to count its bytes,
	// so that HTTPSender does not encode it twice. Never set by Decode.
	enc []byte
}

// PartitionLinks are the links of one partition in a batch.
type PartitionLinks struct {
	Partition uint16
	Epoch     uint64
	Links     []Link
}

// NumLinks returns the number of links in b.
func (b Batch) NumLinks() int {
	n := 0
	for _, p := range b.Partitions {
		n += len(p.Links)
	}
	return n
}

var (
	encoderOnce = sync.OnceValues(func() (*zstd.Encoder, error) {
		// EncodeAll may be called concurrently: the Encoder keeps a pool of block encoders
		// (one per GOMAXPROCS by default), so this one value is the pooled encoder.
		return zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithWindowSize(1<<22),
			zstd.WithEncoderCRC(false), // the transport (TCP, HTTP) already checks bytes
		)
	})
	decoderOnce = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil,
			zstd.WithDecoderMaxMemory(MaxBodyBytes),
			zstd.WithDecoderMaxWindow(1<<23),
			zstd.WithDecoderConcurrency(0),
		)
	})
	bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}
)

// Encode encodes b: a version byte, then a zstd frame of the body
//
//	uvarint len(From), From, uvarint #partitions,
//	per partition: partition (2 bytes, big-endian), uvarint epoch, link section
//
// where a link section holds the links sorted by URL (stable) in columns: uvarint count,
// the shared-prefix lengths with the previous URL, the suffix lengths, the suffixes, the
// depths, the hops, the priorities and the OPIC cash (float32 bits; all numbers uvarints;
// version 1 had no cash column). Columns of small, similar
// numbers compress far better than interleaved records. b is not modified.
func Encode(b Batch) ([]byte, error) {
	if len(b.From) > MaxPeerName {
		return nil, fmt.Errorf("%w: from name of %d bytes", ErrTooLarge, len(b.From))
	}
	if len(b.Partitions) > ring.PartitionCount {
		return nil, fmt.Errorf("%w: %d partitions in one batch", ErrTooLarge, len(b.Partitions))
	}
	total, urlBytes := 0, 0
	for _, p := range b.Partitions {
		if p.Partition >= ring.PartitionCount {
			return nil, fmt.Errorf("%w: partition %d out of range", ErrInvalidLink, p.Partition)
		}
		total += len(p.Links)
		for _, l := range p.Links {
			if err := checkLink(l); err != nil {
				return nil, err
			}
			urlBytes += len(l.URL)
		}
	}
	if total > MaxBatchLinks {
		return nil, fmt.Errorf("%w: %d links (max %d)", ErrTooLarge, total, MaxBatchLinks)
	}
	if urlBytes > MaxBatchURLBytes {
		return nil, fmt.Errorf("%w: %d URL bytes (max %d)", ErrTooLarge, urlBytes, MaxBatchURLBytes)
	}
	bp := bufPool.Get().(*[]byte)
	body := (*bp)[:0]
	body = binary.AppendUvarint(body, uint64(len(b.From)))
	body = append(body, b.From...)
	body = binary.AppendUvarint(body, uint64(len(b.Partitions)))
	for _, p := range b.Partitions {
		body = binary.BigEndian.AppendUint16(body, p.Partition)
		body = binary.AppendUvarint(body, p.Epoch)
		body = appendLinks(body, p.Links, true)
	}
	defer func() {
		if cap(body) <= 4<<20 { // do not keep huge buffers alive in the pool
			*bp = body[:0]
			bufPool.Put(bp)
		}
	}()
	if len(body) > MaxBodyBytes {
		return nil, fmt.Errorf("%w: body of %d bytes", ErrTooLarge, len(body))
	}
	enc, err := encoderOnce()
	if err != nil {
		return nil, fmt.Errorf("forward: zstd encoder: %w", err)
	}
	out := make([]byte, 1, len(body)/3+64)
	out[0] = WireVersion
	return enc.EncodeAll(body, out), nil
}

// Decode decodes an encoded batch. Malformed input returns an error wrapping ErrCorrupt,
// input past the limits one wrapping ErrTooLarge; it never panics, and its memory is
// bounded by MaxBodyBytes plus MaxBatchURLBytes whatever the input.
func Decode(data []byte) (Batch, error) {
	if len(data) == 0 {
		return Batch{}, fmt.Errorf("%w: empty", ErrCorrupt)
	}
	if len(data) > MaxWireBytes {
		return Batch{}, fmt.Errorf("%w: %d bytes on the wire", ErrTooLarge, len(data))
	}
	if data[0] != WireVersion && data[0] != 1 {
		return Batch{}, fmt.Errorf("%w: unknown version %d", ErrCorrupt, data[0])
	}
	withCash := data[0] >= 2
	dec, err := decoderOnce()
	if err != nil {
		return Batch{}, fmt.Errorf("forward: zstd decoder: %w", err)
	}
	bp := bufPool.Get().(*[]byte)
	body, err := dec.DecodeAll(data[1:], (*bp)[:0])
	defer func() {
		if cap(body) <= 4<<20 { // do not keep huge buffers alive in the pool
			*bp = body[:0]
			bufPool.Put(bp)
		}
	}()
	if err != nil {
		if err == zstd.ErrDecoderSizeExceeded {
			return Batch{}, fmt.Errorf("%w: body over %d bytes", ErrTooLarge, MaxBodyBytes)
		}
		return Batch{}, fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
	}
	return decodeBody(body, withCash)
}

// decodeBody parses a decompressed body.
func decodeBody(body []byte, withCash bool) (Batch, error) {
	r := reader{b: body}
	var b Batch
	fromLen := r.uvarint()
	if r.err == nil && fromLen > MaxPeerName {
		return Batch{}, fmt.Errorf("%w: from name of %d bytes", ErrCorrupt, fromLen)
	}
	b.From = string(r.bytes(fromLen))
	nParts := r.uvarint()
	if r.err == nil && nParts > ring.PartitionCount {
		return Batch{}, fmt.Errorf("%w: %d partitions", ErrCorrupt, nParts)
	}
	if r.err != nil {
		return Batch{}, r.err
	}
	b.Partitions = make([]PartitionLinks, 0, nParts)
	budget := linkBudget{links: MaxBatchLinks, urlBytes: MaxBatchURLBytes}
	for range nParts {
		var p PartitionLinks
		part := r.bytes(2)
		if r.err != nil {
			return Batch{}, r.err
		}
		p.Partition = binary.BigEndian.Uint16(part)
		if p.Partition >= ring.PartitionCount {
			return Batch{}, fmt.Errorf("%w: partition %d out of range", ErrCorrupt, p.Partition)
		}
		p.Epoch = r.uvarint()
		p.Links = r.links(&budget, withCash)
		if r.err != nil {
			return Batch{}, r.err
		}
		b.Partitions = append(b.Partitions, p)
	}
	if len(r.b) != 0 {
		return Batch{}, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(r.b))
	}
	return b, nil
}

// checkLink reports whether l can be encoded.
func checkLink(l Link) error {
	switch {
	case l.URL == "":
		return fmt.Errorf("%w: empty URL", ErrInvalidLink)
	case len(l.URL) > MaxURLLength:
		return fmt.Errorf("%w: URL of %d bytes (max %d)", ErrInvalidLink, len(l.URL), MaxURLLength)
	}
	return nil
}

// sortedLinks returns links sorted by URL (stable), copying only when they are not sorted.
func sortedLinks(links []Link) []Link {
	if slices.IsSortedFunc(links, cmpURL) {
		return links
	}
	s := slices.Clone(links)
	slices.SortStableFunc(s, cmpURL)
	return s
}

func cmpURL(a, b Link) int { return strings.Compare(a.URL, b.URL) }

// appendLinks appends the link section of links (see Encode). The links must be valid.
func appendLinks(dst []byte, links []Link, withCash bool) []byte {
	links = sortedLinks(links)
	dst = binary.AppendUvarint(dst, uint64(len(links)))
	prev := ""
	for _, l := range links {
		dst = binary.AppendUvarint(dst, uint64(sharedPrefix(prev, l.URL)))
		prev = l.URL
	}
	prev = ""
	for _, l := range links {
		dst = binary.AppendUvarint(dst, uint64(len(l.URL)-sharedPrefix(prev, l.URL)))
		prev = l.URL
	}
	prev = ""
	for _, l := range links {
		dst = append(dst, l.URL[sharedPrefix(prev, l.URL):]...)
		prev = l.URL
	}
	for _, l := range links {
		dst = binary.AppendUvarint(dst, uint64(l.Depth))
	}
	for _, l := range links {
		dst = binary.AppendUvarint(dst, uint64(l.Hops))
	}
	for _, l := range links {
		dst = binary.AppendUvarint(dst, uint64(l.Priority))
	}
	if withCash {
		for _, l := range links {
			dst = binary.AppendUvarint(dst, uint64(math.Float32bits(l.Cash)))
		}
	}
	return dst
}

func sharedPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// linkBudget is what is left of a batch's limits while decoding.
type linkBudget struct{ links, urlBytes int }

// reader is a bounds-checked cursor over a body; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// small reads a uvarint that must be <= max.
func (r *reader) small(max uint64, what string) int {
	v := r.uvarint()
	if r.err == nil && v > max {
		r.fail("%s %d over %d", what, v, max)
		return 0
	}
	return int(v)
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("truncated")
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// links reads a link section (see Encode), charging it to budget.
func (r *reader) links(budget *linkBudget, withCash bool) []Link {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(budget.links) {
		r.fail("%d links over the batch limit", n)
		return nil
	}
	if n > uint64(len(r.b)/minLinkBytes) {
		r.fail("%d links in %d bytes", n, len(r.b))
		return nil
	}
	budget.links -= int(n)
	links := make([]Link, n)
	shared := make([]int, n)
	suffix := make([]int, n)
	for i := range links {
		shared[i] = r.small(MaxURLLength, "shared prefix")
	}
	for i := range links {
		suffix[i] = r.small(MaxURLLength, "suffix length")
	}
	if r.err != nil {
		return nil
	}
	prev := ""
	for i := range links {
		if shared[i] > len(prev) {
			r.fail("shared prefix %d longer than the previous URL", shared[i])
			return nil
		}
		ulen := shared[i] + suffix[i]
		if ulen == 0 || ulen > MaxURLLength {
			r.fail("URL length %d", ulen)
			return nil
		}
		if ulen > budget.urlBytes {
			r.fail("URL bytes over the batch limit")
			return nil
		}
		budget.urlBytes -= ulen
		suf := r.bytes(uint64(suffix[i]))
		if r.err != nil {
			return nil
		}
		u := prev[:shared[i]] + string(suf)
		if u < prev {
			r.fail("URLs not sorted")
			return nil
		}
		links[i].URL = u
		prev = u
	}
	for i := range links {
		links[i].Depth = uint16(r.small(0xFFFF, "depth"))
	}
	for i := range links {
		links[i].Hops = uint16(r.small(0xFFFF, "hops"))
	}
	for i := range links {
		links[i].Priority = uint8(r.small(0xFF, "priority"))
	}
	if withCash {
		for i := range links {
			c := math.Float32frombits(uint32(r.small(math.MaxUint32, "cash")))
			if r.err == nil && (c < 0 || math.IsNaN(float64(c)) || math.IsInf(float64(c), 0)) {
				r.fail("cash %v", c)
			}
			links[i].Cash = c
		}
	}
	if r.err != nil {
		return nil
	}
	return links
}
