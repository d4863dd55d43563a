package node

// The job configuration the whole cluster shares: limits, delay, user agent and scope
// rules live in the Raft job configuration (control.JobConfig), can be changed at run time
// through PATCH /v1/job on any node, and every node applies them within a second.
//
// A zero field in the job configuration means "each node's own flag": a cluster that was
// only ever paused (which writes the job configuration) keeps every node's settings. So a
// delay of 0 cannot be set through the job (give --delay 0), which errs on the polite side.
// max_depth is the exception: 0 is a setting of its own (the seeds only, list mode), so the
// job records it with MaxDepthSet, and PATCH {"max_depth": null} goes back to each node's
// --max-depth (null removes a member in a JSON merge patch, RFC 7396).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/frontier"
)

// userAgent is the User-Agent in effect.
func (n *Node) userAgent() string { return *n.ua.Load() }

// JobSettings are the effective shared settings of a node.
type JobSettings struct {
	UserAgent       string   `json:"user_agent"`
	DefaultDelay    string   `json:"default_delay"`
	PerHost         int      `json:"per_host"`
	MaxDepth        int      `json:"max_depth"`
	MaxPagesPerHost int      `json:"max_pages_per_host"`
	Scope           string   `json:"scope"`
	Include         []string `json:"include"`
	Exclude         []string `json:"exclude"`
	Recrawl         bool     `json:"recrawl"`
	RecrawlMin      string   `json:"recrawl_min"`
	RecrawlMax      string   `json:"recrawl_max"`
	RevisitShare    float64  `json:"revisit_share"`
	Priority        string   `json:"priority"`
}

