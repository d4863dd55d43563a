package control

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/idna"

	"github.com/crawlnode/crawlnode/ring"
)

// Crawl scopes a JobConfig may name.
const (
	ScopeSeedHosts   = "seed-hosts"   // only hosts that appear in the seeds (the default)
	ScopeSeedDomains = "seed-domains" // the seeds' registrable domains and their subdomains
	ScopeAll         = "all"          // every host reached by links
)

// JobConfig is the crawl job's configuration, replicated through Raft. Every change bumps
// Version by one, so a SetConfig built from an older read is refused (compare-and-set).
type JobConfig struct {
	UserAgent       string        `json:"user_agent"`
	MaxDepth        int           `json:"max_depth"`          // links from a seed; see MaxDepthSet
	MaxPagesPerHost int           `json:"max_pages_per_host"` // 0 = unlimited
	DefaultDelay    time.Duration `json:"default_delay"`      // between fetches to one host when robots.txt is silent
	PerHost         int           `json:"per_host"`           // concurrent fetches per host; 0 = the node's default
	Scope           string        `json:"scope"`              // ScopeSeedHosts, ScopeSeedDomains or ScopeAll
	Include         []string      `json:"include"`            // URL patterns a URL must match (any), if any are given
	Exclude         []string      `json:"exclude"`            // URL patterns that rule a URL out
	BlockedDomains  []string      `json:"blocked_domains"`
	Paused          bool          `json:"paused"`
	// Recrawl is "on" (continuous crawling), "off", or "" (each node's --recrawl).
	Recrawl string `json:"recrawl,omitempty"`
	// RecrawlMin and RecrawlMax bound the interval between two visits of a page; 0 = each
	// node's flag.
	RecrawlMin time.Duration `json:"recrawl_min,omitempty"`
	RecrawlMax time.Duration `json:"recrawl_max,omitempty"`
	// RevisitShare is the share of each host's requests that goes to revisits while it
	// also has new URLs (0 = each node's flag), in [0,1].
	RevisitShare float64 `json:"revisit_share,omitempty"`
	// Priority is the crawl order: "opic" (importance first), "bfs" (breadth first), or
	// "" (each node's --priority).
	Priority string `json:"priority,omitempty"`
	// MaxDepthSet: MaxDepth is the job's as given, 0 (the seeds only) included; false: a
	// MaxDepth of 0 means each node's --max-depth.
	MaxDepthSet bool `json:"max_depth_set,omitempty"`
	// Version is the number of changes applied so far (0 = never configured). Set by the FSM.
	Version uint64 `json:"version"`
	// UpdatedAt is the proposer's clock at the last change (carried in the command).
	UpdatedAt time.Time `json:"updated_at"`
}

// Lease is one partition's entry in the lease table.
type Lease struct {
	Owner string `json:"owner"` // member name; "" = unassigned
	// Epoch counts the partition's owner changes; every move sets it to the previous epoch
	// plus one. Cross-node transfers carry it, and receivers refuse other epochs.
	Epoch uint64    `json:"epoch"`
	Since time.Time `json:"since"` // proposer's clock when the lease last moved
}

// MemberInfo is one node in the member registry.
type MemberInfo struct {
	RaftAddr string    `json:"raft_addr"`
	HTTPAddr string    `json:"http_addr"`
	Voter    bool      `json:"voter"`
	JoinedAt time.Time `json:"joined_at"` // first registration; kept on re-registration
}

// State is everything the Raft group holds. The zero State is the state before the first
// command. State values returned by FSM.State and Control.State are deep copies.
type State struct {
	Config  JobConfig                  `json:"config"`
	Leases  [ring.PartitionCount]Lease `json:"leases"`
	Members map[string]MemberInfo      `json:"members"`
	Index   uint64                     `json:"index"` // Raft index of the last applied command
}

// Clone returns a deep copy of s.
func (s *State) Clone() State {
	c := *s
	c.Config = s.Config.clone()
	c.Members = maps.Clone(s.Members)
	if c.Members == nil {
		c.Members = map[string]MemberInfo{}
	}
	return c
}

func (c JobConfig) clone() JobConfig {
	c.Include = slices.Clone(c.Include)
	c.Exclude = slices.Clone(c.Exclude)
	c.BlockedDomains = slices.Clone(c.BlockedDomains)
	return c
}

// Owned returns the partitions whose lease names member, in order.
func (s *State) Owned(member string) []uint16 {
	var out []uint16
	for p := range s.Leases {
		if s.Leases[p].Owner == member {
			out = append(out, uint16(p))
		}
	}
	return out
}

// Blocked reports whether host (a lower-case host name, without port) is a blocked domain
// or a subdomain of one.
func (c *JobConfig) Blocked(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, d := range c.BlockedDomains {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

// NormalizeDomain returns the form blocked domains are stored in: trimmed, lower-case,
// without leading or trailing dots, IDNA A-label (punycode). Ports, paths, schemes,
// spaces and empty labels are refused with ErrInvalidCommand.
func NormalizeDomain(d string) (string, error) {
	d = strings.Trim(strings.ToLower(strings.TrimSpace(d)), ".")
	if d == "" || strings.ContainsAny(d, "/:@ \t?#") || strings.Contains(d, "..") {
		return "", fmt.Errorf("%w: bad domain %q", ErrInvalidCommand, d)
	}
	a, err := idna.ToASCII(d)
	if err != nil {
		return "", fmt.Errorf("%w: bad domain %q: %v", ErrInvalidCommand, d, err)
	}
	return strings.ToLower(a), nil
}

func normalizeDomains(ds []string) ([]string, error) {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		n, err := NormalizeDomain(d)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, nil
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
