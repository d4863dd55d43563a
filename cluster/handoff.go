package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/internal/httpjson"
	"github.com/crawlnode/crawlnode/ring"
	"github.com/crawlnode/crawlnode/snapshot"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// maxHandoffs is how many partitions one node hands off at once.
const maxHandoffs = 4

// handoffRest is how long the hosts of a partition received from its lease holder wait
// past the import before their first request here. The imported next-allowed times were
// set by the sender's clock, which may be ahead of or behind this node's, and the
// sender's last response of a host may still be leaving the server when the lease
// moves: a CI scale-out saw a new owner's first request to a host arrive 28 ms before
// the server's handler of the old owner's last request to it returned. A handoff
// happens once per partition and membership change, so the second costs little.
const handoffRest = time.Second

// startHandoffs starts handoffs of partitions this node holds whose ring owner is another
// live, registered node (planHandoffs).
func (c *Cluster) startHandoffs(ctx context.Context) {
	if !c.ctl.InContact() {
		return
	}
	c.handoffMu.Lock() // a test may start a round while the loop does
	defer c.handoffMu.Unlock()
	for _, h := range planHandoffs(c.planInput(), maxHandoffs) {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if err := c.handoff(ctx, h.Partition, h.To, h.Epoch); err != nil && ctx.Err() == nil {
				c.stats.handoffFails.Add(1)
				c.log.Warn("handoff failed; will retry", "partition", h.Partition, "epoch", h.Epoch, "peer", h.To, "err", err)
			}
		}()
	}
}

