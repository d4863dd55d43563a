package frontier

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/crawlnode/crawlnode/internal/keyspace"
)

// Key families (their bytes are registered in internal/keyspace). Every key is family(1) | partition(2, big-endian) | rest.
const (
	famQueue = keyspace.FrontierQueue // q|part|host|0x00|priority(1)|depth(2)|seq(8) -> qrec
	famHost  = keyspace.FrontierHost  // h|part|host -> host state; h|part|host|0x00|'m' -> opaque host meta
	famSeen  = keyspace.FrontierSeen  // s|part|urlhash(16) -> seen record
	famDead  = keyspace.FrontierDead  // d|part|urlhash(16) -> dead letter
	famRetry = keyspace.FrontierRetry // r|part|due(8, unix ns)|seq(8) -> q key + qrec; seq's top bit: a revisit
	// famDedup is written by package dedup (the cluster's duplicate decisions), not by the
	// frontier; it lives here only to travel with its partition: export, import (first
	// writer wins), drop, replicas.
	famDedup = keyspace.DedupKeys // D|part|kind(1)|rest -> opaque value
)

// revisitBit marks the sequence number of an r key that schedules a revisit (Recrawl),
// not a retry, so counts need no value reads.
const revisitBit = uint64(1) << 63

// bandRevisit is the queue-key priority byte of a revisit whose time has come: revisits
// sort before discovery in their host's queue, and the host's revisit share decides
// which of the two a lease takes (pickLocked).
const bandRevisit = 0

// Discovery bands: 1 + class*cashBuckets + cash bucket, so seed class comes first, then
// cash, then (in the rest of the key) depth and arrival.
const (
	cashBuckets = 60
	maxClass    = 3 // classes 0..2, the rest share class 3
)

// queueBand is the priority byte of a queued discovery URL: its seed class, then its
// OPIC cash in steps of a third of an octave from 2^8 (bucket 0) down to 2^-11.7 (the
// last bucket, which also holds no cash at all).
func queueBand(class uint8, cash float64) uint8 {
	return 1 + min(class, maxClass)*cashBuckets + cashBucket(cash)
}

func cashBucket(cash float64) uint8 {
	if !(cash > 0) {
		return cashBuckets - 1
	}
	b := math.Round(3 * (8 - math.Log2(cash)))
	return uint8(max(0, min(b, cashBuckets-1)))
}

// prioOfKey is the priority byte of a q key.
func prioOfKey(k []byte) uint8 {
	if len(k) < 11 {
		return 0
	}
	return k[len(k)-11]
}

// URLHash is the exact seen key of a canonical URL: the first 16 bytes of its SHA-256.
// Two distinct URLs collide with probability about n^2/2^129 for n URLs (about 3e-23 for
// 100M URLs), so the set is exact for practical purposes. Its hex form is the public page id.
func URLHash(url string) [16]byte {
	// Hashed from a stack copy: []byte(url) was a heap allocation per link checked
	// (URLs are longer than the conversion's 32-byte stack buffer).
	var buf [512]byte
	b := buf[:0]
	if len(url) > len(buf) {
		b = make([]byte, 0, len(url))
	}
	s := sha256.Sum256(append(b, url...))
	var h [16]byte
	copy(h[:], s[:16])
	return h
}

func famPrefix(fam byte, part uint16) []byte {
	return []byte{fam, byte(part >> 8), byte(part)}
}

func qHostPrefix(part uint16, host string) []byte {
	b := make([]byte, 0, 4+len(host))
	b = append(b, famQueue, byte(part>>8), byte(part))
	b = append(b, host...)
	return append(b, 0)
}

func qKey(part uint16, host string, prio uint8, depth int, seq uint64) []byte {
	b := qHostPrefix(part, host)
	if depth < 0 {
		depth = 0
	}
	if depth > 0xffff {
		depth = 0xffff
	}
	b = append(b, prio, byte(depth>>8), byte(depth))
	return binary.BigEndian.AppendUint64(b, seq)
}

// parseQKey returns the host and sequence number of a q key.
func parseQKey(k []byte) (host string, seq uint64, ok bool) {
	if len(k) < 3+1+1+2+8 || k[0] != famQueue || k[len(k)-12] != 0 {
		return "", 0, false
	}
	return string(k[3 : len(k)-12]), binary.BigEndian.Uint64(k[len(k)-8:]), true
}

