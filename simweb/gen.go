package simweb

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// robotsKind is a host's robots.txt variant.
type robotsKind uint8

const (
	robotsNone        robotsKind = iota // 404: allow all
	robotsSimple                        // allow all, carries Sitemap: lines
	robotsRules                         // wildcards, $, longest match, tie
	robotsGroups                        // several user-agent groups
	robotsDelay                         // Crawl-delay
	robots5xx                           // 500/503 forever: disallow all
	robotsUnreachable                   // connection dropped: disallow all
	robots4xx                           // 403: allow all
	robotsRedirect                      // 301 -> 302 -> file
	robotsOversize                      // ~600 KiB; rules past 500 KiB ignored
	robotsTimeout                       // the host never answers anything: disallow all
)

var robotsKindNames = [...]string{"none(404)", "simple", "rules", "groups", "crawl-delay", "5xx", "unreachable", "4xx(403)", "redirect", "oversize", "timeout"}

func (k robotsKind) String() string { return robotsKindNames[k] }

// feature is a host-level behaviour bit.
type feature uint32

const (
	fErrors feature = 1 << iota
	fRedirects
	fRetryAfter
	fBinary
	fEncoding
	fMalformed
	fBaseHref
	fCanonical
	fNofollow
	fOptOut
	fTDMRep
	fNearDup
	fCalendar
	fSession
	fDeep
	fFacets
	fSubdomains
	fSlow
	fTrickle
	fHuge
	fConnLimit
)

var featureNames = map[feature]string{
	fErrors: "errors", fRedirects: "redirects", fRetryAfter: "retry-after", fBinary: "binary",
	fEncoding: "encoding", fMalformed: "malformed", fBaseHref: "base-href", fCanonical: "canonical",
	fNofollow: "nofollow", fOptOut: "opt-out", fTDMRep: "tdmrep", fNearDup: "near-dup",
	fCalendar: "trap:calendar", fSession: "trap:session", fDeep: "trap:deep", fFacets: "trap:facets",
	fSubdomains: "trap:subdomain", fSlow: "slow", fTrickle: "trickle", fHuge: "huge",
	fConnLimit: "conn-limit",
}

// Trap kinds as reported in Report.TrapRequests.
const (
	TrapCalendar  = "calendar"
	TrapSession   = "session"
	TrapDeep      = "deep"
	TrapFacets    = "facets"
	TrapSubdomain = "subdomain"
)

var sections = [...]string{"news", "blog", "docs", "wiki", "shop", "forum", "guides", "reviews"}

const (
	orphanPages   = 5  // per sitemap host, listed only in sitemaps
	movedPages    = 10 // /moved/N.html targets of redirects, N in 1..movedPages
	crossMovedTo  = 9  // /out/J.html redirects to hJ/moved/9.html
	longChainHops = 7  // /r/301/7/N.html: its end is beyond the 5-hop limit
)

type host struct {
	idx        int
	name       string // "h7.sim.test"
	pages      int    // article pages are 1..pages-1; 0 is the home page
	content    int    // host whose text is served (self, or the origin of a mirror)
	mirrorOf   int    // -1 unless a mirror
	robots     robotsKind
	sitemap    int // 0 none, 1 plain /sitemap.xml, 2 index (+gzip child)
	feat       feature
	site       string        // site name, from content host
	brotli     bool          // encoding hosts: prefer br when offered
	robotsBody []byte        // nil for kinds without a body
	latency    time.Duration // median first-byte latency (0: answer at once)
	rate       int64         // transfer rate, bytes/s (0: unlimited)
}

func (h *host) has(f feature) bool { return h.feat&f != 0 }

