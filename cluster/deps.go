package cluster

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/internal/clusterauth"
)

// Frontier is what the cluster does to the node's frontier: fence partitions, add links
// of partitions held here, and move whole partitions in and out. *frontier.Frontier is one.
type Frontier interface {
	PausePartition(p uint16)
	ResumePartition(p uint16)
	// RestPartition delays every host of p until until (after an import).
	RestPartition(p uint16, until time.Time)
	InFlight(p uint16) int
	Add(cands []frontier.Candidate) (frontier.AddResult, error)
	Partitions() ([]uint16, error)
	ExportPartition(p uint16, fn func(family byte, key, value []byte) error) error
	ImportPartition(p uint16, next func() (family byte, key, value []byte, err error)) (frontier.ImportStats, error)
	DropPartition(p uint16) error
	Stats() frontier.Stats
	Idle() bool
}

// Host is what the cluster needs from the node it runs in.
type Host interface {
	// ApplyJob copies the job's pause flag and blocked domains into the node's operator
	// state; ApplyJobSettings applies a new job configuration version (delays, limits).
	ApplyJob(paused bool, blocked []string)
	ApplyJobSettings(cfg control.JobConfig)
	// Fetched is how many pages the node fetched; Busy how many fetches and extractions
	// are under way; Seeded whether the node was given seeds.
	Fetched() int64
	Busy() int64
	// Extracting is the node's extract backlog (pages not yet in a corpus shard).
	Extracting() int
	Seeded() bool
}

// Replication is what the cluster asks of the node's replication (package replica): run
// its rounds, say which copies stand in for a partition (those are not fetched until
// promoted), and hold the acknowledgement of forwarded links until their backups have them.
type Replication interface {
	Run(ctx context.Context)
	Blocked() map[uint16]bool
	// WaitCopied waits until the backups of parts hold what was committed before
	// committed; false when it gave up (it counts that itself).
	WaitCopied(ctx context.Context, parts []uint16, committed time.Time) bool
}

// noReplication is the Replication of a cluster built without one.
type noReplication struct{}

func (noReplication) Run(ctx context.Context)                              { <-ctx.Done() }
func (noReplication) Blocked() map[uint16]bool                             { return nil }
func (noReplication) WaitCopied(context.Context, []uint16, time.Time) bool { return true }

// Deps are what a Cluster is built from besides its Config: the node's name, data
// directory, Badger DB (the outbox lives in it), frontier and hooks.
type Deps struct {
	Self     string // the node's name
	DataDir  string // the Raft group's state and peers.json go under it
	DB       *badger.DB
	Frontier Frontier
	Host     Host
	// NewReplication builds the node's replication over the new cluster, copying every
	// interval (Config.ReplicaInterval after defaults); nil, or a negative interval: none.
	NewReplication func(c *Cluster, interval time.Duration) Replication
	Logger         *slog.Logger
	// Now is the node's clock (default time.Now).
	Now func() time.Time
	// Signer signs every node-to-node request as this node (clusterauth); nil: requests
	// go unsigned (tests that serve no internal route).
	Signer *clusterauth.Signer
	// Verifier checks the callers of this node's internal routes (the node serves them);
	// the cluster points it, and Signer, at the keyring's keys at start and after every
	// keyring step. nil: nothing to keep in step.
	Verifier *clusterauth.Verifier
	// Transport carries node-to-node requests (the TLS layer's, when mutual TLS is on);
	// nil: plain HTTP with a small idle pool.
	Transport http.RoundTripper
	// Version and DataFormat are gossiped to peers.
	Version    string
	DataFormat int
}
