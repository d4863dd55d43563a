package gossip

import (
	"errors"
	"testing"
	"time"
)

// FuzzDecodeMeta reads arbitrary bytes as a peer's gossiped metadata: an error wrapping
// ErrInvalidMeta, or a Meta whose canonical encoding is no longer than what was read, has the
// size EncodedSize says, and decodes to the same Meta.
//
//	go test -run '^$' -fuzz '^FuzzDecodeMeta$' -fuzztime 60s -parallel 1 ./gossip
func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []Meta{
		{HTTPAddr: "127.0.0.1:8080", RaftAddr: "127.0.0.1:7000", State: StateActive, Version: "v0.3.1", DataFormat: 2,
			Started: time.Date(2026, 12, 3, 10, 0, 0, 123456789, time.UTC)},
		{State: StateJoining},
		{HTTPAddr: "[::1]:80", State: StateDraining, DataFormat: -1, Started: time.Unix(-5, 0).UTC()},
	} {
		f.Add(m.Encode())
	}
	f.Add([]byte{1, 0x80, 0x00, 0, 0, 0, 0, 0})
	f.Add([]byte{2})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidMeta) {
				t.Fatalf("error %v does not wrap ErrInvalidMeta", err)
			}
			return
		}
		enc := m.Encode()
		if len(enc) != m.EncodedSize() {
			t.Fatalf("EncodedSize %d, Encode gave %d bytes", m.EncodedSize(), len(enc))
		}
		if len(enc) > len(b) {
			t.Fatalf("canonical encoding %d bytes, read %d", len(enc), len(b))
		}
		back, err := DecodeMeta(enc)
		if err != nil {
			t.Fatalf("own encoding refused: %v", err)
		}
		if !back.Equal(m) {
			t.Fatalf("round trip changed %+v to %+v", m, back)
		}
		_ = m.Validate() // any decoded value validates without panicking
	})
}

// FuzzMetaRoundTrip: every Meta that validates encodes within MaxMetaSize and decodes to
// itself. A Started of exactly Unix nanosecond 0 is the encoding's "zero time" (see Encode).
//
//	go test -run '^$' -fuzz '^FuzzMetaRoundTrip$' -fuzztime 60s -parallel 1 ./gossip
func FuzzMetaRoundTrip(f *testing.F) {
	f.Add("127.0.0.1:8080", "127.0.0.1:7000", "active", "v1", int64(1), int64(1764756000123456789))
	f.Add("", "", "left", "", int64(0), int64(0))
	f.Add("h:1", "[::1]:2", "draining", "ü", int64(1<<40), int64(-1))
	f.Fuzz(func(t *testing.T, httpAddr, raftAddr, state, version string, df, started int64) {
		m := Meta{HTTPAddr: httpAddr, RaftAddr: raftAddr, State: State(state), Version: version, DataFormat: int(df)}
		if started != 0 {
			m.Started = time.Unix(0, started)
		}
		if err := m.Validate(); err != nil {
			if !errors.Is(err, ErrInvalidMeta) && !errors.Is(err, ErrMetaTooLarge) {
				t.Fatalf("error %v wraps neither ErrInvalidMeta nor ErrMetaTooLarge", err)
			}
			return
		}
		enc := m.Encode()
		if len(enc) > MaxMetaSize {
			t.Fatalf("valid Meta encodes to %d bytes, limit %d", len(enc), MaxMetaSize)
		}
		back, err := DecodeMeta(enc)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !back.Equal(m) {
			t.Fatalf("round trip changed %+v to %+v", m, back)
		}
		if back.Started.Location() != time.UTC {
			t.Fatalf("Started decoded in %v, want UTC", back.Started.Location())
		}
	})
}
