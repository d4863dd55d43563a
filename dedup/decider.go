package dedup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crawlnode/crawlnode/corpus"
)

// Cluster is what the Decider needs of the node's cluster membership.
type Cluster interface {
	Leases
	// Self is this node's name.
	Self() string
	// OwnerOf is the lease holder of p and its epoch, as this node last heard ("" none).
	OwnerOf(p uint16) (owner string, epoch uint64)
	// InternalURL is a peer's internal base URL.
	InternalURL(peer string) (string, bool)
	// Do sends a node-to-node request with the cluster's credentials.
	Do(req *http.Request) (*http.Response, error)
}

// Config configures a Decider.
type Config struct {
	Store   *Store  // this node's store (required)
	Cluster Cluster // required
	// Timeout bounds one round trip to an owner. Default 10s.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Decider implements corpus.Decider over the cluster: each key is decided by the lease
// holder of its partition, in process when that is this node, else in one request per
// owner and round.
type Decider struct {
	cfg Config
	st  Stats
}

// Stats are the Decider's counters (this run).
type Stats struct {
	Pages, Batches           atomic.Int64 // pages decided, Decide calls that answered
	LocalOps, RemoteOps      atomic.Int64 // operations carried out here / sent to owners
	Requests, Failures       atomic.Int64 // requests sent to owners, failed rounds (any owner)
	BytesSent, BytesReceived atomic.Int64 // request and answer bodies
	DecideNanos              atomic.Int64 // wall time inside Decide
}

// New returns a Decider.
func New(cfg Config) (*Decider, error) {
	if cfg.Store == nil || cfg.Cluster == nil {
		return nil, errors.New("dedup: Store and Cluster are required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Decider{cfg: cfg}, nil
}

// Stats returns the counters.
func (d *Decider) Stats() *Stats { return &d.st }

// opsPerPage: the exact key and one near key per table.
const opsPerPage = 1 + Tables

// Decide implements corpus.Decider in two rounds. First, for every page, the exact key
// (look up, insert if absent) and the four near buckets (closest original decided in
// that bucket, insert if absent). A page is an exact duplicate if its hash names another
// page, else a near duplicate of the closest match, else an original. Second, a duplicate
// takes back the keys it inserted in the first round ("only originals enter the
// indexes").
func (d *Decider) Decide(ctx context.Context, pages []corpus.DedupPage) ([]corpus.DedupVerdict, error) {
	start := time.Now()
	defer func() { d.st.DecideNanos.Add(int64(time.Since(start))) }()
	ops := make([]Op, 0, opsPerPage*len(pages))
	for _, p := range pages {
		ops = append(ops, Op{Code: OpExact, Part: ExactPartition(pad4(p.Hash)), Hash: p.Hash, Ref: p.Ref, Revisit: !p.Refetch})
		for t := 0; t < Tables; t++ {
			ops = append(ops, Op{Code: OpNear, Part: NearPartition(t, block(p.SimHash, t)), Hash: p.Hash[:min(8, len(p.Hash))], Table: uint8(t), FP: p.SimHash, Ref: p.Ref, Revisit: !p.Refetch})
		}
	}
	res, err := d.exec(ctx, ops)
	if err != nil {
		return nil, err
	}
	out := make([]corpus.DedupVerdict, len(pages))
	var undo []Op
	for i := range pages {
		r := res[i*opsPerPage : (i+1)*opsPerPage]
		out[i] = verdict(r)
		if out[i].Of == "" {
			continue
		}
		for j, o := range ops[i*opsPerPage : (i+1)*opsPerPage] {
			if r[j].Mine {
				o.Code = map[byte]byte{OpExact: OpDropExact, OpNear: OpDropNear}[o.Code]
				undo = append(undo, o)
			}
		}
	}
	if len(undo) > 0 {
		if _, err := d.exec(ctx, undo); err != nil {
			return nil, err
		}
	}
	d.st.Pages.Add(int64(len(pages)))
	d.st.Batches.Add(1)
	return out, nil
}

// verdict decides one page from its first-round results (exact, then tables 0..3).
func verdict(r []Result) corpus.DedupVerdict {
	if r[0].Ref != "" {
		return corpus.DedupVerdict{Of: r[0].Ref, Kind: corpus.DupExact}
	}
	best := -1
	for t := 1; t < len(r); t++ {
		if r[t].Ref != "" && (best < 0 || r[t].Dist < r[best].Dist) {
			best = t
		}
	}
	if best < 0 {
		return corpus.DedupVerdict{}
	}
	return corpus.DedupVerdict{Of: r[best].Ref, Kind: corpus.DupNear, Distance: r[best].Dist}
}

// exec carries out ops at their owners (one request per owner, all at once; this node's
// share in process) and returns their results in order.
func (d *Decider) exec(ctx context.Context, ops []Op) ([]Result, error) {
	type group struct {
		parts map[uint16]uint64
		idx   []int
	}
	groups := map[string]*group{}
	for i := range ops {
		owner, epoch := d.cfg.Cluster.OwnerOf(ops[i].Part)
		if owner == "" {
			d.st.Failures.Add(1)
			return nil, fmt.Errorf("%w: partition %d", ErrNoOwner, ops[i].Part)
		}
		g := groups[owner]
		if g == nil {
			g = &group{parts: map[uint16]uint64{}}
			groups[owner] = g
		}
		g.parts[ops[i].Part] = epoch
		g.idx = append(g.idx, i)
	}
	out := make([]Result, len(ops))
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for owner, g := range groups {
		sub := make([]Op, len(g.idx))
		for j, i := range g.idx {
			sub[j] = ops[i]
		}
		run := func() {
			res, err := d.run(ctx, owner, g.parts, sub)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			for j, i := range g.idx {
				out[i] = res[j]
			}
		}
		if owner == d.cfg.Cluster.Self() {
			run()
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); run() }()
	}
	wg.Wait()
	if firstErr != nil {
		d.st.Failures.Add(1)
		return nil, firstErr
	}
	return out, nil
}

// run carries out one owner's share: here under the leases, or in requests of at most
// MaxWireOps operations.
func (d *Decider) run(ctx context.Context, owner string, parts map[uint16]uint64, ops []Op) ([]Result, error) {
	if owner == d.cfg.Cluster.Self() {
		var res []Result
		refused, err := d.cfg.Cluster.WithLeases(parts, func() error {
			var err error
			res, err = d.cfg.Store.Apply(ops)
			return err
		})
		if len(refused) > 0 {
			return nil, fmt.Errorf("%w: partitions %v held here by a handoff or lost", ErrNotOwner, refused)
		}
		d.st.LocalOps.Add(int64(len(ops)))
		return res, err
	}
	base, ok := d.cfg.Cluster.InternalURL(owner)
	if !ok {
		return nil, fmt.Errorf("%w: no address for peer %q", ErrSend, owner)
	}
	out := make([]Result, 0, len(ops))
	for len(ops) > 0 {
		n := min(len(ops), MaxWireOps)
		req := &Request{From: d.cfg.Cluster.Self(), Ops: ops[:n]}
		seen := map[uint16]bool{}
		for _, o := range req.Ops {
			if !seen[o.Part] {
				seen[o.Part] = true
				req.Parts = append(req.Parts, PartEpoch{P: o.Part, E: parts[o.Part]})
			}
		}
		rctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
		res, sent, recv, err := post(rctx, d.cfg.Cluster.Do, base, owner, req)
		cancel()
		d.st.Requests.Add(1)
		d.st.BytesSent.Add(int64(sent))
		d.st.BytesReceived.Add(int64(recv))
		if err != nil {
			return nil, err
		}
		d.st.RemoteOps.Add(int64(n))
		out = append(out, res...)
		ops = ops[n:]
	}
	return out, nil
}
