package api

import (
	"slices"
	"strings"
	"time"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/frontier"
)

// Status is a node's figures, as GET /v1/crawl/status reports them and the progress line
// shows them.
type Status struct {
	Node         string        `json:"node"`
	State        string        `json:"state"`
	Uptime       string        `json:"uptime"`
	Elapsed      time.Duration `json:"-"`
	PagesCrawled int64         `json:"pages_crawled"`
	PagesQueued  int64         `json:"pages_queued"`
	InFlight     int64         `json:"in_flight"`
	RetryPending int64         `json:"retry_pending"`
	// Continuous crawling: revisits scheduled (or due and queued), done, and what they saw.
	RevisitsPending int64   `json:"revisits_pending"`
	Revisits        int64   `json:"revisits"`
	NotModified     int64   `json:"revisits_not_modified"`
	Unchanged       int64   `json:"revisits_unchanged"`
	Changed         int64   `json:"revisits_changed"`
	DeadLetters     int64   `json:"dead_letters"`
	CrawlRate       float64 `json:"crawl_rate"`
	HostsKnown      int64   `json:"hosts_known"`
	HostsActive     int64   `json:"hosts_active"`
	SeenURLs        int64   `json:"seen_urls"`
	BytesFetched    int64   `json:"bytes_fetched"`
	ExtractBacklog  int64   `json:"extract_backlog"`
	OutboxLinks     int64   `json:"outbox_links"`
	Partitions      int     `json:"partitions"`
	// MaxPages is the cluster's page limit (0: none), ClusterPages the fetches the members
	// reported recording against it, LimitReached whether they add up to it (each node
	// reports the cluster's figures as it last heard them; the sum takes the largest).
	MaxPages     int64            `json:"max_pages,omitempty"`
	ClusterPages int64            `json:"cluster_pages,omitempty"`
	LimitReached bool             `json:"limit_reached,omitempty"`
	Responses    map[string]int64 `json:"responses"`
	Errors       map[string]int64 `json:"errors"`
	RateHistory  []RatePoint      `json:"rate_history"`
	// OutputStore is the uploader's state (--output-store); absent without one.
	OutputStore *OutputStoreStatus `json:"output_store,omitempty"`
}

// OutputStoreStatus is a node's uploader to object storage: its target, whether uploads
// succeed ("ok", "uploading") or are retried ("retrying", with the last error), what waits
// and what was shipped. Paused says fetching waits for uploads to catch up.
type OutputStoreStatus struct {
	Target            string    `json:"target"`
	State             string    `json:"state"`
	LastError         string    `json:"last_error,omitempty"`
	LastUpload        time.Time `json:"last_upload,omitzero"`
	UnshippedBytes    int64     `json:"unshipped_bytes"`
	UnshippedFiles    int       `json:"unshipped_files"`
	MaxUnshippedBytes int64     `json:"max_unshipped_bytes"`
	FilesInStore      int       `json:"files_in_store"`
	Uploads           int64     `json:"uploads"`
	Failures          int64     `json:"failures"`
	BytesUploaded     int64     `json:"bytes_uploaded"`
	Paused            bool      `json:"paused"`
}

// ErrorCount is transport errors plus 5xx/429 answers: the "errors" of the progress line.
func (s Status) ErrorCount() int64 {
	var n int64
	for _, c := range s.Errors {
		n += c
	}
	return n + s.Responses["5xx"]
}

// RatePoint is one second's crawl rate.
type RatePoint struct {
	T           time.Time `json:"t"`
	PagesPerSec float64   `json:"pages_per_s"`
}

// ClusterStatus is GET /v1/crawl/status in a cluster: the figures summed over the members
// that answered, and each member's own.
type ClusterStatus struct {
	Status
	Members     int      `json:"members"`
	Unreachable []string `json:"unreachable,omitempty"`
	Nodes       []Status `json:"nodes"`
}

