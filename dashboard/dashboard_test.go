package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/crawlnode/crawlnode/dashboard/browsertest"
	"go.uber.org/goleak"
	"golang.org/x/net/html"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	for _, c := range []struct {
		method, path string
		status       int
		body         bool
	}{
		{"GET", "/", 200, true},
		{"GET", "/index.html", 200, true},
		{"HEAD", "/", 200, false},
		{"GET", "/other", 404, false},
		{"POST", "/", 405, false},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.status)
			continue
		}
		if c.status != 200 {
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != "text/html; charset=utf-8" {
			t.Errorf("%s %s: Content-Type %q", c.method, c.path, got)
		}
		if c.body != (string(b) == string(indexHTML)) {
			t.Errorf("%s %s: body of %d bytes, want the page: %v", c.method, c.path, len(b), c.body)
		}
		if got := resp.Header.Get("Content-Security-Policy"); !strings.Contains(got, "script-src 'sha256-") || !strings.Contains(got, "connect-src 'self'") {
			t.Errorf("CSP %q", got)
		}
	}
}

// ids the page must carry: tests and scripts read the dashboard by them.
var requiredIDs = []string{
	"state", "node-name", "uptime", "pages-crawled", "pages-queued", "in-flight", "retry-pending",
	"dead-letters", "crawl-rate", "extract-backlog", "hosts-known", "hosts-active", "seen-urls",
	"bytes-fetched", "rate-chart", "members", "ring", "leader", "member-count", "partition-count",
	"responses-by-class", "errors-by-class", "hosts-by-queue", "hosts-by-errors", "recent-errors",
	"dead-letter-list", "dead-letters-total", "blocked-domains", "pause", "resume", "block-input",
	"block-button", "poll-count", "banner",
}

// TestSelfContained parses the page: no external asset of any kind, every API call relative.
func TestSelfContained(t *testing.T) {
	doc, err := html.Parse(strings.NewReader(string(indexHTML)))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	var script, style strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "link", "img", "iframe", "object", "embed", "audio", "video", "source", "base":
				t.Errorf("element <%s> in a self-contained page", n.Data)
			}
			for _, a := range n.Attr {
				if a.Key == "id" {
					if ids[a.Val] {
						t.Errorf("duplicate id %q", a.Val)
					}
					ids[a.Val] = true
				}
				if a.Key == "src" {
					t.Errorf("<%s src=%q>: assets must be inline", n.Data, a.Val)
				}
				v := strings.ToLower(strings.TrimSpace(a.Val))
				if strings.Contains(v, "://") || strings.HasPrefix(v, "//") || strings.Contains(v, "url(") {
					t.Errorf("<%s %s=%q> names another origin", n.Data, a.Key, a.Val)
				}
			}
			if (n.Data == "script" || n.Data == "style") && n.FirstChild != nil {
				if n.Data == "script" {
					script.WriteString(n.FirstChild.Data)
				} else {
					style.WriteString(n.FirstChild.Data)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	for _, id := range requiredIDs {
		if !ids[id] {
			t.Errorf("no element with id %q", id)
		}
	}
	if s := style.String(); strings.Contains(s, "url(") || strings.Contains(s, "@import") || strings.Contains(s, "://") {
		t.Error("the style sheet loads something")
	}
	js := script.String()
	if js == "" {
		t.Fatal("no inline script")
	}
	// The only absolute URL in the script is the SVG namespace, which is never fetched.
	if u := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`).FindAllString(js, -1); len(slices.DeleteFunc(u, func(s string) bool { return s == "http://www.w3.org" })) > 0 {
		t.Errorf("script names other origins: %v", u)
	}
	calls := regexp.MustCompile(`(?:api|control)\("(GET|POST|DELETE)", "([^"]*)"`).FindAllStringSubmatch(js, -1)
	if len(calls) < 10 {
		t.Fatalf("found %d API calls in the script", len(calls))
	}
	for _, c := range calls {
		if !strings.HasPrefix(c[2], "/v1/") {
			t.Errorf("API call %s %q is not a relative /v1/ path", c[1], c[2])
		}
	}
	if strings.Contains(js, "innerHTML") || strings.Contains(js, "insertAdjacentHTML") || strings.Contains(js, "document.write") {
		t.Error("the script builds HTML from strings; crawled text must go through textContent")
	}
	if len(indexHTML) > 64<<10 {
		t.Errorf("page is %d bytes; keep it small", len(indexHTML))
	}
}

