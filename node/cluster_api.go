package node

// The cluster's HTTP surface on the node: the internal listener (the cluster's and
// replication's node-to-node endpoints, see cluster.Routes), the cluster view, and the
// routing of public reads to the node that holds them (the public handlers are package
// api's, served through apiBackend).

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/cluster"
	"github.com/crawlnode/crawlnode/dedup"
	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/gossip"
	"github.com/crawlnode/crawlnode/internal/peerauth"
	"github.com/crawlnode/crawlnode/replica"
	"github.com/crawlnode/crawlnode/ring"
)

// internalHandler serves the node-to-node endpoints: the cluster's (cluster.Routes) and
// replication's, to authenticated members only (internal_auth.go), each route with its
// own bounds on handlers in flight and body size (limitRoutes) instead of the API's
// 1 MiB request limit. The operator's API token opens none of them.
func (n *Node) internalHandler() http.Handler {
	mux := http.NewServeMux()
	n.cluster.Routes(mux)
	mux.HandleFunc("POST "+replica.Path, n.repl.Receive)
	mux.Handle("POST "+dedup.Path, dedup.Handler(n.dedupStore, n.cluster))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no route %s %s", r.Method, r.URL.Path)
	})
	// peerauth.Middleware first: with TLS, a request speaks only for the member its
	// client certificate names (403 otherwise). Then the caller must be an authenticated
	// member (n.verifier: the certificate's name with TLS, else the cluster key's
	// signature), whose name handlers read with clusterauth.PeerFrom; then each route's
	// bounds. The keyring route (cluster.KeyringPath) is among them: same checks.
	return peerauth.Middleware(n.cluster.TLSOn(),
		n.verifier.Require(n.cluster.IsMember, limitRoutes(n.refuseWhenDiskFull(mux))))
}

// diskRetryAfter is the Retry-After of a write refused for a full disk (the free-space
// check runs every second; diskPause renews the pause).
const diskRetryAfter = "3"

// refuseWhenDiskFull answers 503 disk_full, before reading the body, to the node-to-node
// writes (forwarded links, partition imports, replica rounds) while the disk is short
// (diskShort), and to duplicate decisions (they write the owner's keys). Their senders keep
// what they sent and try again: the links sender keeps its outbox and backs the peer off, a
// handoff or sweep keeps the partition and retries, a replica source resends from the last
// version acknowledged, a decider asks again with backoff while its jobs stay queued. Reads
// pass.
func (n *Node) refuseWhenDiskFull(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && n.diskShort() && diskWriteRoute(r.URL.Path) {
			w.Header().Set("Retry-After", diskRetryAfter)
			writeError(w, http.StatusServiceUnavailable, "disk_full", "%s: the data directory's disk is full; retry later", n.dir.Node)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// diskWriteRoute tells the internal routes that write what a peer sends.
func diskWriteRoute(path string) bool {
	return path == forward.LinksPath || path == replica.Path || path == dedup.Path || strings.HasPrefix(path, "/internal/v1/partitions/")
}

// internalOnly is the handler of a separate internal listener: the node-to-node
// endpoints, plus the read-only views peers ask for (this node's status, health).
func (n *Node) internalOnly() http.Handler {
	internal := n.internalHandler()
	mux := http.NewServeMux()
	mux.Handle("/internal/", internal)
	// Reads routed here by a peer's public API (the page or host lives on this node),
	// answered by the public API's handlers, with the public API's credentials (a member
	// reads as a peer; `export --api` reads the files with the operator's tokens).
	ac := n.apiConfig()
	ac.Pprof, ac.Metrics = false, nil
	public := api.New(ac, apiBackend{n})
	local := api.Guard(ac, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, n.Status()) }))
	mux.Handle("GET /v1/crawl/status", local)
	mux.Handle("GET /v1/pages/{hash}", public)
	mux.Handle("GET /v1/pages", public)
	mux.Handle("GET /v1/hosts/{host}", public)
	mux.Handle("GET /healthz", public)
	// A cluster export reads each member's files at the address the member gossips.
	mux.Handle("GET /v1/export/", public)
	mux.HandleFunc("/", api.NotFound(" on the internal listener"))
	return mux
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
	Replicas replica.Stats `json:"replicas"`
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
	c := n.cluster
	leases, members := c.Table()
	os := c.Outbox().Stats()
	ts := c.Stats()
	v := ClusterView{Self: c.Self(), Leader: c.Leader(), PartitionCount: ring.PartitionCount,
		Handoffs: ts.Handoffs, HandoffBytes: ts.HandoffBytes, HandoffSeconds: ts.HandoffTime.Seconds(),
		Imports: ts.Imports, Swept: ts.Swept, ForcedLeases: ts.Forced,
		ForwardedLinks: os.SentLinks, ForwardedBytes: os.SentBytes, BytesPerLink: os.BytesPerLink, OutboxLinks: os.Queued,
		Replicas: n.repl.Stats()}
	owned := map[string]int{}
	for p, l := range leases {
		v.Leases = append(v.Leases, LeaseView{Partition: p, Owner: l.Owner, Epoch: l.Epoch})
		owned[l.Owner]++
	}
	seen := map[string]bool{}
	for _, m := range c.Members() {
		mi, reg := members[m.Name]
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
	for name, mi := range members {
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
	os := n.cluster.Outbox().Stats()
	ts := n.cluster.Stats()
	rs := n.repl.Counters()
	return []any{"forwarded_links", os.SentLinks, "forwarded_bytes", os.SentBytes, "bytes_per_link", fmt.Sprintf("%.1f", os.BytesPerLink),
		"handoffs", ts.Handoffs, "handoff_bytes", ts.HandoffBytes,
		"handoff_seconds", fmt.Sprintf("%.3f", ts.HandoffTime.Seconds()), "imports", ts.Imports,
		"replica_bytes", rs.Bytes, "replica_records", rs.Records, "replica_rounds", rs.Rounds,
		"replica_lag_max_seconds", fmt.Sprintf("%.3f", rs.LagMax.Seconds()), "replica_promotions", rs.Promoted}
}

// GossipAddr is the address peers give to --join to reach this node ("" before Run has
// started the cluster).
func (n *Node) GossipAddr() string {
	if n.cluster == nil || !n.cluster.Started() {
		return ""
	}
	return n.cluster.Gossip().AdvertiseAddr()
}

// routeToOwner answers r from the node that holds hostKey's partition, when that is
// another node; it reports whether it did.
func (n *Node) routeToOwner(w http.ResponseWriter, r *http.Request, hostKey string) bool {
	if n.cluster == nil || !n.cluster.Started() || r.Header.Get(cluster.ForwardedHeader) != "" || hostKey == "" {
		return false
	}
	owner, _ := n.cluster.OwnerOf(ring.PartitionOf(hostKey))
	if owner == "" || owner == n.cluster.Self() {
		return false
	}
	base, ok := n.cluster.InternalURL(owner)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "owner_unreachable", "host %s belongs to %s, which is not reachable now", hostKey, owner)
		return true
	}
	status, body, ctype, err := n.cluster.GetRaw(r.Context(), base+r.URL.RequestURI())
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
	if n.cluster == nil || !n.cluster.Started() || r.Header.Get(cluster.ForwardedHeader) != "" {
		return false
	}
	for _, m := range n.cluster.Gossip().Alive() {
		if m.Name == n.cluster.Self() || m.Meta.HTTPAddr == "" {
			continue
		}
		status, body, ctype, err := n.cluster.GetRaw(r.Context(), n.cluster.PeerURL(m.Meta.HTTPAddr)+r.URL.RequestURI())
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
