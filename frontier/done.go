package frontier

import (
	"bytes"
	"fmt"
	"slices"
	"time"
)

// Done records the outcome of a lease. Only now does the URL leave its queue (Fetched,
// Drop, Retry) or become leasable again (Requeue). Politeness: with PerHost 1 the host's next
// request waits at least its delay after this response, too; RetryAfter pushes it further.
func (f *Frontier) Done(l *Lease, o Outcome) error {
	var err error
	f.DoneBatch([]Completion{{Lease: l, Outcome: o}}, func(_ int, e error) { err = e })
	return err
}

// Completion is one lease's outcome, for DoneBatch.
type Completion struct {
	Lease   *Lease
	Outcome Outcome
}

// donePrep is what DoneBatch decided for one completion before writing it.
type donePrep struct {
	l           *Lease
	o           Outcome
	dead        bool
	revisitNext bool
	due         int64
	group       []op
	ok          bool
}

// DoneBatch records many leases' outcomes, as Done does each, in one Badger transaction
// (split only between leases when Badger's batch limit is near) and one pass over the
// in-memory state: a group commit of completions. onErr, if not nil, is called with the
// index of each completion that was not recorded (its lease stays outstanding and may be
// given to Done again).
func (f *Frontier) DoneBatch(cs []Completion, onErr func(i int, err error)) {
	fail := func(i int, err error) {
		if onErr != nil {
			onErr(i, err)
		}
	}
	if f.isClosed() {
		for i := range cs {
			fail(i, ErrClosed)
		}
		return
	}
	now := f.cfg.Now()
	rc := f.recrawl.Load()
	ps := make([]donePrep, len(cs))
	writes := 0
	for i := range cs {
		l, o := cs[i].Lease, cs[i].Outcome
		if l == nil || l.issuer != f {
			fail(i, ErrBadLease)
			continue
		}
		if o.Kind < Fetched || o.Kind > Drop {
			fail(i, fmt.Errorf("%w: %d", ErrBadOutcome, o.Kind))
			continue
		}
		if !l.done.CompareAndSwap(false, true) {
			fail(i, ErrLeaseDone)
			continue
		}
		p := &ps[i]
		p.l, p.o, p.ok = l, o, true
		f.prepDone(p, now, rc)
		if p.group != nil {
			writes++
		}
	}
	if writes > 0 {
		b := newBatch(f.db)
		var idx []int // completion index of each group, in order
		var err error
		for i := range ps {
			if !ps[i].ok || ps[i].group == nil {
				continue
			}
			if err = b.group(ps[i].group...); err != nil {
				break
			}
			idx = append(idx, i)
		}
		if err == nil {
			err = b.commit()
		}
		b.discard()
		if err != nil {
			// Groups past the last commit were not written: their leases stay outstanding.
			written := map[int]bool{}
			for _, i := range idx[:min(b.commited, len(idx))] {
				written[i] = true
			}
			for i := range ps {
				if ps[i].ok && ps[i].group != nil && !written[i] {
					ps[i].ok = false
					ps[i].l.done.Store(false)
					fail(i, fmt.Errorf("frontier: done: %w", err))
				}
			}
		}
	}

	var persist []string
	f.mu.Lock()
	for i := range ps {
		if ps[i].ok {
			f.applyDoneLocked(&ps[i], now)
			if ps[i].o.RetryAfter > 0 {
				persist = append(persist, ps[i].l.Host)
			}
		}
	}
	f.signalLocked()
	f.mu.Unlock()
	if len(persist) > 0 {
		if err := f.persistHosts(persist...); err != nil {
			for i := range ps {
				if ps[i].ok && ps[i].o.RetryAfter > 0 {
					fail(i, fmt.Errorf("frontier: done: persist host: %w", err))
				}
			}
		}
	}
}

