package api

import (
	"github.com/crawlnode/crawlnode/internal/httpjson"

	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// errorCode decodes the code of an error body ("" when the body is not one).
func errorCode(body string) string {
	var e httpjson.Error
	_ = json.Unmarshal([]byte(body), &e)
	return e.Code
}

// errorMessage decodes the message of an error body.
func errorMessage(body string) string {
	var e httpjson.Error
	_ = json.Unmarshal([]byte(body), &e)
	return e.Error
}

// With a token, mutating requests and the profiling endpoints need it, and so do reads of
// the crawl's data (pages, export files), which a read token or an authenticated peer
// also opens; with ProtectAll, every read but health, readiness, metrics and the
// dashboard page. Without any token, everything is open.
func TestAuth(t *testing.T) {
	open := New(Config{Pprof: true}, newFake())
	guarded := New(Config{Token: "s3cret", Pprof: true}, newFake())
	reads := New(Config{Token: "s3cret", ReadToken: "r3ad", Pprof: true}, newFake())
	readOnly := New(Config{ReadToken: "r3ad"}, newFake())
	all := New(Config{Token: "s3cret", ReadToken: "r3ad", ProtectReads: ProtectAll}, newFake())
	peer := New(Config{Token: "s3cret", Peer: func(r *http.Request) bool { return r.Header.Get("Authorization") == "Peer yes" }}, newFake())
	for _, tc := range []struct {
		name         string
		h            http.Handler
		method, path string
		auth         string
		want         int
	}{
		{"open: pause", open, "POST", "/v1/crawl/pause", "", http.StatusNoContent},
		{"open: block", open, "DELETE", "/v1/domains/example.com/block", "", http.StatusNoContent},
		{"token: pause without", guarded, "POST", "/v1/crawl/pause", "", http.StatusUnauthorized},
		{"token: pause, wrong", guarded, "POST", "/v1/crawl/pause", "Bearer wrong", http.StatusUnauthorized},
		{"token: pause, no Bearer", guarded, "POST", "/v1/crawl/pause", "s3cret", http.StatusUnauthorized},
		{"token: pause", guarded, "POST", "/v1/crawl/pause", "Bearer s3cret", http.StatusNoContent},
		{"token: unblock without", guarded, "DELETE", "/v1/domains/example.com/block", "", http.StatusUnauthorized},
		{"token: patch job without", guarded, "PATCH", "/v1/job", "", http.StatusUnauthorized},
		{"token: leave without", guarded, "POST", "/v1/node/leave", "", http.StatusUnauthorized},
		{"token: status open", guarded, "GET", "/v1/crawl/status", "", http.StatusOK},
		{"token: job open", guarded, "GET", "/v1/job", "", http.StatusOK},
		{"token: healthz open", guarded, "GET", "/healthz", "", http.StatusOK},
		{"token: unknown GET open", guarded, "GET", "/no-such-route", "", http.StatusNotFound},
		{"token: unknown POST guarded", guarded, "POST", "/no-such-route", "", http.StatusUnauthorized},
		{"token: pprof without", guarded, "GET", "/debug/pprof/cmdline", "", http.StatusUnauthorized},
		{"token: pprof", guarded, "GET", "/debug/pprof/cmdline", "Bearer s3cret", http.StatusOK},
		// The crawl's data needs a read credential once a token is set.
		{"token: page without", guarded, "GET", "/v1/pages?url=http://a.example/", "", http.StatusUnauthorized},
		{"token: page by hash without", guarded, "GET", "/v1/pages/00ff", "", http.StatusUnauthorized},
		{"token: export without", guarded, "GET", "/v1/export/files", "", http.StatusUnauthorized},
		{"token: page with it", guarded, "GET", "/v1/pages?url=http://a.example/", "Bearer s3cret", http.StatusNotFound},
		{"token: hosts open", guarded, "GET", "/v1/hosts", "", http.StatusOK},
		{"read token: page without", reads, "GET", "/v1/pages?url=http://a.example/", "", http.StatusUnauthorized},
		{"read token: page", reads, "GET", "/v1/pages?url=http://a.example/", "Bearer r3ad", http.StatusNotFound},
		{"read token: export", reads, "GET", "/v1/export/files", "Bearer r3ad", http.StatusOK},
		{"read token: page, operator token", reads, "GET", "/v1/pages?url=http://a.example/", "Bearer s3cret", http.StatusNotFound},
		{"read token: no write", reads, "POST", "/v1/crawl/pause", "Bearer r3ad", http.StatusUnauthorized},
		{"read token: no pprof", reads, "GET", "/debug/pprof/cmdline", "Bearer r3ad", http.StatusUnauthorized},
		{"read token: status open", reads, "GET", "/v1/crawl/status", "", http.StatusOK},
		{"read token alone: page", readOnly, "GET", "/v1/pages?url=http://a.example/", "", http.StatusUnauthorized},
		{"read token alone: no write", readOnly, "POST", "/v1/crawl/pause", "Bearer r3ad", http.StatusUnauthorized},
		{"all: status without", all, "GET", "/v1/crawl/status", "", http.StatusUnauthorized},
		{"all: hosts without", all, "GET", "/v1/hosts", "", http.StatusUnauthorized},
		{"all: status with the read token", all, "GET", "/v1/crawl/status", "Bearer r3ad", http.StatusOK},
		{"all: healthz open", all, "GET", "/healthz", "", http.StatusOK},
		{"all: readyz open", all, "GET", "/readyz", "", http.StatusOK},
		{"all: dashboard open", all, "GET", "/", "", http.StatusOK},
		{"peer: page", peer, "GET", "/v1/pages?url=http://a.example/", "Peer yes", http.StatusNotFound},
		{"peer: no write", peer, "POST", "/v1/crawl/pause", "Peer yes", http.StatusUnauthorized},
	} {
		var hdr []string
		if tc.auth != "" {
			hdr = []string{"Authorization", tc.auth}
		}
		code, body, h := do(t, tc.h, tc.method, tc.path, "", hdr...)
		if code != tc.want {
			t.Errorf("%s: %s %s: %d %s, want %d", tc.name, tc.method, tc.path, code, body, tc.want)
		}
		if code == http.StatusUnauthorized && (errorCode(body) != "unauthorized" || h.Get("WWW-Authenticate") == "") {
			t.Errorf("%s: 401 without its code or WWW-Authenticate: %s %v", tc.name, body, h)
		}
	}
}

// The profiling endpoints are served only with Config.Pprof: a profile costs the node CPU
// while it runs, and they are not for the public. A CPU profile comes back as one.
func TestPprofOnlyWhenAsked(t *testing.T) {
	paths := []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol", "/debug/pprof/goroutine?debug=1"}
	off, on := New(Config{}, newFake()), New(Config{Pprof: true}, newFake())
	for _, path := range paths {
		if code, _, _ := do(t, off, "GET", path, ""); code != http.StatusNotFound {
			t.Errorf("without Pprof: GET %s: %d, want 404", path, code)
		}
		if code, body, _ := do(t, on, "GET", path, ""); code != http.StatusOK {
			t.Errorf("with Pprof: GET %s: %d %s, want 200", path, code, body)
		}
	}
	code, body, h := do(t, on, "GET", "/debug/pprof/profile?seconds=1", "")
	if code != http.StatusOK || h.Get("Content-Type") != "application/octet-stream" || len(body) == 0 {
		t.Errorf("CPU profile: %d %q, %d bytes", code, h.Get("Content-Type"), len(body))
	}
}

// A Backend's *Error keeps its status and code; any other error is a 500 "storage".
func TestBackendErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		set      func(*fakeBackend)
		method   string
		path     string
		wantCode int
		wantErr  string
	}{
		{"not ready", func(f *fakeBackend) { f.readyErr = Errorf(503, "not_running", "crawl loop not running") }, "GET", "/readyz", 503, "not_running"},
		{"cluster starting", func(f *fakeBackend) { f.clusterErr = Errorf(503, "starting", "joining") }, "GET", "/v1/cluster", 503, "starting"},
		{"cannot leave", func(f *fakeBackend) { f.leaveErr = Errorf(409, "cannot_leave", "last voter") }, "POST", "/v1/node/leave", 409, "cannot_leave"},
		{"bad domain", func(f *fakeBackend) { f.blockErr = Errorf(400, "bad_domain", "bad domain") }, "POST", "/v1/domains/a:b/block", 400, "bad_domain"},
		{"block storage", func(f *fakeBackend) { f.blockErr = errors.New("disk full") }, "POST", "/v1/domains/x.org/block", 500, "storage"},
		{"dead letters storage", func(f *fakeBackend) { f.lettersErr = errors.New("disk") }, "GET", "/v1/deadletters", 500, "storage"},
		{"lookup storage", func(f *fakeBackend) { f.lookupErr = errors.New("disk") }, "GET", "/v1/pages?url=http://a.example/", 500, "storage"},
		{"job not writable", func(f *fakeBackend) { f.writableErr = Errorf(503, "not_ready", "forming") }, "PATCH", "/v1/job", 503, "not_ready"},
		{"job conflict", func(f *fakeBackend) { f.updateErr = Errorf(409, "version_conflict", "moved") }, "PATCH", "/v1/job", 409, "version_conflict"},
		{"no route", func(*fakeBackend) {}, "GET", "/v2/nothing", 404, "not_found"},
		{"wrong method", func(*fakeBackend) {}, "PUT", "/v1/crawl/status", 404, "not_found"},
	} {
		f := newFake()
		tc.set(f)
		body := ""
		if tc.method == "PATCH" {
			body = `{"per_host": 2}`
		}
		code, got, _ := do(t, New(Config{}, f), tc.method, tc.path, body)
		if code != tc.wantCode || errorCode(got) != tc.wantErr {
			t.Errorf("%s: %d %s, want %d %s", tc.name, code, got, tc.wantCode, tc.wantErr)
		}
	}
}

