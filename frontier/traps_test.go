package frontier

import (
	"math/rand/v2"
	"testing"
)

func TestHostOf(t *testing.T) {
	cases := []struct{ in, want string }{
		{"http://h1.sim.test/a", "h1.sim.test"},
		{"https://H.test:8443/x?y", "h.test:8443"},
		{"http://h.test:80/", "h.test"},
		{"https://h.test:443", "h.test"},
		{"http://user:pw@h.test/", "h.test"},
		{"http://h.test?q=1", "h.test"},
		{"mailto:a@b.c", ""},
		{"http:///x", ""},
	}
	for _, tc := range cases {
		got, ok := hostOf(tc.in)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("hostOf(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

func TestStaticCheck(t *testing.T) {
	l := trapLimits{maxDepth: 2, maxURLLength: 40, maxRepeated: 2, maxParams: 2}
	cases := []struct {
		url   string
		depth int
		want  string
	}{
		{"http://h.test/a", 0, ""},
		{"http://h.test/a", 2, ""},
		{"http://h.test/a", 3, RejectMaxDepth},
		{"http://h.test/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0, RejectURLTooLong},
		{"http://h.test/a/b/a/b", 0, ""},
		{"http://h.test/a/b/a/b/a", 0, RejectRepeatedSegments},
		{"http://h.test/x/a/a/a/", 0, RejectRepeatedSegments},
		{"http://h.test/?a=1&b=2", 0, ""},
		{"http://h.test/?a=1&b=2&c", 0, RejectTooManyParams},
		{"http://h.test/?a=1&&b=2&", 0, ""},
	}
	for _, tc := range cases {
		if got := staticCheck(l, tc.url, tc.depth); got != tc.want {
			t.Errorf("staticCheck(%q, %d) = %q, want %q", tc.url, tc.depth, got, tc.want)
		}
	}
	unlimited := trapLimits{-1, -1, -1, -1}
	if got := staticCheck(unlimited, "http://h.test/a/a/a/a/a?a&b&c&d", 1000); got != "" {
		t.Errorf("unlimited limits rejected with %q", got)
	}
}

func TestLooksGenerated(t *testing.T) {
	cases := []struct {
		url  string
		want bool
	}{
		{"http://h.test/", false},
		{"http://h.test/blog/how-to-crawl", false},
		{"http://h.test/2024/05/17/", true},
		{"http://h.test/archive/2024/5/", true},
		{"http://h.test/calendar/", true},
		{"http://h.test/Calendar?x=1", true},
		{"http://h.test/product/1234567", false},
		{"http://h.test/docs/v2024/intro", false},
		{"http://h.test/s/0123456789abcdef0123/", true},                 // hex session id
		{"http://h.test/s/aB3dE5fG7hJ9kL1mN3pQ5rS7tU9/x", true},         // base64-like token
		{"http://h.test/a-very-long-readable-article-slug-here", false}, // long but no digits
		{"http://h.test/deadbeefdeadbeefdeadbeef", false},               // hex without digits
		{"http://h.test/list?sort=price", true},
		{"http://h.test/list?filter_color=red", true},
		{"http://h.test/list?page=2", false},
		{"http://h.test/list?a=1&b=2&c=3&d=4&e=5", true},
		{"http://h.test/list?a=1&b=2&c=3&d=4", false},
	}
	for _, tc := range cases {
		if got := looksGenerated(tc.url); got != tc.want {
			t.Errorf("looksGenerated(%q) = %v, want %v", tc.url, got, tc.want)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	q := qrec{URL: "http://h.test/a", From: "http://h.test/", Depth: 3, Hops: 1, Attempts: 2, Priority: 7, LastErr: "x", LastStatus: 503}
	got, err := decodeQrec(q.encode())
	if err != nil || got != q {
		t.Fatalf("qrec %+v %v", got, err)
	}
	if _, err := decodeQrec([]byte{1, 200}); err == nil {
		t.Fatal("truncated record decoded")
	}
	k := qKey(270, "h.test:8080", 3, 70000, 42)
	h, seq, ok := parseQKey(k)
	if !ok || h != "h.test:8080" || seq != 42 || k[0] != 'q' || k[1] != 1 || k[2] != 14 {
		t.Fatalf("qkey %q %d %v %v", h, seq, ok, k[:3])
	}
	p, due, s, ok := parseRKey(rKey(5, 123456789, 9))
	if !ok || p != 5 || due != 123456789 || s != 9 {
		t.Fatal("rkey")
	}
}

func TestBloomBytesPerURLAtDefaults(t *testing.T) {
	f := openF(t, Config{DB: openDB(t, "")})
	per := float64(f.Stats().BloomBytes) / float64(f.cfg.ExpectedURLs)
	if per > 1.5 || per < 1 {
		t.Fatalf("Bloom uses %.3f bytes per URL at 1%% FP, want <= 1.5", per)
	}
}

func TestParentHost(t *testing.T) {
	for in, want := range map[string]string{
		"w1.h5.sim.test":       "h5.sim.test",
		"h5.sim.test":          "sim.test",
		"example.org":          "",
		"localhost":            "",
		"10.0.0.1":             "",
		"10.0.0.1:8080":        "",
		"[::1]:8080":           "",
		"a.b.example.org:8080": "b.example.org",
	} {
		if got := parentHost(in); got != want {
			t.Errorf("parentHost(%q) = %q, want %q", in, got, want)
		}
	}
}

// Faceted navigation: a path's first QueryVariantsFree distinct queries are free, later
// ones spend the generated budget, and other paths keep their own allowance.
func TestQueryVariantsSpendGeneratedBudget(t *testing.T) {
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true, QueryVariantsFree: 3, GeneratedBudget: 2})
	added := 0
	for i := 0; i < 10; i++ {
		added += mustAdd(t, f, u("shop.test", "/catalog/?color=c"+string(rune('a'+i)))).Added
	}
	if added != 3+2 {
		t.Fatalf("admitted %d facet variants, want 3 free + 2 budget", added)
	}
	// The budget is spent: another path's variants beyond its free ones are refused too,
	// but its first ones and plain pages still pass.
	for i := 0; i < 3; i++ {
		if r := mustAdd(t, f, u("shop.test", "/other?p="+string(rune('a'+i)))); r.Added != 1 {
			t.Fatalf("free variant %d of another path refused: %+v", i, r)
		}
	}
	if r := mustAdd(t, f, u("shop.test", "/other?p=z")); r.Rejected[RejectGeneratedBudget] != 1 {
		t.Fatalf("4th variant of /other: %+v", r)
	}
	if r := mustAdd(t, f, u("shop.test", "/plain")); r.Added != 1 {
		t.Fatalf("plain page refused: %+v", r)
	}
}

// Invented subdomains: at most MaxSubdomains new hosts below an existing host; seeds are
// exempt, and hosts whose parent is not a known host are not limited.
func TestSubdomainBudget(t *testing.T) {
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true, MaxSubdomains: 3})
	mustAdd(t, f, Candidate{URL: "http://h5.sim.test/"})
	added := 0
	for i := 0; i < 10; i++ {
		c := Candidate{URL: "http://w" + string(rune('a'+i)) + ".h5.sim.test/", Depth: 1}
		added += mustAdd(t, f, c).Added
	}
	if added != 3 {
		t.Fatalf("admitted %d invented subdomains, want 3", added)
	}
	if r := mustAdd(t, f, Candidate{URL: "http://seed.h5.sim.test/"}); r.Added != 1 {
		t.Fatalf("a seed under the parent was refused: %+v", r)
	}
	// Siblings of h5 (children of sim.test, which is not a host here) are unlimited.
	for i := 0; i < 10; i++ {
		c := Candidate{URL: "http://h" + string(rune('a'+i)) + ".sim.test/", Depth: 2}
		if r := mustAdd(t, f, c); r.Added != 1 {
			t.Fatalf("host %s refused: %+v", c.URL, r)
		}
	}
	// Known hosts keep admitting pages.
	if r := mustAdd(t, f, Candidate{URL: "http://wa.h5.sim.test/more", Depth: 2}); r.Added != 1 {
		t.Fatalf("page of an admitted subdomain refused: %+v", r)
	}
}

func TestLookupHash(t *testing.T) {
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true})
	mustAdd(t, f, u("a.test", "/x"), u("b.test", "/y"))
	for _, url := range []string{"http://a.test/x", "http://b.test/y"} {
		sr, ok, err := f.LookupHash(URLHash(url))
		if err != nil || !ok || sr.URL != url || sr.State != StateQueued {
			t.Fatalf("LookupHash(%s) = %+v, %v, %v", url, sr, ok, err)
		}
	}
	if _, ok, err := f.LookupHash(URLHash("http://a.test/missing")); ok || err != nil {
		t.Fatalf("found a URL never added (err %v)", err)
	}
}

