package node

// The cluster's page limit (--max-pages, JobConfig.MaxPages): the fetches the whole cluster
// records, not one node's. Each member draws pages from the limit in grants through Raft
// (control.GrantPages: min(asked, the remainder, a share of it that shrinks as the
// remainder falls)), spends one on every request it sends for a page, and gives back what
// it holds when it has no work left (control.ReturnPages), so the pages go where the work
// is. A slot reserves a page before its request and keeps it only if the fetch was
// recorded; a retried or refused request gives it back. So the members record at most the
// limit in sum, and the server sees at most the limit plus the requests that were in
// flight and not recorded (a retried 503, a timeout the server answered).
//
// The limit is reached when the members' reported spending adds up to it: each member
// reports its spending with every ask and return, and every 500 ms while it waits, so all
// of them see the end within about a second and stop fetching. With --exit-when-done they
// end their run and exit 0; without it they keep running (API, extract stage), say
// limit_reached in their status, and fetch again if PATCH /v1/job raises the limit.
//
// Decisions where the design is silent:
//   - The flag seeds the job: a node started with --max-pages N writes N into the job
//     configuration if it has no limit yet, and fetches nothing until the job carries a
//     limit (else it could fetch before the limit exists). PATCH /v1/job changes it later;
//     members that already stopped at the old limit stay stopped.
//   - A restart counts every page granted to the node in earlier runs as spent: fetches
//     after its last report are not known, and counting them spent never overshoots. The
//     cost: the cluster may stop short by the unspent part of one grant (at most
//     ceil(remainder / (2 * members)) pages).
//   - A member dead past the grace period has its unspent grant reclaimed when its leases
//     are forced away (control.ForceLease); its fetches after its last report are granted
//     again, so the cluster may fetch up to one grant past the limit (RELIABILITY.md).

import (
	"context"
	"sync"
	"time"

	"github.com/crawlnode/crawlnode/control"
)

// budgetAskWait is how long a member waits before asking again after a grant of nothing,
// and how often it reports its spending while it waits.
const budgetAskWait = 500 * time.Millisecond

// pageBudget is this node's share of the cluster's page limit.
type pageBudget struct {
	n    *Node
	kick chan struct{}

	mu        sync.Mutex
	ready     bool  // base and granted were read from the replicated state
	base      int64 // pages granted in earlier runs, counted as spent
	granted   int64 // this node's grant (control.PageBudget.Granted) as last heard
	recorded  int64 // fetches recorded against the grant in this run
	reserved  int64 // pages held by requests in flight
	reported  int64 // spending last reported
	returning bool  // a ReturnPages is on its way: nothing may be reserved
}

func newPageBudget(n *Node) *pageBudget {
	return &pageBudget{n: n, kick: make(chan struct{}, 1)}
}

// limit is the cluster's page limit in effect (0: none).
func (b *pageBudget) limit() int64 { return b.n.cluster.JobConfig().MaxPages }

// spentLocked is the pages this node has used: earlier runs' grants and this run's fetches.
func (b *pageBudget) spentLocked() int64 { return b.base + b.recorded }

func (b *pageBudget) freeLocked() int64 { return b.granted - b.spentLocked() - b.reserved }