// SumStatus sums the figures of self and the peers that answered (unreachable names the
// others). The sum takes self's state, uptime and rate history, and no node name; Nodes
// lists self and the peers by name.
func SumStatus(self Status, peers []Status, unreachable []string) ClusterStatus {
	out := ClusterStatus{Nodes: append([]Status{self}, peers...), Unreachable: unreachable}
	slices.SortFunc(out.Nodes, func(a, b Status) int { return strings.Compare(a.Node, b.Node) })
	sum := Status{State: self.State, Uptime: self.Uptime, Responses: map[string]int64{}, Errors: map[string]int64{}}
	for _, s := range out.Nodes {
		sum.PagesCrawled += s.PagesCrawled
		sum.PagesQueued += s.PagesQueued
		sum.InFlight += s.InFlight
		sum.RetryPending += s.RetryPending
		sum.DeadLetters += s.DeadLetters
		sum.CrawlRate += s.CrawlRate
		sum.HostsKnown += s.HostsKnown
		sum.HostsActive += s.HostsActive
		sum.SeenURLs += s.SeenURLs
		sum.BytesFetched += s.BytesFetched
		sum.ExtractBacklog += s.ExtractBacklog
		sum.OutboxLinks += s.OutboxLinks
		sum.Partitions += s.Partitions
		sum.MaxPages = max(sum.MaxPages, s.MaxPages)
		sum.ClusterPages = max(sum.ClusterPages, s.ClusterPages)
		sum.LimitReached = sum.LimitReached || s.LimitReached
		for k, v := range s.Responses {
			sum.Responses[k] += v
		}
		for k, v := range s.Errors {
			sum.Errors[k] += v
		}
	}
	sum.RateHistory = self.RateHistory
	out.Status = sum
	out.Members = len(out.Nodes) + len(out.Unreachable)
	return out
}

// Page is GET /v1/pages: a page's fetch facts, its WARC record and its corpus record.
type Page struct {
	URLHash   string            `json:"url_hash"`
	URL       string            `json:"url"`
	State     string            `json:"state"`
	Status    int               `json:"status,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	UpdatedAt time.Time         `json:"updated_at"`
	WARC      *archive.Location `json:"warc,omitempty"`
	Corpus    *corpus.Record    `json:"corpus,omitempty"`
}

// HostView is GET /v1/hosts/{host}.
type HostView struct {
	frontier.HostInfo
	DelayMS      int64         `json:"delay_ms"`
	Blocked      bool          `json:"blocked"`
	Errors       int64         `json:"errors"`
	Robots       []RobotsView  `json:"robots,omitempty"`
	RecentErrors []RecentError `json:"recent_errors"`
}

// RobotsView is what the node knows of one robots.txt.
type RobotsView struct {
	URL         string    `json:"url"`
	Status      int       `json:"status"`
	FetchedAt   time.Time `json:"fetched_at"`
	Unreachable bool      `json:"unreachable"`
	CrawlDelay  string    `json:"crawl_delay,omitempty"`
	Sitemaps    []string  `json:"sitemaps,omitempty"`
}

// TopHost is one row of GET /v1/hosts.
type TopHost struct {
	Host     string `json:"host"`
	Queued   int    `json:"queued"`
	InFlight int    `json:"in_flight"`
	Errors   int64  `json:"errors"`
	DelayMS  int64  `json:"delay_ms"`
}

// RecentError is one failed fetch, for the dashboard and the host view.
type RecentError struct {
	Time    time.Time `json:"time"`
	URL     string    `json:"url"`
	Host    string    `json:"host"`
	Class   string    `json:"class"`
	Message string    `json:"message"`
}

// JobSettings are the shared settings in effect on a node: the job configuration over
// the node's flags.
type JobSettings struct {
	UserAgent       string   `json:"user_agent"`
	DefaultDelay    string   `json:"default_delay"`
	PerHost         int      `json:"per_host"`
	MaxDepth        int      `json:"max_depth"`
	MaxPagesPerHost int      `json:"max_pages_per_host"`
	MaxPages        int64    `json:"max_pages"` // the cluster's page limit; 0: none
	Scope           string   `json:"scope"`
	Include         []string `json:"include"`
	Exclude         []string `json:"exclude"`
	Recrawl         bool     `json:"recrawl"`
	RecrawlMin      string   `json:"recrawl_min"`
	RecrawlMax      string   `json:"recrawl_max"`
	RevisitShare    float64  `json:"revisit_share"`
	Priority        string   `json:"priority"`
}

// Job is GET /v1/job (fields in alphabetical order, as the answer always listed them).
type Job struct {
	BlockedDomains []string    `json:"blocked_domains"`
	Effective      JobSettings `json:"effective"`
	Paused         bool        `json:"paused"`
	Version        uint64      `json:"version"`
}

// deadLetter is one row of GET /v1/deadletters.
type deadLetter struct {
	URL       string    `json:"url"`
	Attempts  int       `json:"attempts"`
	Status    int       `json:"status"`
	LastError string    `json:"last_error"`
	At        time.Time `json:"at"`
}

type seedsRequest struct {
	URLs       []string `json:"urls"`
	Priority   string   `json:"priority"`
	CrawlDepth *int     `json:"crawl_depth"`
}

type seedsResponse struct {
	JobID       string         `json:"job_id"`
	SeedsQueued int            `json:"seeds_queued"`
	AlreadySeen int            `json:"already_seen"`
	Status      string         `json:"status"`
	Rejected    []rejectedSeed `json:"rejected,omitempty"`
}

type rejectedSeed struct {
	URL    string `json:"url"`
	Reason string `json:"reason"`
}