func TestTopHostsByQueue(t *testing.T) {
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true})
	for i, n := range []int{3, 7, 1, 5} {
		host := string(rune('a'+i)) + ".test"
		mustAdd(t, f, urls(host, n)...)
	}
	top := f.TopHostsByQueue(3)
	if len(top) != 3 || top[0].Host != "b.test" || top[0].Queued != 7 || top[1].Host != "d.test" || top[2].Host != "a.test" {
		t.Fatalf("top hosts %+v", top)
	}
	if h, ok := f.Host("c.test"); !ok || h.Queued != 1 || h.Delay != 0 {
		t.Fatalf("Host(c.test) = %+v, %v", h, ok)
	}
	if _, ok := f.Host("nope.test"); ok {
		t.Fatal("unknown host found")
	}
}

// A Retry with Park makes the leased URL a dead letter at once (its host was parked while
// it was leased), not after MaxAttempts.
func TestRetryParkIsDeadAtOnce(t *testing.T) {
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true})
	mustAdd(t, f, u("h.test", "/a"))
	l, _ := tryNext(t, f)
	if l == nil {
		t.Fatal("no lease")
	}
	mustDone(t, f, l, Outcome{Kind: Retry, Park: true, Err: "robots.txt unreachable"})
	var got []DeadLetter
	_ = f.DeadLetters(func(d DeadLetter) bool { got = append(got, d); return true })
	if len(got) != 1 || got[0].URL != "http://h.test/a" || got[0].Attempts != 1 || got[0].LastErr != "robots.txt unreachable" {
		t.Fatalf("dead letters %+v", got)
	}
	if st := f.Stats(); st.RetryPending != 0 || st.DeadLetters != 1 || !f.Idle() {
		t.Fatalf("stats %+v idle %v", st, f.Idle())
	}
}

