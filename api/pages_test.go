package api

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/fetch"
	"github.com/crawlnode/crawlnode/frontier"
)

func TestPages(t *testing.T) {
	at := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	loc, _ := archive.Location{File: "a.warc.gz", Offset: 10, Length: 99}.MarshalBinary()
	f := newFake()
	f.pages["http://a.example/x"] = frontier.SeenRecord{URL: "http://a.example/x", State: frontier.StateFetched, Status: 200, At: at, Meta: loc}
	f.pages["http://a.example/gone"] = frontier.SeenRecord{URL: "http://a.example/gone", State: frontier.StateFetched, Status: 404, At: at, Meta: []byte{0xff}}
	f.texts["http://a.example/x"] = corpus.Record{URL: "http://a.example/x", Title: "X", Text: "the text"}
	f.routed = []string{"b.example"}
	h := New(Config{}, f)
	hash := frontier.URLHash("http://a.example/x")
	unknown := frontier.URLHash("http://c.example/")
	for _, tc := range []struct {
		name     string
		path     string
		peerPage bool
		wantCode int
		wantErr  string
		check    func(p Page) bool
	}{
		{"by URL", "/v1/pages?url=HTTP://a.example/x", false, 200, "", func(p Page) bool {
			return p.URLHash == hex.EncodeToString(hash[:]) && p.State == "fetched" && p.Status == 200 && p.UpdatedAt.Equal(at) &&
				p.WARC != nil && *p.WARC == archive.Location{File: "a.warc.gz", Offset: 10, Length: 99} &&
				p.Corpus != nil && p.Corpus.Text == "the text"
		}},
		{"without text", "/v1/pages?url=http://a.example/x&text=FALSE", false, 200, "", func(p Page) bool {
			return p.Corpus != nil && p.Corpus.Title == "X" && p.Corpus.Text == ""
		}},
		{"no corpus record, bad WARC meta", "/v1/pages?url=http://a.example/gone", false, 200, "", func(p Page) bool {
			return p.Corpus == nil && p.WARC == nil && p.Status == 404
		}},
		{"by hash", "/v1/pages/" + hex.EncodeToString(hash[:]), false, 200, "", func(p Page) bool { return p.URL == "http://a.example/x" }},
		{"no url", "/v1/pages", false, 400, "no_url", nil},
		{"bad url", "/v1/pages?url=ftp://a.example/", false, 400, "bad_url", nil},
		{"bad hash", "/v1/pages/abc", false, 400, "bad_hash", nil},
		{"short hash", "/v1/pages/" + hex.EncodeToString(hash[:8]), false, 400, "bad_hash", nil},
		{"unknown URL", "/v1/pages?url=http://a.example/nope", false, 404, "unknown_page", nil},
		{"unknown hash, no peer has it", "/v1/pages/" + hex.EncodeToString(unknown[:]), false, 404, "unknown_page", nil},
	} {
		f.peerPage = tc.peerPage
		code, body, _ := do(t, h, "GET", tc.path, "")
		if code != tc.wantCode || errorCode(body) != tc.wantErr {
			t.Errorf("%s: %d %s, want %d %q", tc.name, code, body, tc.wantCode, tc.wantErr)
			continue
		}
		if tc.check != nil {
			var p Page
			if err := json.Unmarshal([]byte(body), &p); err != nil || !tc.check(p) {
				t.Errorf("%s: %s (%v)", tc.name, body, err)
			}
		}
	}
	// Another node's: routed by host, or asked of the peers by hash.
	if _, body, _ := do(t, h, "GET", "/v1/pages?url=http://b.example/y", ""); !strings.Contains(body, `"routed": "b.example"`) {
		t.Errorf("a URL another node owns: %s", body)
	}
	f.peerPage = true
	if _, body, _ := do(t, h, "GET", "/v1/pages/"+hex.EncodeToString(unknown[:]), ""); !strings.Contains(body, `"from": "peer"`) {
		t.Errorf("a hash a peer knows: %s", body)
	}
	// The corpus failing otherwise still answers, with what it found.
	f.peerPage, f.textErr = false, errors.New("segment unreadable")
	if code, body, _ := do(t, h, "GET", "/v1/pages?url=http://a.example/x", ""); code != 200 || !strings.Contains(body, `"title": "X"`) {
		t.Errorf("corpus error: %d %s", code, body)
	}
}

