package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/crawlnode/crawlnode/control"
)

// JobPatch is PATCH /v1/job: the fields to change (absent ones stay). A zero value or ""
// gives a field back to each node's flag; max_depth takes null for that, as 0 is a
// setting of its own (the seeds only).
type JobPatch struct {
	UserAgent       *string   `json:"user_agent"`
	DefaultDelay    *string   `json:"default_delay"` // duration; "0": each node's --delay
	PerHost         *int      `json:"per_host"`
	MaxDepth        PatchInt  `json:"max_depth"` // >= 0 (0: the seeds only); null: each node's flag
	MaxPagesPerHost *int      `json:"max_pages_per_host"`
	MaxPages        *int64    `json:"max_pages"` // the cluster's page limit, >= 0; 0: none (or each node's --max-pages)
	Scope           *string   `json:"scope"`
	Include         *[]string `json:"include"`
	Exclude         *[]string `json:"exclude"`
	Recrawl         *string   `json:"recrawl"`       // "on", "off" or "" (each node's flag)
	RecrawlMin      *string   `json:"recrawl_min"`   // duration; "0": each node's flag
	RecrawlMax      *string   `json:"recrawl_max"`   // likewise
	RevisitShare    *float64  `json:"revisit_share"` // [0,1]; 0: each node's flag
	Priority        *string   `json:"priority"`      // "opic", "bfs" or "" (each node's flag)
}

// PatchInt is a PATCH field that tells a number from null (remove the setting: back to
// each node's flag, as in a JSON merge patch, RFC 7396) and from absence (leave it).
type PatchInt struct {
	Given, Null bool
	Value       int
}

// UnmarshalJSON reads a number or null.
func (p *PatchInt) UnmarshalJSON(b []byte) error {
	*p = PatchInt{Given: true, Null: string(b) == "null"}
	if p.Null {
		return nil
	}
	return json.Unmarshal(b, &p.Value)
}

func (s *server) getJob(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusOK, s.backend.Job())
}

func (s *server) patchJob(w http.ResponseWriter, r *http.Request) {
	if err := s.backend.JobWritable(); err != nil {
		writeErr(w, err, "")
		return
	}
	var p JobPatch
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		WriteError(w, http.StatusBadRequest, "bad_json", "malformed JSON: %v", err)
		return
	}
	change := func(j *control.JobConfig) error {
		if err := applyPatch(p, j, s.backend); err != nil {
			return &Error{Status: http.StatusBadRequest, Code: "bad_setting", Message: err.Error()}
		}
		// The result as a whole, against the bounds the leader's state machine holds
		// every change to (control.JobConfig.Validate), before anything is proposed.
		if err := j.Validate(); err != nil {
			return &Error{Status: http.StatusBadRequest, Code: "bad_setting", Message: strings.TrimPrefix(err.Error(), control.ErrInvalidCommand.Error()+": ")}
		}
		return nil
	}
	if err := s.backend.UpdateJob(r.Context(), change); err != nil {
		writeErr(w, err, "")
		return
	}
	s.getJob(w, r)
}

// applyPatch writes p's fields into j, checking each; the first bad field is the error.
func applyPatch(p JobPatch, j *control.JobConfig, rules JobBackend) error {
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
		value *int
		dst   *int
		name  string
	}{{p.PerHost, &j.PerHost, "per_host"}, {p.MaxPagesPerHost, &j.MaxPagesPerHost, "max_pages_per_host"}} {
		if f.value != nil {
			if *f.value < 0 {
				return fmt.Errorf("%s must be >= 0 (0: each node's flag)", f.name)
			}
			*f.dst = *f.value
		}
	}
	if p.MaxPages != nil {
		if *p.MaxPages < 0 {
			return fmt.Errorf("max_pages must be >= 0 (0: no cluster limit, or each node's --max-pages)")
		}
		j.MaxPages = *p.MaxPages
	}
	if p.MaxDepth.Given {
		if !p.MaxDepth.Null && p.MaxDepth.Value < 0 {
			return fmt.Errorf("max_depth must be >= 0 (0: the seeds only; null: each node's flag)")
		}
		j.MaxDepth, j.MaxDepthSet = p.MaxDepth.Value, !p.MaxDepth.Null
	}
	if err := applyScope(p, j, rules); err != nil {
		return err
	}
	return applyRecrawl(p, j, rules)
}

// applyScope writes the patch's scope and URL patterns.
func applyScope(p JobPatch, j *control.JobConfig, rules JobBackend) error {
	if p.Scope != nil {
		if *p.Scope != "" {
			if rules.CheckScope(*p.Scope) != nil {
				return fmt.Errorf("scope %q: want all, seed-hosts or seed-domains", *p.Scope)
			}
		}
		j.Scope = *p.Scope
	}
	if p.Include != nil {
		if err := rules.CheckPatterns(*p.Include); err != nil {
			return err
		}
		j.Include = *p.Include
	}
	if p.Exclude != nil {
		if err := rules.CheckPatterns(*p.Exclude); err != nil {
			return err
		}
		j.Exclude = *p.Exclude
	}
	return nil
}

// applyRecrawl writes the patch's recrawl settings and crawl order.
func applyRecrawl(p JobPatch, j *control.JobConfig, rules JobBackend) error {
	if p.Recrawl != nil {
		if *p.Recrawl != "" && *p.Recrawl != "on" && *p.Recrawl != "off" {
			return fmt.Errorf("recrawl %q: want on, off or \"\" (each node's flag)", *p.Recrawl)
		}
		j.Recrawl = *p.Recrawl
	}
	for _, f := range []struct {
		value *string
		dst   *time.Duration
		name  string
	}{{p.RecrawlMin, &j.RecrawlMin, "recrawl_min"}, {p.RecrawlMax, &j.RecrawlMax, "recrawl_max"}} {
		if f.value != nil {
			d, err := time.ParseDuration(*f.value)
			if err != nil || d < 0 {
				return fmt.Errorf("%s %q: want a duration such as 6h (0: each node's flag)", f.name, *f.value)
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
		if *p.Priority != "" && rules.CheckPriority(*p.Priority) != nil {
			return fmt.Errorf("priority %q: want opic, bfs or \"\" (each node's flag)", *p.Priority)
		}
		j.Priority = *p.Priority
	}
	return nil
}