func hKey(part uint16, host string) []byte {
	b := make([]byte, 0, 3+len(host))
	b = append(b, famHost, byte(part>>8), byte(part))
	return append(b, host...)
}

func hMetaKey(part uint16, host string) []byte {
	return append(hKey(part, host), 0, 'm')
}

func hashKey(fam byte, part uint16, h [16]byte) []byte {
	b := make([]byte, 0, 19)
	b = append(b, fam, byte(part>>8), byte(part))
	return append(b, h[:]...)
}

func rKey(part uint16, due int64, seq uint64) []byte {
	b := make([]byte, 0, 19)
	b = append(b, famRetry, byte(part>>8), byte(part))
	b = binary.BigEndian.AppendUint64(b, uint64(due))
	return binary.BigEndian.AppendUint64(b, seq)
}

func parseRKey(k []byte) (part uint16, due int64, seq uint64, ok bool) {
	if len(k) != 19 || k[0] != famRetry {
		return 0, 0, 0, false
	}
	return binary.BigEndian.Uint16(k[1:3]), int64(binary.BigEndian.Uint64(k[3:11])), binary.BigEndian.Uint64(k[11:19]), true
}

// ---- value encoding: uvarints, varints and length-prefixed byte strings ----

type enc struct{ b []byte }

func (e *enc) u(v uint64)     { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) i(v int64)      { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) s(v string)     { e.u(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) bytes(v []byte) { e.u(uint64(len(v))); e.b = append(e.b, v...) }

type dec struct {
	b   []byte
	err bool
}

func (d *dec) u() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) i() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) raw() []byte {
	n := d.u()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) s() string { return string(d.raw()) }

func (d *dec) bytes() []byte {
	r := d.raw()
	if len(r) == 0 {
		return nil
	}
	return append([]byte(nil), r...)
}