// reserve takes one page for a request. held is false when no limit applies (nothing to
// give back); ok is false when the node may not send a page request now.
func (b *pageBudget) reserve() (ok, held bool) {
	if b.limit() == 0 {
		return b.n.cfg.MaxPages == 0, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ready || b.returning || b.freeLocked() <= 0 {
		b.poke()
		return false, false
	}
	b.reserved++
	return true, true
}

// settle ends a reservation: the page is spent when its fetch was recorded.
func (b *pageBudget) settle(recorded bool) {
	b.mu.Lock()
	b.reserved--
	if recorded {
		b.recorded++
	}
	low := b.freeLocked() < int64(b.n.cfg.Concurrency)
	b.mu.Unlock()
	if low {
		b.poke()
	}
}

// available reports whether a slot may lease a URL: no limit, or a page free.
func (b *pageBudget) available() bool {
	if b.limit() == 0 {
		return b.n.cfg.MaxPages == 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ready && !b.returning && b.freeLocked() > 0
}

// limitReached reports whether the cluster has recorded its page limit.
func (b *pageBudget) limitReached() bool {
	limit := b.limit()
	if limit == 0 {
		return false
	}
	_, _, spent := b.n.cluster.PageBudget(b.n.Name())
	return spent >= limit
}

// figures returns the limit and the cluster's recorded pages as last reported, for status.
func (b *pageBudget) figures() (limit, pages int64, reached bool) {
	limit = b.limit()
	if limit == 0 {
		return 0, 0, false
	}
	_, _, spent := b.n.cluster.PageBudget(b.n.Name())
	return limit, spent, spent >= limit
}

func (b *pageBudget) poke() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// run asks for grants, gives back what an idle node holds and reports spending until ctx
// ends.
func (b *pageBudget) run(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var nextAsk, nextReport time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.kick:
		}
		if !b.n.cluster.ControlReady() {
			continue
		}
		if b.limit() == 0 {
			b.seedLimit(ctx)
			continue
		}
		b.mu.Lock()
		if !b.ready {
			share, _, _ := b.n.cluster.PageBudget(b.n.Name())
			b.base, b.granted, b.reported, b.ready = share.Granted, share.Granted, share.Granted, true
		}
		spent, free, reserved := b.spentLocked(), b.freeLocked(), b.reserved
		b.mu.Unlock()
		if b.limitReached() {
			continue
		}
		hasWork := !b.n.front.Idle() || b.n.stats.busy.Load() > 0
		now := time.Now()
		switch {
		case hasWork && free < int64(b.n.cfg.Concurrency) && now.After(nextAsk):
			ask := 2 * int64(b.n.cfg.Concurrency)
			if g, ok := b.apply(ctx, control.GrantPages{Node: b.n.Name(), Spent: spent, Ask: ask}, false); ok && g == 0 {
				nextAsk = now.Add(budgetAskWait)
			}
		case !hasWork && free > 0 && reserved == 0:
			b.apply(ctx, control.ReturnPages{Node: b.n.Name(), Spent: spent}, true)
		case spent > b.lastReported() && now.After(nextReport):
			b.apply(ctx, control.GrantPages{Node: b.n.Name(), Spent: spent}, false)
			nextReport = now.Add(budgetAskWait)
		}
	}
}

func (b *pageBudget) lastReported() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reported
}

// apply sends one budget command through Raft and takes the node's share from its answer
// (the authority: an answer lost before left the grant in the table, and the next answer
// carries it). A return blocks reservations until its answer is in.
func (b *pageBudget) apply(ctx context.Context, cmd control.Command, isReturn bool) (granted int64, ok bool) {
	b.mu.Lock()
	if isReturn {
		if b.reserved > 0 {
			b.mu.Unlock()
			return 0, false
		}
		b.returning = true
		cmd = control.ReturnPages{Node: b.n.Name(), Spent: b.spentLocked()}
	}
	b.mu.Unlock()
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	res, err := b.n.cluster.Apply(actx, cmd)
	cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	if isReturn {
		b.returning = false
	}
	if err != nil || res.Code != "" || res.Budget == nil {
		b.n.log.Warn("page budget command not applied", "command", cmd.Type(), "err", err, "code", res.Code)
		return 0, false
	}
	b.granted = res.Budget.Granted
	b.reported = max(b.reported, res.Budget.Spent)
	b.n.cluster.Refresh()
	return res.Granted, true
}

// seedLimit writes this node's --max-pages into the job configuration when the job has
// no limit yet.
func (b *pageBudget) seedLimit(ctx context.Context) {
	want := b.n.cfg.MaxPages
	if want == 0 {
		return
	}
	err := apiBackend{b.n}.UpdateJob(ctx, func(j *control.JobConfig) error {
		if j.MaxPages == 0 {
			j.MaxPages = want
		}
		return nil
	})
	if err != nil {
		b.n.log.Warn("cannot write the page limit into the job configuration yet", "max_pages", want, "err", err)
		return
	}
	if got := b.limit(); got != 0 && got != want {
		b.n.log.Warn("the cluster's page limit differs from --max-pages; the cluster's applies", "max_pages", want, "cluster_max_pages", got)
	}
}