// fakeAPI implements the node's API contract with fixed figures and records requests.
type fakeAPI struct {
	mu        sync.Mutex
	token     string
	state     string
	blocked   []string
	requests  []string // "METHOD path?query"
	badAuth   int
	hostsFail bool
}

const hostileMessage = `<img src=x onerror="window.__owned=1">`

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !strings.HasPrefix(r.URL.Path, "/v1/") {
		Handler().ServeHTTP(w, r)
		return
	}
	f.requests = append(f.requests, r.Method+" "+r.URL.RequestURI())
	js := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		f.badAuth++
		js(401, map[string]string{"error": "missing or wrong bearer token", "code": "unauthorized"})
		return
	}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	route := r.Method + " " + r.URL.Path
	switch {
	case route == "GET /v1/crawl/status":
		var hist []map[string]any
		for i := range 30 {
			hist = append(hist, map[string]any{"t": now.Add(time.Duration(i-30) * 10 * time.Second).Format(time.RFC3339), "pages_per_s": float64(i%10) * 12.5})
		}
		js(200, map[string]any{
			"node": "node-a", "state": f.state, "uptime": "1h2m3s", "pages_crawled": 1234567, "pages_queued": 8901,
			"in_flight": 12, "retry_pending": 34, "dead_letters": 5, "crawl_rate": 98.76, "hosts_known": 321,
			"hosts_active": 45, "seen_urls": 2345678, "bytes_fetched": 5 << 30, "extract_backlog": 7,
			"responses":    map[string]int{"2xx": 1200000, "3xx": 30000, "4xx": 4000, "5xx": 567},
			"errors":       map[string]int{"timeout": 17, "dns": 3},
			"rate_history": hist,
		})
	case route == "GET /v1/cluster":
		js(200, map[string]any{"leader": "node-b", "partition_count": 271, "members": []map[string]any{
			{"name": "node-a", "state": "alive", "http_addr": "127.0.0.1:8001", "partitions": 90},
			{"name": "node-b", "state": "alive", "http_addr": "127.0.0.1:8002", "partitions": 91},
			{"name": "node-c", "state": "suspect", "http_addr": "127.0.0.1:8003", "partitions": 80},
		}})
	case route == "GET /v1/hosts":
		if f.hostsFail {
			js(500, map[string]string{"error": "hosts exploded", "code": "internal"})
			return
		}
		js(200, map[string]any{"hosts": []map[string]any{
			{"host": "q1.example", "queued": 5000, "in_flight": 2, "errors": 0, "delay_ms": 1000},
			{"host": "q2.example", "queued": 3000, "in_flight": 1, "errors": 9, "delay_ms": 500},
		}})
	case route == "GET /v1/errors/recent":
		js(200, map[string]any{"errors": []map[string]any{
			{"time": now.Format(time.RFC3339), "url": "http://bad.example/x", "class": "timeout", "message": hostileMessage},
		}})
	case route == "GET /v1/deadletters":
		js(200, map[string]any{"total": 5, "dead_letters": []map[string]any{
			{"url": "http://dead.example/p", "attempts": 5, "status": 503, "last_error": "503 service unavailable", "at": now.Format(time.RFC3339)},
		}})
	case route == "GET /v1/domains/blocked":
		js(200, map[string]any{"domains": append([]string{}, f.blocked...)})
	case route == "POST /v1/crawl/pause":
		f.state = "paused"
		w.WriteHeader(204)
	case route == "POST /v1/crawl/resume":
		f.state = "running"
		w.WriteHeader(204)
	case r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/block") && strings.HasPrefix(r.URL.Path, "/v1/domains/"):
		f.blocked = append(f.blocked, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/domains/"), "/block"))
		w.WriteHeader(204)
	case r.Method == "DELETE" && strings.HasSuffix(r.URL.Path, "/block") && strings.HasPrefix(r.URL.Path, "/v1/domains/"):
		d := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/domains/"), "/block")
		f.blocked = slices.DeleteFunc(f.blocked, func(s string) bool { return s == d })
		w.WriteHeader(204)
	default:
		js(404, map[string]string{"error": "no route " + route, "code": "not_found"})
	}
}

