package simweb

import (
	"container/heap"
	"fmt"
	"sort"
	"strings"
	"time"
)

// ReportOptions says how the crawler under test was configured.
type ReportOptions struct {
	// Seeds the crawl started from. Default: Seeds().
	Seeds []string `json:"seeds,omitempty"`
	// UserAgent selects the robots.txt group by its product token (text before '/').
	UserAgent string `json:"user_agent"`
	// DefaultDelay is a host's delay when its robots.txt gives no Crawl-delay for the UA.
	DefaultDelay time.Duration `json:"default_delay"`
	// PerHost is the allowed number of requests in flight per host. Default 1.
	PerHost int `json:"per_host"`
	// Tolerance is the slack on delay, in-flight and Retry-After checks. Default 10ms.
	Tolerance time.Duration `json:"tolerance"`
	// MaxDepth limits must-reach to this many link hops from a seed; 0 = unlimited.
	MaxDepth int `json:"max_depth"`
}

func (o ReportOptions) withDefaults(w *Web) ReportOptions {
	if len(o.Seeds) == 0 {
		o.Seeds = w.Seeds()
	}
	if o.PerHost <= 0 {
		o.PerHost = 1
	}
	if o.Tolerance == 0 {
		o.Tolerance = 10 * time.Millisecond
	}
	return o
}

// Report is the oracle's verdict on the requests logged since the last ResetLog.
type Report struct {
	MustReach int      `json:"must_reach"`
	Reached   int      `json:"reached"`
	Coverage  float64  `json:"coverage"`
	Missing   []string `json:"missing,omitempty"` // sample, up to 50

	Requests         int      `json:"requests"`
	DuplicateFetches int      `json:"duplicate_fetches"` // extra final responses beyond the first per URL
	DuplicateURLs    int      `json:"duplicate_urls"`    // URLs with more than one final response
	Duplicates       []string `json:"duplicates,omitempty"`

	RobotsViolations int      `json:"robots_violations"`
	RobotsSamples    []string `json:"robots_samples,omitempty"`
	BeforeRobots     int      `json:"before_robots"`
	BeforeSamples    []string `json:"before_robots_samples,omitempty"`

	PolitenessViolations int            `json:"politeness_violations"`
	ConcurrencyViolation int            `json:"concurrency_violations"`
	DelayViolations      int            `json:"delay_violations"`
	PolitenessSamples    []string       `json:"politeness_samples,omitempty"` // "host kind gap"
	MaxInFlight          int            `json:"max_in_flight"`                // over all hosts
	InFlightByHost       map[string]int `json:"in_flight_by_host,omitempty"`  // hosts above PerHost

	TrapRequests       map[string]int `json:"trap_requests"`
	TrapRequestsByHost map[string]int `json:"trap_requests_by_host"`

	RetryAfterIgnored int      `json:"retry_after_ignored"`
	RetryAfterSamples []string `json:"retry_after_samples,omitempty"`

	// ConnRefused counts requests refused because they came on a second connection to a
	// ConnLimit host (one connection at a time).
	ConnRefused int `json:"conn_refused"`

	NofollowOnlyFetched int            `json:"nofollow_only_fetched"` // requests for pages linked only via nofollow
	StatusClasses       map[string]int `json:"status_classes"`
	BytesServed         int64          `json:"bytes_served"`
	Hosts               int            `json:"hosts_requested"`
}

const sampleMax = 50

func addSample(s *[]string, v string) {
	if len(*s) < sampleMax {
		*s = append(*s, v)
	}
}

type mustReachSet struct {
	urls []string
	set  map[string]bool
}

// MustReach returns the sorted set a correct, robots-obeying crawler must reach from
// o.Seeds (see the README for the rules).
func (w *Web) MustReach(o ReportOptions) []string {
	return append([]string(nil), w.mustReach(o.withDefaults(w)).urls...)
}

