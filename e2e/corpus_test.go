package e2e

// The corpus and WARC checks of the issue, against simweb's ground truth:
//
//   - every must-reach HTML page has exactly one corpus record (and no URL has two);
//   - simweb's planted mirrors are found as exact duplicates and its planted near-duplicates as
//     near-duplicates, scored so that crawl order does not matter (precision and recall >= 0.95);
//   - extraction keeps the planted main text and drops the planted navigation and boilerplate;
//   - the exported Markdown has the page's title as a heading and its planted text, and none
//     of its boilerplate; export --format markdown writes one file a page (corpus_markdown_test.go);
//   - the WARC files verify under an independent reader (warcread_test.go), and every
//     response's bytes are what simweb serves for the request the WARC recorded;
//   - damaged WARC files and a half-written corpus shard are repaired on restart without
//     losing any record before the damage (TestWARCRepairAfterKill).

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/simweb"
)

// corpusWeb is the web of the corpus checks: 60 hosts with every pathology of the default
// profile, including mirrors (whose origins are in the web) and near-duplicate hosts.
func corpusWeb(c *simweb.Config) {
	c.Hosts = 60
	c.Seed = 11
	c.MirrorHosts = 4
	c.NearDupHosts = 12
	c.CrawlDelayHosts = 0 // politeness has its own tests; Crawl-delay hosts with traps take minutes
}

// TestCorpusOracle crawls a 60-host web to the end, then holds the corpus and the WARC files
// to simweb's ground truth (subtests records, duplicates, extraction, markdown, warc).
func TestCorpusOracle(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	w, addr := web(t, corpusWeb)
	mirrors := 0
	for _, s := range w.Seeds() {
		if pi, ok := w.Page(s); ok && pi.MirrorOf != "" {
			mirrors++
			if _, ok := w.Page(pi.MirrorOf); !ok {
				t.Fatalf("mirror %s: origin %s is not in the web", s, pi.MirrorOf)
			}
		}
	}
	exactGroups, nearGroups := w.ExactDuplicateGroups(), w.NearDuplicateGroups()
	if mirrors == 0 || len(exactGroups) == 0 || len(nearGroups) == 0 {
		t.Fatalf("the web must plant duplicates: %d mirror hosts, %d exact groups, %d near groups", mirrors, len(exactGroups), len(nearGroups))
	}
	t.Logf("web: %d hosts, %d mirror hosts, %d exact-duplicate groups, %d near-duplicate groups", w.Config().Hosts, mirrors, len(exactGroups), len(nearGroups))

	data := filepath.Join(t.TempDir(), "data")
	start := time.Now()
	c := startCrawler(t, crawlArgs(data, addr, w, t)...)
	if code := c.wait(t, 4*time.Minute); code != 0 {
		t.Fatalf("crawlnode exited %d:\n%s", code, tail(c.stderr.String(), 3000))
	}
	rep := w.Report(reportOptions(0))
	checkClean(t, rep, 0)
	t.Logf("crawl took %s", time.Since(start).Round(time.Millisecond))

	var records []corpus.Record
	if err := corpus.ReadShards(filepath.Join(data, "corpus"), func(r corpus.Record) error {
		records = append(records, r)
		return nil
	}); err != nil {
		t.Fatalf("read corpus: %v", err)
	}
	byURL := map[string][]*corpus.Record{}
	for i := range records {
		u := canon(records[i].URL)
		byURL[u] = append(byURL[u], &records[i])
	}

	t.Run("records", func(t *testing.T) { checkRecords(t, w, byURL, len(records)) })
	t.Run("duplicates", func(t *testing.T) { checkDuplicates(t, w, byURL, exactGroups, nearGroups) })
	t.Run("extraction", func(t *testing.T) { checkExtraction(t, w, byURL) })
	t.Run("markdown", func(t *testing.T) { checkMarkdown(t, w, data) })
	// Last: replaying requests resets simweb's log.
	t.Run("warc", func(t *testing.T) { checkWARCAgainstSimweb(t, w, filepath.Join(data, "warc")) })
}

func canon(u string) string {
	if c, ok := simweb.Canonicalize("", u); ok {
		return c
	}
	return u
}

