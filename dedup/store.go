package dedup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/crawlnode/crawlnode/ring"
	"github.com/dgraph-io/badger/v4"
)

// Op is one operation on a duplicate key, carried out by the key's owner.
type Op struct {
	Code byte   `json:"c"`           // OpExact, OpNear, OpDropExact, OpDropNear
	Part uint16 `json:"p"`           // the key's partition (ExactPartition, NearPartition)
	Hash []byte `json:"h,omitempty"` // the page's exact hash (SHA-256 of its normalized text)
	// Table and FP: near operations only (the block is FP's block of Table).
	Table uint8  `json:"t,omitempty"`
	FP    uint64 `json:"f,omitempty"`
	Ref   string `json:"r"` // the asking page: "<url>\t<fetch time ns>"
}

// Operation codes.
const (
	// OpExact: look the hash up and insert Ref if absent. Result.Ref is the page that holds
	// it when that is another page.
	OpExact = 'c'
	// OpNear: look for the closest fingerprint within MaxDistance whose lowest shared table
	// with FP is Table (other than the page itself and exact copies of it), and insert FP
	// if absent and nothing was found.
	OpNear = 'n'
	// OpDropExact, OpDropNear: delete the key if it still holds Ref (a page that turned out
	// to be a duplicate takes back what it inserted).
	OpDropExact = 'x'
	OpDropNear  = 'm'
)

// Result is what an Op found.
type Result struct {
	Ref  string `json:"r,omitempty"` // the other page found ("" none)
	FP   uint64 `json:"f,omitempty"` // near: its fingerprint
	Dist int    `json:"d,omitempty"` // near: its distance
	Mine bool   `json:"m,omitempty"` // the key holds the asking page after the op
}

// ErrBadOp is an operation that cannot be carried out (a malformed request).
var ErrBadOp = errors.New("dedup: bad operation")

// Store carries out operations on the duplicate keys this node owns. One Apply at a time,
// each in one Badger transaction, in order: "look up, and insert if absent" is atomic, and
// two pages racing for one key (from this node or any other) get one original.
type Store struct {
	db *badger.DB
	mu sync.Mutex
}

// NewStore returns the store over db.
func NewStore(db *badger.DB) *Store { return &Store{db: db} }

// Apply carries out ops in order and returns one Result each.
func (s *Store) Apply(ops []Op) ([]Result, error) {
	for i := range ops {
		if err := ops[i].check(); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Result, len(ops))
	for done := 0; done < len(ops); {
		n := 0
		err := s.db.Update(func(txn *badger.Txn) error {
			for i := done; i < len(ops); i++ {
				r, err := apply(txn, &ops[i])
				if errors.Is(err, badger.ErrTxnTooBig) && n > 0 {
					return nil // commit what fits, go on in a new transaction
				}
				if err != nil {
					return err
				}
				out[i] = r
				n++
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("dedup: apply: %w", err)
		}
		done += n
	}
	return out, nil
}

func (o *Op) check() error {
	switch {
	case o.Part >= ring.PartitionCount:
		return fmt.Errorf("%w: partition %d", ErrBadOp, o.Part)
	case o.Ref == "":
		return fmt.Errorf("%w: empty ref", ErrBadOp)
	case (o.Code == OpExact || o.Code == OpDropExact) && (len(o.Hash) == 0 || len(o.Hash) > 64 || ExactPartition(pad4(o.Hash)) != o.Part):
		return fmt.Errorf("%w: exact hash of another partition", ErrBadOp)
	case o.Code == OpNear || o.Code == OpDropNear:
		if o.Table >= Tables || NearPartition(int(o.Table), block(o.FP, int(o.Table))) != o.Part {
			return fmt.Errorf("%w: near key of another partition", ErrBadOp)
		}
	case o.Code != OpExact && o.Code != OpDropExact:
		return fmt.Errorf("%w: code %q", ErrBadOp, o.Code)
	}
	return nil
}

func pad4(h []byte) []byte {
	if len(h) >= 4 {
		return h
	}
	return append(append([]byte(nil), h...), make([]byte, 4-len(h))...)
}

func apply(txn *badger.Txn, o *Op) (Result, error) {
	switch o.Code {
	case OpExact:
		k := exactKey(o.Part, o.Hash)
		v, found, err := get(txn, k)
		if err != nil || (found && string(v) != o.Ref) {
			return Result{Ref: string(v)}, err
		}
		if !found {
			err = txn.Set(k, []byte(o.Ref))
		}
		return Result{Mine: true}, err
	case OpNear:
		return applyNear(txn, o)
	case OpDropExact:
		return Result{}, dropIf(txn, exactKey(o.Part, o.Hash), []byte(o.Ref))
	default: // OpDropNear
		k := nearKey(o.Part, int(o.Table), o.FP)
		v, found, err := get(txn, k)
		if err != nil || !found || len(v) < 8 || string(v[8:]) != o.Ref {
			return Result{}, err
		}
		return Result{}, txn.Delete(k)
	}
}

// applyNear scans the bucket of (Table, FP's block) for the closest other original whose
// lowest shared table with FP is Table, then inserts FP (hash8 | ref) if absent.
func applyNear(txn *badger.Txn, o *Op) (Result, error) {
	t := int(o.Table)
	prefix := nearPrefix(o.Part, t, block(o.FP, t))
	own := hash8(o.Hash)
	best := Result{Dist: MaxDistance + 1}
	present := false
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		fp := binary.BigEndian.Uint64(item.Key()[len(prefix):])
		d := hamming(o.FP, fp)
		match := d <= MaxDistance && lowestShared(o.FP, fp) == t
		if !match && fp != o.FP {
			continue
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			it.Close()
			return Result{}, err
		}
		if len(v) < 8 {
			continue
		}
		ref := string(v[8:])
		if fp == o.FP {
			present = true // never overwritten: the first page with a fingerprint keeps it
			best.Mine = best.Mine || ref == o.Ref
		}
		if !match || ref == o.Ref {
			continue // the page itself (redone after a crash) is no duplicate of itself
		}
		if binary.BigEndian.Uint64(v[:8]) == own && len(o.Hash) > 0 {
			continue // an exact copy: the exact key decides between the two
		}
		if d < best.Dist {
			best.Ref, best.FP, best.Dist = ref, fp, d
		}
	}
	it.Close()
	// A page that found a match here does not enter this bucket: were it retried (a
	// failed round), the two pages of a pair could otherwise each find the other here.
	if !present && best.Ref == "" {
		v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(o.Ref)), own)
		if err := txn.Set(nearKey(o.Part, t, o.FP), append(v, o.Ref...)); err != nil {
			return Result{}, err
		}
		best.Mine = true
	}
	if best.Ref == "" {
		best.Dist = 0
	}
	return best, nil
}

func get(txn *badger.Txn, k []byte) ([]byte, bool, error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v, err := item.ValueCopy(nil)
	return v, err == nil, err
}

func dropIf(txn *badger.Txn, k, want []byte) error {
	v, found, err := get(txn, k)
	if err != nil || !found || !bytes.Equal(v, want) {
		return err
	}
	return txn.Delete(k)
}