func (w *Web) mustReach(o ReportOptions) *mustReachSet {
	token := ProductToken(o.UserAgent)
	key := fmt.Sprintf("%s|%d|%d|%x", token, o.MaxDepth, len(o.Seeds), strHash(strings.Join(o.Seeds, "\n")))
	w.cacheMu.Lock()
	defer w.cacheMu.Unlock()
	if m, ok := w.mrCache[key]; ok {
		return m
	}
	type item struct {
		rs          res
		depth, hops int
	}
	visited := map[string]bool{}
	policies := map[*host]robotsPolicy{}
	touched := map[*host]bool{}
	var queue []item
	var enqueue func(u string, depth, hops int)
	enqueue = func(u string, depth, hops int) {
		if visited[u] || (o.MaxDepth > 0 && depth > o.MaxDepth) {
			return
		}
		hn, pq := splitURL(u)
		rs := w.route(hn, pq)
		if rs.kind == kUnknownHost || rs.trap != "" || rs.isRobotsFile() {
			return
		}
		p, ok := policies[rs.h]
		if !ok {
			p = w.policy(rs.h, 0, token)
			policies[rs.h] = p
		}
		if !p.allowed(pq) {
			return
		}
		visited[u] = true
		queue = append(queue, item{rs, depth, hops})
		if !touched[rs.h] {
			touched[rs.h] = true
			for _, sm := range p.sitemaps {
				enqueue(sm, depth+1, 0)
			}
		}
	}
	for _, s := range o.Seeds {
		if u, ok := Canonicalize("", s); ok {
			enqueue(u, 0, 0)
		}
	}
	for i := 0; i < len(queue); i++ {
		it := queue[i]
		switch it.rs.kind {
		case kRedirect, kLoop, kOut:
			if it.hops < 5 {
				enqueue(w.redirectTarget(it.rs), it.depth+1, it.hops+1)
			}
		case kSitemap, kSitemapIndex, kSitemapPart:
			for _, u := range w.sitemapLocs(it.rs) {
				enqueue(u, it.depth+1, 0)
			}
		default:
			d, ok := w.buildDoc(it.rs)
			if !ok || strings.Contains(d.metaRobots, "nofollow") {
				continue
			}
			for _, l := range d.links {
				if !l.nofollow {
					enqueue(l.url, it.depth+1, 0)
				}
			}
		}
	}
	m := &mustReachSet{set: visited, urls: make([]string, 0, len(visited))}
	for u := range visited {
		m.urls = append(m.urls, u)
	}
	sort.Strings(m.urls)
	if len(w.mrCache) > 16 {
		clear(w.mrCache)
	}
	w.mrCache[key] = m
	return m
}

type finHeap []time.Time

func (h finHeap) Len() int           { return len(h) }
func (h finHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h finHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *finHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *finHeap) Pop() any          { o := *h; x := o[len(o)-1]; *h = o[:len(o)-1]; return x }

func finalStatus(s int) bool { return s >= 200 && s < 500 && s != 429 }