// maxSegments never undercounts: the shortcut it gives staticCheck skips only paths where
// no segment can occur more often than the limit.
func TestMaxSegmentsBound(t *testing.T) {
	parts := []string{"", "/", "a", "b", "/a", "a/", "//", "a/a", "/a/a", "aa/a"}
	var walk func(p string, depth int)
	walk = func(p string, depth int) {
		if r := maxSegmentRepeats(p); r > maxSegments(p) {
			t.Fatalf("path %q: a segment occurs %d times, bound %d", p, r, maxSegments(p))
		}
		if depth == 0 {
			return
		}
		for _, s := range parts {
			walk(p+s, depth-1)
		}
	}
	walk("", 5)
	// Exact on the paths with one repeated segment and nothing else.
	for _, p := range []string{"a", "/a", "a/a", "/a/a/a", "a/a/a/a"} {
		if r, b := maxSegmentRepeats(p), maxSegments(p); r != b {
			t.Errorf("path %q: %d repeats, bound %d", p, r, b)
		}
	}
}

// batchDedup answers as a map would, on the stack table (with probe chains: hashes that
// share the bytes it indexes by) and on the map beyond dedupSmall candidates.
func TestBatchDedup(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 7, 100, dedupSmall, dedupSmall + 1, 1000} {
		var pool [][16]byte
		for range max(n/3, 1) {
			var h [16]byte
			for i := range h {
				h[i] = byte(r.Uint32())
			}
			if r.IntN(3) == 0 && len(pool) > 0 { // same index bytes as another hash
				copy(h[8:], pool[r.IntN(len(pool))][8:])
			}
			pool = append(pool, h)
		}
		var d batchDedup
		d.init(n)
		var items []prep
		want := map[[16]byte]int{}
		for range n {
			h := pool[r.IntN(len(pool))]
			j, ok := d.lookupOrInsert(items, h)
			wj, wok := want[h]
			if ok != wok || ok && j != wj {
				t.Fatalf("n=%d: hash %x: got (%d, %v), want (%d, %v)", n, h, j, ok, wj, wok)
			}
			if !ok {
				want[h] = len(items)
				items = append(items, prep{hash: h})
			}
		}
	}
}