// expectsRecord says whether simweb's page u must have a corpus record: a final 2xx answer
// declared text/html whose body is HTML, or a PDF (declared, or behind a text/html label).
// Redirects, errors, other declared non-HTML and other binary served as text/html
// (sniffed, RFC 7231 / WHATWG) are not corpus pages.
func expectsRecord(w *simweb.Web, u string) (simweb.PageInfo, bool) {
	pi, ok := w.Page(u)
	if ok && pi.PDF && pi.Status == 200 {
		return pi, true
	}
	if !ok || pi.Status < 200 || pi.Status > 299 || !strings.HasPrefix(pi.ContentType, "text/html") {
		return pi, false
	}
	if len(pi.MainText) > 0 {
		return pi, true
	}
	// No planted text: sniff the body simweb serves (in process, first 512 bytes).
	req, _ := http.NewRequest("GET", u, nil)
	cw := &captureWriter{limit: 512}
	serveInProcess(w, req, cw)
	return pi, strings.HasPrefix(http.DetectContentType(cw.body.Bytes()), "text/")
}

// checkRecords: every must-reach HTML page has exactly one record, no URL has two, and no
// record is for a URL simweb did not serve as an HTML page. Rejected pages (quality filters,
// opt-out) have their one record with the reason; planted opt-out pages are rejected as such.
func checkRecords(t *testing.T, w *simweb.Web, byURL map[string][]*corpus.Record, total int) {
	must := w.MustReach(reportOptions(0))
	expected, missing, optOutWrong := 0, []string{}, []string{}
	reasons := map[string]int{}
	for _, u := range must {
		pi, ok := expectsRecord(w, u)
		if !ok {
			continue
		}
		expected++
		recs := byURL[u]
		if len(recs) == 0 {
			missing = append(missing, u)
			continue
		}
		r := recs[0]
		reasons[r.Rejected]++
		if r.Status != pi.Status {
			t.Errorf("%s: record status %d, simweb %d", u, r.Status, pi.Status)
		}
		planted := len(pi.OptOut) > 0 || pi.NoIndex
		if planted != (r.Rejected == corpus.RejectOptOut) || planted && r.Text != "" {
			optOutWrong = append(optOutWrong, fmt.Sprintf("%s (planted %v %v, record %q %v)", u, pi.OptOut, pi.NoIndex, r.Rejected, r.OptOut))
		}
	}
	var twice, notHTML []string
	outside := 0
	mustSet := map[string]bool{}
	for _, u := range must {
		mustSet[u] = true
	}
	for u, recs := range byURL {
		if len(recs) > 1 {
			twice = append(twice, fmt.Sprintf("%s x%d", u, len(recs)))
		}
		if _, ok := expectsRecord(w, u); !ok {
			notHTML = append(notHTML, u)
		}
		if !mustSet[u] {
			outside++ // trap pages within budget, pages linked only through nofollow
		}
	}
	sort.Strings(twice)
	sort.Strings(notHTML)
	t.Logf("records: %d in the corpus for %d URLs; must-reach %d, of which HTML 2xx pages %d; missing %d; URLs with two or more records %d; records outside must-reach %d; by outcome %v",
		total, len(byURL), len(must), expected, len(missing), len(twice), outside, reasons)
	if len(missing) > 0 {
		t.Errorf("%d must-reach HTML pages have no corpus record, e.g. %v", len(missing), first(missing, 10))
	}
	if len(twice) > 0 {
		t.Errorf("%d URLs have more than one record, e.g. %v", len(twice), first(twice, 10))
	}
	if len(notHTML) > 0 {
		t.Errorf("%d records for URLs that are not HTML 2xx pages, e.g. %v", len(notHTML), first(notHTML, 10))
	}
	if len(optOutWrong) > 0 {
		t.Errorf("%d pages whose opt-out record disagrees with the planted signals, e.g. %v", len(optOutWrong), first(optOutWrong, 5))
	}
}

// unionFind over URLs.
type unionFind map[string]string

func (u unionFind) find(x string) string {
	for {
		p, ok := u[x]
		if !ok || p == x {
			return x
		}
		if g, ok := u[p]; ok && g != p {
			u[x] = g
		}
		x = p
	}
}

func (u unionFind) union(a, b string) {
	ra, rb := u.find(a), u.find(b)
	if ra != rb {
		u[ra] = rb
	}
}