func TestHosts(t *testing.T) {
	fetched := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	robots, err := fetch.ParseRobots(200, []byte("User-agent: *\nCrawl-delay: 2\nSitemap: https://a.example/sitemap.xml\n"), fetched).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	f := newFake()
	f.hosts["a.example"] = HostState{Info: frontier.HostInfo{Host: "a.example", Queued: 3, Delay: 1500 * time.Millisecond}, Blocked: true, Errors: 4,
		Robots: map[string][]byte{"https": robots, "http": {0x01}}, UserAgent: "bot"}
	f.recent = []RecentError{{Host: "a.example", URL: "https://a.example/1"}, {Host: "b.example"}, {Host: "a.example", URL: "https://a.example/2"}}
	f.routed = []string{"c.example"}
	f.topHosts[ByQueue] = []TopHost{{Host: "a.example", Queued: 3}, {Host: "b.example", Queued: 1}}
	f.topHosts[ByErrors] = []TopHost{{Host: "b.example", Errors: 9}}
	h := New(Config{}, f)

	code, body, _ := do(t, h, "GET", "/v1/hosts/A.example", "")
	var v HostView
	if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil {
		t.Fatalf("host view: %d %s %v", code, body, err)
	}
	if v.Host != "a.example" || v.DelayMS != 1500 || !v.Blocked || v.Errors != 4 || len(v.RecentErrors) != 2 || len(v.Robots) != 1 {
		t.Errorf("host view: %s", body)
	} else if r := v.Robots[0]; r.URL != "https://a.example/robots.txt" || r.Status != 200 || r.CrawlDelay != "2s" ||
		!r.FetchedAt.Equal(fetched) || len(r.Sitemaps) != 1 {
		t.Errorf("robots view: %+v", r)
	}
	for _, tc := range []struct {
		path     string
		wantCode int
		want     string // in the body
	}{
		{"/v1/hosts/nowhere.example", 404, `"code": "unknown_host"`},
		{"/v1/hosts/c.example", 200, `"routed": "c.example"`},
		{"/v1/hosts", 200, `"host": "b.example"`},
		{"/v1/hosts?top=1", 200, `"queued": 3`},
		{"/v1/hosts?by=errors", 200, `"errors": 9`},
		{"/v1/hosts?by=name", 400, `"code": "bad_order"`},
		{"/v1/errors/recent?host=b.example", 200, `"host": "b.example"`},
		{"/v1/errors/recent?limit=1", 200, `https://a.example/1`},
	} {
		code, body, _ := do(t, h, "GET", tc.path, "")
		if code != tc.wantCode || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d %s, want %d with %s", tc.path, code, body, tc.wantCode, tc.want)
		}
	}
	if _, body, _ := do(t, h, "GET", "/v1/hosts?top=1", ""); strings.Contains(body, "b.example") {
		t.Errorf("top=1 listed two hosts: %s", body)
	}
	f.topHosts[ByQueue] = nil
	if _, body, _ := do(t, h, "GET", "/v1/hosts", ""); strings.Join(strings.Fields(body), "") != `{"hosts":[]}` {
		t.Errorf("no hosts: %s", body)
	}
}

func TestDeadLettersAndCluster(t *testing.T) {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	f := newFake()
	for i := range 30 {
		f.letters = append(f.letters, frontier.DeadLetter{URL: "http://a.example/" + string(rune('a'+i)), Attempts: 5, LastErr: "timeout", Status: 503, At: at})
	}
	h := New(Config{}, f)
	var dl struct {
		Letters []deadLetter `json:"dead_letters"`
		Total   int          `json:"total"`
	}
	_, body, _ := do(t, h, "GET", "/v1/deadletters", "")
	if err := json.Unmarshal([]byte(body), &dl); err != nil || len(dl.Letters) != 20 || dl.Total != 30 ||
		dl.Letters[0] != (deadLetter{URL: "http://a.example/a", Attempts: 5, Status: 503, LastError: "timeout", At: at}) {
		t.Errorf("dead letters: %+v %v", dl, err)
	}
	f.letters = nil
	if _, body, _ := do(t, h, "GET", "/v1/deadletters", ""); strings.Join(strings.Fields(body), "") != `{"dead_letters":[],"total":0}` {
		t.Errorf("no dead letters: %s", body)
	}

	f.cluster = map[string]any{"self": "n1", "leader": "n2"}
	if code, body, _ := do(t, h, "GET", "/v1/cluster", ""); code != 200 || !strings.Contains(body, `"leader": "n2"`) {
		t.Errorf("cluster: %d %s", code, body)
	}
	if code, body, _ := do(t, h, "POST", "/v1/node/leave", ""); code != http.StatusAccepted || !f.left ||
		strings.Join(strings.Fields(body), "") != `{"node":"n1","status":"draining"}` {
		t.Errorf("leave: %d %s", code, body)
	}
	f.partitions = 7
	if code, body, _ := do(t, h, "GET", "/readyz", ""); code != 200 || strings.Join(strings.Fields(body), "") != `{"node":"n1","partitions":7,"status":"ready"}` {
		t.Errorf("readyz: %d %s", code, body)
	}
	if code, body, _ := do(t, h, "GET", "/healthz", ""); code != 200 || strings.Join(strings.Fields(body), "") != `{"node":"n1","status":"ok"}` {
		t.Errorf("healthz: %d %s", code, body)
	}
}