func (f *fakeAPI) get(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// browserPage starts Chromium (skipping outside CI when there is none) and opens url with a
// recorder of CSP violations installed. It returns the tab's chromedp context; the browser
// is stopped when the test ends.
func browserPage(t *testing.T, ctx context.Context, url string) context.Context {
	t.Helper()
	if browsertest.Find() == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no chromium on PATH in CI")
		}
		t.Skip("no chromium on PATH")
	}
	tab, stop, err := browsertest.Start(ctx, browsertest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := chromedp.Do(tab, browsertest.RecordCSP(), chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	return tab
}

// eval evaluates the JavaScript expression expr in the page and decodes its value.
func eval[T any](tab context.Context, expr string) (T, error) {
	return chromedp.Run(tab, chromedp.Evaluate[T](expr))
}

// do evaluates expr for its effect.
func do(t *testing.T, tab context.Context, expr string) {
	t.Helper()
	if _, err := eval[chromedp.Void](tab, expr); err != nil {
		t.Fatal(err)
	}
}

// waitFor evaluates expr until it returns true.
func waitFor(t *testing.T, ctx, tab context.Context, what, expr string) {
	t.Helper()
	var ok bool
	var err error
	for ctx.Err() == nil {
		if ok, err = eval[bool](tab, expr); err == nil && ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within the deadline (%s; last error %v)", what, expr, err)
}

func texts(t *testing.T, tab context.Context, ids ...string) map[string]string {
	t.Helper()
	list, _ := json.Marshal(ids)
	got, err := eval[map[string]string](tab, fmt.Sprintf(`Object.fromEntries(%s.map(id => [id, document.getElementById(id).textContent]))`, list))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestPageInBrowser renders the page in headless Chromium against the fake API and drives
// its controls.
func TestPageInBrowser(t *testing.T) {
	api := &fakeAPI{token: "s3cret", state: "running"}
	srv := httptest.NewServer(api)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	p := browserPage(t, ctx, srv.URL+"/#token=s3cret")
	waitFor(t, ctx, p, "first poll", `+document.getElementById("poll-count").textContent >= 1`)
	t.Logf("first render %s after launch", time.Since(start).Round(time.Millisecond))

	want := map[string]string{
		"node-name": "node-a", "state": "running", "uptime": "1h2m3s", "pages-crawled": "1,234,567",
		"pages-queued": "8,901", "in-flight": "12", "retry-pending": "34", "dead-letters": "5",
		"crawl-rate": "98.8", "extract-backlog": "7", "hosts-known": "321", "hosts-active": "45",
		"seen-urls": "2,345,678", "bytes-fetched": "5.0 GiB", "leader": "node-b", "member-count": "3",
		"partition-count": "271", "dead-letters-total": "5",
	}
	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	got := texts(t, p, ids...)
	for id, w := range want {
		if got[id] != w {
			t.Errorf("#%s = %q, want %q", id, got[id], w)
		}
	}
	type pageRows struct {
		Members, Ring, Queue, ErrHosts, Errors, Dead, Points, Poly int
		RingFlex                                                   []string
		ErrText, ErrHost, RespText                                 string
		Imgs, Owned                                                int
		CSP                                                        []string
	}
	rows, err := eval[pageRows](p, `(() => {
		const q = s => document.querySelectorAll(s);
		const poly = document.querySelector("#rate-chart polyline");
		return {
			Members: q("#members tr").length, Ring: q("#ring div").length,
			RingFlex: [...q("#ring div")].map(d => d.style.flexGrow + ":" + d.textContent),
			Queue: q("#hosts-by-queue tr").length, ErrHosts: q("#hosts-by-errors tr").length,
			ErrHost: document.querySelector("#hosts-by-errors td").textContent,
			Errors: q("#recent-errors tr").length, Dead: q("#dead-letter-list tr").length,
			Points: +document.getElementById("rate-chart").dataset.points,
			Poly: poly ? poly.getAttribute("points").split(" ").length : 0,
			ErrText: q("#recent-errors td")[3].textContent,
			RespText: document.getElementById("responses-by-class").textContent,
			Imgs: q("img").length, Owned: window.__owned || 0, CSP: window.__csp,
		};
	})()`)
	if err != nil {
		t.Fatal(err)
	}
	// 90+91+80 of 271 partitions held: the ring shows the 10 unassigned ones too.
	if rows.Members != 3 || rows.Ring != 4 || !slices.Equal(rows.RingFlex, []string{"90:node-a", "91:node-b", "80:node-c", "10:unassigned"}) {
		t.Errorf("cluster: %d member rows, ring %v", rows.Members, rows.RingFlex)
	}
	if rows.Queue != 2 || rows.ErrHosts != 1 || rows.ErrHost != "q2.example" {
		t.Errorf("hosts: %d by queue, %d by errors (first %q); want 2, 1 (q2.example)", rows.Queue, rows.ErrHosts, rows.ErrHost)
	}
	if rows.Errors != 1 || rows.Dead != 1 || rows.ErrText != hostileMessage || rows.Imgs != 0 || rows.Owned != 0 {
		t.Errorf("errors %d rows (text %q), dead letters %d rows, <img> %d, script ran %d", rows.Errors, rows.ErrText, rows.Dead, rows.Imgs, rows.Owned)
	}
	if rows.Points != 30 || rows.Poly != 30 {
		t.Errorf("chart: %d points, polyline of %d", rows.Points, rows.Poly)
	}
	if !strings.Contains(rows.RespText, "2xx1,200,000") || !strings.Contains(rows.RespText, "5xx567") {
		t.Errorf("responses by class: %q", rows.RespText)
	}
	if len(rows.CSP) > 0 {
		t.Errorf("CSP violations: %v", rows.CSP)
	}

	// Controls.
	do(t, p, `document.getElementById("pause").click()`)
	waitFor(t, ctx, p, "paused", `document.getElementById("state").textContent === "paused" && document.getElementById("pause").disabled && !document.getElementById("resume").disabled`)
	api.get(func() {
		if api.state != "paused" {
			t.Errorf("API state %q after Pause", api.state)
		}
	})
	do(t, p, `document.getElementById("resume").click()`)
	waitFor(t, ctx, p, "resumed", `document.getElementById("state").textContent === "running"`)
	do(t, p, `(() => { document.getElementById("block-input").value = " https://Spam.Example/path "; document.getElementById("block-button").click(); })()`)
	waitFor(t, ctx, p, "blocked list", `document.getElementById("blocked-domains").textContent.includes("spam.example")`)
	api.get(func() {
		if !slices.Equal(api.blocked, []string{"spam.example"}) {
			t.Errorf("blocked %v after blocking https://Spam.Example/path", api.blocked)
		}
	})
	do(t, p, `document.querySelector("#blocked-domains button").click()`)
	waitFor(t, ctx, p, "unblocked", `!document.getElementById("blocked-domains").textContent.includes("spam.example")`)

	api.get(func() {
		if api.badAuth != 0 {
			t.Errorf("%d requests without the bearer token", api.badAuth)
		}
		contract := regexp.MustCompile(`^(GET /v1/crawl/status|GET /v1/cluster|GET /v1/hosts\?top=10&by=(queue|errors)|GET /v1/errors/recent\?limit=20|GET /v1/deadletters\?limit=20|GET /v1/domains/blocked|POST /v1/crawl/(pause|resume)|(POST|DELETE) /v1/domains/[a-z0-9.-]+/block)$`)
		for _, r := range api.requests {
			if !contract.MatchString(r) {
				t.Errorf("request outside the API contract: %s", r)
			}
		}
	})
}

// TestPageWithoutToken shows the token banner when the API answers 401, and a failing
// endpoint only blanks its own panel.
func TestPageWithoutToken(t *testing.T) {
	api := &fakeAPI{token: "s3cret", state: "running"}
	srv := httptest.NewServer(api)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := browserPage(t, ctx, srv.URL+"/")
	waitFor(t, ctx, p, "token banner", `document.getElementById("banner").offsetParent !== null && document.getElementById("banner").textContent.includes("#token=")`)

	api.get(func() { api.token, api.hostsFail = "", true })
	waitFor(t, ctx, p, "recovery", `document.getElementById("pages-crawled").textContent === "1,234,567" && document.getElementById("banner").offsetParent === null`)
	got := texts(t, p, "hosts-by-queue", "members")
	if !strings.Contains(got["hosts-by-queue"], "unavailable: 500 hosts exploded") || !strings.Contains(got["members"], "node-a") {
		t.Errorf("failing hosts panel: %q; members panel %q", got["hosts-by-queue"], got["members"])
	}
}
