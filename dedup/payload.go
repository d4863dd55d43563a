package dedup

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/crawlnode/crawlnode/internal/keyspace"
	"github.com/crawlnode/crawlnode/ring"
	"github.com/dgraph-io/badger/v4"
)

// Payload keys (WARC revisit records), in family D beside the text keys:
//
//	D|part(2)|'p'|digest   -> Original (JSON): the first full response record with that payload
//
// digest is the WARC payload digest as the record carries it ("sha1:BASE32").
const kindPayload = 'p'

// Payload operation codes (Op.Code; Op.Hash is the digest, Op.Part PayloadPartition of it).
const (
	// OpPayloadGet: look the digest up. Result.Ref is the Original's encoding ("" none).
	// It inserts nothing: a payload is registered only once its full record is written.
	OpPayloadGet = 'g'
	// OpPayloadPut: register Op.Ref (an encoded Original whose full response record is
	// written) if the digest has none, or if the one it has names the same URL (the
	// original's URL archived again, e.g. refetched after its node was lost: the newer
	// record is the one known to exist). Result.Mine tells whether the key names Op.Ref
	// after the op; otherwise Result.Ref is the Original it keeps.
	OpPayloadPut = 'P'
)

// MaxDigestLen bounds a payload digest on the wire ("sha1:" and 32 base32 digits is 37).
const MaxDigestLen = 128

// PayloadPartition is the partition that decides a payload digest: FNV-1a of the digest
// modulo the partition count.
func PayloadPartition(digest string) uint16 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(digest))
	return uint16(h.Sum32() % ring.PartitionCount)
}

func payloadKey(part uint16, digest []byte) []byte {
	k := make([]byte, 0, 4+len(digest))
	k = append(k, keyspace.DedupKeys, byte(part>>8), byte(part), kindPayload)
	return append(k, digest...)
}

// Original is the first full response record archived with a payload: what a revisit
// record refers to (URL and Date: WARC-Refers-To-Target-URI and -Date) and where the
// record is (Node's WARC file File at Offset, Length bytes).
type Original struct {
	URL    string    `json:"u"`
	Date   time.Time `json:"d"`
	Node   string    `json:"n"`
	File   string    `json:"f"`
	Offset int64     `json:"o"`
	Length int64     `json:"l,omitempty"`
}

// Encode is the Original as stored and sent (Op.Ref, Result.Ref).
func (o Original) Encode() string {
	b, _ := json.Marshal(o)
	return string(b)
}

// DecodeOriginal reads an encoded Original.
func DecodeOriginal(s string) (Original, error) {
	var o Original
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		return o, fmt.Errorf("%w: payload original: %v", ErrBadOp, err)
	}
	if o.URL == "" {
		return o, fmt.Errorf("%w: payload original without a URL", ErrBadOp)
	}
	return o, nil
}

func isPayloadOp(code byte) bool { return code == OpPayloadGet || code == OpPayloadPut }

func (o *Op) checkPayload() error {
	switch {
	case o.Part >= ring.PartitionCount:
		return fmt.Errorf("%w: partition %d", ErrBadOp, o.Part)
	case len(o.Hash) == 0 || len(o.Hash) > MaxDigestLen || PayloadPartition(string(o.Hash)) != o.Part:
		return fmt.Errorf("%w: payload digest of another partition", ErrBadOp)
	case o.Ref == "":
		return fmt.Errorf("%w: empty ref", ErrBadOp)
	case o.Code == OpPayloadPut:
		if _, err := DecodeOriginal(o.Ref); err != nil {
			return err
		}
	}
	return nil
}

// applyPayload carries out a payload op inside an Apply (its view: atomic with the rest).
func applyPayload(v *view, o *Op) (Result, error) {
	k := payloadKey(o.Part, o.Hash)
	val, found, err := v.get(k)
	if err != nil {
		return Result{}, err
	}
	if o.Code == OpPayloadGet {
		return Result{Ref: string(val)}, nil
	}
	if found && string(val) != o.Ref {
		have, err := DecodeOriginal(string(val))
		mine, _ := DecodeOriginal(o.Ref)
		if err == nil && have.URL != mine.URL {
			return Result{Ref: string(val)}, nil // another page is the original
		}
	}
	if !found || string(val) != o.Ref {
		v.put(k, []byte(o.Ref), nil)
	}
	return Result{Mine: true}, nil
}

// LookupPayload reads the Original of digest from this node's keys without taking the
// Apply lock: a read of one key from one snapshot needs no ordering with other ops, and
// whatever it answers is safe to act on (none: a full record, always correct; found: a
// record that was written). The single-node path and an owner's own lookups take it.
func (s *Store) LookupPayload(digest string) (Original, bool, error) {
	k := payloadKey(PayloadPartition(digest), []byte(digest))
	var val []byte
	err := s.db.View(func(txn *badger.Txn) error {
		v, found, err := get(txn, k)
		if found {
			val = v
		}
		return err
	})
	if err != nil || val == nil {
		return Original{}, false, err
	}
	o, err := DecodeOriginal(string(val))
	return o, err == nil, err
}

// MigratePayloads moves the payload index a node kept before payloads were decided for
// the cluster (family keyspace.NodePayload, 'p': digest -> the node's first record) into
// the partitioned family D, naming self as the node that holds the records. A key already
// in D keeps its value (first writer wins); an entry that does not decode is dropped (the
// next copy of that payload is written in full). Old keys are deleted after their new ones
// are written, so a crash midway is finished by the next start. It returns how many keys
// it moved.
func MigratePayloads(db *badger.DB, self string) (int, error) {
	type old struct {
		URL  string    `json:"u"`
		Date time.Time `json:"d"`
		Loc  struct {
			File           string
			Offset, Length int64
		} `json:"l"`
	}
	moved, err := moveKeys(db, keyspace.NodePayload, func(k, v []byte) (newKey, val []byte) {
		var o old
		if digest := k[1:]; len(digest) > 0 && len(digest) <= MaxDigestLen && json.Unmarshal(v, &o) == nil && o.URL != "" {
			return payloadKey(PayloadPartition(string(digest)), digest),
				[]byte(Original{URL: o.URL, Date: o.Date, Node: self, File: o.Loc.File, Offset: o.Loc.Offset, Length: o.Loc.Length}.Encode())
		}
		return nil, nil
	})
	if err != nil {
		return moved, fmt.Errorf("dedup: migrate payload keys: %w", err)
	}
	return moved, nil
}

// errNoPayloadOwner is a lookup whose partition has no lease holder (yet).
var errNoPayloadOwner = errors.New("dedup: payload partition has no owner")
