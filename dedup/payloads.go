package dedup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// PayloadConfig configures Payloads.
type PayloadConfig struct {
	Store   *Store  // this node's store (required)
	Cluster Cluster // required
	// Bound is how long a fetch slot waits for a lookup's answer from another node before
	// it writes a full response record instead. Default DefaultPayloadBound.
	Bound time.Duration
	// Timeout bounds one request to an owner (lookups and registrations). Default 5s.
	Timeout time.Duration
	// Backoff is how long lookups skip an owner after a request to it failed (they fall
	// back at once instead of waiting Bound each). Default 2s.
	Backoff time.Duration
	// MaxQueue bounds the operations waiting for one owner. Default 8192.
	MaxQueue int
	Logger   *slog.Logger
}

// DefaultPayloadBound: a healthy owner answers a batch in about a millisecond on a LAN
// (BENCHMARKS.md), so 250 ms covers its GC pauses and a busy Badger compaction, while an
// owner that is gone (or cut off) costs a fetch slot at most this once per Backoff: the
// slot's own request and the host's crawl delay (1 s by default) are longer, and the
// other slots keep fetching meanwhile.
const DefaultPayloadBound = 250 * time.Millisecond

// Payloads decides identical payloads for the whole cluster: before a response is
// archived, Lookup asks the digest's owner for the first full record with that payload
// (a revisit record then refers to it); once a full record is written, Register tells the
// owner, which keeps the first it hears of. The owner's answers are in process when it is
// this node; others are batched per owner, maxSenders requests in flight per
// owner, everything that queued meanwhile in the next one.
type Payloads struct {
	cfg PayloadConfig
	st  PayloadStats

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the senders

	mu     sync.Mutex
	queues map[string]*payloadQueue
	closed bool
}

// PayloadStats are the counters of Payloads (this run).
type PayloadStats struct {
	Lookups                atomic.Int64 // lookups asked (local and remote)
	LocalLookups           atomic.Int64 // answered in process (this node owns the digest)
	Found                  atomic.Int64 // lookups that named an original (a revisit record)
	Missed                 atomic.Int64 // lookups that found none (a full record, the original)
	FallbackTimeout        atomic.Int64 // lookups not answered within Bound: full record
	FallbackError          atomic.Int64 // lookups failed (no owner, owner refused, down, queue full): full record
	Registered             atomic.Int64 // payloads registered as originals
	LostRace               atomic.Int64 // registrations that found another original: a second full record
	RegisterFailed         atomic.Int64 // registrations that never reached the owner
	Requests, Failures     atomic.Int64 // requests to owners, failed requests
	BytesSent, BytesRecv   atomic.Int64 // request and answer bodies
	RemoteOps              atomic.Int64 // operations sent to owners
	LookupNanos, WaitNanos atomic.Int64 // wall time in Lookup (all), of which waiting for remote answers
}

type payloadQueue struct {
	items     []*payloadPending
	senders   int // goroutines sending this owner's queue (at most maxSenders)
	downUntil time.Time
}

// maxSenders is how many requests may be in flight to one owner. One batches best: on
// the loaded 2-core machine of BENCHMARKS.md a 64-slot fetch stage kept 0.63 of its pages
// per second with one, 0.45 with two (more requests, more CPU per page; one run each).
const maxSenders = 1

type payloadPending struct {
	op      Op
	epoch   uint64
	done    chan payloadAnswer // lookups only
	gaveUp  atomic.Bool        // the waiting slot fell back: do not send
	retries int                // registrations: sends that failed
}

type payloadAnswer struct {
	res Result
	err error
}