// Report judges the logged requests against o.
func (w *Web) Report(o ReportOptions) Report {
	o = o.withDefaults(w)
	token := ProductToken(o.UserAgent)
	mr := w.mustReach(o)
	recs := w.Log()
	rep := Report{MustReach: len(mr.urls), Requests: len(recs), TrapRequests: map[string]int{},
		TrapRequestsByHost: map[string]int{}, StatusClasses: map[string]int{}, InFlightByHost: map[string]int{}}

	reached := map[string]bool{}
	finals := map[string]int{}
	byHost := map[string][]int{}
	policies := map[string]*robotsPolicy{}
	pol := func(hn string) *robotsPolicy {
		if p, ok := policies[hn]; ok {
			return p
		}
		var p *robotsPolicy
		if h, sub, ok := w.hostFor(hn); ok {
			v := w.policy(h, sub, token)
			p = &v
		}
		policies[hn] = p
		return p
	}
	for i, r := range recs {
		rep.BytesServed += r.Bytes
		rep.StatusClasses[fmt.Sprintf("%dxx", r.Status/100)]++
		if r.Refused {
			rep.ConnRefused++
		}
		byHost[r.Host] = append(byHost[r.Host], i)
		if r.Trap != "" {
			rep.TrapRequests[r.Trap]++
			rep.TrapRequestsByHost[r.TrapHost]++
		}
		if r.RobotsFile {
			continue
		}
		if mr.set[r.CanonicalURL] {
			reached[r.CanonicalURL] = true
		}
		if finalStatus(r.Status) {
			finals[r.CanonicalURL]++
		}
		if p := pol(r.Host); p != nil {
			_, pq := splitURL(r.CanonicalURL)
			if !p.allowed(pq) {
				rep.RobotsViolations++
				addSample(&rep.RobotsSamples, r.CanonicalURL)
			}
		}
		if strings.Contains(r.CanonicalURL, "/hidden/") && r.Status == 200 {
			rep.NofollowOnlyFetched++
		}
	}
	rep.Hosts = len(byHost)
	rep.Reached = len(reached)
	if rep.MustReach > 0 {
		rep.Coverage = float64(rep.Reached) / float64(rep.MustReach)
	}
	for _, u := range mr.urls {
		if !reached[u] {
			addSample(&rep.Missing, u)
		}
	}
	dups := make([]string, 0)
	for u, n := range finals {
		if n > 1 {
			rep.DuplicateFetches += n - 1
			rep.DuplicateURLs++
			dups = append(dups, u)
		}
	}
	sort.Strings(dups)
	for _, u := range dups {
		addSample(&rep.Duplicates, u)
	}

	tol := o.Tolerance
	hostNames := make([]string, 0, len(byHost))
	for hn := range byHost {
		hostNames = append(hostNames, hn)
	}
	sort.Strings(hostNames)
	for _, hn := range hostNames {
		idx := byHost[hn]
		sort.SliceStable(idx, func(a, b int) bool { return recs[idx[a]].Arrival.Before(recs[idx[b]].Arrival) })
		delay := o.DefaultDelay
		if p := pol(hn); p != nil && p.hasDelay {
			delay = p.delay
		}
		// robots before anything else
		var robotsDone, robotsAsked time.Time
		for _, i := range idx {
			r := recs[i]
			if r.RobotsFile && r.Status != 0 && (robotsDone.IsZero() || r.Finish.Before(robotsDone)) &&
				strings.HasSuffix(r.CanonicalURL, "/robots.txt") {
				robotsDone, robotsAsked = r.Finish, r.Arrival
			}
		}
		var ra []RequestRecord
		fh := &finHeap{}
		maxIn := 0
		for n, i := range idx {
			r := recs[i]
			if !r.RobotsFile && (robotsDone.IsZero() || r.Arrival.Before(robotsAsked) || r.Arrival.Before(robotsDone.Add(-tol))) {
				rep.BeforeRobots++
				addSample(&rep.BeforeSamples, r.CanonicalURL)
			}
			if n > 0 {
				gap := r.Arrival.Sub(recs[idx[n-1]].Arrival)
				if delay > 0 && gap < delay-tol {
					rep.DelayViolations++
					addSample(&rep.PolitenessSamples, fmt.Sprintf("%s delay gap=%s want>=%s", hn, gap, delay))
				}
			}
			for fh.Len() > 0 && !(*fh)[0].After(r.Arrival) {
				heap.Pop(fh)
			}
			fin := r.Finish.Add(-tol)
			if fin.Before(r.Arrival) {
				fin = r.Arrival
			}
			heap.Push(fh, fin)
			if fh.Len() > maxIn {
				maxIn = fh.Len()
			}
			if fh.Len() > o.PerHost {
				rep.ConcurrencyViolation++
				// Which clients overlapped: this request and the one before it (in a cluster
				// test, each node sends its own User-Agent).
				prev := RequestRecord{}
				if n > 0 {
					prev = recs[idx[n-1]]
				}
				addSample(&rep.PolitenessSamples, fmt.Sprintf("%s concurrency in_flight=%d allowed=%d: %s %q from %s at %s overlaps %s %q from %s at %s-%s",
					hn, fh.Len(), o.PerHost, r.CanonicalURL, r.UserAgent, r.Client, r.Arrival.Format("15:04:05.000"),
					prev.CanonicalURL, prev.UserAgent, prev.Client, prev.Arrival.Format("15:04:05.000"), prev.Finish.Format("15:04:05.000")))
			}
			for _, a := range ra {
				if r.Arrival.After(a.Finish) && r.Arrival.Before(a.Finish.Add(a.RetryAfter-tol)) {
					rep.RetryAfterIgnored++
					addSample(&rep.RetryAfterSamples, fmt.Sprintf("%s %s %s after a Retry-After of %s", hn, r.CanonicalURL, r.Arrival.Sub(a.Finish), a.RetryAfter))
					break
				}
			}
			if r.RetryAfter > 0 {
				ra = append(ra, r)
			}
		}
		if maxIn > rep.MaxInFlight {
			rep.MaxInFlight = maxIn
		}
		if maxIn > o.PerHost {
			rep.InFlightByHost[hn] = maxIn
		}
	}
	rep.PolitenessViolations = rep.ConcurrencyViolation + rep.DelayViolations
	return rep
}

