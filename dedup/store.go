package dedup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/crawlnode/crawlnode/ring"
	"github.com/dgraph-io/badger/v4"
)

// Op is one operation on a duplicate key, carried out by the key's owner.
type Op struct {
	Code byte   `json:"c"`           // OpExact, OpNear, OpDropExact, OpDropNear, OpPayloadGet, OpPayloadPut
	Part uint16 `json:"p"`           // the key's partition (ExactPartition, NearPartition)
	Hash []byte `json:"h,omitempty"` // the page's exact hash (SHA-256 of its normalized text)
	// Table and FP: near operations only (the block is FP's block of Table).
	Table uint8  `json:"t,omitempty"`
	FP    uint64 `json:"f,omitempty"`
	Ref   string `json:"r"` // the asking page: "<url>\t<fetch time ns>"
	// Revisit (OpExact, OpNear): the asking page is a revisit of a URL whose earlier
	// capture stands (corpus.DedupPage.Refetch false): a key naming the same URL at
	// another fetch time is that capture, and the page is its duplicate as on one node.
	// Without it (every first fetch of a URL) such a key names a capture whose record
	// was lost with a node: the page takes the key over instead of being its duplicate,
	// and near entries of its URL are removed. Sent only on revisits, so the usual
	// operation carries no extra byte.
	Revisit bool `json:"rv,omitempty"`
}

// Operation codes.
const (
	// OpExact: look the hash up and insert Ref if absent. Result.Ref is the page that holds
	// it when that is another page.
	OpExact = 'c'
	// OpNear: look for the closest fingerprint within MaxDistance whose lowest shared table
	// with FP is Table (other than the page itself and exact copies of it), and insert FP
	// if absent and nothing was found (or join FP's entry as a holder when an exact copy
	// holds it).
	OpNear = 'n'
	// OpDropExact, OpDropNear: delete the key if it still holds Ref (a page that turned out
	// to be a duplicate takes back what it inserted); a near entry that other exact copies
	// hold too only loses Ref.
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
// in order, its reads from one Badger snapshot with its own earlier writes laid over it,
// its writes in one batch: "look up, and insert if absent" is atomic, and two pages racing
// for one key (from this node or any other) get one original. (Reads inside a Badger
// update transaction were tried first: its iterators sort the transaction's pending writes
// each time one is made, 87% of the CPU of a 64-page batch.)
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
	v := &view{ov: map[string][]byte{}, bucket: map[string][]string{}}
	err := s.db.View(func(txn *badger.Txn) error {
		v.txn = txn
		for i := range ops {
			r, err := apply(v, &ops[i])
			if err != nil {
				return err
			}
			out[i] = r
		}
		return nil
	})
	if err == nil {
		err = v.write(s.db)
	}
	if err != nil {
		return nil, fmt.Errorf("dedup: apply: %w", err)
	}
	return out, nil
}

// view is an Apply's reads (a snapshot and its own writes over it) and writes.
type view struct {
	txn    *badger.Txn
	ov     map[string][]byte   // key -> value written by this Apply; nil: deleted
	order  []string            // keys of ov in first-write order
	bucket map[string][]string // near bucket prefix -> keys this Apply set in it
}

func (v *view) get(k []byte) ([]byte, bool, error) {
	if val, ok := v.ov[string(k)]; ok {
		return val, val != nil, nil
	}
	item, err := v.txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	val, err := item.ValueCopy(nil)
	return val, err == nil, err
}

func (v *view) put(k, val []byte, prefix []byte) {
	if _, ok := v.ov[string(k)]; !ok {
		v.order = append(v.order, string(k))
		if prefix != nil {
			v.bucket[string(prefix)] = append(v.bucket[string(prefix)], string(k))
		}
	}
	v.ov[string(k)] = val
}

// scan calls fn for every live key under prefix (a near bucket), the snapshot's first,
// then those only this Apply set; value reads the key's value.
func (v *view) scan(prefix []byte, fn func(key []byte, value func() ([]byte, error)) error) error {
	it := v.txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		if val, ok := v.ov[string(item.Key())]; ok {
			if val == nil {
				continue // deleted by this Apply
			}
			if err := fn(item.Key(), func() ([]byte, error) { return val, nil }); err != nil {
				return err
			}
			continue
		}
		if err := fn(item.Key(), func() ([]byte, error) { return item.ValueCopy(nil) }); err != nil {
			return err
		}
	}
	for _, k := range v.bucket[string(prefix)] {
		if val := v.ov[k]; val != nil {
			if _, err := v.txn.Get([]byte(k)); errors.Is(err, badger.ErrKeyNotFound) {
				if err := fn([]byte(k), func() ([]byte, error) { return val, nil }); err != nil {
					return err
				}
			} else if err != nil {
				return err
			}
		}
	}
	return nil
}

// write commits the Apply's writes in one batch.
func (v *view) write(db *badger.DB) error {
	if len(v.order) == 0 {
		return nil
	}
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range v.order {
		var err error
		if val := v.ov[k]; val != nil {
			err = wb.Set([]byte(k), val)
		} else {
			err = wb.Delete([]byte(k))
		}
		if err != nil {
			return err
		}
	}
	return wb.Flush()
}

