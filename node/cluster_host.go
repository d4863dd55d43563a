package node

import (
	"github.com/crawlnode/crawlnode/cluster"
	"github.com/crawlnode/crawlnode/control"
)

// Version is the build's version as nodes gossip it.
const Version = "0.2.0"

// dataFormat is the on-disk and wire format version nodes gossip.
const dataFormat = 1

// ClusterConfig says how a node finds and joins its peers (see cluster.Config).
type ClusterConfig = cluster.Config

// clusterHost is the node as its cluster sees it (cluster.Host).
type clusterHost struct{ n *Node }

func (h clusterHost) ApplyJob(paused bool, blocked []string) { h.n.applyJob(paused, blocked) }
func (h clusterHost) ApplyJobSettings(j control.JobConfig)   { h.n.applyJobSettings(j) }
func (h clusterHost) Fetched() int64                         { return h.n.stats.fetched.Load() }
func (h clusterHost) Extracting() int                        { return h.n.stage.Backlog() }
func (h clusterHost) Busy() int64                            { return h.n.stats.busy.Load() }
func (h clusterHost) Seeded() bool                           { return h.n.hasSeedHosts() }
