package node

// The node's side of the public API: apiBackend implements api.Backend over a *Node, so
// the handlers (package api) read the node's figures, frontier, corpus and cluster
// through it; Node.Status, at the end, gathers the figures that the API and the progress
// line report.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/gossip"
	"github.com/crawlnode/crawlnode/urlnorm"
)

// apiBackend serves the public API from a node.
type apiBackend struct {
	node *Node
}

var _ api.Backend = apiBackend{}

func (b apiBackend) Name() string { return b.node.Name() }

// Ready: the data directory is writable, the crawl loop runs, and (in a cluster) the node
// is in touch with a Raft leader, so the leases it holds are current and it may fetch (a
// node cut off from the leader fences itself and is not ready).
func (b apiBackend) Ready() (int, error) {
	n := b.node
	probe := filepath.Join(n.dir.Path, ".ready-probe")
	if err := os.WriteFile(probe, []byte("ok"), 0o644); err != nil {
		return 0, api.Errorf(http.StatusServiceUnavailable, "storage", "data directory not writable: %v", err)
	}
	os.Remove(probe)
	if n.running.Load() == 0 {
		return 0, api.Errorf(http.StatusServiceUnavailable, "not_running", "crawl loop not running")
	}
	if n.cluster == nil {
		return 0, nil
	}
	if !n.cluster.Started() || !n.cluster.InContact() {
		return 0, api.Errorf(http.StatusServiceUnavailable, "not_joined", "not in contact with a cluster leader")
	}
	return n.cluster.Held(), nil
}

func (b apiBackend) Status() api.Status { return b.node.Status() }

// PeerStatuses asks every other live member for its own status, 2 s each, in parallel.
func (b apiBackend) PeerStatuses(ctx context.Context) ([]api.Status, []string, bool) {
	c := b.node.cluster
	if c == nil || c.Gossip() == nil {
		return nil, nil, false
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var nodes []api.Status
	var unreachable []string
	for _, m := range c.Gossip().Alive() {
		if m.Name == c.Self() || m.Meta.HTTPAddr == "" {
			continue
		}
		wg.Add(1)
		go func(m gossip.Member) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			var st api.Status
			err := c.Get(ctx, c.PeerURL(m.Meta.HTTPAddr)+"/v1/crawl/status?local=1", &st)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				unreachable = append(unreachable, m.Name)
				return
			}
			nodes = append(nodes, st)
		}(m)
	}
	wg.Wait()
	return nodes, unreachable, true
}

// AddSeeds queues the seeds here or in the outbox of their owners. crawl_depth N: the seed
// enters at depth MaxDepth-N, so the global depth limit stops its links N hops out (N is
// capped at MaxDepth). Within a host, shallower URLs still come first.
func (b apiBackend) AddSeeds(ctx context.Context, seeds api.SeedBatch) (api.SeedResult, error) {
	n := b.node
	if n.diskShort() {
		return api.SeedResult{}, n.errDiskFull()
	}
	depth := 0
	if seeds.CrawlDepth != nil {
		depth = max(0, n.cfg.MaxDepth-*seeds.CrawlDepth)
	}
	cands := make([]frontier.Candidate, len(seeds.URLs))
	hosts := make([]string, len(seeds.URLs))
	for i, u := range seeds.URLs {
		hosts[i] = urlnorm.HostKey(u)
		cands[i] = frontier.Candidate{URL: u, Host: hosts[i], Priority: seeds.Priority, Depth: depth, Cash: n.seedCash()}
	}
	if err := n.addSeedHosts(hosts); err != nil {
		return api.SeedResult{}, err
	}
	res, forwarded, err := n.route(ctx, cands)
	if err != nil {
		return api.SeedResult{}, err
	}
	return api.SeedResult{Queued: res.Added + forwarded, AlreadySeen: res.AlreadySeen, Rejected: res.Rejected}, nil
}

func (b apiBackend) SetPaused(paused bool) error { return b.node.SetPaused(paused) }

func (b apiBackend) SetBlocked(domain string, block bool) error {
	_, err := b.node.SetBlocked(domain, block)
	if errors.Is(err, ErrBadDomain) {
		return api.Errorf(http.StatusBadRequest, "bad_domain", "%v", err)
	}
	return err
}

