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
	// MaxPages bounds the fetches the whole cluster records (0 = no limit): members draw
	// pages from it in grants (GrantPages), so the cluster stops together at this count.
	MaxPages int64 `json:"max_pages,omitempty"`
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

// PageBudget is one member's share of the job's page limit (JobConfig.MaxPages).
type PageBudget struct {
	// Granted is the pages granted to the member and not given back, spent ones included.
	Granted int64 `json:"granted"`
	// Spent is the fetches the member last reported recording against its grants (at most
	// Granted).
	Spent int64 `json:"spent"`
}

// State is everything the Raft group holds. The zero State is the state before the first
// command. State values returned by FSM.State and Control.State are deep copies.
type State struct {
	Config  JobConfig                  `json:"config"`
	Leases  [ring.PartitionCount]Lease `json:"leases"`
	Members map[string]MemberInfo      `json:"members"`
	// Budget is each member's share of the page limit (absent: no grant yet).
	Budget map[string]PageBudget `json:"budget,omitempty"`
	Index  uint64                `json:"index"` // Raft index of the last applied command
}

// BudgetTotals sums every member's grant and reported spending.
func (s *State) BudgetTotals() (granted, spent int64) {
	for _, b := range s.Budget {
		granted += b.Granted
		spent += b.Spent
	}
	return granted, spent
}

// PageLimitReached reports whether the members reported spending the whole page limit.
func (s *State) PageLimitReached() bool {
	_, spent := s.BudgetTotals()
	return s.Config.MaxPages > 0 && spent >= s.Config.MaxPages
}

// GrantSize is how many pages a member asking for ask gets, out of limit with granted
// given out already, in a cluster of members: at most the remainder, and at most a
// share of it, ceil(remainder / (2 * members)), so grants shrink as the remainder falls
// and the last pages go to whichever members still have work. A member that asks gets at
// least one page while any remain. Pure.
func GrantSize(limit, granted int64, members int, ask int64) int64 {
	remaining := limit - granted
	if limit <= 0 || remaining <= 0 || ask <= 0 {
		return 0
	}
	members = max(members, 1)
	share := (remaining + 2*int64(members) - 1) / (2 * int64(members))
	return min(ask, remaining, max(share, 1))
}

// Clone returns a deep copy of s.
func (s *State) Clone() State {
	c := *s
	c.Config = s.Config.clone()
	c.Members = maps.Clone(s.Members)
	c.Budget = maps.Clone(s.Budget)
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