func (o *Op) check() error {
	if isPayloadOp(o.Code) {
		return o.checkPayload()
	}
	switch {
	case o.Part >= ring.PartitionCount:
		return fmt.Errorf("%w: partition %d", ErrBadOp, o.Part)
	case o.Ref == "":
		return fmt.Errorf("%w: empty ref", ErrBadOp)
	case (o.Code == OpExact || o.Code == OpDropExact) && (len(o.Hash) == 0 || len(o.Hash) > 64 || ExactPartition(pad4(o.Hash)) != o.Part):
		return fmt.Errorf("%w: exact hash of another partition", ErrBadOp)
	case o.Code == OpNear || o.Code == OpDropNear:
		if strings.Contains(o.Ref, "\n") {
			return fmt.Errorf("%w: newline in ref", ErrBadOp) // it separates a near entry's holders
		}
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

func apply(v *view, o *Op) (Result, error) {
	if isPayloadOp(o.Code) {
		return applyPayload(v, o)
	}
	switch o.Code {
	case OpExact:
		k := exactKey(o.Part, o.Hash)
		val, found, err := v.get(k)
		if err != nil {
			return Result{}, err
		}
		if found && string(val) != o.Ref && !o.Revisit && sameURL(string(val), o.Ref) {
			found = false // its own lost capture: the refetch takes the key over
		}
		if found && string(val) != o.Ref {
			return Result{Ref: string(val)}, nil
		}
		if !found {
			v.put(k, []byte(o.Ref), nil)
		}
		return Result{Mine: true}, nil
	case OpNear:
		return applyNear(v, o)
	case OpDropExact:
		k := exactKey(o.Part, o.Hash)
		val, found, err := v.get(k)
		if err == nil && found && string(val) == o.Ref {
			v.put(k, nil, nil)
		}
		return Result{}, err
	default: // OpDropNear
		k := nearKey(o.Part, int(o.Table), o.FP)
		val, found, err := v.get(k)
		if err == nil && found && len(val) >= 8 {
			if refs := holders(val); slices.Contains(refs, o.Ref) {
				putHolders(v, k, k[:len(k)-8], val, slices.DeleteFunc(refs, func(r string) bool { return r == o.Ref }))
			}
		}
		return Result{}, err
	}
}

// holders are the pages a near entry (hash8 | ref, then "\n" ref for each exact copy that
// shares it) stands for; the first is the one a probe is told of.
func holders(val []byte) []string { return strings.Split(string(val[8:]), "\n") }

// putHolders writes the entry k (value val) with its holders now refs, or deletes it when
// none is left.
func putHolders(v *view, k, prefix, val []byte, refs []string) {
	if len(refs) == 0 {
		v.put(k, nil, prefix)
		return
	}
	v.put(k, append(slices.Clip(val[:8]), strings.Join(refs, "\n")...), prefix)
}

// applyNear scans the bucket of (Table, FP's block) for the closest other original whose
// lowest shared table with FP is Table, then inserts FP (hash8 | ref) if absent and
// nothing was found. An entry with FP of an exact copy of the page (same hash8) gains
// the page as a holder instead, when nothing was found: the exact key decides which of
// the copies is the original, and the entry must outlive the duplicates' taking back.
func applyNear(v *view, o *Op) (Result, error) {
	t := int(o.Table)
	prefix := nearPrefix(o.Part, t, block(o.FP, t))
	own := hash8(o.Hash)
	best := Result{Dist: MaxDistance + 1}
	present := false
	var shared, sharedVal []byte // FP's entry held by exact copies of the page
	err := v.scan(prefix, func(key []byte, value func() ([]byte, error)) error {
		fp := binary.BigEndian.Uint64(key[len(prefix):])
		d := hamming(o.FP, fp)
		match := d <= MaxDistance && lowestShared(o.FP, fp) == t
		if !match && fp != o.FP {
			return nil
		}
		val, err := value()
		if err != nil || len(val) < 8 {
			return err
		}
		refs := holders(val)
		if !o.Revisit {
			lost := func(r string) bool { return r != o.Ref && sameURL(r, o.Ref) }
			if slices.ContainsFunc(refs, lost) {
				// Its own lost capture: removed, so no page is ever found a duplicate of
				// it; the refetch enters the bucket in its place.
				refs = slices.DeleteFunc(refs, lost)
				putHolders(v, slices.Clone(key), prefix, val, refs)
				if len(refs) == 0 {
					return nil
				}
				val = append(slices.Clip(val[:8]), strings.Join(refs, "\n")...)
			}
		}
		mine := slices.Contains(refs, o.Ref)
		copyOf := binary.BigEndian.Uint64(val[:8]) == own && len(o.Hash) > 0
		if fp == o.FP {
			present = true // never overwritten: the first page with a fingerprint keeps it
			best.Mine = best.Mine || mine
			if copyOf && !mine {
				shared, sharedVal = slices.Clone(key), val
			}
		}
		if !match || mine {
			return nil // the page itself (redone after a crash) is no duplicate of itself
		}
		if copyOf {
			return nil // an exact copy: the exact key decides between the two
		}
		if d < best.Dist {
			best.Ref, best.FP, best.Dist = refs[0], fp, d
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	// A page that found a match here does not enter this bucket: were it retried (a
	// failed round), the two pages of a pair could otherwise each find the other here.
	switch {
	case best.Ref != "" || best.Mine:
	case !present:
		val := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(o.Ref)), own)
		v.put(nearKey(o.Part, t, o.FP), append(val, o.Ref...), prefix)
		best.Mine = true
	case shared != nil:
		putHolders(v, shared, prefix, sharedVal, append(holders(sharedVal), o.Ref))
		best.Mine = true
	}
	if best.Ref == "" {
		best.Dist = 0
	}
	return best, nil
}

// sameURL says whether two refs ("<url>\t<fetch time ns>") name the same URL.
func sameURL(a, b string) bool {
	ua, _, _ := strings.Cut(a, "\t")
	ub, _, _ := strings.Cut(b, "\t")
	return ua == ub
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