func (b apiBackend) Blocked() []string { return b.node.Blocked() }

func (b apiBackend) LookupHash(hash [16]byte) (frontier.SeenRecord, bool, error) {
	return b.node.front.LookupHash(hash)
}

func (b apiBackend) Lookup(url string) (frontier.SeenRecord, bool, error) {
	return b.node.front.Lookup(url)
}

func (b apiBackend) PageText(ctx context.Context, url string, withText bool) (corpus.Record, error) {
	return b.node.stage.Page(ctx, url, withText)
}

func (b apiBackend) RouteToOwner(w http.ResponseWriter, r *http.Request, hostKey string) bool {
	return b.node.routeToOwner(w, r, hostKey)
}

func (b apiBackend) AskPeers(w http.ResponseWriter, r *http.Request) bool {
	return b.node.askPeers(w, r)
}

func (b apiBackend) Host(host string) (api.HostState, bool) {
	n := b.node
	info, ok := n.front.Host(host)
	if !ok {
		return api.HostState{}, false
	}
	return api.HostState{Info: info, Blocked: n.isBlocked(host), Errors: n.hostErrors(host),
		Robots: n.hostMeta(host).Robots, UserAgent: n.userAgent()}, true
}

func (b apiBackend) TopHosts(by api.HostOrder, limit int) []api.TopHost {
	n := b.node
	var rows []api.TopHost
	switch by {
	case api.ByQueue:
		for _, h := range n.front.TopHostsByQueue(limit) {
			rows = append(rows, api.TopHost{Host: h.Host, Queued: h.Queued, InFlight: h.InFlight, Errors: n.hostErrors(h.Host), DelayMS: h.Delay.Milliseconds()})
		}
	case api.ByErrors:
		for _, he := range n.topHostsByErrors(limit) {
			row := api.TopHost{Host: he.Host, Errors: he.Errors}
			if h, ok := n.front.Host(he.Host); ok {
				row.Queued, row.InFlight, row.DelayMS = h.Queued, h.InFlight, h.Delay.Milliseconds()
			}
			rows = append(rows, row)
		}
	}
	return rows
}

func (b apiBackend) RecentErrors(limit int, host string) []api.RecentError {
	return b.node.RecentErrors(limit, host)
}

func (b apiBackend) DeadLetters(limit int) ([]frontier.DeadLetter, int, error) {
	var letters []frontier.DeadLetter
	err := b.node.front.DeadLetters(func(d frontier.DeadLetter) bool {
		letters = append(letters, d)
		return len(letters) < limit
	})
	if err != nil {
		return nil, 0, err
	}
	return letters, b.node.front.Stats().DeadLetters, nil
}

// errStarting answers the cluster endpoints while the node joins: its Raft controller
// does not exist until then.
var errStarting = api.Errorf(http.StatusServiceUnavailable, "starting", "the node is still joining its cluster")

func (b apiBackend) Cluster() (any, error) {
	if !b.node.cluster.Started() {
		return nil, errStarting
	}
	return b.node.Cluster(), nil
}

func (b apiBackend) Leave() error {
	if !b.node.cluster.Started() {
		return errStarting
	}
	if err := b.node.cluster.Leave(); err != nil {
		return api.Errorf(http.StatusConflict, "cannot_leave", "%v", err)
	}
	return nil
}

func (b apiBackend) Job() api.Job {
	j := b.node.cluster.JobConfig()
	e, _ := b.node.effectiveJob(j)
	return api.Job{Version: j.Version, Effective: e, Paused: j.Paused, BlockedDomains: j.BlockedDomains}
}

func (b apiBackend) JobWritable() error {
	select {
	case <-b.node.cluster.Ready(): // the Raft group is up (the API serves before it is)
		return nil
	default:
		return api.Errorf(http.StatusServiceUnavailable, "not_ready", "the cluster is still forming: try again")
	}
}

