package control

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Bounds of a job configuration (JobConfig.Validate). A change that breaks one is refused
// as a whole, whoever proposes it (the operator API, a forwarded command, a Raft entry),
// so that no single request can make the cluster impolite or unbounded. 0 keeps its
// meaning (each node's flag) wherever the field documents one.
const (
	// MinJobDelay and MaxJobDelay bound DefaultDelay when set: a job-wide delay under
	// 50 ms is no politeness (a node's own --delay may be lower: the operator chose it
	// for that node), one over an hour stops the crawl in effect.
	MinJobDelay = 50 * time.Millisecond
	MaxJobDelay = time.Hour
	// MaxJobPerHost bounds PerHost: requests in flight per host, 1 by default.
	MaxJobPerHost = 16
	// MaxJobDepth bounds MaxDepth (links from a seed).
	MaxJobDepth = 10_000
	// MaxJobPagesPerHost and MaxJobPages bound the page limits.
	MaxJobPagesPerHost = 1_000_000_000
	MaxJobPages        = 1_000_000_000_000
	// MaxUserAgent bounds the user agent, in bytes.
	MaxUserAgent = 512
	// MaxJobPatterns bounds Include and Exclude each; MaxPatternLen one pattern, in bytes.
	MaxJobPatterns = 1_000
	MaxPatternLen  = 2_048
	// MaxBlockedDomains bounds BlockedDomains.
	MaxBlockedDomains = 100_000
	// MinRecrawl and MaxRecrawl bound RecrawlMin and RecrawlMax when set.
	MinRecrawl = time.Minute
	MaxRecrawl = 366 * 24 * time.Hour
)

// Validate checks the configuration as a whole against its bounds (the constants above)
// and its vocabularies; the first fault is the error (wrapping ErrInvalidCommand). It
// reads no state: the FSM applies it to every SetConfig, the API to every change before
// proposing it.
func (c JobConfig) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidCommand}, a...)...)
	}
	switch {
	case len(c.UserAgent) > MaxUserAgent:
		return bad("user_agent of %d bytes, max %d", len(c.UserAgent), MaxUserAgent)
	case strings.IndexFunc(c.UserAgent, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return bad("user_agent holds a control character")
	case c.Scope != "" && c.Scope != ScopeSeedHosts && c.Scope != ScopeSeedDomains && c.Scope != ScopeAll:
		return bad("scope %q", c.Scope)
	case c.DefaultDelay < 0 || (c.DefaultDelay > 0 && c.DefaultDelay < MinJobDelay) || c.DefaultDelay > MaxJobDelay:
		return bad("default_delay %s: want 0 (each node's --delay) or %s to %s", c.DefaultDelay, MinJobDelay, MaxJobDelay)
	case c.PerHost < 0 || c.PerHost > MaxJobPerHost:
		return bad("per_host %d: want 0 (each node's --per-host) to %d", c.PerHost, MaxJobPerHost)
	case c.MaxDepth < 0 || c.MaxDepth > MaxJobDepth:
		return bad("max_depth %d: want 0 to %d", c.MaxDepth, MaxJobDepth)
	case c.MaxPagesPerHost < 0 || c.MaxPagesPerHost > MaxJobPagesPerHost:
		return bad("max_pages_per_host %d: want 0 to %d", c.MaxPagesPerHost, MaxJobPagesPerHost)
	case c.MaxPages < 0 || c.MaxPages > MaxJobPages:
		return bad("max_pages %d: want 0 to %d", c.MaxPages, MaxJobPages)
	case len(c.Include) > MaxJobPatterns || len(c.Exclude) > MaxJobPatterns:
		return bad("%d include and %d exclude patterns, max %d each", len(c.Include), len(c.Exclude), MaxJobPatterns)
	case slices.Contains(c.Include, "") || slices.Contains(c.Exclude, ""):
		return bad("empty pattern")
	case slices.ContainsFunc(c.Include, longPattern) || slices.ContainsFunc(c.Exclude, longPattern):
		return bad("a pattern over %d bytes", MaxPatternLen)
	case len(c.BlockedDomains) > MaxBlockedDomains:
		return bad("%d blocked domains, max %d", len(c.BlockedDomains), MaxBlockedDomains)
	case c.Recrawl != "" && c.Recrawl != "on" && c.Recrawl != "off":
		return bad("recrawl %q", c.Recrawl)
	case c.Priority != "" && c.Priority != "opic" && c.Priority != "bfs":
		return bad("priority %q", c.Priority)
	case !recrawlOK(c.RecrawlMin) || !recrawlOK(c.RecrawlMax):
		return bad("recrawl bounds %s, %s: want 0 (each node's flag) or %s to %s", c.RecrawlMin, c.RecrawlMax, MinRecrawl, MaxRecrawl)
	case c.RecrawlMin > 0 && c.RecrawlMax > 0 && c.RecrawlMax < c.RecrawlMin:
		return bad("recrawl_max %s below recrawl_min %s", c.RecrawlMax, c.RecrawlMin)
	case !(c.RevisitShare >= 0 && c.RevisitShare <= 1): // NaN included
		return bad("revisit_share %v: want [0,1]", c.RevisitShare)
	}
	return nil
}

func longPattern(p string) bool { return len(p) > MaxPatternLen }

func recrawlOK(d time.Duration) bool { return d == 0 || (d >= MinRecrawl && d <= MaxRecrawl) }