// generate builds the hosts: page counts, feature assignment, robots bodies. O(Hosts).
func (w *Web) generate() {
	c := w.cfg
	H := c.Hosts
	r := newRng(mix(uint64(c.Seed), 1))
	w.hosts = make([]*host, H)
	// heavy-tailed page counts, scaled to an exact total
	raw := make([]float64, H)
	sum := 0.0
	for i := range raw {
		v := r.pareto(1.5)
		if v > 60 {
			v = 60
		}
		raw[i] = v
		sum += v
	}
	total := H * c.MeanPages
	for i := 0; i < H; i++ {
		n := int(raw[i]/sum*float64(total) + 0.5)
		n = max(n, 5)
		n = min(n, c.MaxPages)
		w.hosts[i] = &host{idx: i, name: "h" + strconv.Itoa(i) + "." + c.Suffix, pages: n, content: i, mirrorOf: -1}
	}
	perm := make([]int, H)
	for i := range perm {
		perm[i] = i
	}
	for i := H - 1; i > 0; i-- {
		j := r.intn(i + 1)
		perm[i], perm[j] = perm[j], perm[i]
	}
	// exclusive robots variants first, along the permutation
	p := 0
	for _, rk := range []struct {
		k robotsKind
		n int
	}{
		{robots5xx, c.Robots5xxHosts}, {robotsUnreachable, c.RobotsUnreachableHosts}, {robotsTimeout, c.TimeoutHosts},
		{robotsDelay, c.CrawlDelayHosts},
		{robotsRedirect, c.RobotsRedirectHosts}, {robotsOversize, c.RobotsOversizeHosts}, {robots4xx, c.Robots4xxHosts},
		{robotsGroups, c.RobotsGroupsHosts}, {robotsRules, c.RobotsRulesHosts},
	} {
		for j := 0; j < rk.n && p < H; j++ {
			h := w.hosts[perm[p]]
			h.robots = rk.k
			if rk.k == robotsDelay {
				h.pages = min(h.pages, c.CrawlDelayMaxPages)
			}
			p++
		}
	}
	// mirrors: taken from the end of the permutation, robots none
	mirrors := map[int]bool{}
	for j := 0; j < c.MirrorHosts && H >= 4 && j < H/4; j++ {
		m := w.hosts[perm[H-1-j]]
		if m.robots != robotsNone {
			continue
		}
		mirrors[m.idx] = true
	}
	eligible := make([]*host, 0, H)
	for _, i := range perm {
		h := w.hosts[i]
		if h.robots != robots5xx && h.robots != robotsUnreachable && h.robots != robotsTimeout && !mirrors[i] {
			eligible = append(eligible, h)
		}
	}
	if len(eligible) == 0 {
		eligible = append(eligible, w.hosts[perm[0]])
	}
	// origins for mirrors: eligible hosts that are not crawl-delay hosts
	oi := 0
	mirrorIdx := make([]int, 0, len(mirrors))
	for i := range mirrors {
		mirrorIdx = append(mirrorIdx, i)
	}
	sort.Ints(mirrorIdx)
	for _, mi := range mirrorIdx {
		m := w.hosts[mi]
		for tries := 0; tries < len(eligible); tries++ {
			o := eligible[(oi+len(eligible)/2)%len(eligible)]
			oi++
			if o.robots == robotsNone || o.robots == robots4xx || o.robots == robotsSimple {
				m.mirrorOf, m.content, m.pages = o.idx, o.idx, o.pages
				break
			}
		}
	}
	q := 0
	assign := func(f feature, n int) {
		for j := 0; j < n; j++ {
			eligible[q%len(eligible)].feat |= f
			q++
		}
	}
	assign(fCalendar, c.CalendarTrapHosts)
	assign(fSession, c.SessionTrapHosts)
	assign(fDeep, c.DeepTrapHosts)
	assign(fFacets, c.FacetTrapHosts)
	assign(fSubdomains, c.SubdomainTrapHosts)
	assign(fSlow, c.SlowHosts)
	assign(fTrickle, c.TrickleHosts)
	assign(fHuge, c.HugeHosts)
	assign(fConnLimit, c.ConnLimitHosts)
	assign(fRetryAfter, c.RetryAfterHosts)
	if c.OptOutHosts > 0 {
		eligible[q%len(eligible)].feat |= fTDMRep
	}
	assign(fOptOut, c.OptOutHosts)
	assign(fNofollow, c.NofollowHosts)
	assign(fMalformed, c.MalformedHosts)
	assign(fBaseHref, c.BaseHrefHosts)
	assign(fCanonical, c.CanonicalHosts)
	assign(fNearDup, c.NearDupHosts)
	assign(fRedirects, c.RedirectHosts)
	assign(fErrors, c.ErrorHosts)
	assign(fBinary, c.BinaryHosts)
	assign(fEncoding, c.EncodingHosts)
	sm := 0
	for i := range eligible {
		j := i / 2 // alternate: robots-rule hosts (start of the permutation) and plain hosts
		if i%2 == 1 {
			j += len(eligible) / 3
		}
		h := eligible[j%len(eligible)]
		if sm >= c.SitemapHosts {
			break
		}
		if h.robots == robots4xx || h.robots == robotsRedirect {
			continue
		}
		if h.robots == robotsNone {
			h.robots = robotsSimple
		}
		h.sitemap = 1 + sm%2
		sm++
	}
	for _, h := range w.hosts {
		cr := newRng(mix(uint64(c.Seed), 2, uint64(h.content)))
		h.site = title(wordAt(cr), wordAt(cr))
		h.brotli = h.idx%2 == 0
		h.robotsBody = w.robotsBody(h)
		h.latency, h.rate = w.hostLatency(h)
	}
}

