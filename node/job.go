package node

// The job configuration the whole cluster shares: limits, delay, user agent and scope
// rules live in the Raft job configuration (control.JobConfig), can be changed at run time
// through PATCH /v1/job on any node (package api parses the patch, apiBackend.UpdateJob
// writes it), and every node applies them within a second.
//
// A zero field in the job configuration means "each node's own flag": a cluster that was
// only ever paused (which writes the job configuration) keeps every node's settings. So a
// delay of 0 cannot be set through the job (give --delay 0), which errs on the polite side.
// max_depth is the exception: 0 is a setting of its own (the seeds only, list mode), so the
// job records it with MaxDepthSet, and PATCH {"max_depth": null} goes back to each node's
// --max-depth (null removes a member in a JSON merge patch, RFC 7396).

import (
	"errors"
	"time"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/frontier"
)

// userAgent is the User-Agent in effect.
func (n *Node) userAgent() string { return *n.agent.Load() }

// effectiveJob merges the job configuration over the node's flags.
func (n *Node) effectiveJob(j control.JobConfig) (api.JobSettings, error) {
	e := api.JobSettings{
		UserAgent: n.cfg.UserAgent, DefaultDelay: n.cfg.Delay.String(), PerHost: n.cfg.PerHost,
		MaxDepth: n.cfg.MaxDepth, MaxPagesPerHost: n.cfg.MaxPagesPerHost, MaxPages: n.cfg.MaxPages, Scope: string(n.cfg.Scope),
		Include: n.cfg.Include, Exclude: n.cfg.Exclude,
		Recrawl: n.cfg.Recrawl, RecrawlMin: n.cfg.RecrawlMin.String(), RecrawlMax: n.cfg.RecrawlMax.String(),
		RevisitShare: n.cfg.RevisitShare, Priority: n.cfg.Priority,
	}
	switch j.Recrawl {
	case "on":
		e.Recrawl = true
	case "off":
		e.Recrawl = false
	}
	if j.RecrawlMin > 0 {
		e.RecrawlMin = j.RecrawlMin.String()
	}
	if j.RecrawlMax > 0 {
		e.RecrawlMax = j.RecrawlMax.String()
	}
	if j.RevisitShare > 0 {
		e.RevisitShare = j.RevisitShare
	}
	if j.Priority != "" {
		e.Priority = j.Priority
	}
	if j.UserAgent != "" {
		e.UserAgent = j.UserAgent
	}
	if j.DefaultDelay > 0 {
		e.DefaultDelay = j.DefaultDelay.String()
	}
	if j.PerHost > 0 {
		e.PerHost = j.PerHost
	}
	if j.MaxDepth > 0 || j.MaxDepthSet {
		e.MaxDepth = j.MaxDepth
	}
	if j.MaxPagesPerHost > 0 {
		e.MaxPagesPerHost = j.MaxPagesPerHost
	}
	if j.MaxPages > 0 {
		e.MaxPages = j.MaxPages
	}
	if j.Scope != "" {
		e.Scope = j.Scope
	}
	if j.Include != nil {
		e.Include = j.Include
	}
	if j.Exclude != nil {
		e.Exclude = j.Exclude
	}
	if _, err := ParseScope(e.Scope); err != nil {
		return e, err
	}
	return e, nil
}

// applyJobSettings puts the job configuration into effect on this node (called when the
// replicated configuration changes).
func (n *Node) applyJobSettings(j control.JobConfig) {
	e, err := n.effectiveJob(j)
	if err != nil {
		n.log.Error("job configuration not applied", "version", j.Version, "err", err)
		return
	}
	delay, _ := time.ParseDuration(e.DefaultDelay)
	inc, err1 := compilePatterns(e.Include)
	exc, err2 := compilePatterns(e.Exclude)
	if err := errors.Join(err1, err2); err != nil {
		n.log.Error("job configuration not applied", "version", j.Version, "err", err)
		return
	}
	if e.UserAgent != n.userAgent() {
		ua := e.UserAgent
		n.agent.Store(&ua)
		n.client.SetUserAgent(ua)
	}
	n.delay.Store(int64(delay))
	n.front.SetLimits(frontier.Limits{DefaultDelay: delay, PerHost: e.PerHost, MaxDepth: e.MaxDepth, MaxDepthSet: true, MaxPagesPerHost: e.MaxPagesPerHost})
	n.scope.rules.Store(&scopeRules{mode: Scope(e.Scope), include: inc, exclude: exc})
	rmin, _ := time.ParseDuration(e.RecrawlMin)
	rmax, _ := time.ParseDuration(e.RecrawlMax)
	n.front.SetRecrawl(frontier.Recrawl{Enabled: e.Recrawl, Min: rmin, Max: max(rmax, rmin), Share: e.RevisitShare})
	n.bfs.Store(e.Priority == PriorityBFS)
	n.log.Info("job configuration applied", "version", j.Version, "user_agent", e.UserAgent, "delay", e.DefaultDelay,
		"per_host", e.PerHost, "max_depth", e.MaxDepth, "max_pages_per_host", e.MaxPagesPerHost, "scope", e.Scope,
		"recrawl", e.Recrawl, "recrawl_min", e.RecrawlMin, "recrawl_max", e.RecrawlMax, "revisit_share", e.RevisitShare, "priority", e.Priority)
}