// PageInfo is the ground truth about one URL.
type PageInfo struct {
	URL         string   `json:"url"`
	Host        string   `json:"host"`
	Path        string   `json:"path"`
	Status      int      `json:"status"` // final status (after a first 503/429 for busy pages)
	ContentType string   `json:"content_type"`
	Title       string   `json:"title,omitempty"`
	MainText    []string `json:"main_text,omitempty"`   // planted main-text paragraphs
	Boilerplate []string `json:"boilerplate,omitempty"` // planted nav/footer/ad strings
	MirrorOf    string   `json:"mirror_of,omitempty"`   // original of an exact duplicate
	NearDupOf   string   `json:"near_dup_of,omitempty"`
	Canonical   string   `json:"canonical,omitempty"` // rel=canonical target
	NoIndex     bool     `json:"noindex,omitempty"`   // meta robots or X-Robots-Tag noindex
	NoFollow    bool     `json:"nofollow,omitempty"`  // meta robots nofollow
	OptOut      []string `json:"opt_out,omitempty"`   // x-robots-tag:noindex, tdm-reservation-header, meta-noai, meta-tdm-reservation, tdmrep.json
	Malformed   bool     `json:"malformed,omitempty"`
	Trap        string   `json:"trap,omitempty"`
	RedirectTo  string   `json:"redirect_to,omitempty"`
	Links       []string `json:"links,omitempty"`        // canonical targets of every link in the page
	Language    string   `json:"language,omitempty"`     // true language of the main text (ISO 639-1)
	LangAttr    string   `json:"lang_attr,omitempty"`    // <html lang> as served ("" for none)
	LangAttrIs  string   `json:"lang_attr_is,omitempty"` // LangAttrRight, LangAttrNone or LangAttrWrong
	// PDF: the body is a PDF (declared, or behind a text/html label) whose Title and
	// MainText paragraphs are known.
	PDF bool `json:"pdf,omitempty"`
	// PDFHostile names a hostile PDF (Config.HostilePDFs): "broken", "pages" or "bomb";
	// such a PDF has no Title or MainText.
	PDFHostile string `json:"pdf_hostile,omitempty"`
}

