package frontier

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// View is a read snapshot of the Badger DB a frontier lives in (Config.DB), and of
// every other key in it (the outbox's): exports from one View are one consistent cut.
// A URL queued in one partition by a page recorded fetched in another (a redirect, a
// link) is in the cut if the fetch is; a replica built from separate snapshots could
// show the page fetched and not the link, and lose the link when it is promoted.
//
// A View hides the Badger transaction it reads from, so that callers outside the
// frontier never hold one. It is not safe for concurrent use; Close releases the
// snapshot (Badger keeps every version it may read until then).
type View struct {
	txn *badger.Txn
}

// OpenView takes a read snapshot of db. The caller closes it.
func OpenView(db *badger.DB) *View { return &View{txn: db.NewTransaction(false)} }

// View takes a read snapshot of the frontier's DB. The caller closes it.
func (f *Frontier) View() *View { return OpenView(f.db) }

// Close releases the snapshot. Idempotent.
func (v *View) Close() {
	if v.txn != nil {
		v.txn.Discard()
		v.txn = nil
	}
}

// Version is the Badger version the snapshot reads at: every commit at or below it is
// in it, none above. What the exports return as the next call's since.
func (v *View) Version() uint64 { return v.txn.ReadTs() }

// ExportSince calls fn, prefix by prefix from one read snapshot, for every key under the
// prefixes written or deleted after Badger version since (0: every live key), newest
// value per key, deleted=true for a deletion; fn's family is the key's first byte. It
// returns the snapshot's read version (the next call's since).
func ExportSince(db *badger.DB, since uint64, fn func(family byte, key, value []byte, deleted bool) error, prefixes ...[]byte) (uint64, error) {
	v := OpenView(db)
	defer v.Close()
	return v.ExportSince(since, fn, prefixes...)
}

// ExportSince is the package's ExportSince reading from the view's snapshot.
func (v *View) ExportSince(since uint64, fn func(family byte, key, value []byte, deleted bool) error, prefixes ...[]byte) (uint64, error) {
	return exportSinceTxn(v.txn, since, nil, fn, prefixes...)
}

// ExportPartitionSince is Frontier.ExportPartitionSince reading from the view's
// snapshot: exports of several partitions (and of other keys of the DB) from one View
// are one consistent cut.
func (v *View) ExportPartitionSince(p uint16, since uint64, fn func(family byte, key, value []byte, deleted bool) error) (uint64, error) {
	prefixes := make([][]byte, len(exportFamilies))
	for i, fam := range exportFamilies {
		prefixes[i] = famPrefix(fam, p)
	}
	readTs, err := v.ExportSince(since, fn, prefixes...)
	if err != nil {
		return 0, fmt.Errorf("frontier: export partition %d since %d: %w", p, since, err)
	}
	return readTs, nil
}

// ExportKeys calls fn, in the order of keys, for each key as the snapshot holds it: its
// value, or deleted=true (value nil) when the snapshot has no live version of it. Given
// exactly the keys that have a version in (since, v.Version()], it reports what
// ExportSince(since, ...) reports for them, without stepping over the versions of every
// other key (what a replica round does with the keys it saw committed; see the replica
// package's doc, "What a round reads").
func (v *View) ExportKeys(keys [][]byte, fn func(family byte, key, value []byte, deleted bool) error) error {
	for _, k := range keys {
		item, err := v.txn.Get(k)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			err = fn(k[0], k, nil, true)
		case err != nil:
			return fmt.Errorf("frontier: export keys: %w", err)
		default:
			err = item.Value(func(val []byte) error { return fn(k[0], k, val, false) })
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ExportPartitionsSince is ExportPartitionSince for every partition in parts at once,
// all from one since > 0: one iterator per family over all partitions instead of one
// per partition and family. Positioning an iterator (a seek in every memtable and every
// table newer than since) is most of the cost of a small delta, and a replica round
// exports a hundred partitions or more, most with a handful of changes. fn receives
// each change with its partition; a partition's changes come in the order
// ExportPartitionSince gives them (family by family, keys in order). Keys of partitions
// not in parts are skipped. It returns the snapshot's read version.
func (v *View) ExportPartitionsSince(parts []uint16, since uint64, fn func(p uint16, family byte, key, value []byte, deleted bool) error) (uint64, error) {
	if since == 0 {
		return 0, errors.New("frontier: export partitions: since must be > 0 (a full copy goes partition by partition)")
	}
	want := make([]bool, 1<<16)
	for _, p := range parts {
		want[p] = true
	}
	prefixes := make([][]byte, len(exportFamilies))
	for i, fam := range exportFamilies {
		prefixes[i] = []byte{fam}
	}
	keep := func(k []byte) bool { return len(k) >= 3 && want[binary.BigEndian.Uint16(k[1:3])] }
	readTs, err := exportSinceTxn(v.txn, since, keep, func(fam byte, k, val []byte, deleted bool) error {
		return fn(binary.BigEndian.Uint16(k[1:3]), fam, k, val, deleted)
	}, prefixes...)
	if err != nil {
		return readTs, fmt.Errorf("frontier: export partitions since %d: %w", since, err)
	}
	return readTs, nil
}

// exportSinceTxn is View.ExportSince that skips, value unread, every key keep refuses
// (nil keeps all).
func exportSinceTxn(txn *badger.Txn, since uint64, keep func(key []byte) bool, fn func(family byte, key, value []byte, deleted bool) error, prefixes ...[]byte) (uint64, error) {
	readTs := txn.ReadTs()
	for _, prefix := range prefixes {
		// With since > 0 every version is read: deletions are versions too.
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, SinceTs: since, AllVersions: since > 0})
		var last []byte
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()
			if last != nil && bytes.Equal(k, last) {
				continue // an older version of the key just sent
			}
			last = append(last[:0], k...)
			if keep != nil && !keep(k) {
				continue
			}
			var err error
			switch {
			case item.IsDeletedOrExpired() && since == 0:
			case item.IsDeletedOrExpired():
				err = fn(k[0], k, nil, true)
			default:
				err = item.Value(func(v []byte) error { return fn(k[0], k, v, false) })
			}
			if err != nil {
				it.Close()
				return readTs, err
			}
		}
		it.Close()
	}
	return readTs, nil
}