// checkDuplicates scores the corpus's duplicate marks against simweb's planted groups.
//
// Only pages whose text was analysed can be marked (a record not rejected); a planted pair
// counts when both its pages have such a record. Which page is the original depends on crawl
// order, so pairs are scored, not marks: a planted pair is found when both pages fall in the
// same corpus duplicate cluster (the connected components of url -> duplicate_of). Exact pairs
// are the pairs of an exact group (mirrors, print variants: identical text); near pairs are the
// other pairs of a near group (texts one edit apart). Recall is found/planted per kind.
// Precision: of the pages the corpus marked duplicate, the share whose duplicate_of is planted
// as a duplicate of it (same exact or near group). The kind of the mark is checked on its own:
// a planted-identical pair marked near is a kind error; a near pair marked exact counts as
// right only if simweb's texts of the two are equal after NormalizeText.
func checkDuplicates(t *testing.T, w *simweb.Web, byURL map[string][]*corpus.Record, exactGroups, nearGroups [][]string) {
	analysed := func(u string) (*corpus.Record, bool) {
		recs := byURL[u]
		if len(recs) == 0 || recs[0].Rejected != "" {
			return nil, false
		}
		return recs[0], true
	}
	truth, exactOf := unionFind{}, unionFind{}
	planted := map[string]bool{}
	for _, g := range exactGroups {
		for _, u := range g {
			truth.union(g[0], u)
			exactOf.union(g[0], u)
			planted[u] = true
		}
	}
	for _, g := range nearGroups {
		for _, u := range g {
			truth.union(g[0], u)
			planted[u] = true
		}
	}
	// simweb's groups cover home, article and print pages; other pages with the same planted
	// text (trap pages of one session, say) are exact duplicates too.
	byText := map[string]string{}
	for u := range byURL {
		if _, ok := analysed(u); !ok {
			continue
		}
		pi, ok := w.Page(u)
		if !ok || len(pi.MainText) == 0 {
			continue
		}
		key := corpus.NormalizeText(strings.Join(pi.MainText, "\n"))
		if v, ok := byText[key]; ok {
			truth.union(v, u)
			exactOf.union(v, u)
			planted[u], planted[v] = true, true
		} else {
			byText[key] = u
		}
	}
	found := unionFind{}
	marked, correct, kindErr := 0, 0, 0
	var falsePos, kindSamples []string
	for u, recs := range byURL {
		r := recs[0]
		if r.DuplicateOf == "" {
			continue
		}
		if r.Rejected != "" {
			t.Errorf("%s: rejected (%s) and marked duplicate", u, r.Rejected)
		}
		orig := canon(r.DuplicateOf)
		found.union(u, orig)
		marked++
		if o, ok := analysed(orig); !ok || !o.Kept() {
			t.Errorf("%s: duplicate_of %s, which is not a kept original in the corpus", u, orig)
		}
		if truth.find(u) != truth.find(orig) {
			falsePos = append(falsePos, fmt.Sprintf("%s -> %s (%s, distance %d)", u, orig, r.DuplicateKind, r.DupDistance))
			continue
		}
		correct++
		identical := exactOf.find(u) == exactOf.find(orig) || sameText(w, u, orig)
		if identical != (r.DuplicateKind == corpus.DupExact) {
			kindErr++
			kindSamples = append(kindSamples, fmt.Sprintf("%s -> %s marked %s, planted identical %v", u, orig, r.DuplicateKind, identical))
		}
	}
	type score struct{ planted, found int }
	var exact, near score
	var missedExact, missedNear []string
	groups := map[string][]string{}
	for u := range byURL {
		if _, ok := analysed(u); ok {
			if planted[u] {
				groups[truth.find(u)] = append(groups[truth.find(u)], u)
			}
		}
	}
	for _, g := range groups {
		sort.Strings(g)
		for i := range g {
			for j := i + 1; j < len(g); j++ {
				a, b := g[i], g[j]
				hit := found.find(a) == found.find(b)
				if exactOf.find(a) == exactOf.find(b) {
					exact.planted++
					if hit {
						exact.found++
					} else {
						missedExact = append(missedExact, a+" ~ "+b)
					}
				} else {
					near.planted++
					if hit {
						near.found++
					} else {
						missedNear = append(missedNear, a+" ~ "+b)
					}
				}
			}
		}
	}
	ratio := func(a, b int) float64 {
		if b == 0 {
			return 1
		}
		return float64(a) / float64(b)
	}
	precision := ratio(correct, marked)
	recallExact, recallNear := ratio(exact.found, exact.planted), ratio(near.found, near.planted)
	recallAll := ratio(exact.found+near.found, exact.planted+near.planted)
	t.Logf("duplicates: %d pages marked (%d false positives): precision %.4f; planted pairs with both pages analysed: exact %d found %d (recall %.4f), near %d found %d (recall %.4f), all recall %.4f; kind errors %d",
		marked, len(falsePos), precision, exact.planted, exact.found, recallExact, near.planted, near.found, recallNear, recallAll, kindErr)
	if len(falsePos) > 0 {
		sort.Strings(falsePos)
		t.Logf("false positives, e.g. %v", first(falsePos, 10))
	}
	if exact.planted == 0 || near.planted == 0 {
		t.Errorf("the crawl analysed no planted exact (%d) or near (%d) pair", exact.planted, near.planted)
	}
	if precision < 0.95 {
		t.Errorf("duplicate precision %.4f < 0.95", precision)
	}
	if recallExact < 0.95 {
		t.Errorf("exact-duplicate recall %.4f < 0.95; missed e.g. %v", recallExact, first(missedExact, 10))
	}
	if recallNear < 0.95 {
		t.Errorf("near-duplicate recall %.4f < 0.95; missed e.g. %v", recallNear, first(missedNear, 10))
	}
	if kindErr > 0 {
		t.Errorf("%d duplicate marks of the wrong kind, e.g. %v", kindErr, first(kindSamples, 5))
	}
}