// Page returns the ground truth of a URL (canonicalized first). ok is false for unknown
// hosts and URLs that answer 404.
func (w *Web) Page(u string) (PageInfo, bool) {
	cu, ok := Canonicalize("", u)
	if !ok {
		return PageInfo{}, false
	}
	hn, pq := splitURL(cu)
	rs := w.route(hn, pq)
	pi := PageInfo{URL: cu, Host: hn, Path: pq, Trap: rs.trap}
	switch rs.kind {
	case kUnknownHost, kNotFound:
		return pi, false
	case kRobots, kRobotsAlt:
		pi.Status, pi.ContentType = 200, "text/plain; charset=utf-8"
		switch rs.h.robots {
		case robotsNone:
			pi.Status = 404
		case robots4xx:
			pi.Status = 403
		case robots5xx:
			pi.Status = 500 + 3*(rs.h.idx%2)
		case robotsUnreachable, robotsTimeout:
			pi.Status = 0
		}
		if rs.sub > 0 {
			pi.Status = 404
		}
		return pi, true
	case kRedirect, kLoop, kOut:
		pi.Status, _ = w.redirectOf(rs)
		pi.RedirectTo = w.redirectTarget(rs)
		pi.ContentType = htmlType
		return pi, true
	case kGone:
		pi.Status, pi.ContentType = 410, htmlType
		return pi, true
	case kError:
		pi.Status, pi.ContentType = 500, htmlType
		return pi, true
	case kPDF:
		pi.Status, pi.ContentType, pi.PDF = 200, "application/pdf", true
		if rs.h.has(fTDMRep) {
			pi.OptOut = []string{"tdmrep.json"} // it reserves the whole host
		}
		if hostile := hostilePDFName(rs.n); hostile != "" {
			pi.PDFHostile = hostile
			return pi, true
		}
		pi.Title, _, pi.MainText = w.pdfDoc(rs.h, rs.n)
		pi.Language = "en"
		return pi, true
	case kPNG:
		pi.Status, pi.ContentType = 200, "image/png"
		return pi, true
	case kBin:
		pi.Status, pi.ContentType = 200, "application/octet-stream"
		return pi, true
	case kMislabeled:
		pi.Status, pi.ContentType = 200, htmlType
		pi.Title, _, pi.MainText = w.pdfDoc(rs.h, mislabeledPDF+rs.n)
		pi.Language, pi.PDF = "en", true
		if rs.h.has(fTDMRep) {
			pi.OptOut = []string{"tdmrep.json"} // it reserves the whole host
		}
		return pi, true
	case kHuge:
		pi.Status, pi.ContentType = 200, htmlType
		return pi, true
	case kSitemap, kSitemapIndex, kSitemapPart:
		pi.Status, pi.ContentType = 200, "application/xml"
		if rs.kind == kSitemapPart && rs.n == 1 {
			pi.ContentType = "application/gzip"
		}
		pi.Links = w.sitemapLocs(rs)
		return pi, true
	case kTDMRep:
		pi.Status, pi.ContentType = 200, "application/json"
		return pi, true
	}
	d, ok := w.buildDoc(rs)
	if !ok {
		return pi, false
	}
	pi.Status, pi.ContentType = d.status, htmlType
	pi.Title = d.title
	if len(w.cfg.Bodies) == 0 { // Bodies' text is not simweb's to know
		pi.MainText = w.mainText(d)
		pi.Language = Languages[w.langIndex(d)]
	}
	pi.LangAttr, pi.LangAttrIs = w.langAttr(d)
	pi.Boilerplate = w.boilerplate(rs.h)
	pi.MirrorOf, pi.NearDupOf, pi.Canonical = d.mirrorOf, d.nearDupOf, d.canonical
	pi.Malformed = d.malformed
	pi.NoIndex = strings.Contains(d.metaRobots, "noindex") || d.xRobots == "noindex"
	pi.NoFollow = strings.Contains(d.metaRobots, "nofollow")
	if d.xRobots != "" {
		pi.OptOut = append(pi.OptOut, "x-robots-tag:"+d.xRobots)
	}
	if d.tdmHeader {
		pi.OptOut = append(pi.OptOut, "tdm-reservation-header")
	}
	if strings.Contains(d.metaRobots, "noai") {
		pi.OptOut = append(pi.OptOut, "meta-noai")
	}
	if d.metaTDM {
		pi.OptOut = append(pi.OptOut, "meta-tdm-reservation")
	}
	if rs.h.has(fTDMRep) {
		pi.OptOut = append(pi.OptOut, "tdmrep.json")
	}
	for _, l := range d.links {
		pi.Links = append(pi.Links, l.url)
	}
	return pi, true
}

// textPages calls fn for every home, article and print page of every host.
func (w *Web) textPages(fn func(d *doc)) {
	for _, h := range w.hosts {
		for k := 0; k < h.pages; k++ {
			pq := w.articlePath(h, k)
			rs := w.route(h.name, pq)
			if d, ok := w.buildDoc(rs); ok {
				fn(d)
			}
			if printable(h, k) && k > 0 {
				if d, ok := w.buildDoc(w.route(h.name, pq+"?print=1")); ok {
					fn(d)
				}
			}
		}
	}
}

// ExactDuplicateGroups lists groups of URLs whose served main text is identical (mirrors
// and print variants), each sorted, groups sorted by first URL.
func (w *Web) ExactDuplicateGroups() [][]string {
	groups := map[[3]uint64][]string{}
	w.textPages(func(d *doc) { groups[d.textKey] = append(groups[d.textKey], d.url) })
	return sortedGroups(groups, func(g []string) bool { return len(g) > 1 })
}

// NearDuplicateGroups lists groups of URLs whose main texts are one text and its
// near-duplicate edits (every group holds at least two distinct texts).
func (w *Web) NearDuplicateGroups() [][]string {
	fam := map[[2]uint64][]string{}
	texts := map[[2]uint64]map[[3]uint64]bool{}
	w.textPages(func(d *doc) {
		fam[d.familyKey] = append(fam[d.familyKey], d.url)
		if texts[d.familyKey] == nil {
			texts[d.familyKey] = map[[3]uint64]bool{}
		}
		texts[d.familyKey][d.textKey] = true
	})
	out := [][]string{}
	for k, g := range fam {
		if len(texts[k]) > 1 {
			sort.Strings(g)
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func sortedGroups[K comparable](m map[K][]string, keep func([]string) bool) [][]string {
	out := [][]string{}
	for _, g := range m {
		if keep(g) {
			sort.Strings(g)
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}