// NewPayloads returns a Payloads.
func NewPayloads(cfg PayloadConfig) (*Payloads, error) {
	if cfg.Store == nil || cfg.Cluster == nil {
		return nil, errors.New("dedup: Store and Cluster are required")
	}
	if cfg.Bound <= 0 {
		cfg.Bound = DefaultPayloadBound
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 2 * time.Second
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 8192
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Payloads{cfg: cfg, queues: map[string]*payloadQueue{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// Stats returns the counters.
func (p *Payloads) Stats() *PayloadStats { return &p.st }

// Errors of Lookup (each means: write a full response record).
var (
	ErrPayloadTimeout = errors.New("dedup: payload owner did not answer in time")
	ErrPayloadBusy    = errors.New("dedup: payload owner unavailable")
)

// maxRegisterRetries is how often a registration is sent again after a failed request
// before it is given up (and counted in RegisterFailed).
const maxRegisterRetries = 5

// Lookup returns the first full record archived with digest, anywhere in the cluster.
// found false with a nil error: none yet. An error (no owner, the owner did not answer
// within Bound, refused, is backing off) means "unknown": the caller writes a full record,
// which is always correct, and it is counted as a fallback.
func (p *Payloads) Lookup(ctx context.Context, digest string) (Original, bool, error) {
	start := time.Now()
	defer func() { p.st.LookupNanos.Add(int64(time.Since(start))) }()
	p.st.Lookups.Add(1)
	part := PayloadPartition(digest)
	owner, epoch := p.cfg.Cluster.OwnerOf(part)
	if owner == "" {
		p.st.FallbackError.Add(1)
		return Original{}, false, fmt.Errorf("%w: partition %d", errNoPayloadOwner, part)
	}
	if owner == p.cfg.Cluster.Self() {
		// In process, no lease check: whatever the store answers is safe (see LookupPayload).
		p.st.LocalLookups.Add(1)
		o, ok, err := p.cfg.Store.LookupPayload(digest)
		switch {
		case err != nil:
			p.st.FallbackError.Add(1)
		case ok:
			p.st.Found.Add(1)
		default:
			p.st.Missed.Add(1)
		}
		return o, ok, err
	}
	it := &payloadPending{op: Op{Code: OpPayloadGet, Part: part, Hash: []byte(digest), Ref: "?"}, epoch: epoch, done: make(chan payloadAnswer, 1)}
	if err := p.enqueue(owner, it, true); err != nil {
		p.st.FallbackError.Add(1)
		return Original{}, false, err
	}
	t := time.NewTimer(p.cfg.Bound)
	defer t.Stop()
	wait := time.Now()
	defer func() { p.st.WaitNanos.Add(int64(time.Since(wait))) }()
	select {
	case a := <-it.done:
		if a.err != nil {
			p.st.FallbackError.Add(1)
			return Original{}, false, a.err
		}
		if a.res.Ref == "" {
			p.st.Missed.Add(1)
			return Original{}, false, nil
		}
		o, err := DecodeOriginal(a.res.Ref)
		if err != nil {
			p.st.FallbackError.Add(1)
			return Original{}, false, err
		}
		p.st.Found.Add(1)
		return o, true, nil
	case <-t.C:
		it.gaveUp.Store(true)
		p.st.FallbackTimeout.Add(1)
		return Original{}, false, fmt.Errorf("%w: %s after %s", ErrPayloadTimeout, owner, p.cfg.Bound)
	case <-ctx.Done():
		it.gaveUp.Store(true)
		p.st.FallbackError.Add(1)
		return Original{}, false, ctx.Err()
	}
}

// PayloadRecord is a full response record just written: its digest and where it is.
type PayloadRecord struct {
	Digest   string
	Original Original
}

// Register tells the digests' owners that these full records are written, so that later
// identical payloads refer to them. It does not wait for remote owners (their share is
// queued and sent in the background, retried a few times); this node's share is applied
// at once, in one Apply. A registration that finds another original (two copies fetched
// at once) is counted in LostRace; one that never reaches its owner in RegisterFailed.
func (p *Payloads) Register(recs []PayloadRecord) {
	var local []Op
	parts := map[uint16]uint64{}
	self := p.cfg.Cluster.Self()
	for _, r := range recs {
		part := PayloadPartition(r.Digest)
		op := Op{Code: OpPayloadPut, Part: part, Hash: []byte(r.Digest), Ref: r.Original.Encode()}
		if err := op.check(); err != nil {
			p.st.RegisterFailed.Add(1)
			p.cfg.Logger.Debug("payload register", "digest", r.Digest, "err", err)
			continue
		}
		owner, epoch := p.cfg.Cluster.OwnerOf(part)
		switch owner {
		case "":
			p.st.RegisterFailed.Add(1)
		case self:
			local = append(local, op)
			parts[part] = epoch
		default:
			if err := p.enqueue(owner, &payloadPending{op: op, epoch: epoch}, false); err != nil {
				p.st.RegisterFailed.Add(1)
			}
		}
	}
	if len(local) == 0 {
		return
	}
	var res []Result
	refused, err := p.cfg.Cluster.WithLeases(parts, func() error {
		var err error
		res, err = p.cfg.Store.Apply(local)
		return err
	})
	if len(refused) > 0 || err != nil {
		// A lease moved or a handoff holds a partition: this batch is not registered. Later
		// copies get full records (correct, counted).
		p.st.RegisterFailed.Add(int64(len(local)))
		p.cfg.Logger.Debug("payload register here", "refused", refused, "err", err)
		return
	}
	p.countPuts(res)
}

func (p *Payloads) countPuts(res []Result) {
	for _, r := range res {
		if r.Mine {
			p.st.Registered.Add(1)
		} else {
			p.st.LostRace.Add(1)
		}
	}
}

// enqueue queues it for owner and starts the owner's sender if none runs. A lookup is
// refused while the owner backs off after a failure.
func (p *Payloads) enqueue(owner string, it *payloadPending, lookup bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("%w: closed", ErrPayloadBusy)
	}
	q := p.queues[owner]
	if q == nil {
		q = &payloadQueue{}
		p.queues[owner] = q
	}
	if lookup && time.Now().Before(q.downUntil) {
		return fmt.Errorf("%w: %s failed recently", ErrPayloadBusy, owner)
	}
	if len(q.items) >= p.cfg.MaxQueue {
		return fmt.Errorf("%w: %d operations queued for %s", ErrPayloadBusy, len(q.items), owner)
	}
	q.items = append(q.items, it)
	if q.senders < maxSenders {
		q.senders++
		p.wg.Add(1)
		go p.send(owner, q)
	}
	return nil
}

// send empties owner's queue, one request at a time, until it finds it empty.
func (p *Payloads) send(owner string, q *payloadQueue) {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		if wait := time.Until(q.downUntil); wait > 0 && !p.closed {
			// Only registrations are queued while the owner backs off.
			p.mu.Unlock()
			select {
			case <-time.After(wait):
			case <-p.ctx.Done():
			}
			p.mu.Lock()
		}
		if p.closed {
			for _, it := range q.items {
				p.fail(it, fmt.Errorf("%w: closed", ErrPayloadBusy))
			}
			q.items, q.senders = nil, q.senders-1
			p.mu.Unlock()
			return
		}
		var batch []*payloadPending
		i := 0
		for ; i < len(q.items) && len(batch) < MaxWireOps; i++ {
			if it := q.items[i]; !it.gaveUp.Load() {
				batch = append(batch, it)
			}
		}
		q.items = q.items[i:]
		if len(batch) == 0 {
			q.items, q.senders = q.items[:0], q.senders-1
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		err := p.post(owner, batch)
		if err == nil {
			continue
		}
		p.st.Failures.Add(1)
		p.cfg.Logger.Debug("payload decisions", "owner", owner, "ops", len(batch), "err", err)
		p.mu.Lock()
		q.downUntil = time.Now().Add(p.cfg.Backoff)
		var again []*payloadPending
		for _, it := range batch {
			if it.done == nil && it.retries < maxRegisterRetries && len(q.items)+len(again) < p.cfg.MaxQueue {
				it.retries++
				again = append(again, it)
				continue
			}
			p.fail(it, err)
		}
		q.items = append(again, q.items...)
		p.mu.Unlock()
	}
}

// fail answers a lookup with err, or counts a registration as failed.
func (p *Payloads) fail(it *payloadPending, err error) {
	if it.done != nil {
		it.done <- payloadAnswer{err: err}
		return
	}
	p.st.RegisterFailed.Add(1)
}

// post sends one batch to owner and hands out the answers.
func (p *Payloads) post(owner string, batch []*payloadPending) error {
	base, ok := p.cfg.Cluster.InternalURL(owner)
	if !ok {
		return fmt.Errorf("%w: no address for peer %q", ErrSend, owner)
	}
	req := &Request{From: p.cfg.Cluster.Self(), Ops: make([]Op, len(batch))}
	seen := map[uint16]bool{}
	for i, it := range batch {
		req.Ops[i] = it.op
		if !seen[it.op.Part] {
			seen[it.op.Part] = true
			req.Parts = append(req.Parts, PartEpoch{P: it.op.Part, E: it.epoch})
		}
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.Timeout)
	defer cancel()
	res, sent, recv, err := post(ctx, p.cfg.Cluster.Do, base, owner, req)
	p.st.Requests.Add(1)
	p.st.BytesSent.Add(int64(sent))
	p.st.BytesRecv.Add(int64(recv))
	if err != nil {
		return err
	}
	p.st.RemoteOps.Add(int64(len(batch)))
	var puts []Result
	for i, it := range batch {
		if it.done != nil {
			it.done <- payloadAnswer{res: res[i]}
		} else {
			puts = append(puts, res[i])
		}
	}
	p.countPuts(puts)
	return nil
}

// Drain waits up to d for the queued operations to be sent (registrations at the end of
// a crawl); it returns whether every queue emptied.
func (p *Payloads) Drain(d time.Duration) bool {
	end := time.Now().Add(d)
	for {
		p.mu.Lock()
		busy := false
		for _, q := range p.queues {
			busy = busy || q.senders > 0
		}
		p.mu.Unlock()
		if !busy {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Close stops taking operations, ends the requests in flight and waits for the senders:
// registrations still queued are counted in RegisterFailed (later copies of those
// payloads get full records).
func (p *Payloads) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}
