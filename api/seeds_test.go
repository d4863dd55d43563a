package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// POST /v1/crawl/seeds: the body is checked before anything is queued; URLs that do not
// canonicalize are listed as rejected while the others go on.
func TestSeedsValidation(t *testing.T) {
	depth := func(d int) *int { return &d }
	for _, tc := range []struct {
		name      string
		body      string
		wantCode  int
		wantErr   string
		wantBatch *SeedBatch // what reached AddSeeds; nil: nothing did
	}{
		{"malformed", `{"urls": [`, 400, "bad_json", nil},
		{"unknown field", `{"urls": ["http://a.example/"], "depth": 1}`, 400, "bad_json", nil},
		{"trailing data", `{"urls": ["http://a.example/"]} {}`, 400, "bad_json", nil},
		{"no urls", `{"urls": []}`, 400, "no_urls", nil},
		{"no urls field", `{}`, 400, "no_urls", nil},
		{"bad priority", `{"urls": ["http://a.example/"], "priority": "urgent"}`, 400, "bad_priority", nil},
		{"negative depth", `{"urls": ["http://a.example/"], "crawl_depth": -1}`, 400, "bad_depth", nil},
		{"too large", `{"urls": ["` + strings.Repeat("a", MaxRequestBody) + `"]}`, 413, "too_large", nil},
		{"normal", `{"urls": ["HTTP://A.example/x#frag"]}`, 202, "",
			&SeedBatch{URLs: []string{"http://a.example/x"}, Priority: 1}},
		{"high, depth 0", `{"urls": ["http://a.example/"], "priority": "high", "crawl_depth": 0}`, 202, "",
			&SeedBatch{URLs: []string{"http://a.example/"}, Priority: 0, CrawlDepth: depth(0)}},
		{"one bad URL", `{"urls": ["ftp://a.example/", "http://b.example/"], "priority": "normal", "crawl_depth": 2}`, 202, "",
			&SeedBatch{URLs: []string{"http://b.example/"}, Priority: 1, CrawlDepth: depth(2)}},
		{"all bad", `{"urls": ["ftp://a.example/"]}`, 202, "", nil},
	} {
		f := newFake()
		f.seedResult = SeedResult{Queued: 1}
		code, body, _ := do(t, New(Config{}, f), "POST", "/v1/crawl/seeds", tc.body)
		if code != tc.wantCode || errorCode(body) != tc.wantErr {
			t.Errorf("%s: %d %s, want %d %q", tc.name, code, body, tc.wantCode, tc.wantErr)
			continue
		}
		if tc.wantBatch == nil {
			if len(f.seeds) != 0 {
				t.Errorf("%s: AddSeeds called with %+v", tc.name, f.seeds)
			}
			continue
		}
		if len(f.seeds) != 1 {
			t.Errorf("%s: %d AddSeeds calls", tc.name, len(f.seeds))
			continue
		}
		got, want := f.seeds[0], *tc.wantBatch
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) {
			t.Errorf("%s: batch %s, want %s", tc.name, gb, wb)
		}
	}
}

// The answer counts what the Backend queued and saw, lists each refused URL and each
// frontier rejection, and says "rejected" when nothing was queued or seen.
func TestSeedsAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		result SeedResult
		err    error
		want   string // the answer's JSON, compact; "" for an error
		code   int
	}{
		{"queued", `{"urls": ["http://a.example/", "http://b.example/"]}`, SeedResult{Queued: 1, AlreadySeen: 1}, nil,
			`{"job_id":"default","seeds_queued":1,"already_seen":1,"status":"accepted"}`, 202},
		{"refused URL and a trap", `{"urls": ["ftp://x/", "http://a.example/"]}`, SeedResult{Rejected: map[string]int{"max_depth": 1}}, nil,
			`{"job_id":"default","seeds_queued":0,"already_seen":0,"status":"rejected","rejected":[{"url":"ftp://x/","reason":"REASON"},{"url":"(1 URLs)","reason":"max_depth"}]}`, 202},
		{"storage", `{"urls": ["http://a.example/"]}`, SeedResult{}, errors.New("disk full"), "", 500},
	} {
		f := newFake()
		f.seedResult, f.seedErr = tc.result, tc.err
		code, body, _ := do(t, New(Config{}, f), "POST", "/v1/crawl/seeds", tc.body)
		if code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.code)
			continue
		}
		if tc.want == "" {
			if errorCode(body) != "storage" || !strings.Contains(body, "queue seeds: disk full") {
				t.Errorf("%s: %s", tc.name, body)
			}
			continue
		}
		var resp seedsResponse
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatal(err)
		}
		for i := range resp.Rejected {
			if strings.HasPrefix(resp.Rejected[i].URL, "ftp") && resp.Rejected[i].Reason != "" {
				resp.Rejected[i].Reason = "REASON" // urlnorm's wording is its own
			}
		}
		got, _ := json.Marshal(resp)
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestPauseAndBlock(t *testing.T) {
	f := newFake()
	f.blocked = []string{"x.example"}
	h := New(Config{}, f)
	for _, req := range [][2]string{{"POST", "/v1/crawl/pause"}, {"POST", "/v1/crawl/resume"},
		{"POST", "/v1/domains/Example.COM/block"}, {"DELETE", "/v1/domains/example.com/block"}} {
		if code, body, _ := do(t, h, req[0], req[1], ""); code != http.StatusNoContent {
			t.Errorf("%s %s: %d %s", req[0], req[1], code, body)
		}
	}
	if len(f.paused) != 2 || !f.paused[0] || f.paused[1] {
		t.Errorf("pause calls %v, want [true false]", f.paused)
	}
	if strings.Join(f.blockCalls, " ") != "+Example.COM -example.com" {
		t.Errorf("block calls %v", f.blockCalls)
	}
	if _, body, _ := do(t, h, "GET", "/v1/domains/blocked", ""); strings.Join(strings.Fields(body), "") != `{"domains":["x.example"]}` {
		t.Errorf("blocked: %s", body)
	}
}