// handoff moves partition p (held here at epoch) to target.
func (c *Cluster) handoff(ctx context.Context, p uint16, target string, epoch uint64) error {
	if err := c.Acquire(ctx, p, true, 30*time.Second); err != nil {
		return err
	}
	defer c.Release(p, true)
	if owner, e := c.OwnerOf(p); owner != c.self || e != epoch {
		return nil // the table moved on meanwhile
	}
	start := c.now()
	st, err := c.sendPartition(ctx, p, target, epoch)
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	move := control.AssignLeases{Moves: []control.LeaseMove{{Partition: p, From: c.self, To: target, Epoch: epoch}}, At: c.now()}
	res, err := c.Apply(ctx, move)
	// The partition stays held until this node's own copy of the lease table shows where
	// the lease went. Releasing it on a lost reply, or while this node's Raft log lags
	// the leader's, would let it fetch p again while the new owner already does (seen in
	// a scale-out under load: three requests to one host from two nodes at once).
	for {
		if err == nil && res.Code != "" && res.Code != "lease_conflict" {
			return fmt.Errorf("move lease: %s", res.Error) // refused: nothing moved
		}
		if c.waitLeaseChange(ctx, p, epoch, 2*time.Second) {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			c.log.Warn("lease move unconfirmed; asking again", "partition", p, "epoch", epoch, "peer", target, "err", err)
		}
		// Compare-and-set: a repeat of a move that was committed is a conflict, not a
		// second move.
		res, err = c.Apply(ctx, move)
	}
	if owner, e := c.OwnerOf(p); owner != target || e != epoch+1 {
		c.log.Warn("lease of a partition being handed off went elsewhere", "partition", p, "owner", owner, "epoch", e)
		return nil // someone else's move won; the sweep sends what is left here
	}
	// The rest, then drop. A failure leaves the partition for the sweep.
	var derr error
	for try := 0; try < 10 && ctx.Err() == nil; try++ {
		var st2 snapshot.Stats
		if st2, derr = c.sendPartition(ctx, p, target, epoch+1); derr == nil {
			st.Bytes += st2.Bytes
			st.Records += st2.Records
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if derr == nil {
		if err := c.front.DropPartition(p); err != nil {
			c.log.Warn("drop handed-off partition; the sweep retries", "partition", p, "err", err)
		}
	} else {
		c.log.Warn("final stream of a handed-off partition failed; the sweep retries", "partition", p, "peer", target, "err", derr)
	}
	took := c.now().Sub(start)
	c.stats.handoffs.Add(1)
	c.stats.handoffBytes.Add(st.Bytes)
	c.stats.handoffRecords.Add(st.Records)
	c.stats.handoffNanos.Add(int64(took))
	c.log.Info("partition handed off", "partition", p, "epoch", epoch+1, "peer", target, "records", st.Records, "bytes", st.Bytes, "took", took.Round(time.Millisecond))
	return nil
}

// waitLeaseChange waits up to d for this node's lease table to show p no longer held
// here at epoch.
func (c *Cluster) waitLeaseChange(ctx context.Context, p uint16, epoch uint64, d time.Duration) bool {
	deadline := c.now().Add(d)
	for {
		c.Refresh()
		if owner, e := c.OwnerOf(p); owner != c.self || e != epoch {
			return true
		}
		if c.now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sendPartition streams partition p to peer, tagged with epoch, and returns once the peer
// has imported it.
func (c *Cluster) sendPartition(ctx context.Context, p uint16, peer string, epoch uint64) (snapshot.Stats, error) {
	base, ok := c.InternalURL(peer)
	if !ok {
		return snapshot.Stats{}, fmt.Errorf("no address for %s", peer)
	}
	pr, pw := io.Pipe()
	var st snapshot.Stats
	werr := make(chan error, 1)
	go func() {
		var err error
		st, err = snapshot.Write(pw, snapshot.Header{Partition: p, Epoch: epoch, From: c.self, To: peer, Created: c.now()},
			func(fn func(family byte, key, value []byte) error) error { return c.front.ExportPartition(p, fn) })
		pw.CloseWithError(err)
		werr <- err
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/internal/v1/partitions/"+strconv.Itoa(int(p)), pr)
	if err != nil {
		pr.Close()
		<-werr
		return st, err
	}
	req.Header.Set("Content-Type", "application/x-crawlnode-snapshot")
	resp, err := c.client.Do(req)
	if err != nil {
		pr.CloseWithError(err)
		<-werr
		return st, err
	}
	defer resp.Body.Close()
	pr.CloseWithError(io.ErrClosedPipe) // the server has answered: stop writing
	if e := <-werr; e != nil && resp.StatusCode == http.StatusOK {
		return st, e
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return st, fmt.Errorf("peer %s answered %d: %s", peer, resp.StatusCode, bytes.TrimSpace(b))
	}
	return st, nil
}

// importHandler serves POST /internal/v1/partitions/{p}: a snapshot stream of p. It
// accepts a stream from the lease holder at its epoch (a handoff before the lease moves)
// or one tagged with this node's own lease epoch (the rest of a handoff, a sweep).
func (c *Cluster) importHandler(w http.ResponseWriter, r *http.Request) {
	pn, err := strconv.Atoi(r.PathValue("p"))
	if err != nil || pn < 0 || pn >= ring.PartitionCount {
		httpjson.WriteError(w, http.StatusBadRequest, "bad_partition", "bad partition %q", r.PathValue("p"))
		return
	}
	p := uint16(pn)
	peer := callerOf(r.Context())
	c.Refresh()
	rd, err := snapshot.Read(r.Body, func(h snapshot.Header) error {
		if h.Partition != p || h.To != c.self {
			return snapshot.ErrWrongPartition
		}
		if h.From != peer {
			// A member speaks for itself only: the stream's sender is the caller.
			return fmt.Errorf("%w: stream from %q sent by %q", snapshot.ErrStaleEpoch, h.From, peer)
		}
		owner, epoch := c.OwnerOf(p)
		if (owner == h.From || owner == c.self) && epoch == h.Epoch {
			return nil
		}
		return fmt.Errorf("%w: lease is %s@%d, stream %s@%d", snapshot.ErrStaleEpoch, owner, epoch, h.From, h.Epoch)
	})
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, snapshot.ErrWrongPartition) || errors.Is(err, snapshot.ErrStaleEpoch) {
			code = http.StatusConflict
		}
		httpjson.WriteError(w, code, "refused", "%v", err)
		return
	}
	defer rd.Close()
	if err := c.Acquire(r.Context(), p, false, 15*time.Second); err != nil {
		httpjson.WriteError(w, http.StatusConflict, "busy", "%v", err)
		return
	}
	defer c.Release(p, false)
	st, err := c.front.ImportPartition(p, rd.Next)
	if err != nil {
		httpjson.WriteError(w, http.StatusInternalServerError, "import_failed", "%v", err)
		return
	}
	if owner, _ := c.OwnerOf(p); owner == rd.Header().From {
		// The sender held the lease when it sent this: it stopped fetching p only just now.
		// Its hosts rest a moment more before the lease lets this node fetch them, while p
		// is still held here (so no lease slips in between).
		c.front.RestPartition(p, c.now().Add(handoffRest))
	}
	c.stats.imports.Add(1)
	if owner, _ := c.OwnerOf(p); owner != c.self {
		c.mu.Lock()
		c.received[p] = c.now()
		c.mu.Unlock()
	}
	c.log.Info("partition imported", "partition", p, "epoch", rd.Header().Epoch, "peer", rd.Header().From, "records", st.Records, "queued", st.Queued)
	httpjson.Write(w, http.StatusOK, st)
}

// sweep sends partitions present here but leased to another live node to that node, and
// drops them here: interrupted handoffs, a node that comes back after its leases were
// taken over, links that raced a handoff.
func (c *Cluster) sweep(ctx context.Context) {
	c.mu.Lock()
	now := c.now()
	if now.Sub(c.lastSweep) < 3*time.Second || len(c.handing) > 0 {
		c.mu.Unlock()
		return
	}
	c.lastSweep = now
	c.mu.Unlock()
	if !c.ctl.InContact() {
		return
	}
	for _, p := range c.foreign() {
		owner, epoch := c.OwnerOf(p)
		if _, ok := c.Alive()[owner]; !ok {
			continue
		}
		if err := c.Acquire(ctx, p, true, 10*time.Second); err != nil {
			continue
		}
		if o, e := c.OwnerOf(p); o == owner && e == epoch {
			if st, err := c.sendPartition(ctx, p, owner, epoch); err != nil {
				c.log.Warn("sweep: stream failed", "partition", p, "peer", owner, "epoch", epoch, "err", err)
			} else if err := c.front.DropPartition(p); err != nil {
				c.log.Warn("sweep: drop failed", "partition", p, "err", err)
			} else {
				c.stats.swept.Add(1)
				c.log.Info("sweep: sent a partition held here to its owner", "partition", p, "peer", owner, "epoch", epoch, "records", st.Records)
			}
		}
		c.Release(p, true)
	}
}

// foreign lists partitions present in the local frontier whose lease another node holds
// (not those streamed in lately for a handoff still under way): foreignPartitions.
func (c *Cluster) foreign() []uint16 {
	parts, err := c.front.Partitions()
	if err != nil {
		return nil
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	out, forget := foreignPartitions(c.self, parts, c.tab.Load().leases[:], c.received, now)
	for _, p := range forget {
		delete(c.received, p)
	}
	return out
}

// receiveLinks is the forward receiver: links of a partition this node holds at the
// batch's epoch go into the frontier.
func (c *Cluster) receiveLinks(ctx context.Context, from string, pl forward.PartitionLinks) error {
	if peer := callerOf(ctx); peer == "" || peer != from {
		// A batch names its sender; only that sender, authenticated, may deliver it.
		return fmt.Errorf("%w: batch from %q delivered by %q", forward.ErrForbidden, from, peer)
	}
	c.routeMu.RLock()
	defer c.routeMu.RUnlock()
	owner, epoch := c.OwnerOf(pl.Partition)
	if owner != c.self || epoch != pl.Epoch || !c.HoldsLocal(pl.Partition) {
		return forward.ErrNotOwner
	}
	_, err := c.front.Add(linksToCandidates(pl.Links))
	return err
}

// WithLeases runs fn while this node holds every partition of ps at its epoch and no
// handoff or import holds it, else it returns those it does not hold and runs nothing.
// It holds routeMu for reading, like a forwarded link's add: a handoff's final export
// waits for fn, so nothing fn writes under a partition is left behind (package dedup).
func (c *Cluster) WithLeases(ps map[uint16]uint64, fn func() error) ([]uint16, error) {
	c.routeMu.RLock()
	defer c.routeMu.RUnlock()
	var refused []uint16
	synced := c.synced.Load() // cut off from the leader: the lease may have moved on
	for p, e := range ps {
		owner, epoch := c.OwnerOf(p)
		if !synced || owner != c.self || epoch != e || !c.HoldsLocal(p) {
			refused = append(refused, p)
		}
	}
	if len(refused) > 0 {
		return refused, nil
	}
	return nil, fn()
}

// linksCopied runs after forwarded links were committed, before the sender is told (and
// deletes them): it waits until the committed partitions' backups hold a copy with them.
// Acknowledged earlier, links committed here after the last replica round were lost with
// this node if it died for good before the next one: the promoted copies lacked them and
// the sender had forgotten them (a CI run lost a cross-host redirect's only target so).
// A backup that does not answer in time does not stop the links: they are acknowledged
// anyway (counted in replica_ack_unreplicated_total).
func (c *Cluster) linksCopied(ctx context.Context, committed []uint16) error {
	// The replicator stamps its rounds with the node's clock too (replica.Config.Now).
	at := c.now()
	if !c.repl.WaitCopied(ctx, committed, at) && ctx.Err() == nil {
		c.log.Debug("forwarded links acknowledged before their replica round", "partitions", len(committed))
	}
	return nil
}

// --- decommission ---

// Leave starts a decommission: the node announces draining, the ring leaves it out, its
// partitions are handed off, and Run returns once it holds nothing.
func (c *Cluster) Leave() error {
	others := 0
	for name := range c.Alive() {
		if name != c.self {
			others++
		}
	}
	if others == 0 {
		return errors.New("no other live member to take this node's partitions")
	}
	if c.leaving.Swap(true) {
		return nil
	}
	c.log.Warn("decommission: handing off every partition, then leaving")
	return nil
}

// checkLeft ends a decommission once nothing is held here any more.
func (c *Cluster) checkLeft() {
	if !c.leaving.Load() {
		return
	}
	t := c.tab.Load()
	for _, l := range t.leases {
		if l.Owner == c.self {
			return
		}
	}
	c.mu.Lock()
	busy := len(c.handing) > 0
	c.mu.Unlock()
	if busy || c.out.Queued() > 0 || len(c.foreign()) > 0 || c.host.Busy() > 0 {
		return
	}
	if parts, err := c.front.Partitions(); err != nil || len(parts) > 0 {
		return
	}
	c.leftOnce.Do(func() {
		c.log.Warn("decommission complete: every partition handed off")
		close(c.left)
	})
}

// --- completion ---

// idleReport is GET /internal/v1/idle.
type idleReport struct {
	Node    string `json:"node"`
	Idle    bool   `json:"idle"`
	Done    bool   `json:"done"`
	Fetched int64  `json:"fetched"`
	Queued  int    `json:"queued"`
	Outbox  int    `json:"outbox"`
	// Seeded: this node was given seeds (its scope holds seed hosts) or holds seen URLs.
	// A cluster none of whose members is seeded has not started its crawl, so it is not
	// done: members started with --exit-when-done wait for seeds sent through the API.
	Seeded bool `json:"seeded"`
	// Extracting is the node's extract backlog: its duplicate decisions still need the
	// keys' owners (WaitExtracted).
	Extracting int `json:"extracting"`
}

func (c *Cluster) localIdle() idleReport {
	fs := c.front.Stats()
	rep := idleReport{Node: c.self, Done: c.doneLocal.Load(), Fetched: c.host.Fetched(), Queued: fs.Queued, Outbox: c.out.Queued(),
		Seeded: fs.Seen > 0 || c.host.Seeded(), Extracting: c.host.Extracting()}
	c.mu.Lock()
	held := len(c.handing) > 0
	for _, h := range c.hold {
		held = held || h > 0
	}
	c.mu.Unlock()
	rep.Idle = c.front.Idle() && c.host.Busy() == 0 && rep.Outbox == 0 && !held && len(c.foreign()) == 0
	return rep
}

// WaitExtracted waits, after this node's crawl is done and its own extract stage caught
// up, until no alive member has an extract backlog, asking every second: their duplicate
// decisions need the keys' owners, this node among them, so a node that exited first
// would hold the others' extraction up. A member that does not answer is asked again; one
// that is not alive is not waited for. It returns ctx's error if ctx ends first.
func (c *Cluster) WaitExtracted(ctx context.Context) error {
	for logged := false; ; {
		waiting := ""
		for name, m := range c.Alive() {
			if name == c.self || m.Meta.HTTPAddr == "" {
				continue
			}
			var rep idleReport
			if err := c.Get(ctx, c.PeerURL(m.Meta.HTTPAddr)+"/internal/v1/idle", &rep); err != nil || rep.Extracting > 0 {
				waiting = name
				break
			}
		}
		if waiting == "" {
			return nil
		}
		if !logged {
			c.log.Info("waiting for the members' extract stages before leaving: their duplicate decisions may need this node", "peer", waiting)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Done reports whether the whole cluster is done. prev carries the last round's
// fetched total (-1 when the last round was not idle).
func (c *Cluster) Done(ctx context.Context, prev *int64) bool {
	if c.doneSeen.Load() {
		return true
	}
	t := c.tab.Load()
	for _, l := range t.leases {
		if l.Owner == "" {
			*prev = -1
			return false
		}
	}
	alive := c.Alive()
	var total int64
	seeded := false
	for name := range t.members {
		var rep idleReport
		if name == c.self {
			rep = c.localIdle()
		} else {
			m, ok := alive[name]
			if !ok || m.Meta.HTTPAddr == "" {
				*prev = -1
				return false
			}
			if err := c.Get(ctx, c.PeerURL(m.Meta.HTTPAddr)+"/internal/v1/idle", &rep); err != nil {
				*prev = -1
				return false
			}
		}
		if rep.Done {
			c.doneSeen.Store(true)
			return true
		}
		if !rep.Idle {
			*prev = -1
			return false
		}
		seeded = seeded || rep.Seeded
		total += rep.Fetched
	}
	if !seeded {
		// Nothing was ever given to crawl: an idle cluster that has not started yet.
		if !c.unseededLogged.Swap(true) {
			c.log.Info("no seeds yet: the crawl is not done until it has had some (POST /v1/crawl/seeds or crawlnode seed)")
		}
		*prev = -1
		return false
	}
	if *prev == total {
		return true
	}
	*prev = total
	return false
}

func (c *Cluster) Get(ctx context.Context, url string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out)
}
