package node

// The cluster's HTTP surface: the internal node-to-node endpoints under /internal/, the
// cluster view, and the routing of public reads to the node that holds them (the public
// handlers are package api's, served through apiBackend).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/gossip"
	"github.com/crawlnode/crawlnode/ring"
)

// internalHandler serves the node-to-node endpoints. Their bodies have their own limits
// (forward.MaxWireBytes; snapshot streams are bounded per record and block), so they
// bypass the API's 1 MiB request limit.
func (n *Node) internalHandler() http.Handler {
	mux := http.NewServeMux()
	c := n.cl
	mux.Handle("POST "+forward.LinksPath, forward.HandlerSync(c.receiveLinks, c.linksCopied))
	mux.HandleFunc("POST /internal/v1/partitions/{p}", c.importHandler)
	mux.HandleFunc("POST /internal/v1/raft/apply", c.applyHandler)
	mux.HandleFunc("POST "+replicaPath, c.repl.receive)
	mux.HandleFunc("GET /internal/v1/raft/index", func(w http.ResponseWriter, r *http.Request) {
		// Only the controller must exist: peers ask the leader for its index and forward
		// commands to it while it may still be joining gossip.
		if !c.ctlReady.Load() {
			writeError(w, http.StatusServiceUnavailable, "starting", "the node is still joining its cluster")
			return
		}
		idx, err := c.ctl.LeaderIndex(5 * time.Second)
		if err != nil {
			writeError(w, http.StatusConflict, "not_leader", "%v", err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]uint64{"index": idx})
	})
	mux.HandleFunc("GET /internal/v1/idle", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, c.localIdle())
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no route %s %s", r.Method, r.URL.Path)
	})
	return api.RequireToken(n.cfg.APIToken, mux)
}

// internalOnly is the handler of a separate internal listener: the node-to-node
// endpoints, plus the read-only views peers ask for (this node's status, health).
func (n *Node) internalOnly() http.Handler {
	internal := n.internalHandler()
	mux := http.NewServeMux()
	mux.Handle("/internal/", internal)
	mux.HandleFunc("GET /v1/crawl/status", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, n.Status()) })
	// Reads routed here by a peer's public API (the page or host lives on this node),
	// answered by the public API's handlers.
	public := api.New(api.Config{Token: n.cfg.APIToken, Logger: n.log}, apiBackend{n})
	mux.Handle("GET /v1/pages/{hash}", public)
	mux.Handle("GET /v1/pages", public)
	mux.Handle("GET /v1/hosts/{host}", public)
	mux.Handle("GET /healthz", public)
	mux.HandleFunc("/", api.NotFound(" on the internal listener"))
	return mux
}

