package frontier

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// boost passes OPIC cash on to URLs that are already queued (Config.Importance): their
// record's cash grows, and when it reaches a better cash bucket the record moves to the
// matching queue key (same host, depth and sequence), so it is leased sooner. Called with
// addMu held. The whole read-modify-write runs under mu, so no lease, refill, retry move
// or park can touch the same keys meanwhile: a URL that is leased, being loaded,
// committing or waiting for a retry just keeps its cash. Cash given to a URL that was
// already fetched is dropped (revisits are scheduled by change rate, not by cash).
func (f *Frontier) boost(items []prep) error {
	const maxPerTxn = 512
	if len(items) > maxPerTxn {
		items = items[:maxPerTxn]
	}
	type upd struct {
		h       *host
		old, nk []byte
		rec     qrec
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	txn := f.db.NewTransaction(true)
	defer txn.Discard()
	var ups []upd
	for _, it := range items {
		h := f.hosts[it.host]
		if h == nil || h.loading {
			continue
		}
		sk := hashKey(famSeen, it.part, it.hash)
		si, err := txn.Get(sk)
		if errors.Is(err, badger.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		sv, err := si.ValueCopy(nil)
		if err != nil {
			return err
		}
		sr, err := decodeSeen(sv)
		if err != nil || sr.State != StateQueued || len(sr.QKey) == 0 || prioOfKey(sr.QKey) == bandRevisit {
			continue
		}
		qk := sr.QKey
		if _, ok := f.committing[string(qk)]; ok {
			continue
		}
		if slices.ContainsFunc(h.leased, func(k []byte) bool { return bytes.Equal(k, qk) }) {
			continue
		}
		qi, err := txn.Get(qk)
		if errors.Is(err, badger.ErrKeyNotFound) {
			continue // waiting for a retry
		}
		if err != nil {
			return err
		}
		qv, err := qi.ValueCopy(nil)
		if err != nil {
			return err
		}
		rec, err := decodeQrec(qv)
		if err != nil {
			continue
		}
		rec.Cash += it.c.Cash
		rec.History += it.c.Cash
		nk := qk
		if nb := queueBand(rec.Priority, rec.Cash); nb < prioOfKey(qk) {
			nk = slices.Clone(qk)
			nk[len(nk)-11] = nb
			sr.QKey = nk
			if err := txn.Delete(qk); err != nil {
				return err
			}
			if err := txn.Set(sk, sr.encode()); err != nil {
				return err
			}
		}
		if err := txn.Set(nk, rec.encode()); err != nil {
			return err
		}
		ups = append(ups, upd{h: h, old: qk, nk: nk, rec: rec})
	}
	if len(ups) == 0 {
		return nil
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("frontier: pass cash: %w", err)
	}
	for _, u := range ups {
		i := slices.IndexFunc(u.h.buf, func(x item) bool { return bytes.Equal(x.key, u.old) })
		if bytes.Equal(u.old, u.nk) {
			if i >= 0 {
				u.h.buf[i].rec = u.rec
			}
			continue
		}
		if i >= 0 {
			u.h.buf = slices.Delete(u.h.buf, i, i+1)
		}
		f.insertLocked(u.h, item{key: u.nk, rec: u.rec})
		f.fixLocked(u.h)
	}
	f.signalLocked()
	return nil
}
