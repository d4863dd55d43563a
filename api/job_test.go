package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/control"
)

// PATCH /v1/job's max_depth tells a number (0 included) from null and from absence.
func TestJobPatchMaxDepth(t *testing.T) {
	for _, tc := range []struct {
		body        string
		given, null bool
		value       int
	}{
		{`{}`, false, false, 0},
		{`{"max_depth": 0}`, true, false, 0},
		{`{"max_depth": 5}`, true, false, 5},
		{`{"max_depth": null}`, true, true, 0},
	} {
		var p JobPatch
		if err := json.Unmarshal([]byte(tc.body), &p); err != nil {
			t.Errorf("%s: %v", tc.body, err)
			continue
		}
		if got := p.MaxDepth; got.Given != tc.given || got.Null != tc.null || got.Value != tc.value {
			t.Errorf("%s: %+v", tc.body, got)
		}
	}
	var p JobPatch
	if err := json.Unmarshal([]byte(`{"max_depth": "deep"}`), &p); err == nil {
		t.Errorf(`max_depth "deep" accepted`)
	}
}

// Each field of a patch is checked and written into the configuration it lands on; a bad
// field is a 400 bad_setting that writes nothing.
func TestJobPatch(t *testing.T) {
	base := control.JobConfig{UserAgent: "ua/1", PerHost: 2, MaxDepth: 7, MaxDepthSet: true, Scope: "all",
		Include: []string{"a"}, RecrawlMin: time.Hour, Version: 4}
	for _, tc := range []struct {
		name    string
		patch   string
		wantErr string // a part of the message; "" for success
		want    func(j *control.JobConfig)
	}{
		{"empty", `{}`, "", func(j *control.JobConfig) {}},
		{"user agent", `{"user_agent": "bot/2"}`, "", func(j *control.JobConfig) { j.UserAgent = "bot/2" }},
		{"delay", `{"default_delay": "750ms"}`, "", func(j *control.JobConfig) { j.DefaultDelay = 750 * time.Millisecond }},
		{"delay bare number", `{"default_delay": "2"}`, `default_delay "2": want a duration`, nil},
		{"delay negative", `{"default_delay": "-1s"}`, `default_delay "-1s"`, nil},
		{"per host", `{"per_host": 4, "max_pages_per_host": 0}`, "", func(j *control.JobConfig) { j.PerHost, j.MaxPagesPerHost = 4, 0 }},
		{"per host negative", `{"per_host": -1}`, "per_host must be >= 0", nil},
		{"max pages negative", `{"max_pages_per_host": -5}`, "max_pages_per_host must be >= 0", nil},
		{"cluster page limit", `{"max_pages": 5000}`, "", func(j *control.JobConfig) { j.MaxPages = 5000 }},
		{"cluster page limit off", `{"max_pages": 0}`, "", func(j *control.JobConfig) { j.MaxPages = 0 }},
		{"cluster page limit negative", `{"max_pages": -1}`, "max_pages must be >= 0", nil},
		{"max depth 0", `{"max_depth": 0}`, "", func(j *control.JobConfig) { j.MaxDepth, j.MaxDepthSet = 0, true }},
		{"max depth null", `{"max_depth": null}`, "", func(j *control.JobConfig) { j.MaxDepth, j.MaxDepthSet = 0, false }},
		{"max depth negative", `{"max_depth": -2}`, "max_depth must be >= 0", nil},
		{"scope", `{"scope": "seed-domains"}`, "", func(j *control.JobConfig) { j.Scope = "seed-domains" }},
		{"scope back to flag", `{"scope": ""}`, "", func(j *control.JobConfig) { j.Scope = "" }},
		{"scope bad", `{"scope": "everywhere"}`, `scope "everywhere": want all, seed-hosts or seed-domains`, nil},
		{"patterns", `{"include": [], "exclude": ["\\.pdf$"]}`, "", func(j *control.JobConfig) { j.Include, j.Exclude = []string{}, []string{`\.pdf$`} }},
		{"include bad", `{"include": ["(a"]}`, "missing closing", nil},
		{"exclude bad", `{"exclude": ["(a"]}`, "missing closing", nil},
		{"recrawl", `{"recrawl": "on", "recrawl_max": "24h"}`, "", func(j *control.JobConfig) { j.Recrawl, j.RecrawlMax = "on", 24*time.Hour }},
		{"recrawl bad", `{"recrawl": "yes"}`, `recrawl "yes": want on, off`, nil},
		{"recrawl min bad", `{"recrawl_min": "soon"}`, `recrawl_min "soon": want a duration`, nil},
		{"recrawl max below min", `{"recrawl_max": "30m"}`, "recrawl_max 30m0s is below recrawl_min 1h0m0s", nil},
		{"recrawl min 0 lifts the bound", `{"recrawl_min": "0", "recrawl_max": "30m"}`, "", func(j *control.JobConfig) { j.RecrawlMin, j.RecrawlMax = 0, 30*time.Minute }},
		{"revisit share", `{"revisit_share": 0.25}`, "", func(j *control.JobConfig) { j.RevisitShare = 0.25 }},
		{"revisit share over 1", `{"revisit_share": 1.5}`, "revisit_share must be in [0,1]", nil},
		{"priority", `{"priority": "bfs"}`, "", func(j *control.JobConfig) { j.Priority = "bfs" }},
		{"priority back to flag", `{"priority": ""}`, "", func(j *control.JobConfig) { j.Priority = "" }},
		{"priority bad", `{"priority": "random"}`, `priority "random": want opic, bfs`, nil},
		{"one bad field writes nothing", `{"user_agent": "x", "per_host": -1}`, "per_host", nil},
		// The bounds on the configuration as a whole (control.JobConfig.Validate).
		{"delay too short", `{"default_delay": "1ms"}`, "default_delay 1ms: want 0", nil},
		{"delay too long", `{"default_delay": "2h"}`, "default_delay 2h0m0s", nil},
		{"delay at the floor", `{"default_delay": "50ms"}`, "", func(j *control.JobConfig) { j.DefaultDelay = 50 * time.Millisecond }},
		{"per host absurd", `{"per_host": 10000}`, "per_host 10000", nil},
		{"delay 0 and per host absurd together", `{"default_delay": "0", "per_host": 500}`, "per_host 500", nil},
		{"per host at the bound", `{"per_host": 16}`, "", func(j *control.JobConfig) { j.PerHost = 16 }},
		{"max depth absurd", `{"max_depth": 100000000}`, "max_depth 100000000", nil},
		{"max pages per host absurd", `{"max_pages_per_host": 2000000000}`, "max_pages_per_host", nil},
		{"cluster page limit absurd", `{"max_pages": 9000000000000000}`, "max_pages", nil},
		{"user agent with a line break", `{"user_agent": "bot\r\nX-Evil: 1"}`, "control character", nil},
		{"user agent too long", `{"user_agent": "` + strings.Repeat("a", 600) + `"}`, "user_agent of 600 bytes", nil},
		{"recrawl too short", `{"recrawl_min": "1s"}`, "recrawl bounds", nil},
	} {
		f := newFake()
		f.jobConfig = base
		f.jobConfig.Include = append([]string(nil), base.Include...)
		code, body, _ := do(t, New(Config{}, f), "PATCH", "/v1/job", tc.patch)
		if tc.wantErr != "" {
			if code != 400 || errorCode(body) != "bad_setting" || !strings.Contains(errorMessage(body), tc.wantErr) {
				t.Errorf("%s: %d %s, want 400 bad_setting %q", tc.name, code, body, tc.wantErr)
			}
			if f.jobConfig.Version != base.Version {
				t.Errorf("%s: a refused patch was written", tc.name)
			}
			continue
		}
		if code != 200 {
			t.Errorf("%s: %d %s", tc.name, code, body)
			continue
		}
		want := base
		want.Include = append([]string(nil), base.Include...)
		tc.want(&want)
		want.Version++
		gb, _ := json.Marshal(f.jobConfig)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, gb, wb)
		}
	}
}

