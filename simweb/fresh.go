package simweb

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Pages that change (Config.ChangeIntervals), conditional requests, and the two judges of
// issue 8: freshness (simweb knows every page's version at every instant, and which version
// each fetch saw) and PageRank (power iteration over the generated link graph).
//
// Page versions: a home or article page whose change interval is P > 0 is in version
// floor((t - epoch + phase) / P) at time t, where the phase (0 <= phase < P) comes from the
// URL so that pages of one interval do not all change at once; version v began at
// epoch + v*P - phase (version 0 began before the epoch). Its ETag is "<url hash>-<v>" and its Last-Modified the second its
// version began (truncated, as HTTP dates are). The body carries a revision line, so each
// version has its own bytes. A request whose If-None-Match names the current ETag, or
// (without If-None-Match) whose If-Modified-Since is not before the current Last-Modified,
// gets 304 Not Modified. The epoch is New's clock reading.

// changeInterval returns the change interval of a routed resource (0: never changes, or
// not a versioned kind).
func (w *Web) changeInterval(rs res) time.Duration {
	iv := w.cfg.ChangeIntervals
	if len(iv) == 0 || rs.h == nil || rs.sub > 0 || (rs.kind != kHome && rs.kind != kArticle) {
		return 0
	}
	k := rs.n
	if rs.kind == kHome {
		k = 0
	}
	return iv[mix(uint64(w.cfg.Seed), 20, uint64(rs.h.idx), uint64(k))%uint64(len(iv))]
}

func (w *Web) phase(u string, p time.Duration) time.Duration {
	return time.Duration(strHash(u) % uint64(p))
}

// versionAt is the version of u (interval p) at t, and when it began.
func (w *Web) versionAt(u string, p time.Duration, t time.Time) (int, time.Time) {
	if p <= 0 {
		return 0, w.epoch
	}
	ph := w.phase(u, p)
	el := t.Sub(w.epoch) + ph
	if el < 0 {
		el = 0
	}
	v := int(el / p)
	return v, w.epoch.Add(time.Duration(v)*p - ph)
}

// nextChange is the first change of u (interval p) after t (zero time if never).
func (w *Web) nextChange(u string, p time.Duration, t time.Time) time.Time {
	if p <= 0 {
		return time.Time{}
	}
	v, _ := w.versionAt(u, p, t)
	return w.epoch.Add(time.Duration(v+1)*p - w.phase(u, p))
}

func etagOf(u string, v int) string {
	return `"` + strconv.FormatUint(strHash(u)%1_000_000_007, 36) + "-" + strconv.Itoa(v) + `"`
}

// notModified reports whether a conditional request may be answered 304 for a page in
// version v that began at begin (RFC 9110 13.2.2: If-None-Match first).
func notModified(r *http.Request, etag string, begin time.Time) bool {
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		for _, t := range strings.Split(inm, ",") {
			t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
			if t == etag || t == "*" {
				return true
			}
		}
		return false
	}
	if ims := r.Header.Get("If-Modified-Since"); ims != "" {
		if t, err := http.ParseTime(ims); err == nil {
			return !begin.Truncate(time.Second).After(t)
		}
	}
	return false
}

// changefreqOf is the sitemap changefreq that describes an interval.
func changefreqOf(p time.Duration) string {
	switch {
	case p <= 0:
		return "never"
	case p < time.Hour:
		return "always"
	case p < 24*time.Hour:
		return "hourly"
	case p < 7*24*time.Hour:
		return "daily"
	case p < 30*24*time.Hour:
		return "weekly"
	case p < 365*24*time.Hour:
		return "monthly"
	}
	return "yearly"
}

// FreshnessReport is the judgement of a continuous crawl between From and To.
type FreshnessReport struct {
	From, To time.Time
	// Pages is the number of versioned pages (ChangeIntervals) fetched at least once by To.
	Pages int `json:"pages"`
	// Freshness is the time-averaged share of those pages whose last fetched copy (a 200,
	// or a 304 that confirmed it) is the page's current version: 1 = always fresh. A page
	// not fetched yet counts as stale.
	Freshness float64 `json:"freshness"`
	// ByInterval is Freshness per change interval ("5s", "never", ...).
	ByInterval map[string]float64 `json:"by_interval"`
	// Requests counts the requests for versioned pages that arrived in [From, To];
	// NotModified the 304 answers among them; AllRequests every request in the window.
	Requests, NotModified, AllRequests int
	// TooSoon counts fetches of a URL (final answers: 2xx, 3xx, 4xx but 429) that arrived
	// less than MinInterval after the previous fetch of the same URL, over the whole log.
	TooSoon        int      `json:"too_soon"`
	TooSoonSamples []string `json:"too_soon_samples,omitempty"`
	// MinGap is the shortest gap between two fetches of one URL seen in the whole log.
	MinGap time.Duration `json:"min_gap"`
}

