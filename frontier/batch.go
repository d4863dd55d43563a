package frontier

import (
	"github.com/dgraph-io/badger/v4"
)

type op struct {
	k, v []byte
	del  bool
}

// batch writes groups of ops; a group never spans two transactions, so what must be atomic
// (seen + queued, delete + dead letter) is. It commits early when Badger's size limits near.
// A transaction is opened when its first op comes, not after each commit: opening and
// discarding one registers and retires a read mark with Badger's watermark goroutine (a
// channel send that wakes it), and every Add that wrote paid for a second transaction it
// never used.
type batch struct {
	db               *badger.DB
	txn              *badger.Txn
	size, count      int64
	maxSize, maxCnt  int64
	groups, commited int // groups added, groups durably committed
}

func newBatch(db *badger.DB) *batch {
	return &batch{db: db, maxSize: db.MaxBatchSize() / 2, maxCnt: db.MaxBatchCount() / 2}
}

func (b *batch) group(ops ...op) error {
	var sz int64
	for _, o := range ops {
		sz += int64(len(o.k)+len(o.v)) + 32
	}
	if b.count > 0 && (b.count+int64(len(ops)) >= b.maxCnt || b.size+sz >= b.maxSize) {
		if err := b.commit(); err != nil {
			return err
		}
	}
	if b.txn == nil {
		b.txn = b.db.NewTransaction(true)
	}
	for _, o := range ops {
		var err error
		if o.del {
			err = b.txn.Delete(o.k)
		} else {
			err = b.txn.Set(o.k, o.v)
		}
		if err != nil {
			return err
		}
	}
	b.size += sz
	b.count += int64(len(ops))
	b.groups++
	return nil
}

func (b *batch) commit() error {
	var err error
	if b.txn != nil {
		err = b.txn.Commit()
		b.txn = nil
	}
	b.size, b.count = 0, 0
	if err != nil {
		return err
	}
	b.commited = b.groups
	return nil
}

func (b *batch) discard() {
	if b.txn != nil {
		b.txn.Discard()
	}
}

// persistHosts writes the host records of names (their current state).
func (f *Frontier) persistHosts(names ...string) error {
	f.hostRecMu.Lock()
	defer f.hostRecMu.Unlock()
	f.mu.Lock()
	ops := make([]op, 0, len(names))
	for _, n := range names {
		if h := f.hosts[n]; h != nil {
			r := h.rec()
			ops = append(ops, op{k: hKey(h.part, n), v: r.encode()})
		}
	}
	f.mu.Unlock()
	b := newBatch(f.db)
	defer b.discard()
	for _, o := range ops {
		if err := b.group(o); err != nil {
			return err
		}
	}
	return b.commit()
}