// prepDone builds the Badger writes of one completion.
func (f *Frontier) prepDone(p *donePrep, now time.Time, rc *Recrawl) {
	l, o := p.l, p.o
	hash := URLHash(l.URL)
	rec := l.rec
	switch o.Kind {
	case Fetched, Drop:
		st := StateFetched
		if o.Kind == Drop {
			st = StateDropped
		}
		sr := SeenRecord{URL: l.URL, Status: o.Status, State: st, Reason: o.Err, Meta: o.Meta, At: now}
		p.group = []op{{k: l.key, del: true}, {k: hashKey(famSeen, l.part, hash), v: sr.encode()}}
		if o.Kind == Fetched && rc.Enabled {
			// Schedule the next visit: same host queue, revisit band, a new sequence.
			nr := qrec{URL: rec.URL, From: rec.From, Depth: rec.Depth, Priority: rec.Priority, History: rec.History}
			nr.Val = Observe(rec.Val, o.Version, now)
			iv := NextInterval(*rc, nr.Val, f.relativeImportance(rec.History))
			nr.Val.Interval = int64(iv)
			p.due = now.Add(iv).UnixNano()
			qk := qKey(l.part, l.Host, bandRevisit, rec.Depth, f.seq.Add(1))
			p.group = append(p.group, op{k: rKey(l.part, p.due, f.seq.Add(1)|revisitBit), v: encodeR(qk, &nr)})
			p.revisitNext = true
		}
	case Retry:
		rec.Attempts++
		rec.LastErr, rec.LastStatus = o.Err, o.Status
		if parkAsDead(rec.Attempts, f.cfg.MaxAttempts, o.Park) {
			p.dead = true
			dl := DeadLetter{URL: l.URL, Host: l.Host, Attempts: rec.Attempts, LastErr: o.Err, Status: o.Status, At: now}
			sr := SeenRecord{URL: l.URL, Status: o.Status, State: StateDead, Reason: o.Err, Meta: o.Meta, At: now}
			p.group = []op{{k: l.key, del: true}, {k: hashKey(famDead, l.part, hash), v: dl.encode()}, {k: hashKey(famSeen, l.part, hash), v: sr.encode()}}
		} else {
			p.due = now.Add(f.backoff(rec.Attempts)).UnixNano()
			rk := rKey(l.part, p.due, f.seq.Add(1))
			p.group = []op{{k: l.key, del: true}, {k: rk, v: encodeR(l.key, &rec)}}
		}
	}
}

// applyDoneLocked updates the in-memory state for a recorded completion.
func (f *Frontier) applyDoneLocked(p *donePrep, now time.Time) {
	l, o := p.l, p.o
	h := f.hostLocked(l.Host)
	if i := slices.IndexFunc(h.leased, func(k []byte) bool { return bytes.Equal(k, l.key) }); i >= 0 {
		h.leased = slices.Delete(h.leased, i, i+1)
	}
	h.inflight--
	f.inflight--
	if l.released {
		h.released = max(0, h.released-1)
	}
	switch {
	case o.Kind == Requeue:
		f.insertLocked(h, item{key: l.key, rec: l.rec})
	default:
		h.queued--
		f.queued--
		h.fetched++
		if prioOfKey(l.key) == bandRevisit {
			h.revisits--
			f.revisitQueued--
		}
		switch {
		case p.dead:
			f.dead++
		case o.Kind == Retry:
			f.retryPending++
			f.noteRetryLocked(l.part, p.due)
		case p.revisitNext:
			f.revisitPending++
			f.noteRetryLocked(l.part, p.due)
		}
	}
	if !l.released {
		f.politeLocked(h, l, o, now.UnixNano())
	}
	f.fixLocked(h)
}

// politeLocked moves the host's politeness clock when a lease's request is over: back to
// where it was if no request was sent, else (PerHost 1) at least the delay past the
// response's end; RetryAfter pushes it further.
func (f *Frontier) politeLocked(h *host, l *Lease, o Outcome, nowNs int64) {
	h.nextAt = nextAfterRequest(h.nextAt, requestOver{
		now: nowNs, prevNext: l.prevNext, leaseNext: l.leaseNext, delay: f.delayOf(h), perHost: f.cfg.PerHost,
		noRequest: o.NoRequest, finished: o.Finished, retryAfter: o.RetryAfter,
	})
}

// Release says that a lease's request is over (o as Done will get it; its politeness
// fields, Finished, NoRequest and RetryAfter, count now): the host's politeness clock
// moves as Done would move it, and the host may be leased again after its delay, while
// this URL stays leased, and in its queue, until Done records it. So the time a caller
// spends making the page's links and archive record durable (a group commit) does not
// hold the host: a host gets its turns at the pace of its delay, as long as the frontier
// has its other URLs. Release after Done, a second Release, or a lease the host no longer
// holds (its partition was handed off) are no-ops. Optional: Done alone does both.
func (f *Frontier) Release(l *Lease, o Outcome) {
	if l == nil || l.issuer != f || l.done.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hosts[l.Host]
	if l.released || l.done.Load() || h == nil ||
		!slices.ContainsFunc(h.leased, func(k []byte) bool { return bytes.Equal(k, l.key) }) {
		return
	}
	l.released = true
	h.released++
	f.politeLocked(h, l, o, f.cfg.Now().UnixNano())
	f.fixLocked(h)
	f.signalLocked()
}

// backoff is full jitter over min(BackoffMax, BackoffBase * 2^(attempt-1)) (retryBackoff).
func (f *Frontier) backoff(attempt int) time.Duration {
	return retryBackoff(attempt, f.cfg.BackoffBase, f.cfg.BackoffMax, f.cfg.Rand())
}