// PATCH /v1/job answers as GET /v1/job does; a malformed body is a 400 bad_json.
func TestJobRoutes(t *testing.T) {
	f := newFake()
	f.job = Job{Effective: JobSettings{UserAgent: "ua", Scope: "all"}, Paused: true, BlockedDomains: []string{"x.example"}}
	h := New(Config{}, f)
	_, got, _ := do(t, h, "GET", "/v1/job", "")
	var m map[string]any
	if err := json.Unmarshal([]byte(got), &m); err != nil || m["paused"] != true || m["version"] != 0.0 {
		t.Errorf("GET /v1/job: %s %v", got, err)
	}
	// The fields come in the order the answer always had (a map's: alphabetical).
	keys := []string{`"blocked_domains"`, `"effective"`, `"paused"`, `"version"`}
	for i := 1; i < len(keys); i++ {
		if strings.Index(got, keys[i-1]) > strings.Index(got, keys[i]) {
			t.Errorf("GET /v1/job: %s before %s: %s", keys[i], keys[i-1], got)
		}
	}
	code, got, _ := do(t, h, "PATCH", "/v1/job", `{"per_host": 3}`)
	if err := json.Unmarshal([]byte(got), &m); code != 200 || err != nil || m["version"] != 1.0 {
		t.Errorf("PATCH /v1/job: %d %s", code, got)
	}
	for _, body := range []string{`{"per_hosts": 3}`, `{"per_host": "3"}`, `[`} {
		if code, got, _ := do(t, h, "PATCH", "/v1/job", body); code != 400 || errorCode(got) != "bad_json" {
			t.Errorf("PATCH %s: %d %s, want 400 bad_json", body, code, got)
		}
	}
}