// UpdateJob writes change(current configuration) through Raft as a compare-and-set on the
// configuration's version, applying change again (up to 5 times) when someone changed the
// job meanwhile, and returns once this node applies the new version (or after 3 s: a
// follower applies the leader's commit a moment later).
func (b apiBackend) UpdateJob(ctx context.Context, change func(*control.JobConfig) error) error {
	n := b.node
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for try := 0; ; try++ {
		n.cluster.Refresh()
		cur := n.cluster.JobConfig()
		next := cur
		if err := change(&next); err != nil {
			return err
		}
		if next.Scope == "" {
			// The replicated configuration reads an empty scope as seed-hosts: write the
			// scope in effect instead, so a patch of other settings leaves it alone.
			next.Scope = string(n.cfg.Scope)
		}
		res, err := n.cluster.Apply(ctx, control.SetConfig{Config: next, ExpectVersion: cur.Version, At: n.cfg.Now()})
		if err != nil {
			return api.Errorf(http.StatusServiceUnavailable, "not_applied", "%v", err)
		}
		if res.Code == "version_conflict" && try < 5 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if res.Code != "" {
			return api.Errorf(http.StatusConflict, res.Code, "%s", res.Error)
		}
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			n.cluster.Refresh()
			if n.cluster.JobConfig().Version >= res.ConfigVersion {
				break
			}
		}
		break
	}
	n.cluster.SyncJob()
	return nil
}

func (b apiBackend) CheckScope(scope string) error {
	_, err := ParseScope(scope)
	return err
}

func (b apiBackend) CheckPatterns(patterns []string) error {
	_, err := compilePatterns(patterns)
	return err
}

func (b apiBackend) CheckPriority(priority string) error {
	if priority != PriorityOPIC && priority != PriorityBFS {
		return fmt.Errorf("priority %q: want %s or %s", priority, PriorityOPIC, PriorityBFS)
	}
	return nil
}

// Status returns the node's current figures.
func (n *Node) Status() api.Status {
	fs := n.front.Stats()
	st := api.Status{
		Node:            n.Name(),
		State:           "running",
		Uptime:          n.cfg.Now().Sub(n.started).Round(time.Second).String(),
		Elapsed:         n.cfg.Now().Sub(n.started),
		PagesCrawled:    n.stats.fetched.Load(),
		PagesQueued:     int64(fs.Queued),
		InFlight:        int64(fs.InFlight),
		RetryPending:    int64(fs.RetryPending),
		RevisitsPending: int64(fs.RevisitPending + fs.RevisitQueued),
		Revisits:        n.stats.revisits.Load(),
		NotModified:     n.stats.notModified.Load(),
		Unchanged:       n.stats.unchanged.Load(),
		Changed:         n.stats.changed.Load(),
		DeadLetters:     int64(fs.DeadLetters),
		CrawlRate:       n.rate.perSecond(),
		HostsKnown:      int64(fs.Hosts),
		HostsActive:     int64(fs.ReadyHosts + fs.WaitingHosts),
		SeenURLs:        int64(fs.Seen),
		BytesFetched:    n.stats.bytes.Load(),
		ExtractBacklog:  int64(n.stage.Backlog()),
		Responses: map[string]int64{
			"2xx": n.stats.ok2xx.Load(), "3xx": n.stats.redirects.Load(),
			"4xx": n.stats.client4xx.Load(), "5xx": n.stats.server5xx.Load(),
		},
		Errors:      n.stats.errorsByClass(),
		OutputStore: n.outputStoreStatus(),
	}
	st.MaxPages, st.ClusterPages, st.LimitReached = n.budget.figures()
	switch {
	case n.running.Load() == 0:
		st.State = "stopped"
	case st.LimitReached:
		st.State = "limit_reached"
	case n.Paused():
		st.State = "paused"
	}
	if n.cluster != nil {
		st.OutboxLinks = int64(n.cluster.Outbox().Queued())
		st.Partitions = n.cluster.Held()
		if n.cluster.Leaving() {
			st.State = "draining"
		}
	}
	st.RateHistory = n.rate.history()
	return st
}

// ExportFiles lists this node's outputs for a cluster export (Node.ExportFiles).
func (b apiBackend) ExportFiles() ([]api.ExportFile, error) { return b.node.ExportFiles() }

// OpenExportFile opens one of them (Node.OpenExportFile).
func (b apiBackend) OpenExportFile(kind, name string) (api.ExportReader, int64, time.Time, error) {
	return b.node.OpenExportFile(kind, name)
}
