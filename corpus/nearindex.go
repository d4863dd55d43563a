package corpus

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// Near-duplicate index after Manku, Jain and Das Sarma, "Detecting Near-Duplicates for Web
// Crawling" (WWW 2007), for k = 3: the 64-bit fingerprint is cut into 4 blocks of 16 bits. Two
// fingerprints at Hamming distance <= 3 differ in at most 3 blocks, so by pigeonhole they agree
// exactly on at least one block. Table i maps block i to the fingerprints having that block; a
// lookup probes each of the 4 tables once with the query's block and checks the candidates in
// that bucket by Hamming distance. So the index finds every stored fingerprint within distance 3
// with at most 4 probes.

// NearTables is the number of tables (and 16-bit blocks) of the index.
const NearTables = 4

// NearMaxDistance is the largest Hamming distance at which two SimHashes are near-duplicates.
const NearMaxDistance = 3

// NearMatch is a stored fingerprint found by NearIndex.Lookup.
type NearMatch struct {
	Fingerprint uint64
	// Ref is what was stored with the fingerprint. The stage stores "<url>\t<fetch time>" so that a
	// page redone after a crash does not find itself (see the package doc); DuplicateOf is the URL.
	Ref      string
	Distance int
}

// NearIndex finds stored SimHashes within NearMaxDistance of a query.
type NearIndex interface {
	// Lookup returns the closest stored fingerprint within NearMaxDistance of h (ties: the first
	// found, tables in order 0..3), whether there is one, and the number of table probes made
	// (never more than NearTables).
	Lookup(h uint64) (m NearMatch, found bool, probes int, err error)
	// Insert stores h with ref. Inserting the same fingerprint again replaces its ref.
	Insert(h uint64, ref string) error
}

func nearBlock(h uint64, table int) uint16 { return uint16(h >> (16 * uint(table))) }

// MemNearIndex is an in-memory NearIndex, safe for concurrent use.
type MemNearIndex struct {
	mu     sync.RWMutex
	tables [NearTables]map[uint16][]memNearEntry
}

type memNearEntry struct {
	h   uint64
	ref string
}

// NewMemNearIndex returns an empty in-memory index.
func NewMemNearIndex() *MemNearIndex {
	m := &MemNearIndex{}
	for i := range m.tables {
		m.tables[i] = make(map[uint16][]memNearEntry)
	}
	return m
}

// Lookup implements NearIndex.
func (m *MemNearIndex) Lookup(h uint64) (NearMatch, bool, int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	best := NearMatch{Distance: NearMaxDistance + 1}
	probes := 0
	for t := 0; t < NearTables; t++ {
		probes++
		for _, e := range m.tables[t][nearBlock(h, t)] {
			if d := Hamming(h, e.h); d < best.Distance {
				best = NearMatch{Fingerprint: e.h, Ref: e.ref, Distance: d}
			}
		}
		if best.Distance == 0 {
			break
		}
	}
	return best, best.Distance <= NearMaxDistance, probes, nil
}

// Insert implements NearIndex.
func (m *MemNearIndex) Insert(h uint64, ref string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for t := 0; t < NearTables; t++ {
		b := nearBlock(h, t)
		bucket := m.tables[t][b]
		replaced := false
		for i := range bucket {
			if bucket[i].h == h {
				bucket[i].ref = ref
				replaced = true
				break
			}
		}
		if !replaced {
			m.tables[t][b] = append(bucket, memNearEntry{h: h, ref: ref})
		}
	}
	return nil
}

// BadgerNearIndex is a NearIndex in Badger under the 'n' key family, so it survives restarts:
//
//	'n' <table:1> <block:2 BE> <fingerprint:8 BE>  ->  ref
//
// One probe is one prefix scan of 'n'<table><block>. Safe for concurrent use.
type BadgerNearIndex struct {
	db *badger.DB
}

// NewBadgerNearIndex returns the index stored in db.
func NewBadgerNearIndex(db *badger.DB) *BadgerNearIndex { return &BadgerNearIndex{db: db} }

func nearKey(h uint64, table int) []byte {
	k := make([]byte, 1+1+2+8)
	k[0] = prefixNear
	k[1] = byte(table)
	binary.BigEndian.PutUint16(k[2:], nearBlock(h, table))
	binary.BigEndian.PutUint64(k[4:], h)
	return k
}

// Lookup implements NearIndex.
func (b *BadgerNearIndex) Lookup(h uint64) (NearMatch, bool, int, error) {
	best := NearMatch{Distance: NearMaxDistance + 1}
	probes := 0
	err := b.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		for t := 0; t < NearTables && best.Distance > 0; t++ {
			probes++
			prefix := nearKey(h, t)[:4]
			opts.Prefix = prefix
			it := txn.NewIterator(opts)
			for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
				item := it.Item()
				fp := binary.BigEndian.Uint64(item.Key()[4:])
				d := Hamming(h, fp)
				if d >= best.Distance {
					continue
				}
				ref, err := item.ValueCopy(nil)
				if err != nil {
					it.Close()
					return err
				}
				best = NearMatch{Fingerprint: fp, Ref: string(ref), Distance: d}
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return NearMatch{}, false, probes, fmt.Errorf("corpus: near index lookup: %w", err)
	}
	return best, best.Distance <= NearMaxDistance, probes, nil
}

// Insert implements NearIndex.
func (b *BadgerNearIndex) Insert(h uint64, ref string) error {
	if err := b.db.Update(func(txn *badger.Txn) error { return b.InsertTxn(txn, h, ref) }); err != nil {
		return fmt.Errorf("corpus: near index insert: %w", err)
	}
	return nil
}

// InsertTxn is Insert inside the caller's transaction (one commit for the stage's exact and
// near index entries).
func (b *BadgerNearIndex) InsertTxn(txn *badger.Txn, h uint64, ref string) error {
	for t := 0; t < NearTables; t++ {
		if err := txn.Set(nearKey(h, t), []byte(ref)); err != nil {
			return err
		}
	}
	return nil
}