func TestQueryInt(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"", 20}, {"limit=5", 5}, {"limit=0", 20}, {"limit=-3", 20}, {"limit=x", 20}, {"limit=5000", 200}, {"limit=200", 200},
	} {
		r, _ := http.NewRequest("GET", "/?"+tc.query, nil)
		if got := queryInt(r, "limit", 20, 200); got != tc.want {
			t.Errorf("%q: %d, want %d", tc.query, got, tc.want)
		}
	}
}

// The cluster's status sums the members' figures, keeps this node's state, uptime and rate
// history, lists every member by name and counts the unreachable ones as members.
func TestSumStatus(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	self := Status{Node: "b", State: "paused", Uptime: "1m0s", PagesCrawled: 10, PagesQueued: 5, CrawlRate: 1.5, Partitions: 3,
		Responses: map[string]int64{"2xx": 9, "5xx": 1}, Errors: map[string]int64{"dns": 2}, RateHistory: []RatePoint{{T: at, PagesPerSec: 1.5}}}
	peerA := Status{Node: "a", State: "running", Uptime: "2m0s", PagesCrawled: 7, SeenURLs: 40, CrawlRate: 0.5, Partitions: 2,
		Responses: map[string]int64{"2xx": 7}, Errors: map[string]int64{"dns": 1, "timeout": 3}}
	peerC := Status{Node: "c", PagesCrawled: 1, OutboxLinks: 12, InFlight: 2, Responses: map[string]int64{}}
	// The page limit is the cluster's: each node reports what it last heard, the sum the most.
	self.MaxPages, self.ClusterPages = 100, 90
	peerA.MaxPages, peerA.ClusterPages, peerA.LimitReached = 100, 100, true
	for _, tc := range []struct {
		name        string
		peers       []Status
		unreachable []string
		wantNodes   []string
		wantMembers int
		wantSum     Status
	}{
		{"alone", nil, nil, []string{"b"}, 1, Status{State: "paused", Uptime: "1m0s", PagesCrawled: 10, PagesQueued: 5, CrawlRate: 1.5, Partitions: 3,
			MaxPages: 100, ClusterPages: 90,
			Responses: map[string]int64{"2xx": 9, "5xx": 1}, Errors: map[string]int64{"dns": 2}}},
		{"three", []Status{peerC, peerA}, nil, []string{"a", "b", "c"}, 3, Status{State: "paused", Uptime: "1m0s", PagesCrawled: 18, PagesQueued: 5,
			InFlight: 2, SeenURLs: 40, CrawlRate: 2, Partitions: 5, OutboxLinks: 12, MaxPages: 100, ClusterPages: 100, LimitReached: true,
			Responses: map[string]int64{"2xx": 16, "5xx": 1}, Errors: map[string]int64{"dns": 3, "timeout": 3}}},
		{"one unreachable", []Status{peerA}, []string{"c"}, []string{"a", "b"}, 3, Status{State: "paused", Uptime: "1m0s", PagesCrawled: 17, PagesQueued: 5,
			SeenURLs: 40, CrawlRate: 2, Partitions: 5, MaxPages: 100, ClusterPages: 100, LimitReached: true,
			Responses: map[string]int64{"2xx": 16, "5xx": 1}, Errors: map[string]int64{"dns": 3, "timeout": 3}}},
	} {
		got := SumStatus(self, tc.peers, tc.unreachable)
		var names []string
		for _, s := range got.Nodes {
			names = append(names, s.Node)
		}
		if strings.Join(names, ",") != strings.Join(tc.wantNodes, ",") || got.Members != tc.wantMembers {
			t.Errorf("%s: nodes %v members %d, want %v %d", tc.name, names, got.Members, tc.wantNodes, tc.wantMembers)
		}
		want := tc.wantSum
		want.RateHistory = self.RateHistory
		gb, _ := json.Marshal(got.Status)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) {
			t.Errorf("%s: sum\n%s\nwant\n%s", tc.name, gb, wb)
		}
	}
}

