package dedup

import (
	"encoding/binary"
	"fmt"

	"github.com/crawlnode/crawlnode/internal/keyspace"
	"github.com/dgraph-io/badger/v4"
)

// Migrate moves the indexes a node kept before duplicate decisions were made for the
// cluster (corpus's 'c' and 'n' families, one node's own) into the partitioned family D,
// keeping every decision: an exact key becomes the D exact key of its partition, a near
// entry the D entry of its bucket (with no hash prefix: the exact copy of an old original
// is found by its exact key). A key already in D keeps its value (first writer wins). The
// old keys are deleted after their new ones are written, so a crash midway is finished by
// the next start. Keys of partitions another node holds are swept to it like any
// partition state. It returns how many keys it moved.
func Migrate(db *badger.DB) (int, error) {
	moved := 0
	for _, fam := range []byte{keyspace.CorpusExact, keyspace.CorpusNear} {
		n, err := migrateFamily(db, fam)
		moved += n
		if err != nil {
			return moved, fmt.Errorf("dedup: migrate %q keys: %w", fam, err)
		}
	}
	return moved, nil
}

func migrateFamily(db *badger.DB, fam byte) (int, error) {
	return moveKeys(db, fam, func(k, v []byte) (newKey, val []byte) {
		switch {
		case fam == keyspace.CorpusExact && len(k) > 4:
			return exactKey(ExactPartition(k[1:]), k[1:]), v
		case fam == keyspace.CorpusNear && len(k) == 12 && int(k[1]) < Tables:
			t, fp := int(k[1]), binary.BigEndian.Uint64(k[4:])
			return nearKey(NearPartition(t, block(fp, t)), t, fp), append(make([]byte, 8, 8+len(v)), v...)
		}
		return nil, nil
	})
}

// moveKeys moves every key under prefix to the key convert gives (nil: the entry is
// dropped), 1,024 keys a transaction. A new key already present keeps its value (first
// writer wins); each old key is deleted in the transaction that writes its new one, so a
// crash midway is finished by the next call. It returns how many keys it moved.
func moveKeys(db *badger.DB, prefix byte, convert func(k, v []byte) (newKey, val []byte)) (int, error) {
	moved := 0
	for {
		type kv struct{ old, new, val []byte }
		var batch []kv
		err := db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 256, Prefix: []byte{prefix}})
			defer it.Close()
			for it.Rewind(); it.Valid() && len(batch) < 1024; it.Next() {
				k := it.Item().KeyCopy(nil)
				v, err := it.Item().ValueCopy(nil)
				if err != nil {
					return err
				}
				e := kv{old: k}
				e.new, e.val = convert(k, v)
				batch = append(batch, e)
			}
			return nil
		})
		if err != nil || len(batch) == 0 {
			return moved, err
		}
		err = db.Update(func(txn *badger.Txn) error {
			for _, e := range batch {
				if e.new != nil {
					if _, found, err := get(txn, e.new); err != nil {
						return err
					} else if !found {
						if err := txn.Set(e.new, e.val); err != nil {
							return err
						}
					}
				}
				if err := txn.Delete(e.old); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return moved, err
		}
		moved += len(batch)
	}
}