// Freshness judges the request log: freshness of the versioned pages over [from, to] and
// revisits faster than minInterval (0: not checked). Retries of 5xx/429 answers do not
// count as revisits.
func (w *Web) Freshness(from, to time.Time, minInterval time.Duration) FreshnessReport {
	rep := FreshnessReport{From: from, To: to, ByInterval: map[string]float64{}, MinGap: -1}
	recs := w.Log()
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Arrival.Before(recs[j].Arrival) })
	type visit struct {
		at time.Time
		v  int
	}
	byURL := map[string][]visit{}
	last := map[string]time.Time{}
	for _, r := range recs {
		if !r.Arrival.Before(from) && !r.Arrival.After(to) {
			rep.AllRequests++
		}
		if r.RobotsFile || !(finalStatus(r.Status) || r.Status == http.StatusNotModified) {
			continue
		}
		if p, ok := last[r.CanonicalURL]; ok {
			gap := r.Arrival.Sub(p)
			if rep.MinGap < 0 || gap < rep.MinGap {
				rep.MinGap = gap
			}
			if minInterval > 0 && gap < minInterval-10*time.Millisecond {
				rep.TooSoon++
				if len(rep.TooSoonSamples) < sampleMax {
					rep.TooSoonSamples = append(rep.TooSoonSamples, fmt.Sprintf("%s again after %s", r.CanonicalURL, gap))
				}
			}
		}
		last[r.CanonicalURL] = r.Arrival
		if r.Version < 0 || (r.Status != http.StatusOK && r.Status != http.StatusNotModified) {
			continue
		}
		if !r.Arrival.Before(from) && !r.Arrival.After(to) {
			rep.Requests++
			if r.Status == http.StatusNotModified {
				rep.NotModified++
			}
		}
		byURL[r.CanonicalURL] = append(byURL[r.CanonicalURL], visit{r.Arrival, r.Version})
	}
	if rep.MinGap < 0 {
		rep.MinGap = 0
	}
	span := to.Sub(from)
	if span <= 0 {
		return rep
	}
	sum := map[string]float64{}
	cnt := map[string]int{}
	total := 0.0
	for u, vs := range byURL {
		if vs[0].at.After(to) {
			continue
		}
		hn, pq := splitURL(u)
		p := w.changeInterval(w.route(hn, pq))
		fresh := time.Duration(0)
		for i, v := range vs {
			start := v.at
			end := to
			if i+1 < len(vs) {
				end = vs[i+1].at
			}
			if cur, _ := w.versionAt(u, p, start); cur != v.v {
				continue // served a version older than the one current at arrival: cannot happen
			}
			if nc := w.nextChange(u, p, start); !nc.IsZero() && nc.Before(end) {
				end = nc
			}
			s, e := maxTime(start, from), minTime(end, to)
			if e.After(s) {
				fresh += e.Sub(s)
			}
		}
		f := float64(fresh) / float64(span)
		key := "never"
		if p > 0 {
			key = p.String()
		}
		sum[key] += f
		cnt[key]++
		total += f
		rep.Pages++
	}
	if rep.Pages > 0 {
		rep.Freshness = total / float64(rep.Pages)
	}
	for k, s := range sum {
		rep.ByInterval[k] = s / float64(cnt[k])
	}
	return rep
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// outLinks lists the must-reach targets a must-reach resource links to, as the crawl
// follows them (the edges of the PageRank graph).
func (w *Web) outLinks(rs res, set map[string]bool) []string {
	var out []string
	add := func(u string) {
		if set[u] {
			out = append(out, u)
		}
	}
	switch rs.kind {
	case kRedirect, kLoop, kOut:
		add(w.redirectTarget(rs))
	case kSitemap, kSitemapIndex, kSitemapPart:
		for _, u := range w.sitemapLocs(rs) {
			add(u)
		}
	default:
		d, ok := w.buildDoc(rs)
		if !ok || strings.Contains(d.metaRobots, "nofollow") {
			return nil
		}
		for _, l := range d.links {
			if !l.nofollow {
				add(l.url)
			}
		}
	}
	return out
}

