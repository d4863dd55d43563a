package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/crawlnode/crawlnode/cluster"
	"github.com/crawlnode/crawlnode/replica"
)

// newReplicator builds the node's replication (package replica) over its cluster.
func (n *Node) newReplicator(c *cluster.Cluster, interval time.Duration, log *slog.Logger) *replica.Replicator {
	return replica.New(replica.Config{
		Interval: interval,
		Self:     c.Self(),
		DB:       n.db,
		Frontier: n.front,
		Outbox:   c.Outbox(),
		Logger:   log.With("component", "cluster", "node", c.Self()),
		Now:      n.cfg.Now,
		Shipped:  n.shippedWARC(),
	}, replicaCluster{c})
}

// replicaCluster is the cluster as replication sees it (replica.Cluster): a partition
// held for an import is cluster.Acquire's shared hold.
type replicaCluster struct{ *cluster.Cluster }

var _ replica.Cluster = replicaCluster{}

func (rc replicaCluster) Hold(ctx context.Context, p uint16, wait time.Duration) error {
	return rc.Acquire(ctx, p, false, wait)
}

func (rc replicaCluster) Release(p uint16) { rc.Cluster.Release(p, false) }