// sameText: simweb's planted main texts of a and b are equal after normalization.
func sameText(w *simweb.Web, a, b string) bool {
	pa, _ := w.Page(a)
	pb, _ := w.Page(b)
	return corpus.NormalizeText(strings.Join(pa.MainText, "\n")) == corpus.NormalizeText(strings.Join(pb.MainText, "\n"))
}

// checkExtraction compares every kept record's text with the planted main text and
// boilerplate: the share of planted main-text words whose paragraph survives whole, and the
// share of planted boilerplate strings (cookie banner, newsletter box, advertisement, footer,
// footer links) absent from the text. Navigation links and comments are neither.
func checkExtraction(t *testing.T, w *simweb.Web, byURL map[string][]*corpus.Record) {
	var pages, paraWords, keptWords, bpTotal, bpDropped int
	worstKept, worstURL := 1.0, ""
	leaks := map[string]int{}
	for u, recs := range byURL {
		r := recs[0]
		if r.Text == "" {
			continue
		}
		pi, ok := w.Page(u)
		if !ok || len(pi.MainText) == 0 {
			continue
		}
		pages++
		text := " " + corpus.NormalizeText(r.Text) + " "
		pw, kw := 0, 0
		for _, p := range pi.MainText {
			n := corpus.NormalizeText(p)
			words := strings.Count(n, " ") + 1
			pw += words
			if strings.Contains(text, " "+n+" ") {
				kw += words
			}
		}
		paraWords += pw
		keptWords += kw
		if share := float64(kw) / float64(pw); share < worstKept {
			worstKept, worstURL = share, u
		}
		for _, b := range pi.Boilerplate {
			bpTotal++
			if strings.Contains(text, " "+corpus.NormalizeText(b)+" ") {
				leaks[b]++
			} else {
				bpDropped++
			}
		}
	}
	if pages == 0 {
		t.Fatal("no kept record with planted text")
	}
	kept, dropped := float64(keptWords)/float64(paraWords), float64(bpDropped)/float64(bpTotal)
	t.Logf("extraction over %d kept pages: main text kept %.4f (%d of %d words, worst page %.3f %s); boilerplate dropped %.4f (%d of %d strings); leaks %v",
		pages, kept, keptWords, paraWords, worstKept, worstURL, dropped, bpDropped, bpTotal, leaks)
	if kept < 0.95 {
		t.Errorf("only %.4f of the planted main text kept", kept)
	}
	if dropped < 0.95 {
		t.Errorf("only %.4f of the planted boilerplate dropped", dropped)
	}
}

// captureWriter is an http.ResponseWriter that keeps the status, header and the first limit
// body bytes; past limit, Write fails (over is set), which ends simweb's streaming handlers.
type captureWriter struct {
	hdr    http.Header
	status int
	body   bytes.Buffer
	limit  int
	over   bool
}

var errCaptureFull = errors.New("capture limit reached")

func (c *captureWriter) Header() http.Header {
	if c.hdr == nil {
		c.hdr = http.Header{}
	}
	return c.hdr
}

func (c *captureWriter) WriteHeader(s int) {
	if c.status == 0 {
		c.status = s
	}
}

func (c *captureWriter) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	room := c.limit - c.body.Len()
	if len(p) > room {
		c.body.Write(p[:room])
		c.over = true
		return room, errCaptureFull
	}
	c.body.Write(p)
	return len(p), nil
}