func title(ws ...string) string {
	for i, s := range ws {
		ws[i] = strings.ToUpper(s[:1]) + s[1:]
	}
	return strings.Join(ws, " ")
}

func wordAt(r *rng) string { return wordList[r.intn(len(wordList))] }

// hostFor parses a canonical host name into (host, subdomain number).
func (w *Web) hostFor(name string) (*host, int, bool) {
	rest, ok := strings.CutSuffix(name, "."+w.cfg.Suffix)
	if !ok {
		return nil, 0, false
	}
	sub := 0
	if a, b, ok := strings.Cut(rest, "."); ok {
		n, ok := atoiStrict(strings.TrimPrefix(a, "w"))
		if !ok || !strings.HasPrefix(a, "w") || n < 1 {
			return nil, 0, false
		}
		sub, rest = n, b
	}
	if !strings.HasPrefix(rest, "h") {
		return nil, 0, false
	}
	i, ok := atoiStrict(rest[1:])
	if !ok || i >= len(w.hosts) {
		return nil, 0, false
	}
	h := w.hosts[i]
	if sub > 0 && !h.has(fSubdomains) {
		return nil, 0, false
	}
	return h, sub, true
}

// atoiStrict parses a non-negative decimal without sign or leading zeros.
func atoiStrict(s string) (int, bool) {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// --- article naming (content-derived, so mirrors share paths) ---

func (w *Web) section(content, k int) string {
	return sections[mix(uint64(w.cfg.Seed), 3, uint64(content), uint64(k))%uint64(len(sections))]
}

func (w *Web) articlePath(h *host, k int) string {
	if k == 0 {
		return "/"
	}
	r := newRng(mix(uint64(w.cfg.Seed), 4, uint64(h.content), uint64(k)))
	return "/" + w.section(h.content, k) + "/" + strconv.Itoa(k) + "-" + wordAt(r) + "-" + wordAt(r) + ".html"
}

func (w *Web) url(h *host, pathq string) string { return "http://" + h.name + pathq }

func (w *Web) subName(h *host, sub int) string { return "w" + strconv.Itoa(sub) + "." + h.name }

func printable(h *host, k int) bool { return h.has(fCanonical) && k%4 == 1 }
func hiddenOf(h *host, k int) bool  { return h.has(fNofollow) && (k%7 == 1 || k%7 == 2) }

// kind of resource
type kind uint8

const (
	kNotFound kind = iota
	kUnknownHost
	kRobots
	kRobotsAlt // robots redirect hop or target
	kHome
	kSection
	kArticle
	kPrint
	kOrphan
	kHidden
	kMoved
	kRedirect
	kLoop
	kOut
	kGone
	kError
	kBusy
	kLimited
	kPDF
	kPNG
	kBin
	kMislabeled
	kSlow
	kTrickle
	kHuge
	kSitemap
	kSitemapIndex
	kSitemapPart
	kTDMRep
	kCalendar
	kSession
	kDeep
	kFacets
	kSubPage
)

// res is a routed request target.
type res struct {
	h     *host
	sub   int
	kind  kind
	n     int    // page number, year*100+month, part number, ...
	code  int    // redirect status
	hops  int    // redirect hops left
	str   string // free parameter (session id, deep path, facet query)
	trap  string
	host  string // canonical host name served
	pathq string // canonical path?query
}

func (r res) isRobotsFile() bool { return r.kind == kRobots || r.kind == kRobotsAlt }

// route maps a canonical host and canonical path?query to a resource.
func (w *Web) route(hostname, pathq string) res {
	h, sub, ok := w.hostFor(hostname)
	out := res{kind: kNotFound, host: hostname, pathq: pathq}
	if !ok {
		out.kind = kUnknownHost
		return out
	}
	out.h, out.sub = h, sub
	path, query, _ := strings.Cut(pathq, "?")
	if sub > 0 {
		out.trap = TrapSubdomain
		switch {
		case path == "/robots.txt" && query == "":
			out.kind = kRobots
		case path == "/" && query == "":
			out.kind, out.n = kSubPage, sub
		}
		return out
	}
	// trap classification by prefix (even for URLs that 404 inside the trap space)
	switch {
	case h.has(fCalendar) && strings.HasPrefix(path, "/calendar/"):
		out.trap = TrapCalendar
	case h.has(fSession) && strings.HasPrefix(path, "/session/"):
		out.trap = TrapSession
	case h.has(fDeep) && strings.HasPrefix(path, "/deep/"):
		out.trap = TrapDeep
	case h.has(fFacets) && strings.HasPrefix(path, "/catalog/"):
		out.trap = TrapFacets
	}
	if out.trap != "" {
		w.routeTrap(&out, path, query)
		return out
	}
	if query != "" {
		base := w.route(hostname, path)
		if query == "print=1" && base.kind == kArticle && printable(h, base.n) {
			base.kind, base.pathq = kPrint, pathq
			return base
		}
		return out
	}
	switch path {
	case "/robots.txt":
		out.kind = kRobots
		return out
	case "/robots-moved.txt", "/cfg/robots.txt":
		if h.robots == robotsRedirect {
			out.kind = kRobotsAlt
		}
		return out
	case "/":
		out.kind = kHome
		return out
	case "/sitemap.xml":
		if h.sitemap == 1 {
			out.kind = kSitemap
		}
		return out
	case "/sitemap_index.xml":
		if h.sitemap == 2 {
			out.kind = kSitemapIndex
		}
		return out
	case "/sitemaps/pages-1.xml.gz", "/sitemaps/pages-2.xml":
		if h.sitemap == 2 {
			out.kind, out.n = kSitemapPart, 1
			if strings.HasSuffix(path, "2.xml") {
				out.n = 2
			}
		}
		return out
	case "/.well-known/tdmrep.json":
		if h.has(fTDMRep) {
			out.kind = kTDMRep
		}
		return out
	}
	segs := strings.Split(path[1:], "/")
	numHTML := func(s, ext string, lo, hi int) (int, bool) {
		v, ok := strings.CutSuffix(s, ext)
		if !ok {
			return 0, false
		}
		n, ok := atoiStrict(v)
		return n, ok && n >= lo && n <= hi
	}
	set := func(k kind, n int, ok bool) res {
		if ok {
			out.kind, out.n = k, n
		}
		return out
	}
	if len(segs) == 2 {
		a, b := segs[0], segs[1]
		switch a {
		case "orphans":
			n, ok := numHTML(b, ".html", 1, orphanPages)
			return set(kOrphan, n, ok && h.sitemap > 0)
		case "hidden":
			n, ok := numHTML(b, ".html", 1, h.pages-1)
			return set(kHidden, n, ok && hiddenOf(h, n))
		case "moved":
			n, ok := numHTML(b, ".html", 1, movedPages)
			return set(kMoved, n, ok)
		case "loop":
			if h.has(fRedirects) && (b == "a.html" || b == "b.html") {
				out.kind, out.str = kLoop, b
			}
			return out
		case "out":
			n, ok := numHTML(b, ".html", 0, len(w.hosts)-1)
			return set(kOut, n, ok && h.has(fRedirects))
		case "gone":
			n, ok := numHTML(b, ".html", 0, 1<<30)
			return set(kGone, n, ok && h.has(fErrors))
		case "error":
			n, ok := numHTML(b, ".html", 0, 1<<30)
			return set(kError, n, ok && h.has(fErrors))
		case "busy":
			n, ok := numHTML(b, ".html", 1, 3)
			return set(kBusy, n, ok && h.has(fRetryAfter))
		case "limited":
			n, ok := numHTML(b, ".html", 1, 3)
			return set(kLimited, n, ok && h.has(fRetryAfter))
		case "files":
			hi := 2
			if w.cfg.HostilePDFs {
				hi = 4
			}
			n, ok := numHTML(b, ".pdf", 1, hi)
			return set(kPDF, n, ok && h.has(fBinary))
		case "img":
			n, ok := numHTML(b, ".png", 1, 2)
			return set(kPNG, n, ok && h.has(fBinary))
		case "bin":
			n, ok := numHTML(b, ".html", 1, 2)
			return set(kBin, n, ok && h.has(fBinary))
		case "mislabeled":
			n, ok := numHTML(b, ".html", 1, 2)
			return set(kMislabeled, n, ok && h.has(fBinary))
		case "slow":
			return set(kSlow, 1, b == "1.html" && h.has(fSlow))
		case "trickle":
			return set(kTrickle, 1, b == "1.html" && h.has(fTrickle))
		case "huge":
			return set(kHuge, 1, b == "1.html" && h.has(fHuge))
		}
		for _, s := range sections {
			if a != s {
				continue
			}
			if b == "" {
				out.kind = kSection
				return out
			}
			num, _, ok := strings.Cut(b, "-")
			k, ok2 := atoiStrict(num)
			if ok && ok2 && k >= 1 && k < h.pages && w.articlePath(h, k) == path {
				out.kind, out.n = kArticle, k
			}
			return out
		}
		return out
	}
	if len(segs) == 4 && segs[0] == "r" && h.has(fRedirects) {
		code, ok1 := atoiStrict(segs[1])
		hops, ok2 := atoiStrict(segs[2])
		n, ok3 := numHTML(segs[3], ".html", 1, movedPages)
		if ok1 && ok2 && ok3 && (code == 301 || code == 302 || code == 307 || code == 308) && hops >= 1 && hops <= longChainHops {
			out.kind, out.code, out.hops, out.n = kRedirect, code, hops, n
		}
	}
	return out
}

func (w *Web) routeTrap(out *res, path, query string) {
	switch out.trap {
	case TrapCalendar:
		// /calendar/YYYY/MM/
		segs := strings.Split(path, "/")
		if len(segs) == 5 && segs[4] == "" && query == "" && len(segs[2]) == 4 && len(segs[3]) == 2 {
			y, ok1 := atoiStrict(segs[2])
			m, ok2 := strconv.Atoi(segs[3])
			if ok1 && ok2 == nil && y >= 1000 && m >= 1 && m <= 12 {
				out.kind, out.n = kCalendar, y*100+m
			}
		}
	case TrapSession:
		// /session/<16 hex>/index.html or item-N.html
		segs := strings.Split(path, "/")
		if len(segs) == 4 && query == "" && len(segs[2]) == 16 && isHex(segs[2]) &&
			(segs[3] == "index.html" || strings.HasPrefix(segs[3], "item-") && strings.HasSuffix(segs[3], ".html")) {
			out.kind, out.str = kSession, segs[2]
		}
	case TrapDeep:
		if query == "" && strings.HasSuffix(path, "/") {
			out.kind, out.str = kDeep, path
		}
	case TrapFacets:
		if path == "/catalog/" {
			out.kind, out.str = kFacets, query
		}
	}
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// --- links and documents ---

const (
	tagA uint8 = iota
	tagArea
	tagIframe
	tagCanonical
)

// link forms: how an href is written
const (
	formRoot uint8 = iota
	formAbs
	formRel
	formProto
	formUpper
	formFrag
	formTrack
	formJsess
	formEsc
	formReorder
	numForms
)

type link struct {
	url      string // canonical absolute URL of the target
	text     string
	tag      uint8
	nofollow bool
	form     uint8
}

// doc is everything about an HTML page except its generated text.
type doc struct {
	url        string
	h          *host
	kind       kind
	title      string
	textSeed   uint64 // main text seed
	words      int
	editSeed   uint64 // != 0: near-duplicate edits
	links      []link
	base       string // <base href> as written
	metaRobots string
	metaTDM    bool
	xRobots    string
	tdmHeader  bool
	malformed  bool
	canonical  string
	mirrorOf   string
	nearDupOf  string
	textKey    [3]uint64 // identity of the main text (content host, text id, edited)
	familyKey  [2]uint64 // identity of the base text before near-dup edits
	status     int
	revision   int // version of a changing page (ChangeIntervals), shown in the body
}

func (w *Web) wordsFor(content int, id uint64) int {
	r := newRng(mix(uint64(w.cfg.Seed), 5, uint64(content), id))
	n := int(float64(w.cfg.MinWords) * r.pareto(1.25))
	return min(n, w.cfg.MaxWords)
}

func (w *Web) textSeed(content int, id uint64) uint64 {
	return mix(uint64(w.cfg.Seed), 6, uint64(content), id)
}

// article text ids other than article numbers
const (
	idOrphan = 1_000_000 + iota*1000
	idHidden
	idMoved
	idSection
	idStatic
)

// buildDoc returns the document for an HTML resource (ok false for non-HTML kinds).
func (w *Web) buildDoc(rs res) (*doc, bool) {
	h := rs.h
	c := w.cfg
	d := &doc{url: "http://" + rs.host + rs.pathq, h: h, kind: rs.kind, status: 200}
	pr := newRng(mix(uint64(c.Seed), 7, uint64(h.idx), uint64(rs.kind), uint64(rs.n), uint64(len(rs.str)), strHash(rs.str)))
	textID := uint64(rs.n)
	contentHost := h.content
	switch rs.kind {
	case kHome, kArticle, kPrint:
		k := rs.n
		if rs.kind == kHome {
			k = 0
		}
		ch := w.hosts[contentHost]
		tr := newRng(mix(uint64(c.Seed), 8, uint64(contentHost), uint64(k)))
		d.title = title(wordAt(tr), wordAt(tr), wordAt(tr), wordAt(tr))
		if k == 0 {
			d.title = ch.site + " – " + d.title
		}
		base := k
		if ch.has(fNearDup) && k%10 == 5 && k >= 2 {
			base = k - 1
			d.editSeed = mix(uint64(c.Seed), 9, uint64(contentHost), uint64(k))
			d.nearDupOf = w.url(h, w.articlePath(h, k-1))
		}
		d.textSeed, d.words = w.textSeed(contentHost, uint64(base)), w.wordsFor(contentHost, uint64(base))
		d.textKey = [3]uint64{uint64(contentHost), uint64(base), d.editSeed}
		d.familyKey = [2]uint64{uint64(contentHost), uint64(base)}
		if h.mirrorOf >= 0 {
			d.mirrorOf = w.url(w.hosts[h.mirrorOf], w.articlePath(h, k))
		}
		if rs.kind == kPrint {
			d.canonical = w.url(h, w.articlePath(h, k))
			d.mirrorOf = d.canonical
			d.title += " (print)"
		}
		w.articleLinks(d, h, k, pr)
	case kSection, kOrphan, kHidden, kMoved:
		ids := map[kind]uint64{kSection: idSection, kOrphan: idOrphan, kHidden: idHidden, kMoved: idMoved}
		textID = ids[rs.kind] + uint64(rs.n)
		if rs.kind == kSection {
			sec := strings.Split(rs.pathq, "/")[1]
			textID = idSection + uint64(strHash(sec)%997)
			d.title = title(sec) + " – " + h.site
			d.words = 120
		} else {
			tr := newRng(mix(uint64(c.Seed), 8, uint64(h.idx), textID))
			d.title = title(wordAt(tr), wordAt(tr), wordAt(tr))
			d.words = w.wordsFor(h.idx, textID)
		}
		contentHost = h.idx
		d.textSeed = w.textSeed(contentHost, textID)
		d.textKey = [3]uint64{uint64(contentHost), textID, 0}
		d.familyKey = [2]uint64{uint64(contentHost), textID}
		w.navLinks(d, h)
		if rs.kind == kSection {
			sec := strings.Split(rs.pathq, "/")[1]
			cnt := 0
			for k := 1; k < h.pages && cnt < 40; k++ {
				if w.section(h.content, k) == sec {
					d.links = append(d.links, link{url: w.url(h, w.articlePath(h, k)), text: "Article " + strconv.Itoa(k)})
					cnt++
				}
			}
		} else if h.pages > 1 {
			k := 1 + pr.intn(h.pages-1)
			d.links = append(d.links, link{url: w.url(h, w.articlePath(h, k)), text: "Read more"})
		}
	case kCalendar, kSession, kDeep, kFacets, kSubPage:
		d.words = 60
		textID = idStatic + uint64(rs.kind)
		d.textSeed = w.textSeed(h.idx, textID^strHash(rs.str)^uint64(rs.n))
		d.textKey = [3]uint64{uint64(h.idx), d.textSeed, 1}
		d.familyKey = [2]uint64{uint64(h.idx), d.textSeed}
		d.title = "Archive"
		w.trapLinks(d, rs)
	case kBusy, kLimited, kSlow, kTrickle:
		d.words = 80
		textID = idStatic + 100 + uint64(rs.kind)*10 + uint64(rs.n)
		d.textSeed = w.textSeed(h.idx, textID)
		d.textKey = [3]uint64{uint64(h.idx), textID, 0}
		d.familyKey = [2]uint64{uint64(h.idx), textID}
		d.title = "Status " + strconv.Itoa(rs.n)
		d.links = append(d.links, link{url: w.url(h, "/"), text: "Home"})
	default:
		return nil, false
	}
	// link forms
	for i := range d.links {
		d.links[i].form = w.pickForm(d.links[i], h, pr)
	}
	// page-level flags (serving-host features)
	k := rs.n
	if rs.kind == kHome {
		k = 0
	}
	if rs.kind == kArticle || rs.kind == kHome || rs.kind == kPrint {
		if h.has(fBaseHref) && k%2 == 0 {
			if k%4 == 0 {
				d.base = "http://" + h.name + "/"
			} else {
				d.base = "/" + w.section(h.content, k) + "/"
			}
		}
		if h.has(fMalformed) && k%3 == 0 {
			d.malformed = true
		}
		if h.has(fNofollow) {
			switch k % 7 {
			case 1:
				d.metaRobots = "nofollow"
			case 3:
				d.metaRobots = "noindex"
			}
		}
		if h.has(fOptOut) {
			switch k % 5 {
			case 1:
				d.xRobots = "noindex"
			case 2:
				d.tdmHeader = true
			case 3:
				if d.metaRobots == "" {
					d.metaRobots = "noai, noimageai"
				}
			case 4:
				d.metaTDM = true
			}
		}
		if h.has(fCanonical) && rs.kind == kArticle && k%4 == 2 {
			d.canonical = d.url // self-canonical
		}
	}
	if d.canonical != "" {
		d.links = append(d.links, link{url: d.canonical, tag: tagCanonical, form: formAbs})
	}
	return d, true
}

func strHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

func (w *Web) navLinks(d *doc, h *host) {
	d.links = append(d.links, link{url: w.url(h, "/"), text: "Home"})
	for _, s := range sections {
		d.links = append(d.links, link{url: w.url(h, "/"+s+"/"), text: title(s)})
	}
}

func (w *Web) articleLinks(d *doc, h *host, k int, pr *rng) {
	c := w.cfg
	w.navLinks(d, h)
	N := h.pages
	add := func(t int, text string) {
		if t >= 1 && t < N {
			d.links = append(d.links, link{url: w.url(h, w.articlePath(h, t)), text: text})
		}
	}
	// link structure comes from the content host so mirrors share it
	lr := newRng(mix(uint64(c.Seed), 10, uint64(h.content), uint64(k)))
	add(k+1, "Next article")
	add(2*k+1, "Related: "+wordAt(lr))
	add(2*k+2, "Related: "+wordAt(lr))
	if k == 0 {
		for t := 3; t < min(N, 20); t++ {
			add(t, "Latest: "+wordAt(lr))
		}
	}
	for i := 0; i < c.RandomLinks; i++ {
		u := lr.float()
		add(int(float64(N)*u*u*u), "Popular: "+wordAt(lr))
	}
	for i := 0; i < c.CrossHostLinks; i++ {
		u := lr.float()
		j := int(float64(len(w.hosts)) * u * u)
		v := lr.float()
		if j == h.idx || j == h.content {
			continue
		}
		o := w.hosts[j]
		t := int(float64(o.pages) * v * v * v)
		d.links = append(d.links, link{url: w.url(o, w.articlePath(o, t)), text: o.site + ": " + wordAt(lr)})
	}
	if k%5 == 0 && len(d.links) > 12 {
		d.links[10].tag = tagArea
		d.links[11].tag = tagIframe
	}
	// serving-host features
	if printable(h, k) {
		d.links = append(d.links, link{url: w.url(h, w.articlePath(h, k)+"?print=1"), text: "Print version"})
	}
	if hiddenOf(h, k) {
		d.links = append(d.links, link{url: w.url(h, "/hidden/"+strconv.Itoa(k)+".html"), text: "Sponsored", nofollow: k%7 == 2})
	}
	if h.has(fErrors) {
		switch k % 13 {
		case 6:
			d.links = append(d.links, link{url: w.url(h, "/missing/"+strconv.Itoa(k)+".html"), text: "Old link"})
		case 7:
			d.links = append(d.links, link{url: w.url(h, "/gone/"+strconv.Itoa(k)+".html"), text: "Removed"})
		}
	}
	if k == 0 || k%10 == 3 {
		for _, e := range w.trapEntries(h) {
			d.links = append(d.links, link{url: e, text: "Browse " + wordAt(lr)})
		}
	}
	if k == 0 {
		for _, e := range w.extras(h) {
			d.links = append(d.links, link{url: w.url(h, e), text: "Resource " + e})
		}
	}
}

// trapEntries are the absolute entry URLs of a host's trap spaces.
func (w *Web) trapEntries(h *host) []string {
	var out []string
	if h.has(fCalendar) {
		out = append(out, w.url(h, "/calendar/2026/01/"))
	}
	if h.has(fSession) {
		out = append(out, w.url(h, "/session/"+fmt.Sprintf("%016x", mix(uint64(w.cfg.Seed), uint64(h.idx)))+"/index.html"))
	}
	if h.has(fDeep) {
		out = append(out, w.url(h, "/deep/more/"))
	}
	if h.has(fFacets) {
		out = append(out, w.url(h, "/catalog/?color=red"))
	}
	if h.has(fSubdomains) {
		out = append(out, "http://"+w.subName(h, 1)+"/")
	}
	return out
}

// extras are the special resources a host links from its home page.
func (w *Web) extras(h *host) []string {
	var out []string
	if h.has(fRedirects) {
		out = append(out, "/r/301/1/1.html", "/r/302/1/2.html", "/r/307/1/3.html", "/r/308/1/4.html",
			"/r/301/3/5.html", "/r/302/7/6.html", "/loop/a.html",
			"/out/"+strconv.Itoa((h.idx+7)%len(w.hosts))+".html")
	}
	if h.has(fErrors) {
		out = append(out, "/missing/1.html", "/gone/1.html", "/error/1.html")
	}
	if h.has(fRetryAfter) {
		out = append(out, "/busy/1.html", "/busy/2.html", "/limited/1.html", "/limited/2.html")
	}
	if h.has(fBinary) {
		out = append(out, "/files/1.pdf", "/img/1.png", "/bin/1.html", "/mislabeled/1.html")
		if w.cfg.HostilePDFs {
			out = append(out, "/files/2.pdf", "/files/3.pdf", "/files/4.pdf")
		}
	}
	if h.has(fSlow) {
		out = append(out, "/slow/1.html")
	}
	if h.has(fTrickle) {
		out = append(out, "/trickle/1.html")
	}
	if h.has(fHuge) {
		out = append(out, "/huge/1.html")
	}
	return out
}

var deepWords = [...]string{"more", "next", "sub", "page", "archive", "items"}

func (w *Web) trapLinks(d *doc, rs res) {
	h := rs.h
	d.links = append(d.links, link{url: w.url(h, "/"), text: "Home"})
	switch rs.kind {
	case kCalendar:
		y, m := rs.n/100, rs.n%100
		py, pm, ny, nm := y, m-1, y, m+1
		if pm == 0 {
			py, pm = y-1, 12
		}
		if nm == 13 {
			ny, nm = y+1, 1
		}
		if py >= 1000 {
			d.links = append(d.links, link{url: w.url(h, fmt.Sprintf("/calendar/%04d/%02d/", py, pm)), text: "Previous month"})
		}
		d.links = append(d.links, link{url: w.url(h, fmt.Sprintf("/calendar/%04d/%02d/", ny, nm)), text: "Next month"})
		d.links = append(d.links, link{url: w.url(h, fmt.Sprintf("/calendar/%04d/%02d/", y+1, m)), text: "Next year"})
	case kSession:
		next := fmt.Sprintf("%016x", mix(strHash(rs.str), 11))
		d.links = append(d.links, link{url: w.url(h, "/session/"+next+"/index.html"), text: "Continue"})
		d.links = append(d.links, link{url: w.url(h, "/session/"+next+"/item-1.html"), text: "Item"})
	case kDeep:
		for i := 0; i < 2; i++ {
			seg := deepWords[(strHash(rs.str)+uint64(i))%uint64(len(deepWords))]
			d.links = append(d.links, link{url: w.url(h, rs.str+seg+"/"), text: "Deeper", form: formRel})
		}
	case kFacets:
		items := map[string]string{}
		for _, it := range strings.Split(rs.str, "&") {
			if n, v, ok := strings.Cut(it, "="); ok {
				items[n] = v
			}
		}
		facets := [][]string{{"color", "red", "blue", "green", "black"}, {"size", "s", "m", "l", "xl"},
			{"brand", "acme", "globex", "initech"}, {"sort", "price", "name", "new"}}
		for _, f := range facets {
			for _, v := range f[1:3] {
				cp := map[string]string{}
				for a, b := range items {
					cp[a] = b
				}
				cp[f[0]] = v
				d.links = append(d.links, link{url: w.url(h, "/catalog/?"+facetQuery(cp)), text: f[0] + " " + v})
			}
		}
		pg, _ := strconv.Atoi(items["page"])
		cp := map[string]string{}
		for a, b := range items {
			cp[a] = b
		}
		cp["page"] = strconv.Itoa(max(pg, 1) + 1)
		d.links = append(d.links, link{url: w.url(h, "/catalog/?"+facetQuery(cp)), text: "Next page"})
	case kSubPage:
		for _, n := range []int{rs.n + 1, 2*rs.n + 1} {
			d.links = append(d.links, link{url: "http://" + w.subName(h, n) + "/", text: "Partner site"})
		}
	}
}

func facetQuery(m map[string]string) string {
	items := make([]string, 0, len(m))
	for k, v := range m {
		items = append(items, k+"="+v)
	}
	sort.Strings(items)
	return strings.Join(items, "&")
}

// pickForm chooses how a link's href is written.
func (w *Web) pickForm(l link, h *host, r *rng) uint8 {
	if l.form != formRoot || l.tag == tagCanonical {
		return l.form
	}
	same := strings.HasPrefix(l.url, "http://"+h.name+"/")
	if !w.cfg.LinkVariety && !w.cfg.TrackingParams {
		if same {
			return formRoot
		}
		return formAbs
	}
	for {
		f := uint8(r.intn(int(numForms)))
		if !w.cfg.LinkVariety && f != formRoot && f != formAbs && f != formTrack && f != formJsess {
			continue
		}
		if !w.cfg.TrackingParams && (f == formTrack || f == formJsess) {
			continue
		}
		if !same && (f == formRoot || f == formRel || f == formFrag || f == formJsess || f == formEsc) {
			f = formAbs
		}
		// most links stay plain
		if r.intn(3) == 0 {
			if same {
				return formRoot
			}
			return formAbs
		}
		return f
	}
}
