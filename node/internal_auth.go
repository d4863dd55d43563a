package node

// Who may call the node-to-node routes, and how much of them at once.
//
// Every route under /internal/ needs an authenticated member (clusterauth): the caller's
// verified client certificate when mutual TLS is on (tlsPeer), else a signature under
// the cluster key (the keyring's keys, seeded by Config.Cluster.ClusterKey), else, with
// no key (development on one machine), a loopback caller (any caller with
// Config.Cluster.InsecureCluster). The operator's API token
// opens none of them. Then each route takes at most its share of handlers at once (503
// busy with Retry-After past it) and a bounded body (413 too_large past it); the routes
// themselves check the lease table (package cluster, replica, dedup).

import (
	"crypto/tls"
	"net/http"
	"strings"

	"github.com/crawlnode/crawlnode/cluster"
	"github.com/crawlnode/crawlnode/dedup"
	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/internal/clusterauth"
	"github.com/crawlnode/crawlnode/internal/peerauth"
	"github.com/crawlnode/crawlnode/replica"
)

// tlsPeer names the caller from its verified client certificate when the node runs
// mutual TLS (cfg.Cluster.TLS: its internal listener asks for client certificates);
// nil when it does not. The one place that points at the TLS layer's peer name.
func (n *Node) tlsPeer() func(*tls.ConnectionState) (string, error) {
	if n.cfg.Cluster.TLS == nil {
		return nil
	}
	return peerauth.PeerName
}

// newClusterAuth builds the node's request signer and verifier from its configuration:
// the configured cluster key (cfg.Cluster.ClusterKey) until the cluster starts, when it
// points both at the keyring (DIR/keyring.json wins after a rotation; the primary signs,
// every key verifies) and keeps them in step with every keyring change.
func newClusterAuth(cfg Config, self string) (*clusterauth.Signer, *clusterauth.Verifier, error) {
	var keys [][]byte
	if k := cfg.Cluster.ClusterKey; len(k) > 0 {
		keys = [][]byte{k}
	}
	var primary []byte
	if len(keys) > 0 {
		primary = keys[0]
	}
	s, err := clusterauth.NewSigner(self, primary, cfg.Now)
	if err != nil {
		return nil, nil, err
	}
	v, err := clusterauth.NewVerifier(keys)
	if err != nil {
		return nil, nil, err
	}
	v.Insecure, v.Now = cfg.Cluster.InsecureCluster, cfg.Now
	return s, v, nil
}

// routeLimit is one internal route's bounds: handlers at once and body bytes.
type routeLimit struct {
	inflight int
	body     int64
}

// Internal route bounds. Streams (partitions, replicas) are long and fewer; links and
// dedup batches are small and many; the rest carry no body worth the name. Partition
// and replica streams are bounded per record and block by their decoders, and as a
// whole by maxStreamBytes (a partition of the largest frontier we plan for, with room).
const maxStreamBytes = 8 << 30

var internalLimits = []struct {
	prefix string
	limit  routeLimit
}{
	{forward.LinksPath, routeLimit{inflight: 32, body: forward.MaxWireBytes}},
	{dedup.Path, routeLimit{inflight: 32, body: dedup.MaxWireBytes}},
	{replica.Path, routeLimit{inflight: 16, body: maxStreamBytes}},
	// Each sender hands off at most 4 partitions at once (cluster.maxHandoffs); a node
	// that joins receives from every other member at once.
	{"/internal/v1/partitions/", routeLimit{inflight: 16, body: maxStreamBytes}},
	{"/internal/v1/raft/apply", routeLimit{inflight: 32, body: cluster.MaxCommandBytes}},
	{"/internal/v1/raft/index", routeLimit{inflight: 8, body: 4 << 10}},
	{"/internal/v1/idle", routeLimit{inflight: 16, body: 4 << 10}},
}

// otherInternalLimit bounds any other path under /internal/ (404s included).
var otherInternalLimit = routeLimit{inflight: 16, body: 4 << 10}

// limitRoutes bounds each internal route's handlers in flight and request body.
func limitRoutes(next http.Handler) http.Handler {
	type gate struct {
		limit routeLimit
		sem   chan struct{}
	}
	gates := make([]gate, len(internalLimits))
	for i, l := range internalLimits {
		gates[i] = gate{l.limit, make(chan struct{}, l.limit.inflight)}
	}
	other := gate{otherInternalLimit, make(chan struct{}, otherInternalLimit.inflight)}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := &other
		for i, l := range internalLimits {
			if r.URL.Path == l.prefix || (strings.HasSuffix(l.prefix, "/") && strings.HasPrefix(r.URL.Path, l.prefix)) {
				g = &gates[i]
				break
			}
		}
		if r.ContentLength > g.limit.body {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", "%s takes at most %d bytes", r.URL.Path, g.limit.body)
			return
		}
		select {
		case g.sem <- struct{}{}:
		default:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "busy", "%s: %d requests in flight already; retry later", r.URL.Path, g.limit.inflight)
			return
		}
		defer func() { <-g.sem }()
		r.Body = http.MaxBytesReader(w, r.Body, g.limit.body)
		next.ServeHTTP(w, r)
	})
}