func (c *captureWriter) Flush() {}

// serveInProcess runs simweb's handler on req; a handler that aborts the connection (as
// for an unreachable robots.txt) leaves status 0.
func serveInProcess(w *simweb.Web, req *http.Request, cw *captureWriter) {
	defer func() {
		if r := recover(); r != nil && r != http.ErrAbortHandler {
			panic(r)
		}
	}()
	if req.RequestURI == "" {
		req.RequestURI = req.URL.RequestURI()
	}
	w.Handler().ServeHTTP(cw, req)
}

// checkWARCAgainstSimweb reads every WARC file with the test's own reader, verifies every
// record's block and payload digests, and replays each response's recorded request (same
// Host, path, headers, Accept-Encoding included) against simweb in process: status, the
// Content-Type/Content-Encoding/Location headers and the payload bytes must be what simweb
// serves (a truncated payload must be a prefix of it). Revisits must name a payload digest that
// an earlier response of the referred URL carries, and simweb's body must have that digest.
func checkWARCAgainstSimweb(t *testing.T, w *simweb.Web, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatal("no WARC files")
	}
	// Pass 1: requests by record id, payload digests by URL.
	requests := map[string][]byte{}
	digests := map[string]map[string]bool{}
	types := map[string]int{}
	records := 0
	for _, f := range files {
		err := readWARCFile(f, true, func(r *warcRec) error {
			records++
			types[r.Type()]++
			switch r.Type() {
			case "request":
				requests[r.Get("WARC-Record-ID")] = r.Block
			case "response":
				u := r.Get("WARC-Target-URI")
				if digests[u] == nil {
					digests[u] = map[string]bool{}
				}
				digests[u][r.Get("WARC-Payload-Digest")] = true
			}
			return nil
		})
		if err != nil {
			t.Fatalf("independent reader: %v", err)
		}
	}
	t.Logf("warc: %d files, %d records, every block and payload digest verified; by type %v", len(files), records, types)

	// Pass 2: replay. Records of one URL go to one worker in file order, so simweb's
	// first-request behaviours (503/429 then 200) replay as the crawler met them.
	w.ResetLog()
	type job struct {
		rec *warcRec
		req []byte
	}
	const workers = 6
	var chans [workers]chan job
	var mu sync.Mutex
	var problems []string
	var compared, truncated, revisits int
	var bytesCompared int64
	fail := func(format string, a ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, a...))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := range chans {
		chans[i] = make(chan job, 64)
		wg.Add(1)
		go func(in chan job) {
			defer wg.Done()
			for j := range in {
				n, trunc, rv := replayOne(w, j.rec, j.req, digests, fail)
				mu.Lock()
				bytesCompared += n
				compared++
				if trunc {
					truncated++
				}
				if rv {
					revisits++
				}
				mu.Unlock()
			}
		}(chans[i])
	}
	missingReq := 0
	for _, f := range files {
		err := readWARCFile(f, false, func(r *warcRec) error {
			if r.Type() != "response" && r.Type() != "revisit" {
				return nil
			}
			reqID := r.Get("WARC-Concurrent-To")
			req, ok := requests[reqID]
			if !ok {
				missingReq++
				return nil
			}
			h := fnv.New32a()
			h.Write([]byte(canon(r.Get("WARC-Target-URI"))))
			chans[h.Sum32()%workers] <- job{r, req}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range chans {
		close(c)
	}
	wg.Wait()
	t.Logf("warc: %d responses replayed against simweb (%d revisits, %d truncated), %.1f MiB of payload compared byte for byte; %d without a request record",
		compared, revisits, truncated, float64(bytesCompared)/(1<<20), missingReq)
	if missingReq > 0 {
		t.Errorf("%d response records without their request record", missingReq)
	}
	if compared == 0 || truncated == 0 {
		t.Errorf("replayed %d responses, %d truncated: the web's huge pages should give truncated records", compared, truncated)
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		t.Errorf("%d responses differ from what simweb serves, e.g.:\n%s", len(problems), strings.Join(first(problems, 10), "\n"))
	}
}

// replayOne replays one response or revisit record; it returns the payload bytes compared.
func replayOne(w *simweb.Web, r *warcRec, reqBlock []byte, digests map[string]map[string]bool, fail func(string, ...any)) (n int64, trunc, revisit bool) {
	uri := r.Get("WARC-Target-URI")
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(reqBlock)))
	if err != nil {
		fail("%s: request record does not parse: %v", uri, err)
		return
	}
	if got := canon("http://" + req.Host + req.RequestURI); got != canon(uri) {
		fail("%s: request record asks for %s", uri, got)
	}
	hdr, payload, ok := httpParts(r.Block)
	if !ok {
		fail("%s: HTTP header has no end", uri)
		return
	}
	wres, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(hdr)), req)
	if err != nil {
		fail("%s: HTTP header does not parse: %v", uri, err)
		return
	}
	wres.Body.Close()
	trunc = r.Get("WARC-Truncated") != ""
	revisit = r.Type() == "revisit"
	cw := &captureWriter{limit: len(payload) + 1}
	if trunc {
		cw.limit = len(payload)
	}
	if revisit {
		cw.limit = 64 << 20
	}
	serveInProcess(w, req, cw)
	if cw.status != wres.StatusCode {
		fail("%s: WARC status %d, simweb %d", uri, wres.StatusCode, cw.status)
		return
	}
	for _, name := range []string{"Content-Type", "Content-Encoding", "Location"} {
		if a, b := wres.Header.Get(name), cw.Header().Get(name); a != b {
			fail("%s: WARC %s %q, simweb %q", uri, name, a, b)
		}
	}
	served := cw.body.Bytes()
	switch {
	case revisit:
		d := r.Get("WARC-Payload-Digest")
		if got := sha1Base32(served); got != d {
			fail("%s: revisit digest %s, simweb's body %s", uri, d, got)
		}
		ref := r.Get("WARC-Refers-To-Target-URI")
		if !digests[ref][d] {
			fail("%s: revisit refers to %s, which has no response with payload %s", uri, ref, d)
		}
		return int64(len(served)), false, true
	case trunc:
		if !cw.over || !bytes.Equal(served, payload) {
			fail("%s: truncated payload (%d bytes) is not a strict prefix of simweb's body", uri, len(payload))
		}
	default:
		if cw.over || !bytes.Equal(served, payload) {
			fail("%s: payload differs: WARC %d bytes, simweb %d%s", uri, len(payload), len(served), map[bool]string{true: "+"}[cw.over])
		}
	}
	return int64(len(payload)), trunc, false
}

