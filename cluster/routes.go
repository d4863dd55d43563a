package cluster

// The cluster's node-to-node endpoints under /internal/, and what the node reads of the
// cluster for its own API, metrics and crawl loop.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/gossip"
	"github.com/crawlnode/crawlnode/internal/httpjson"
	"github.com/crawlnode/crawlnode/ring"
	"github.com/crawlnode/crawlnode/urlnorm"
)

// Routes registers the cluster's node-to-node endpoints on mux: forwarded links,
// partition streams, Raft commands forwarded to the leader, the leader's applied index
// and this node's idleness. Their bodies have their own limits (forward.MaxWireBytes;
// snapshot streams are bounded per record and block; Raft commands MaxCommandBytes).
// They expect the caller's authenticated name in the request's context
// (clusterauth.PeerFrom): the node serves them behind clusterauth's Require.
func (c *Cluster) Routes(mux *http.ServeMux) {
	mux.Handle("POST "+forward.LinksPath, forward.HandlerSync(c.receiveLinks, c.linksCopied))
	mux.HandleFunc("POST /internal/v1/partitions/{p}", c.importHandler)
	mux.HandleFunc("POST /internal/v1/raft/apply", c.applyHandler)
	mux.HandleFunc("GET /internal/v1/raft/index", c.indexHandler)
	mux.HandleFunc(KeyringPath, c.keyringHandler)
	mux.HandleFunc("GET /internal/v1/idle", func(w http.ResponseWriter, r *http.Request) {
		httpjson.Write(w, http.StatusOK, c.localIdle())
	})
}

// indexHandler serves the leader's applied index after a barrier (checkSync's catch-up).
func (c *Cluster) indexHandler(w http.ResponseWriter, r *http.Request) {
	// Only the controller must exist: peers ask the leader for its index and forward
	// commands to it while it may still be joining gossip.
	if !c.ctlReady.Load() {
		httpjson.WriteError(w, http.StatusServiceUnavailable, "starting", "the node is still joining its cluster")
		return
	}
	idx, err := c.ctl.LeaderIndex(5 * time.Second)
	if err != nil {
		httpjson.WriteError(w, http.StatusConflict, "not_leader", "%v", err)
		return
	}
	httpjson.Write(w, http.StatusOK, map[string]uint64{"index": idx})
}

// MaxCommandBytes bounds a forwarded Raft command's body (413 past it).
const MaxCommandBytes = 1 << 20

// applyHandler runs a Raft command forwarded by another node (it must be the leader), if
// its authenticated sender may send it (checkForwarded).
func (c *Cluster) applyHandler(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxCommandBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			httpjson.WriteError(w, http.StatusRequestEntityTooLarge, "too_large", "a Raft command is at most %d bytes", MaxCommandBytes)
			return
		}
		httpjson.WriteError(w, http.StatusBadRequest, "bad_body", "%v", err)
		return
	}
	cmd, err := control.Decode(body)
	if err != nil {
		httpjson.WriteError(w, http.StatusBadRequest, "bad_command", "%v", err)
		return
	}
	if !c.ctlReady.Load() {
		httpjson.WriteError(w, http.StatusServiceUnavailable, "starting", "the node is still joining its cluster")
		return
	}
	if err := c.checkForwarded(callerOf(r.Context()), cmd); err != nil {
		c.log.Warn("forwarded raft command refused", "peer", callerOf(r.Context()), "err", err)
		refuse(w, err)
		return
	}
	res, err := c.ctl.Apply(cmd)
	if err != nil {
		code := http.StatusServiceUnavailable
		switch {
		case errors.Is(err, control.ErrNotLeader):
			code = http.StatusMisdirectedRequest
		case errors.Is(err, control.ErrInvalidCommand):
			// Refused by the state machine (a configuration out of bounds...): final.
			httpjson.WriteError(w, http.StatusBadRequest, "invalid", "%v", err)
			return
		}
		httpjson.WriteError(w, code, "not_applied", "%v", err)
		return
	}
	httpjson.Write(w, http.StatusOK, toApplyResult(res))
}

