package node

import (
	"net/http"
)

// dedupCluster is the cluster as package dedup's Decider sees it. The Decider is built
// with the stages, before the cluster; it asks only once the stage runs (after Start).
type dedupCluster struct{ n *Node }

func (d dedupCluster) Self() string                           { return d.n.dir.Node }
func (d dedupCluster) OwnerOf(p uint16) (string, uint64)      { return d.n.cluster.OwnerOf(p) }
func (d dedupCluster) InternalURL(peer string) (string, bool) { return d.n.cluster.InternalURL(peer) }
func (d dedupCluster) Do(req *http.Request) (*http.Response, error) {
	return d.n.cluster.Do(req)
}
func (d dedupCluster) WithLeases(ps map[uint16]uint64, fn func() error) ([]uint16, error) {
	return d.n.cluster.WithLeases(ps, fn)
}