// effectiveJob merges the job configuration over the node's flags.
func (n *Node) effectiveJob(j control.JobConfig) (JobSettings, error) {
	e := JobSettings{
		UserAgent: n.cfg.UserAgent, DefaultDelay: n.cfg.Delay.String(), PerHost: n.cfg.PerHost,
		MaxDepth: n.cfg.MaxDepth, MaxPagesPerHost: n.cfg.MaxPagesPerHost, Scope: string(n.cfg.Scope),
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
		n.ua.Store(&ua)
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

// jobPatch is PATCH /v1/job: the fields to change (absent ones stay).
type jobPatch struct {
	UserAgent       *string   `json:"user_agent"`
	DefaultDelay    *string   `json:"default_delay"`
	PerHost         *int      `json:"per_host"`
	MaxDepth        patchInt  `json:"max_depth"` // >= 0 (0: the seeds only); null: each node's flag
	MaxPagesPerHost *int      `json:"max_pages_per_host"`
	Scope           *string   `json:"scope"`
	Include         *[]string `json:"include"`
	Exclude         *[]string `json:"exclude"`
	Recrawl         *string   `json:"recrawl"`       // "on", "off" or "" (each node's flag)
	RecrawlMin      *string   `json:"recrawl_min"`   // duration; "0": each node's flag
	RecrawlMax      *string   `json:"recrawl_max"`   // likewise
	RevisitShare    *float64  `json:"revisit_share"` // (0,1]; 0: each node's flag
	Priority        *string   `json:"priority"`      // "opic", "bfs" or "" (each node's flag)
}

// patchInt is a PATCH field that tells a number from null (remove the setting: back to
// each node's flag, as in a JSON merge patch) and from absence (leave it).
type patchInt struct {
	given, null bool
	v           int
}

func (p *patchInt) UnmarshalJSON(b []byte) error {
	*p = patchInt{given: true, null: string(b) == "null"}
	if p.null {
		return nil
	}
	return json.Unmarshal(b, &p.v)
}

func (n *Node) getJob(w http.ResponseWriter, r *http.Request) {
	j := n.cl.JobConfig()
	e, _ := n.effectiveJob(j)
	writeJSON(w, http.StatusOK, map[string]any{"version": j.Version, "effective": e, "paused": j.Paused, "blocked_domains": j.BlockedDomains})
}

func (n *Node) patchJob(w http.ResponseWriter, r *http.Request) {
	select {
	case <-n.cl.Ready(): // the Raft group is up (the API serves before it is)
	default:
		writeError(w, http.StatusServiceUnavailable, "not_ready", "the cluster is still forming: try again")
		return
	}
	var p jobPatch
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		writeError(w, http.StatusBadRequest, "bad_json", "malformed JSON: %v", err)
		return
	}
	apply := func(j *control.JobConfig) error {
		if p.UserAgent != nil {
			j.UserAgent = *p.UserAgent
		}
		if p.DefaultDelay != nil {
			d, err := time.ParseDuration(*p.DefaultDelay)
			if err != nil || d < 0 {
				return fmt.Errorf("default_delay %q: want a duration such as 500ms (0: each node's --delay)", *p.DefaultDelay)
			}
			j.DefaultDelay = d
		}
		for _, f := range []struct {
			v    *int
			dst  *int
			name string
		}{{p.PerHost, &j.PerHost, "per_host"}, {p.MaxPagesPerHost, &j.MaxPagesPerHost, "max_pages_per_host"}} {
			if f.v != nil {
				if *f.v < 0 {
					return fmt.Errorf("%s must be >= 0 (0: each node's flag)", f.name)
				}
				*f.dst = *f.v
			}
		}
		if p.MaxDepth.given {
			if !p.MaxDepth.null && p.MaxDepth.v < 0 {
				return fmt.Errorf("max_depth must be >= 0 (0: the seeds only; null: each node's flag)")
			}
			j.MaxDepth, j.MaxDepthSet = p.MaxDepth.v, !p.MaxDepth.null
		}
		if p.Scope != nil {
			if *p.Scope != "" {
				if _, err := ParseScope(*p.Scope); err != nil {
					return fmt.Errorf("scope %q: want all, seed-hosts or seed-domains", *p.Scope)
				}
			}
			j.Scope = *p.Scope
		}
		if p.Include != nil {
			if _, err := compilePatterns(*p.Include); err != nil {
				return err
			}
			j.Include = *p.Include
		}
		if p.Exclude != nil {
			if _, err := compilePatterns(*p.Exclude); err != nil {
				return err
			}
			j.Exclude = *p.Exclude
		}
		if p.Recrawl != nil {
			if *p.Recrawl != "" && *p.Recrawl != "on" && *p.Recrawl != "off" {
				return fmt.Errorf("recrawl %q: want on, off or \"\" (each node's flag)", *p.Recrawl)
			}
			j.Recrawl = *p.Recrawl
		}
		for _, f := range []struct {
			v    *string
			dst  *time.Duration
			name string
		}{{p.RecrawlMin, &j.RecrawlMin, "recrawl_min"}, {p.RecrawlMax, &j.RecrawlMax, "recrawl_max"}} {
			if f.v != nil {
				d, err := time.ParseDuration(*f.v)
				if err != nil || d < 0 {
					return fmt.Errorf("%s %q: want a duration such as 6h (0: each node's flag)", f.name, *f.v)
				}
				*f.dst = d
			}
		}
		if j.RecrawlMin > 0 && j.RecrawlMax > 0 && j.RecrawlMax < j.RecrawlMin {
			return fmt.Errorf("recrawl_max %s is below recrawl_min %s", j.RecrawlMax, j.RecrawlMin)
		}
		if p.RevisitShare != nil {
			if *p.RevisitShare < 0 || *p.RevisitShare > 1 {
				return fmt.Errorf("revisit_share must be in [0,1] (0: each node's flag)")
			}
			j.RevisitShare = *p.RevisitShare
		}
		if p.Priority != nil {
			if *p.Priority != "" && *p.Priority != PriorityOPIC && *p.Priority != PriorityBFS {
				return fmt.Errorf("priority %q: want opic, bfs or \"\" (each node's flag)", *p.Priority)
			}
			j.Priority = *p.Priority
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	for try := 0; ; try++ {
		n.cl.Refresh()
		cur := n.cl.JobConfig()
		next := cur
		if err := apply(&next); err != nil {
			writeError(w, http.StatusBadRequest, "bad_setting", "%v", err)
			return
		}
		if next.Scope == "" {
			// The replicated configuration reads an empty scope as seed-hosts: write the
			// scope in effect instead, so a patch of other settings leaves it alone.
			next.Scope = string(n.cfg.Scope)
		}
		res, err := n.cl.Apply(ctx, control.SetConfig{Config: next, ExpectVersion: cur.Version, At: time.Now()})
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "not_applied", "%v", err)
			return
		}
		if res.Code == "version_conflict" && try < 5 {
			time.Sleep(50 * time.Millisecond)
			continue // someone changed the job meanwhile: apply the patch to the new version
		}
		if res.Code != "" {
			writeError(w, http.StatusConflict, res.Code, "%s", res.Error)
			return
		}
		// Answer with the configuration as this node applies it (a follower applies the
		// leader's commit a moment later).
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			n.cl.Refresh()
			if n.cl.JobConfig().Version >= res.ConfigVersion {
				break
			}
		}
		break
	}
	n.cl.SyncJob()
	n.getJob(w, r)
}