func (d *dec) done(what string) error {
	if d.err {
		return fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	return nil
}

// qrec is a queued URL (value of a q key, and part of an r value).
type qrec struct {
	URL, From  string
	Depth      int
	Hops       int
	Attempts   int
	Priority   uint8
	LastErr    string
	LastStatus int
	// OPIC: Cash not yet passed on, History all cash received (version 2).
	Cash, History float64
	// Val is what the last fetch saw (revisits; version 2).
	Val Validators
	// Links counts the link occurrences (pages linking to it) the URL received while
	// queued, itself included (version 3; older records read as 1).
	Links int
	// Refetch: queued again by a promotion because the capture a lost node made may not
	// have reached the output store (ImportOptions; version 4, a flags word).
	Refetch bool
}

const qrecVersion = 4

// qrec flag bits (version 4).
const qrecRefetch = 1

func (r *qrec) encode() []byte {
	e := enc{b: make([]byte, 0, 32+len(r.URL)+len(r.From)+len(r.LastErr))}
	e.u(qrecVersion)
	e.s(r.URL)
	e.s(r.From)
	e.u(uint64(r.Depth))
	e.u(uint64(r.Hops))
	e.u(uint64(r.Attempts))
	e.u(uint64(r.Priority))
	e.s(r.LastErr)
	e.i(int64(r.LastStatus))
	e.u(math.Float64bits(r.Cash))
	e.u(math.Float64bits(r.History))
	r.Val.encode(&e)
	e.u(uint64(r.Links))
	var flags uint64
	if r.Refetch {
		flags |= qrecRefetch
	}
	e.u(flags)
	return e.b
}

func decodeQrec(b []byte) (qrec, error) {
	d := dec{b: b}
	var r qrec
	ver := d.u()
	r.URL = d.s()
	r.From = d.s()
	r.Depth = int(d.u())
	r.Hops = int(d.u())
	r.Attempts = int(d.u())
	r.Priority = uint8(d.u())
	r.LastErr = d.s()
	r.LastStatus = int(d.i())
	if ver >= 2 {
		r.Cash = math.Float64frombits(d.u())
		r.History = math.Float64frombits(d.u())
		r.Val.decode(&d)
	}
	r.Links = 1
	if ver >= 3 {
		r.Links = int(d.u())
	}
	if ver >= 4 {
		r.Refetch = d.u()&qrecRefetch != 0
	}
	return r, d.done("queue record")
}

// rrec is the value of an r key: the q key to restore and the record.
func encodeR(qk []byte, r *qrec) []byte {
	e := enc{}
	e.bytes(qk)
	e.b = append(e.b, r.encode()...)
	return e.b
}

func decodeR(b []byte) (qk []byte, r qrec, err error) {
	d := dec{b: b}
	qk = d.bytes()
	if err = d.done("retry record"); err != nil {
		return nil, r, err
	}
	r, err = decodeQrec(d.b)
	return qk, r, err
}

// SeenState is the state of a URL in the seen set.
type SeenState string

// Seen states.
const (
	StateQueued  SeenState = "queued"  // admitted, waiting in a queue or for a retry
	StateFetched SeenState = "fetched" // final outcome recorded
	StateDropped SeenState = "dropped" // final, not fetched (robots, filters)
	StateDead    SeenState = "dead"    // parked as a dead letter
)

var stateCodes = []SeenState{StateQueued, StateFetched, StateDropped, StateDead}

func stateCode(s SeenState) uint64 {
	for i, v := range stateCodes {
		if v == s {
			return uint64(i)
		}
	}
	return 0
}

// SeenRecord is what the seen set holds about a URL.
type SeenRecord struct {
	URL    string
	Status int       // last HTTP status (0 if none)
	State  SeenState // queued, fetched, dropped or dead
	Reason string    // Drop reason or last error
	Meta   []byte    // opaque, from Outcome.Meta
	At     time.Time // time of the last change
	// QKey is the URL's queue key while it is queued (so cash can find it); not exported.
	QKey []byte
}

func (s *SeenRecord) encode() []byte {
	e := enc{b: make([]byte, 0, 24+len(s.URL)+len(s.Meta)+len(s.Reason))}
	e.u(stateCode(s.State))
	e.i(int64(s.Status))
	e.i(s.At.UnixNano())
	e.s(s.URL)
	e.s(s.Reason)
	e.bytes(s.Meta)
	if s.State == StateQueued && len(s.QKey) > 0 {
		e.bytes(s.QKey)
	}
	return e.b
}

// DecodeSeenRecord decodes the value of a seen key (family s) as an export or a replica
// carries it.
func DecodeSeenRecord(b []byte) (SeenRecord, error) { return decodeSeen(b) }

func decodeSeen(b []byte) (SeenRecord, error) {
	d := dec{b: b}
	var s SeenRecord
	c := d.u()
	if c < uint64(len(stateCodes)) {
		s.State = stateCodes[c]
	}
	s.Status = int(d.i())
	s.At = time.Unix(0, d.i())
	s.URL = d.s()
	s.Reason = d.s()
	s.Meta = d.bytes()
	if len(d.b) > 0 {
		s.QKey = d.bytes()
	}
	return s, d.done("seen record")
}

// DeadLetter is a URL parked after MaxAttempts transient failures or by ParkHost.
type DeadLetter struct {
	URL, Host string
	Attempts  int
	LastErr   string
	Status    int
	At        time.Time
}

func (dl *DeadLetter) encode() []byte {
	e := enc{}
	e.s(dl.URL)
	e.s(dl.Host)
	e.u(uint64(dl.Attempts))
	e.s(dl.LastErr)
	e.i(int64(dl.Status))
	e.i(dl.At.UnixNano())
	return e.b
}

func decodeDead(b []byte) (DeadLetter, error) {
	d := dec{b: b}
	var dl DeadLetter
	dl.URL = d.s()
	dl.Host = d.s()
	dl.Attempts = int(d.u())
	dl.LastErr = d.s()
	dl.Status = int(d.i())
	dl.At = time.Unix(0, d.i())
	return dl, d.done("dead letter")
}

// hostRec is the persisted host state (value of an h key).
type hostRec struct {
	DelaySet  bool
	Delay     time.Duration
	Next      int64 // unix ns, next allowed request
	Admitted  int
	Generated int
}

func (h *hostRec) encode() []byte {
	e := enc{}
	var flags uint64
	if h.DelaySet {
		flags |= 1
	}
	e.u(flags)
	e.i(int64(h.Delay))
	e.i(h.Next)
	e.u(uint64(h.Admitted))
	e.u(uint64(h.Generated))
	return e.b
}

func decodeHost(b []byte) (hostRec, error) {
	d := dec{b: b}
	var h hostRec
	h.DelaySet = d.u()&1 != 0
	h.Delay = time.Duration(d.i())
	h.Next = d.i()
	h.Admitted = int(d.u())
	h.Generated = int(d.u())
	return h, d.done("host record")
}
