package node

import (
	"context"
	"net/http"
	"time"

	"github.com/crawlnode/crawlnode/gossip"
	"github.com/crawlnode/crawlnode/replica"
	"github.com/crawlnode/crawlnode/ring"
)

// newReplicator builds the node's replication (package replica) over the cluster.
func newReplicator(c *cluster, interval time.Duration) *replica.Replicator {
	return replica.New(replica.Config{
		Interval: interval,
		Self:     c.self,
		DB:       c.n.db,
		Frontier: c.n.front,
		Outbox:   c.out,
		Logger:   c.log,
		Now:      c.n.cfg.Now,
	}, replicaCluster{c})
}

// replicaCluster is the cluster as replication sees it (replica.Cluster).
type replicaCluster struct{ c *cluster }

var _ replica.Cluster = replicaCluster{}

func (rc replicaCluster) InContact() bool                  { return rc.c.ctl.InContact() }
func (rc replicaCluster) Ring() *ring.Ring                 { return rc.c.ringNow() }
func (rc replicaCluster) RingOf(names []string) *ring.Ring { return rc.c.ringOf(names) }
func (rc replicaCluster) HoldsLocal(p uint16) bool         { return rc.c.holdsLocal(p) }
func (rc replicaCluster) Alive() map[string]gossip.Member  { return rc.c.aliveMembers() }
func (rc replicaCluster) Members() []gossip.Member         { return rc.c.g.Members() }

func (rc replicaCluster) InternalURL(peer string) (string, bool) { return rc.c.internalURL(peer) }

// OwnerOf is "" while no lease table is known.
func (rc replicaCluster) OwnerOf(p uint16) (string, uint64) {
	if rc.c.tab.Load() == nil {
		return "", 0
	}
	return rc.c.ownerOf(p)
}

// Registered is true while no lease table is known.
func (rc replicaCluster) Registered(name string) bool {
	t := rc.c.tab.Load()
	return t == nil || registered(t, name)
}

func (rc replicaCluster) Do(req *http.Request) (*http.Response, error) {
	rc.c.authorize(req)
	return rc.c.client.Do(req)
}

func (rc replicaCluster) Hold(ctx context.Context, p uint16, wait time.Duration) error {
	return rc.c.acquire(ctx, p, false, wait)
}

func (rc replicaCluster) Release(p uint16) { rc.c.release(p, false) }