// GET /v1/crawl/status is this node's own figures alone, with ?local=1, and the cluster's
// sum in a cluster.
func TestStatusRoute(t *testing.T) {
	f := newFake()
	f.status = Status{Node: "n1", State: "running", PagesCrawled: 3}
	h := New(Config{}, f)
	var st ClusterStatus
	_, body, _ := do(t, h, "GET", "/v1/crawl/status", "")
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Node != "n1" || st.Members != 0 {
		t.Errorf("alone: %+v %v", st, err)
	}
	f.clustered, f.peers = true, []Status{{Node: "n2", PagesCrawled: 4}}
	st = ClusterStatus{}
	_, body, _ = do(t, h, "GET", "/v1/crawl/status", "")
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Node != "" || st.Members != 2 || st.PagesCrawled != 7 {
		t.Errorf("cluster: %+v %v", st, err)
	}
	st = ClusterStatus{}
	_, body, _ = do(t, h, "GET", "/v1/crawl/status?local=1", "")
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Node != "n1" || st.PagesCrawled != 3 {
		t.Errorf("local: %+v %v", st, err)
	}
}

// Every call the dashboard makes (its contract in dashboard/dashboard_test.go) and the page
// itself reach a handler here.
func TestDashboardRoutesServed(t *testing.T) {
	f := newFake()
	f.cluster = map[string]string{}
	h := New(Config{}, f)
	for _, req := range [][2]string{
		{"GET", "/"}, {"GET", "/v1/crawl/status"}, {"GET", "/v1/cluster"},
		{"GET", "/v1/hosts?top=10&by=queue"}, {"GET", "/v1/hosts?top=10&by=errors"},
		{"GET", "/v1/errors/recent?limit=20"}, {"GET", "/v1/deadletters?limit=20"}, {"GET", "/v1/domains/blocked"},
		{"POST", "/v1/crawl/pause"}, {"POST", "/v1/crawl/resume"},
		{"POST", "/v1/domains/example.com/block"}, {"DELETE", "/v1/domains/example.com/block"},
	} {
		if code, body, _ := do(t, h, req[0], req[1], ""); code >= 300 {
			t.Errorf("%s %s: %d %s", req[0], req[1], code, body)
		}
	}
}

// The error body's form on the wire: indented JSON, message then code.
func TestErrorBody(t *testing.T) {
	code, body, h := do(t, New(Config{}, newFake()), "GET", "/v1/nothing", "")
	want := "{\n  \"error\": \"no route GET /v1/nothing\",\n  \"code\": \"not_found\"\n}\n"
	if code != 404 || body != want || h.Get("Content-Type") != "application/json" {
		t.Errorf("%d %q %q, want 404 %q application/json", code, body, h.Get("Content-Type"), want)
	}
}