// PageRank computes the PageRank (damping 0.85; dangling pages spread their rank evenly)
// of the must-reach pages of o over the links between them, by power iteration until the
// L1 change is below 1e-10 (at most 200 rounds). The ranks sum to 1.
func (w *Web) PageRank(o ReportOptions) map[string]float64 {
	o = o.withDefaults(w)
	mr := w.mustReach(o)
	key := "pr|" + fmt.Sprint(len(mr.urls)) + "|" + strings.Join(o.Seeds, "\n")
	w.cacheMu.Lock()
	if pr, ok := w.prCache[key]; ok {
		w.cacheMu.Unlock()
		return pr
	}
	w.cacheMu.Unlock()
	n := len(mr.urls)
	idx := make(map[string]int, n)
	for i, u := range mr.urls {
		idx[u] = i
	}
	outs := make([][]int, n)
	for i, u := range mr.urls {
		hn, pq := splitURL(u)
		seen := map[int]bool{}
		for _, t := range w.outLinks(w.route(hn, pq), mr.set) {
			if j := idx[t]; !seen[j] {
				seen[j] = true
				outs[i] = append(outs[i], j)
			}
		}
	}
	const d = 0.85
	rank := make([]float64, n)
	next := make([]float64, n)
	for i := range rank {
		rank[i] = 1 / float64(n)
	}
	for round := 0; round < 200 && n > 0; round++ {
		dangling := 0.0
		for i := range next {
			next[i] = 0
		}
		for i, r := range rank {
			if len(outs[i]) == 0 {
				dangling += r
				continue
			}
			share := r / float64(len(outs[i]))
			for _, j := range outs[i] {
				next[j] += share
			}
		}
		base := (1-d)/float64(n) + d*dangling/float64(n)
		diff := 0.0
		for i := range next {
			next[i] = base + d*next[i]
			diff += math.Abs(next[i] - rank[i])
		}
		rank, next = next, rank
		if diff < 1e-10 {
			break
		}
	}
	pr := make(map[string]float64, n)
	for i, u := range mr.urls {
		pr[u] = rank[i]
	}
	w.cacheMu.Lock()
	if len(w.prCache) > 4 {
		clear(w.prCache)
	}
	w.prCache[key] = pr
	w.cacheMu.Unlock()
	return pr
}

// PageRankReport says how much of the web's PageRank a crawl fetched early.
type PageRankReport struct {
	MustReach int `json:"must_reach"`
	// Fetched is the number of must-reach pages fetched, in the order of their first final
	// answer's arrival; Prefix = ceil(Fraction * MustReach) of them are judged.
	Fetched, Prefix int
	Fraction        float64
	// Share is the share of total PageRank held by the first Prefix pages fetched; Best
	// the share of the Prefix pages of highest rank (the best any order could do), and
	// Uniform the share Prefix pages of average rank would hold (= Fraction).
	Share, Best, Uniform float64
}

// PageRankShare judges the order of the crawl in the log: the share of total PageRank
// among the first fraction of the must-reach pages it fetched.
func (w *Web) PageRankShare(o ReportOptions, fraction float64) PageRankReport {
	pr := w.PageRank(o)
	rep := PageRankReport{MustReach: len(pr), Fraction: fraction, Uniform: fraction}
	rep.Prefix = int(math.Ceil(fraction * float64(len(pr))))
	recs := w.Log()
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Arrival.Before(recs[j].Arrival) })
	got := map[string]bool{}
	for _, r := range recs {
		if r.RobotsFile || !finalStatus(r.Status) || got[r.CanonicalURL] {
			continue
		}
		v, ok := pr[r.CanonicalURL]
		if !ok {
			continue
		}
		got[r.CanonicalURL] = true
		if len(got) <= rep.Prefix {
			rep.Share += v
		}
	}
	rep.Fetched = len(got)
	ranks := make([]float64, 0, len(pr))
	for _, v := range pr {
		ranks = append(ranks, v)
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(ranks)))
	for i := 0; i < rep.Prefix && i < len(ranks); i++ {
		rep.Best += ranks[i]
	}
	return rep
}