// TestWARCRepairAfterKill kills a crawl with SIGKILL, damages its data directory as a crash
// and a bad disk would (the newest WARC file cut in the middle of a record; then, after a
// second run and kill, garbage appended to it; the open corpus shard cut mid-record), and
// restarts the crawler on it, the first time with more seeds. Each restart must repair and go
// on; at the end every record before the damage is still in the data directory and in
// `crawlnode export --format warc` and `--format urls`, every file verifies under the
// independent reader, the corpus reads back, and the crawl is complete.
func TestWARCRepairAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	w, addr := web(t, func(c *simweb.Config) { c.Hosts = 30; c.Seed = 13; c.CrawlDelayHosts = 0 })
	data := filepath.Join(t.TempDir(), "data")
	all := crawlArgs(data, addr, w, t, "--concurrency", "16")
	// The first run starts from a third of the seeds; the restart adds the rest.
	fewSeeds := filepath.Join(t.TempDir(), "few.txt")
	os.WriteFile(fewSeeds, []byte(strings.Join(w.Seeds()[:10], "\n")+"\n"), 0o644)
	few := append([]string(nil), all...)
	for i := range few {
		if few[i] == "--seeds" {
			few[i+1] = fewSeeds
		}
	}

	kept := map[string]string{} // record id -> type+uri of every record before the damage
	damage := func(run int, how string) {
		t.Helper()
		files, _ := filepath.Glob(filepath.Join(data, "warc", "*.warc.gz"))
		sort.Strings(files)
		if len(files) == 0 {
			t.Fatalf("run %d wrote no WARC file", run)
		}
		newest := files[len(files)-1]
		var last *warcRec
		for _, f := range files {
			err := readWARCFile(f, true, func(r *warcRec) error {
				if f == newest {
					last = r
				}
				kept[r.Get("WARC-Record-ID")] = r.Type() + " " + r.Get("WARC-Target-URI")
				return nil
			})
			if err != nil {
				t.Fatalf("run %d: before any damage, the WARC files must verify: %v", run, err)
			}
		}
		if last == nil {
			t.Fatalf("run %d: newest WARC file is empty", run)
		}
		switch how {
		case "cut":
			delete(kept, last.Get("WARC-Record-ID"))
			if err := os.Truncate(newest, last.Offset+last.MemberLen/2); err != nil {
				t.Fatal(err)
			}
		case "garbage":
			f, _ := os.OpenFile(newest, os.O_APPEND|os.O_WRONLY, 0)
			f.Write([]byte("\x1f\x8b\x08\x00garbage after a torn write\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
			f.Close()
		}
		// A half-written corpus record: the open shard (if any) loses its last bytes.
		shards, _ := filepath.Glob(filepath.Join(data, "corpus", "*.partial"))
		for _, s := range shards {
			if fi, err := os.Stat(s); err == nil && fi.Size() > 64 {
				os.Truncate(s, fi.Size()-7)
			}
		}
		t.Logf("run %d killed: %d WARC files, %d records kept before the damage (%s of %s), %d open corpus shards cut", run, len(files), len(kept), how, filepath.Base(newest), len(shards))
	}
	// A restart after damage says what it repaired.
	repaired := func(run int, out string) {
		t.Helper()
		for _, want := range []string{"cutting torn tail of warc file", "recovered partial shard"} {
			if !strings.Contains(out, want) {
				t.Errorf("run %d after the damage: the log does not say %q:\n%s", run, want, tail(out, 1500))
			}
		}
	}
	warcBytes := func() int64 {
		files, _ := filepath.Glob(filepath.Join(data, "warc", "*.warc.gz"))
		var n int64
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	// kill stops a run with SIGKILL mid-crawl: once it has archived grow more bytes, or after
	// at most 5s (the whole crawl archives some 28 MB).
	kill := func(run int, args []string, grow int64) string {
		t.Helper()
		start := warcBytes()
		c := startCrawler(t, args...)
		deadline := time.Now().Add(5 * time.Second)
		for warcBytes()-start < grow && time.Now().Before(deadline) {
			select {
			case err := <-c.done:
				t.Fatalf("run %d ended before the kill: %v\n%s", run, err, tail(c.stderr.String(), 2000))
			case <-time.After(50 * time.Millisecond):
			}
		}
		c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.done
		return c.stderr.String()
	}
	kill(1, few, 6<<20)
	damage(1, "cut")
	repaired(2, kill(2, all, 6<<20))
	damage(2, "garbage")
	c := startCrawler(t, all...)
	if code := c.wait(t, 4*time.Minute); code != 0 {
		t.Fatalf("run 3 exited %d:\n%s", code, tail(c.stderr.String(), 3000))
	}
	repaired(3, c.stderr.String())
	rep := w.Report(reportOptions(0))
	t.Logf("final: coverage %.4f (%d of %d)", rep.Coverage, rep.Reached, rep.MustReach)
	if rep.Coverage < 1 {
		t.Errorf("coverage %.4f, missing e.g. %v", rep.Coverage, first(rep.Missing, 10))
	}

	// The data directory: every file verifies, every earlier record is there.
	files, _ := filepath.Glob(filepath.Join(data, "warc", "*.warc.gz"))
	sort.Strings(files)
	inDir := map[string]bool{}
	for _, f := range files {
		if err := readWARCFile(f, true, func(r *warcRec) error { inDir[r.Get("WARC-Record-ID")] = true; return nil }); err != nil {
			t.Errorf("after repair: %v", err)
		}
	}
	lostIn := func(ids map[string]bool) []string {
		var lost []string
		for id, what := range kept {
			if !ids[id] {
				lost = append(lost, what)
			}
		}
		sort.Strings(lost)
		return lost
	}
	if lost := lostIn(inDir); len(lost) > 0 {
		t.Errorf("%d records before the damage are gone from the data directory, e.g. %v", len(lost), first(lost, 5))
	}

	// export --format warc: one stream the independent reader reads through.
	out := filepath.Join(t.TempDir(), "all.warc.gz")
	if o, err := exec.Command(crawlnodeBin, "export", "--data", data, "--format", "warc", "--out", out).CombinedOutput(); err != nil {
		t.Fatalf("export warc: %v\n%s", err, o)
	}
	exported := map[string]bool{}
	if err := readWARCFile(out, true, func(r *warcRec) error { exported[r.Get("WARC-Record-ID")] = true; return nil }); err != nil {
		t.Errorf("exported WARC: %v", err)
	}
	if lost := lostIn(exported); len(lost) > 0 {
		t.Errorf("export --format warc lost %d records from before the damage, e.g. %v", len(lost), first(lost, 5))
	}
	if len(exported) != len(inDir) {
		t.Errorf("export --format warc has %d records, the data directory %d", len(exported), len(inDir))
	}

	// export --format urls: every earlier response and revisit is listed.
	urls := filepath.Join(t.TempDir(), "urls.tsv")
	if o, err := exec.Command(crawlnodeBin, "export", "--data", data, "--format", "urls", "--out", urls).CombinedOutput(); err != nil {
		t.Fatalf("export urls: %v\n%s", err, o)
	}
	listed := map[string]int{}
	b, _ := os.ReadFile(urls)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Split(line, "\t"); len(f) >= 4 {
			listed[f[3]+" "+f[0]]++
		}
	}
	missing := 0
	need := map[string]int{}
	for _, what := range kept {
		if strings.HasPrefix(what, "response ") || strings.HasPrefix(what, "revisit ") {
			need[what]++
		}
	}
	for what, n := range need {
		if listed[what] < n {
			missing++
			if missing <= 5 {
				t.Errorf("export --format urls lists %s %d times, %d records before the damage", what, listed[what], n)
			}
		}
	}
	t.Logf("after repair: %d WARC files, %d records (%d before the damage, all kept); export warc %d records, urls %d lines",
		len(files), len(inDir), len(kept), len(exported), len(listed))

	// The corpus reads back whole, one record a URL.
	recs, twice := 0, 0
	seen := map[string]bool{}
	if err := corpus.ReadShards(filepath.Join(data, "corpus"), func(r corpus.Record) error {
		recs++
		if seen[r.URL] {
			twice++
		}
		seen[r.URL] = true
		return nil
	}); err != nil {
		t.Errorf("corpus after repair: %v", err)
	}
	t.Logf("corpus after repair: %d records, %d URLs with a second record (refetched after a kill)", recs, twice)

	// Damage in the middle of a finished file (a bad sector): a byte of a member half-way
	// through flipped. The node still starts on the directory, and export delivers every
	// record before the damaged one and names the damage.
	var recsOfFirst []*warcRec
	readWARCFile(files[0], false, func(r *warcRec) error {
		recsOfFirst = append(recsOfFirst, &warcRec{Offset: r.Offset, MemberLen: r.MemberLen, Fields: r.Fields})
		return nil
	})
	if len(recsOfFirst) < 3 {
		t.Fatalf("%s holds %d records", files[0], len(recsOfFirst))
	}
	mid := recsOfFirst[len(recsOfFirst)/2]
	var before []string // files[0] is the oldest: the records before the damage are its first half
	for _, r := range recsOfFirst[:len(recsOfFirst)/2] {
		before = append(before, r.Get("WARC-Record-ID"))
	}
	f, err := os.OpenFile(files[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	one := []byte{0}
	f.ReadAt(one, mid.Offset+mid.MemberLen/2)
	f.WriteAt([]byte{one[0] ^ 0x55}, mid.Offset+mid.MemberLen/2)
	f.Close()
	c = startCrawler(t, all...)
	if code := c.wait(t, time.Minute); code != 0 {
		t.Errorf("run 4, on a WARC file damaged in the middle, exited %d:\n%s", code, tail(c.stderr.String(), 2000))
	}
	out = filepath.Join(t.TempDir(), "damaged.warc.gz")
	o, err := exec.Command(crawlnodeBin, "export", "--data", data, "--format", "warc", "--out", out).CombinedOutput()
	got := map[string]bool{}
	rerr := readWARCFile(out, true, func(r *warcRec) error { got[r.Get("WARC-Record-ID")] = true; return nil })
	lost := 0
	for _, id := range before {
		if !got[id] {
			lost++
		}
	}
	t.Logf("damaged byte at offset %d of %s (record %d of %d): export exit %v, %d records exported (%d of the %d before the damage lost, %d of the %d after it delivered), reader: %v; export said: %s",
		mid.Offset+mid.MemberLen/2, filepath.Base(files[0]), len(before)+1, len(inDir), err, len(got), lost, len(before),
		len(got)-(len(before)-lost), len(inDir)-len(before)-1, rerr, strings.TrimSpace(string(o)))
	if lost > 0 || rerr != nil {
		t.Errorf("export after mid-file damage lost %d records before it (reader: %v)", lost, rerr)
	}
	if !strings.Contains(string(o), filepath.Base(files[0])) || !strings.Contains(string(o), fmt.Sprint(mid.Offset)) {
		t.Errorf("export does not name the damaged file and offset %d: %q", mid.Offset, strings.TrimSpace(string(o)))
	}
}
