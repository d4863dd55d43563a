package api

import (
	"context"
	"net/http"

	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/frontier"
)

// Backend is what the handlers need from a node. A method that fails with an *Error gets
// that status and code on the wire; other errors are answered 500 "storage".
type Backend interface {
	CrawlBackend
	PageBackend
	HostBackend
	ClusterBackend
	JobBackend
	ExportBackend
}

// CrawlBackend is the node's life and figures, seeding and the operator's switches.
type CrawlBackend interface {
	// Name is the node's name.
	Name() string
	// Ready reports whether the node can serve a crawl: nil, or an *Error saying why
	// not; partitions is the count of partitions whose lease the node holds.
	Ready() (partitions int, err error)
	// Status is this node's figures.
	Status() Status
	// PeerStatuses asks the other live members for their figures; clustered is false
	// when the node runs alone (then the status is its own).
	PeerStatuses(ctx context.Context) (nodes []Status, unreachable []string, clustered bool)
	// AddSeeds queues canonical seed URLs (routing them to their owners).
	AddSeeds(ctx context.Context, seeds SeedBatch) (SeedResult, error)
	// SetPaused pauses or resumes fetching (on every member).
	SetPaused(paused bool) error
	// SetBlocked blocks or unblocks a domain and its subdomains; a domain that cannot be
	// blocked is an *Error with code bad_domain.
	SetBlocked(domain string, block bool) error
	// Blocked lists the blocked domains.
	Blocked() []string
}

// PageBackend is page lookup and corpus reads.
type PageBackend interface {
	// LookupHash and Lookup return what the frontier recorded of a URL; ok is false for a
	// URL never seen here.
	LookupHash(hash [16]byte) (rec frontier.SeenRecord, ok bool, err error)
	Lookup(canonicalURL string) (rec frontier.SeenRecord, ok bool, err error)
	// PageText returns the corpus record of a fetched page (corpus.ErrNoPage: none); with
	// another error the record may still hold what was found.
	PageText(ctx context.Context, url string, withText bool) (corpus.Record, error)
	// RouteToOwner answers r from the member that holds hostKey, when that is another
	// member, and reports whether it did (it wrote the answer).
	RouteToOwner(w http.ResponseWriter, r *http.Request, hostKey string) bool
	// AskPeers asks the live peers for r, relays the first 200 and reports whether one
	// answered.
	AskPeers(w http.ResponseWriter, r *http.Request) bool
}

// HostBackend is what the node knows of hosts and failures.
type HostBackend interface {
	// Host returns what the node knows of one host; ok is false when it has no URL of it.
	Host(host string) (state HostState, ok bool)
	// TopHosts returns up to limit hosts, most first, by queue length or by errors.
	TopHosts(by HostOrder, limit int) []TopHost
	// RecentErrors returns up to limit recent fetch errors, newest first; host filters.
	RecentErrors(limit int, host string) []RecentError
	// DeadLetters returns up to limit dead letters and the count of all of them.
	DeadLetters(limit int) (letters []frontier.DeadLetter, total int, err error)
}

// ClusterBackend is the cluster as this node sees it.
type ClusterBackend interface {
	// Cluster returns the cluster view to encode as it is (an *Error while the node is
	// still joining).
	Cluster() (view any, err error)
	// Leave starts decommissioning this node.
	Leave() error
}

// JobBackend is the shared job configuration.
type JobBackend interface {
	// Job returns the configuration in effect on this node.
	Job() Job
	// JobWritable returns an *Error while the configuration cannot be changed (the Raft
	// group is not up yet).
	JobWritable() error
	// UpdateJob applies change to the current configuration and writes the result,
	// applying it again if the configuration changed meanwhile. An error of change is
	// returned as it is; the node's own failures are *Errors.
	UpdateJob(ctx context.Context, change func(*control.JobConfig) error) error
	// CheckScope, CheckPatterns and CheckPriority validate a job's scope, URL patterns
	// and crawl order ("" is each node's flag and is not passed).
	CheckScope(scope string) error
	CheckPatterns(patterns []string) error
	CheckPriority(priority string) error
}

// HostOrder is the order of GET /v1/hosts.
type HostOrder string

// The orders of GET /v1/hosts.
const (
	ByQueue  HostOrder = "queue"
	ByErrors HostOrder = "errors"
)

// HostState is what a node knows of one host, for GET /v1/hosts/{host}.
type HostState struct {
	Info    frontier.HostInfo
	Blocked bool
	Errors  int64 // failed fetches counted since the node started
	// Robots holds the host's robots.txt by scheme, as fetch.Robots.MarshalBinary wrote it.
	Robots map[string][]byte
	// UserAgent is the User-Agent whose Crawl-delay applies.
	UserAgent string
}

// SeedBatch is a POST /v1/crawl/seeds the handler accepted.
type SeedBatch struct {
	URLs     []string // canonical
	Priority uint8    // 0 high, 1 normal
	// CrawlDepth, when given, is how many hops from the seeds to follow.
	CrawlDepth *int
}

// SeedResult is what became of a SeedBatch.
type SeedResult struct {
	Queued      int            // queued here or handed to their owners
	AlreadySeen int            // seen before
	Rejected    map[string]int // URLs turned away, by reason
}