// applyHandler runs a Raft command forwarded by another node (it must be the leader).
func (c *cluster) applyHandler(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_body", "%v", err)
		return
	}
	cmd, err := control.Decode(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_command", "%v", err)
		return
	}
	if !c.ctlReady.Load() {
		writeError(w, http.StatusServiceUnavailable, "starting", "the node is still joining its cluster")
		return
	}
	res, err := c.ctl.Apply(cmd)
	if err != nil {
		code := http.StatusServiceUnavailable
		if errors.Is(err, control.ErrNotLeader) {
			code = http.StatusMisdirectedRequest
		}
		writeError(w, code, "not_applied", "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, toApplyResult(res))
}

// held counts the partitions whose lease this node holds.
func (c *cluster) held() int {
	k := 0
	for _, l := range c.tab.Load().leases {
		if l.Owner == c.self {
			k++
		}
	}
	return k
}

// ClusterView is GET /v1/cluster.
type ClusterView struct {
	Self           string          `json:"self"`
	Leader         string          `json:"leader"`
	PartitionCount int             `json:"partition_count"`
	Voters         []string        `json:"voters"`
	Members        []ClusterMember `json:"members"`
	Leases         []LeaseView     `json:"leases"`
	// This node's transfers: partitions handed off, their wire bytes and the time they
	// took (pause to drop), partitions imported, leftovers swept, leases forced (leader).
	Handoffs       int64   `json:"handoffs"`
	HandoffBytes   int64   `json:"handoff_bytes"`
	HandoffSeconds float64 `json:"handoff_seconds"`
	Imports        int64   `json:"imports"`
	Swept          int64   `json:"swept"`
	ForcedLeases   int64   `json:"forced_leases"`
	ForwardedLinks int64   `json:"forwarded_links"`
	ForwardedBytes int64   `json:"forwarded_bytes"`
	BytesPerLink   float64 `json:"bytes_per_link"`
	OutboxLinks    int     `json:"outbox_links"`
	// Replication of this node's partitions to their backups, and copies held here.
	Replicas ReplicaStats `json:"replicas"`
}

// ClusterMember is one member of ClusterView.
type ClusterMember struct {
	Name       string `json:"name"`
	State      string `json:"state"`  // joining, active, draining, left
	Status     string `json:"status"` // alive, dead, left (gossip's view from this node)
	HTTPAddr   string `json:"http_addr"`
	RaftAddr   string `json:"raft_addr"`
	GossipAddr string `json:"gossip_addr"`
	Partitions int    `json:"partitions"`
	Voter      bool   `json:"voter"`
	Registered bool   `json:"registered"`
}

// LeaseView is one partition's lease.
type LeaseView struct {
	Partition int    `json:"partition"`
	Owner     string `json:"owner"`
	Epoch     uint64 `json:"epoch"`
}

// Cluster returns the cluster as this node sees it.
func (n *Node) Cluster() ClusterView {
	c := n.cl
	t := c.tab.Load()
	leader, _ := c.ctl.Leader()
	os := c.out.Stats()
	v := ClusterView{Self: c.self, Leader: leader, PartitionCount: ring.PartitionCount,
		Handoffs: c.stats.handoffs.Load(), HandoffBytes: c.stats.handoffBytes.Load(),
		HandoffSeconds: time.Duration(c.stats.handoffNanos.Load()).Seconds(),
		Imports:        c.stats.imports.Load(), Swept: c.stats.swept.Load(), ForcedLeases: c.stats.forced.Load(),
		ForwardedLinks: os.SentLinks, ForwardedBytes: os.SentBytes, BytesPerLink: os.BytesPerLink, OutboxLinks: os.Queued,
		Replicas: c.repl.stats()}
	owned := map[string]int{}
	for p, l := range t.leases {
		v.Leases = append(v.Leases, LeaseView{Partition: p, Owner: l.Owner, Epoch: l.Epoch})
		owned[l.Owner]++
	}
	seen := map[string]bool{}
	for _, m := range c.g.Members() {
		mi, reg := t.members[m.Name]
		state := string(m.Meta.State)
		if m.Status == gossip.StatusLeft {
			state = string(gossip.StateLeft)
		}
		v.Members = append(v.Members, ClusterMember{
			Name: m.Name, State: state, Status: string(m.Status), HTTPAddr: m.Meta.HTTPAddr, RaftAddr: m.Meta.RaftAddr,
			GossipAddr: m.Addr, Partitions: owned[m.Name], Voter: mi.Voter, Registered: reg,
		})
		seen[m.Name] = true
	}
	for name, mi := range t.members {
		if !seen[name] {
			v.Members = append(v.Members, ClusterMember{Name: name, State: "unknown", Status: string(gossip.StatusDead), HTTPAddr: mi.HTTPAddr, RaftAddr: mi.RaftAddr, Partitions: owned[name], Voter: mi.Voter, Registered: true})
		}
		if mi.Voter {
			v.Voters = append(v.Voters, name)
		}
	}
	slices.Sort(v.Voters)
	slices.SortFunc(v.Members, func(a, b ClusterMember) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return v
}

// TransferStats are this node's cluster transfer counters, for the final log line.
func (n *Node) TransferStats() []any {
	c := n.cl
	os := c.out.Stats()
	return []any{"forwarded_links", os.SentLinks, "forwarded_bytes", os.SentBytes, "bytes_per_link", fmt.Sprintf("%.1f", os.BytesPerLink),
		"handoffs", c.stats.handoffs.Load(), "handoff_bytes", c.stats.handoffBytes.Load(),
		"handoff_seconds", fmt.Sprintf("%.3f", time.Duration(c.stats.handoffNanos.Load()).Seconds()), "imports", c.stats.imports.Load(),
		"replica_bytes", c.repl.bytesSent.Load(), "replica_records", c.repl.records.Load(), "replica_rounds", c.repl.rounds.Load(),
		"replica_lag_max_seconds", fmt.Sprintf("%.3f", time.Duration(c.repl.lagMax.Load()).Seconds()), "replica_promotions", c.repl.promoted.Load()}
}

// GossipAddr is the address peers give to --join to reach this node ("" before Run has
// started the cluster).
func (n *Node) GossipAddr() string {
	if n.cl == nil || !n.cl.started.Load() {
		return ""
	}
	return n.cl.g.AdvertiseAddr()
}

// forwardedHeader marks a read another node routed here, so it is answered locally.
const forwardedHeader = "X-Crawlnode-Forwarded"

// routeToOwner answers r from the node that holds hostKey's partition, when that is
// another node; it reports whether it did.
func (n *Node) routeToOwner(w http.ResponseWriter, r *http.Request, hostKey string) bool {
	if n.cl == nil || !n.cl.started.Load() || r.Header.Get(forwardedHeader) != "" || hostKey == "" {
		return false
	}
	owner, _ := n.cl.ownerOf(ring.PartitionOf(hostKey))
	if owner == "" || owner == n.cl.self {
		return false
	}
	base, ok := n.cl.internalURL(owner)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "owner_unreachable", "host %s belongs to %s, which is not reachable now", hostKey, owner)
		return true
	}
	status, body, ctype, err := n.cl.getRaw(r.Context(), base+r.URL.RequestURI())
	if err != nil {
		writeError(w, http.StatusBadGateway, "owner_failed", "asking %s: %v", owner, err)
		return true
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("X-Crawlnode-Node", owner)
	w.WriteHeader(status)
	w.Write(body)
	return true
}

// askPeers asks every live peer for r (a read this node could not answer) and relays the
// first 200; it reports whether one answered.
func (n *Node) askPeers(w http.ResponseWriter, r *http.Request) bool {
	if n.cl == nil || !n.cl.started.Load() || r.Header.Get(forwardedHeader) != "" {
		return false
	}
	for _, m := range n.cl.g.Alive() {
		if m.Name == n.cl.self || m.Meta.HTTPAddr == "" {
			continue
		}
		status, body, ctype, err := n.cl.getRaw(r.Context(), "http://"+m.Meta.HTTPAddr+r.URL.RequestURI())
		if err == nil && status == http.StatusOK {
			w.Header().Set("Content-Type", ctype)
			w.Header().Set("X-Crawlnode-Node", m.Name)
			w.WriteHeader(status)
			w.Write(body)
			return true
		}
	}
	return false
}

// getRaw GETs url from a peer as a forwarded read.
func (c *cluster) getRaw(ctx context.Context, url string) (int, []byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, "", err
	}
	req.Header.Set(forwardedHeader, c.self)
	c.authorize(req)
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, body, resp.Header.Get("Content-Type"), err
}
