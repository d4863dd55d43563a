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
	for len(items) > maxPerTxn {
		if err := f.boost(items[:maxPerTxn]); err != nil {
			return err
		}
		items = items[maxPerTxn:]
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
		if h == nil {
			continue
		}
		if h.loading {
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
		rec.Cash += it.cash
		rec.History += it.cash
		rec.Links += it.links
		nk := qk
		if nb := queueBand(rec.Priority, h.importance(rec.Cash, rec.Links, h.pagesAdding())); nb < prioOfKey(qk) {
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
		i := slices.IndexFunc(u.h.prefetch, func(x item) bool { return bytes.Equal(x.key, u.old) })
		if bytes.Equal(u.old, u.nk) {
			if i >= 0 {
				u.h.prefetch[i].rec = u.rec
			}
			continue
		}
		if i >= 0 {
			u.h.prefetch = slices.Delete(u.h.prefetch, i, i+1)
		}
		f.insertLocked(u.h, item{key: u.nk, rec: u.rec})
		f.fixLocked(u.h)
	}
	f.signalLocked()
	return nil
}

// teleport is the cash a fetched page is expected to pass on to its site's pages, in units
// of a seed's cash: PageRank's 1 - d.
const teleport = 0.15

// pageLinks is the number of links a typical page shares its cash among: the forecast's
// scale (only the ratio of forecasts between sites, and to real cash, matters).
const pageLinks = 16

// importance is a queued URL's estimated importance, which orders the queues in OPIC mode:
// its cash (the in-links seen so far, each weighted by its page's cash), plus a forecast
// for a site's navigation links. On a single pass OPIC sees only the in-links of pages
// already fetched, and a site's navigation pages hold much of its PageRank: every page of
// the site links to them, so their share grows with the site's size. A URL linked from
// more than half of the site's pages whose links the frontier has (pages; links counts
// the URL's in-link occurrences) is navigation, and is forecast teleport/pageLinks from
// every page the site is known to have (admitted): a large site's navigation outranks a
// small site's, and both outrank pages linked once. The forecast follows the site's size,
// not its link density: a site's first pages fetched are its home and listing pages,
// whose many links say little of how many pages will link to the navigation, while the
// distinct URLs the site has shown are the best early measure of its size (a listing
// page of a large site shows many). Until a site's second page, every link of its first
// page may be navigation: all get the forecast alike, so they keep the page's order (a
// home page lists its sections first) rather than follow small differences of cash.
// Without cash (breadth-first mode) it is 0. Called with mu held.
func (h *host) importance(cash float64, links, pages int) float64 {
	if !(cash > 0) {
		return cash
	}
	if 2*links > pages {
		cash += teleport * float64(h.admitted) / pageLinks
	}
	return cash
}

// pagesAdding is importance's page count for links being added: the site's fetched pages
// and the page (or pages) whose links these are. pagesKnown is the count for a URL
// already queued, when the pages fetched have given their links.
func (h *host) pagesAdding() int { return h.fetched + 1 }
func (h *host) pagesKnown() int  { return max(h.fetched, 1) }