// Route queues candidates: those of partitions whose lease this node holds go into the
// frontier, the others into the outbox for their lease holder. It filters cands in place
// and returns the frontier's result and how many went to the outbox. The outbox is
// durable when Route returns; when it is full, Route waits for room (back-pressure on
// the fetch slot) until ctx ends.
func (c *Cluster) Route(ctx context.Context, cands []frontier.Candidate) (frontier.AddResult, int, error) {
	var remote []forward.Link
	c.routeMu.RLock()
	local := cands[:0]
	for _, cd := range cands {
		h := cd.Host
		if h == "" {
			h = urlnorm.HostKey(cd.URL)
		}
		if c.HoldsLocal(ring.PartitionOf(h)) {
			local = append(local, cd)
		} else {
			remote = append(remote, forward.Link{URL: cd.URL, Depth: forward.Clamp16(cd.Depth), Hops: forward.Clamp16(cd.Hops), Priority: cd.Priority, Cash: float32(cd.Cash)})
		}
	}
	var res frontier.AddResult
	var err error
	if len(local) > 0 {
		res, err = c.front.Add(local)
	}
	c.routeMu.RUnlock()
	if err != nil || len(remote) == 0 {
		return res, 0, err
	}
	for {
		err := c.out.Add(remote)
		if !errors.Is(err, forward.ErrFull) {
			return res, len(remote), err
		}
		select {
		case <-ctx.Done():
			return res, 0, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Self is this node's name.
func (c *Cluster) Self() string { return c.self }

// Started reports whether Start finished: gossip, Raft and the loop run.
func (c *Cluster) Started() bool { return c.started.Load() }

// Ready is closed once every partition has a lease holder.
func (c *Cluster) Ready() <-chan struct{} { return c.ready }

// Left is closed once a decommission handed off everything.
func (c *Cluster) Left() <-chan struct{} { return c.left }

// Leaving reports whether a decommission was asked for.
func (c *Cluster) Leaving() bool { return c.leaving.Load() }

// MarkDone records that this node decided the cluster is done (peers asking
// /internal/v1/idle hear it).
func (c *Cluster) MarkDone() { c.doneLocal.Store(true) }

// Gossip is the node's gossip membership (nil before Start).
func (c *Cluster) Gossip() *gossip.Gossip { return c.gossip }

// ControlReady reports whether the Raft controller is up (job commands may be applied).
func (c *Cluster) ControlReady() bool { return c.ctlReady.Load() }

// InContact reports whether this node is in contact with the Raft leader.
func (c *Cluster) InContact() bool { return c.ctlReady.Load() && c.ctl.InContact() }

// IsLeader reports whether this node leads the Raft group.
func (c *Cluster) IsLeader() bool { return c.ctlReady.Load() && c.ctl.IsLeader() }

// Leader is the Raft leader's name ("" when none is known).
func (c *Cluster) Leader() string {
	if !c.ctlReady.Load() {
		return ""
	}
	name, _ := c.ctl.Leader()
	return name
}

// Outbox is the durable queue of links for other nodes' partitions.
func (c *Cluster) Outbox() *forward.Outbox { return c.out }

// Table is this node's copy of the lease table and the member registry.
func (c *Cluster) Table() ([ring.PartitionCount]control.Lease, map[string]control.MemberInfo) {
	t := c.tab.Load()
	return t.leases, t.members
}

// JobConfig is the job configuration as this node last applied it from Raft.
func (c *Cluster) JobConfig() control.JobConfig { return c.tab.Load().config }

// PageBudget is name's share of the job's page limit, and every member's grants and
// reported spending summed, as this node last applied them from Raft.
func (c *Cluster) PageBudget(name string) (share control.PageBudget, granted, spent int64) {
	t := c.tab.Load()
	for n, b := range t.budget {
		granted += b.Granted
		spent += b.Spent
		if n == name {
			share = b
		}
	}
	return share, granted, spent
}

// Registered reports whether name is in the member registry.
func (c *Cluster) Registered(name string) bool { return registered(c.tab.Load(), name) }

// Members is gossip's view of every member, alive or not.
func (c *Cluster) Members() []gossip.Member { return c.gossip.Members() }

// Held counts the partitions whose lease this node holds.
func (c *Cluster) Held() int {
	k := 0
	for _, l := range c.tab.Load().leases {
		if l.Owner == c.self {
			k++
		}
	}
	return k
}

// Stats are this node's partition transfers: handoffs (and their wire bytes, records and
// time, pause to drop), failed handoffs, imports, leftovers swept, leases forced (leader).
type Stats struct {
	Handoffs, HandoffFails, HandoffBytes, HandoffRecords int64
	HandoffTime                                          time.Duration
	Imports, Swept, Forced                               int64
}

// Stats returns this node's transfer counters.
func (c *Cluster) Stats() Stats {
	return Stats{Handoffs: c.stats.handoffs.Load(), HandoffFails: c.stats.handoffFails.Load(),
		HandoffBytes: c.stats.handoffBytes.Load(), HandoffRecords: c.stats.handoffRecords.Load(),
		HandoffTime: time.Duration(c.stats.handoffNanos.Load()),
		Imports:     c.stats.imports.Load(), Swept: c.stats.swept.Load(), Forced: c.stats.forced.Load()}
}

// ForwardedHeader marks a read another node routed here, so it is answered locally.
const ForwardedHeader = "X-Crawlnode-Forwarded"

// GetRaw GETs url from a peer as a forwarded read (the peer answers it locally).
func (c *Cluster) GetRaw(ctx context.Context, url string) (int, []byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, "", err
	}
	req.Header.Set(ForwardedHeader, c.self)
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, body, resp.Header.Get("Content-Type"), err
}

// Do sends a node-to-node request with the cluster's client and credentials.
func (c *Cluster) Do(req *http.Request) (*http.Response, error) {
	return c.client.Do(req)
}

// The rounds of the cluster's upkeep, run now rather than at the loop's next tick: a
// test cluster in one process drives them (STYLE: a synchronous test cluster), and they
// are safe beside the loop's own rounds.

// Lead runs the leader's round (it does nothing useful on a node that is not the leader).
func (c *Cluster) Lead() { c.lead() }

// StartHandoffs starts the handoffs this node owes now; Handoffs counts those running.
func (c *Cluster) StartHandoffs(ctx context.Context) { c.startHandoffs(ctx) }

// Handoffs is how many handoffs run from this node now.
func (c *Cluster) Handoffs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.handing)
}

// SweepNow runs the sweep now, however recently it last ran.
func (c *Cluster) SweepNow(ctx context.Context) {
	c.mu.Lock()
	c.lastSweep = time.Time{}
	c.mu.Unlock()
	c.sweep(ctx)
}

// DeadSince is when the leader first saw name gone (false: it does not count it dead).
func (c *Cluster) DeadSince(name string) (time.Time, bool) {
	c.leadMu.Lock()
	defer c.leadMu.Unlock()
	t, ok := c.deadSince[name]
	return t, ok
}
