package gossip

import (
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/memberlist"
)

// State is a node's lifecycle state as it announces it in its metadata.
type State string

// The states a node announces. The node layer moves joining -> active -> draining; gossip
// itself only carries the value.
const (
	// StateJoining: the node is up and gossiping but does not own partitions yet.
	StateJoining State = "joining"
	// StateActive: the node owns and crawls partitions.
	StateActive State = "active"
	// StateDraining: the node is handing its partitions off before it leaves.
	StateDraining State = "draining"
	// StateLeft: the node has decommissioned. Gossip reports a departure in Member.Status;
	// this value is for registries (Raft) that keep a record of nodes that left on purpose,
	// and for a node that wants to say so in its last metadata update before Leave.
	StateLeft State = "left"
)

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	switch s {
	case StateJoining, StateActive, StateDraining, StateLeft:
		return true
	}
	return false
}

// MaxMetaSize is the largest encoded Meta memberlist accepts (memberlist.MetaMaxSize, 512
// bytes). memberlist panics on larger metadata, so SetMeta and New check it first.
const MaxMetaSize = memberlist.MetaMaxSize

// metaFormatV1 is the first byte of an encoded Meta. It is bumped only for an incompatible
// change; compatible additions append fields, which older readers ignore.
const metaFormatV1 byte = 1

// Meta is what a node gossips about itself.
type Meta struct {
	// HTTPAddr is the node's HTTP API address (host:port), used for forwarding and the
	// cluster view. Empty means the node serves no HTTP API (tests).
	HTTPAddr string
	// RaftAddr is the node's Raft transport address (host:port). Empty means not yet known.
	RaftAddr string
	// State is the node's lifecycle state. It must be a known State.
	State State
	// Version is the crawlnode build version, free text (for example "v0.3.1").
	Version string
	// DataFormat is the version of the on-disk and on-wire data format this node speaks;
	// peers refuse handoffs between incompatible formats.
	DataFormat int
	// Started is when this node's process started. It tells a restart (same name, new
	// Started) from a metadata update. Stored with nanosecond precision, in UTC.
	Started time.Time
}

// Validate checks the fields that have a fixed shape and the encoded size.
func (m Meta) Validate() error {
	if !m.State.Valid() {
		return fmt.Errorf("%w: unknown state %q", ErrInvalidMeta, m.State)
	}
	for _, a := range []struct{ name, v string }{{"http address", m.HTTPAddr}, {"raft address", m.RaftAddr}} {
		if a.v == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			return fmt.Errorf("%w: %s %q: %v", ErrInvalidMeta, a.name, a.v, err)
		}
	}
	if m.DataFormat < 0 {
		return fmt.Errorf("%w: negative data format %d", ErrInvalidMeta, m.DataFormat)
	}
	if n := m.EncodedSize(); n > MaxMetaSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrMetaTooLarge, n, MaxMetaSize)
	}
	return nil
}

// EncodedSize is the length of Encode's output, in bytes.
func (m Meta) EncodedSize() int {
	n := 1
	for _, s := range []string{m.HTTPAddr, m.RaftAddr, string(m.State), m.Version} {
		n += uvarintLen(uint64(len(s))) + len(s)
	}
	n += varintLen(int64(m.DataFormat))
	n += varintLen(startedNanos(m.Started))
	return n
}

// Encode returns the compact binary form of m:
//
//	byte    format (1)
//	uvarint len, bytes   HTTPAddr, RaftAddr, State, Version (in this order)
//	varint  DataFormat
//	varint  Started as Unix nanoseconds (0 = zero time)
//
// Encode does not check the size; Validate does.
func (m Meta) Encode() []byte {
	b := make([]byte, 0, m.EncodedSize())
	b = append(b, metaFormatV1)
	for _, s := range []string{m.HTTPAddr, m.RaftAddr, string(m.State), m.Version} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendVarint(b, int64(m.DataFormat))
	b = binary.AppendVarint(b, startedNanos(m.Started))
	return b
}

// DecodeMeta parses Encode's output. Bytes after the known fields are ignored (a newer,
// compatible writer may append fields); an unknown format byte or a truncated field is an
// error wrapping ErrInvalidMeta. It does not validate the values (a peer's newer state name
// still decodes).
func DecodeMeta(b []byte) (Meta, error) {
	var m Meta
	if len(b) == 0 {
		return m, fmt.Errorf("%w: empty", ErrInvalidMeta)
	}
	if b[0] != metaFormatV1 {
		return m, fmt.Errorf("%w: unknown format %d", ErrInvalidMeta, b[0])
	}
	rest := b[1:]
	var strs [4]string
	for i := range strs {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l > uint64(len(rest)-n) {
			return Meta{}, fmt.Errorf("%w: truncated string field %d", ErrInvalidMeta, i)
		}
		strs[i] = string(rest[n : n+int(l)])
		rest = rest[n+int(l):]
	}
	df, n := binary.Varint(rest)
	if n <= 0 {
		return Meta{}, fmt.Errorf("%w: truncated data format", ErrInvalidMeta)
	}
	rest = rest[n:]
	started, n := binary.Varint(rest)
	if n <= 0 {
		return Meta{}, fmt.Errorf("%w: truncated start time", ErrInvalidMeta)
	}
	m = Meta{HTTPAddr: strs[0], RaftAddr: strs[1], State: State(strs[2]), Version: strs[3], DataFormat: int(df)}
	if started != 0 {
		m.Started = time.Unix(0, started).UTC()
	}
	return m, nil
}

// Equal reports whether two Meta values carry the same information (Started compared with
// time.Time.Equal).
func (m Meta) Equal(o Meta) bool {
	return m.HTTPAddr == o.HTTPAddr && m.RaftAddr == o.RaftAddr && m.State == o.State &&
		m.Version == o.Version && m.DataFormat == o.DataFormat && m.Started.Equal(o.Started)
}

func startedNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func uvarintLen(v uint64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutUvarint(buf[:], v)
}

func varintLen(v int64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutVarint(buf[:], v)
}
