package frontier

import "strings"

// Rejection reasons, the keys of AddResult.Rejected.
const (
	RejectInvalidURL       = "invalid_url"           // no scheme://host, or the host cannot be derived
	RejectMaxDepth         = "max_depth"             // Depth > MaxDepth
	RejectURLTooLong       = "url_too_long"          // len(URL) > MaxURLLength
	RejectRepeatedSegments = "repeated_segments"     // a path segment occurs > MaxRepeatedSegments times
	RejectTooManyParams    = "too_many_query_params" // more than MaxQueryParams query items
	RejectHostPageCap      = "host_page_cap"         // the host admitted MaxPagesPerHost URLs already
	RejectGeneratedBudget  = "generated_budget"      // looks generated and the host's budget is spent
	RejectSubdomainBudget  = "subdomain_budget"      // a new host under a host that has MaxSubdomains children
)

// hostOf derives the host key (host[:port], lower-case) of an absolute URL. Canonical URLs
// carry no userinfo and no default port; any userinfo is stripped anyway, and the default
// port of http/https is removed so both spellings map to one host.
func hostOf(u string) (string, bool) {
	i := strings.Index(u, "://")
	if i <= 0 {
		return "", false
	}
	scheme := u[:i]
	rest := u[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end >= 0 {
		rest = rest[:end]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = rest[at+1:]
	}
	if rest == "" {
		return "", false
	}
	if (strings.EqualFold(scheme, "http") && strings.HasSuffix(rest, ":80")) ||
		(strings.EqualFold(scheme, "https") && strings.HasSuffix(rest, ":443")) {
		rest = rest[:strings.LastIndexByte(rest, ':')]
	}
	return strings.ToLower(rest), true
}

// splitURL returns the path and query of an absolute URL (fragment dropped).
func splitURL(u string) (path, query string) {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
		if j := strings.IndexAny(u, "/?#"); j >= 0 {
			u = u[j:]
		} else {
			u = ""
		}
	}
	if i := strings.IndexByte(u, '#'); i >= 0 {
		u = u[:i]
	}
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i], u[i+1:]
	}
	return u, ""
}

// trapLimits are the static (per-URL) limits of staticCheck.
type trapLimits struct {
	maxDepth, maxURLLength, maxRepeated, maxParams int
}

// staticCheck applies the per-URL trap defenses that need no host state. It returns the
// rejection reason or "".
func staticCheck(l trapLimits, url string, depth int) string {
	if l.maxURLLength >= 0 && len(url) > l.maxURLLength {
		return RejectURLTooLong
	}
	if l.maxDepth >= 0 && depth > l.maxDepth {
		return RejectMaxDepth
	}
	path, query := splitURL(url)
	if l.maxParams >= 0 && countParams(query) > l.maxParams {
		return RejectTooManyParams
	}
	if l.maxRepeated >= 0 && maxSegments(path) > l.maxRepeated && maxSegmentRepeats(path) > l.maxRepeated {
		return RejectRepeatedSegments
	}
	return ""
}

// countParams counts the non-empty &-separated items of a query, without allocating.
func countParams(q string) int {
	n := 0
	for len(q) > 0 {
		i := strings.IndexByte(q, '&')
		if i < 0 {
			return n + 1
		}
		if i > 0 {
			n++
		}
		q = q[i+1:]
	}
	return n
}

// maxSegmentRepeats is the highest number of times one non-empty path segment occurs.
// Quadratic in the segment count but allocation-free; paths are short (MaxURLLength).
func maxSegmentRepeats(path string) int {
	best := 0
	for rest := path; rest != ""; {
		s, tail := nextSeg(rest)
		rest = tail
		if s == "" {
			continue
		}
		n := 1
		for r := tail; r != ""; {
			var t string
			t, r = nextSeg(r)
			if t == s {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// maxSegments bounds the number of non-empty /-separated segments of path from above
// (one more than its slashes, less one when it starts with one), so that the common short
// path skips maxSegmentRepeats' quadratic walk: no segment of it can occur more often.
func maxSegments(path string) int {
	n := strings.Count(path, "/") + 1
	if strings.HasPrefix(path, "/") {
		n--
	}
	return n
}

// nextSeg splits off the first /-separated segment of p.
func nextSeg(p string) (seg, rest string) {
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, ""
}

// facetParams are query names typical of faceted navigation and sort/view permutations.
var facetParams = map[string]bool{
	"sort": true, "order": true, "orderby": true, "sort_by": true, "sortby": true, "order_by": true,
	"dir": true, "view": true, "filter": true, "facet": true, "fq": true, "refine": true,
	"date": true, "day": true, "month": true, "year": true, "week": true,
}

// looksGenerated reports whether a URL looks machine-generated: a path segment that occurs
// twice (relative links that make paths ever deeper), a date in the path
// (/2024/05/17/, /2024/05/), a calendar segment, a session-id-like segment (a long hex or
// base64-like token mixing letters and digits), or a query with 5+ items or a facet,
// sort or date parameter. Such URLs spend the host's GeneratedBudget.
func looksGenerated(url string) bool {
	path, query := splitURL(url)
	if maxSegmentRepeats(path) > 1 {
		return true // ever-deeper relative paths: /a/b/a/..., /more/next/more/...
	}
	segs := strings.Split(path, "/")
	for i, s := range segs {
		ls := strings.ToLower(s)
		if ls == "calendar" || ls == "cal" || ls == "events-calendar" {
			return true
		}
		if isYear(s) && i+1 < len(segs) && isNum(segs[i+1], 1, 2) {
			return true
		}
		if isTokenLike(s) {
			return true
		}
	}
	if query != "" {
		n := 0
		for _, it := range strings.Split(query, "&") {
			if it == "" {
				continue
			}
			n++
			name, _, _ := strings.Cut(it, "=")
			name = strings.ToLower(name)
			if facetParams[name] || strings.HasPrefix(name, "filter") || strings.HasPrefix(name, "facet") {
				return true
			}
		}
		if n >= 5 {
			return true
		}
	}
	return false
}

func isNum(s string, minLen, maxLen int) bool {
	if len(s) < minLen || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isYear(s string) bool {
	return isNum(s, 4, 4) && s >= "1900" && s <= "2199"
}

// isTokenLike: >= 16 hex chars with both digits and letters, or >= 24 base64url chars
// with digits, lower and upper case letters (a session id or random token).
func isTokenLike(s string) bool {
	if i := strings.IndexAny(s, ".;"); i >= 0 {
		s = s[:i] // ignore an extension or a path parameter
	}
	if len(s) < 16 {
		return false
	}
	var hex, digit, lower, upper, other bool = true, false, false, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
			if c >= 'a' {
				lower = true
			} else {
				upper = true
			}
		case c >= 'g' && c <= 'z':
			lower, hex = true, false
		case c >= 'G' && c <= 'Z':
			upper, hex = true, false
		case c == '-' || c == '_':
			hex = false
		default:
			other = true
		}
	}
	if other {
		return false
	}
	if hex && digit && (lower || upper) && !(lower && upper) {
		return true
	}
	return len(s) >= 24 && digit && lower && upper
}

// parentHost is the host one label up ("x.h.example.org" -> "h.example.org"), or "" when
// the host has fewer than three labels or is an IP literal. A port stays with the child.
func parentHost(hostKey string) string {
	h := hostKey
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h, "]") {
		h = h[:i]
	}
	if strings.HasPrefix(h, "[") || strings.Count(h, ".") < 2 {
		return ""
	}
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last != "" && last[0] >= '0' && last[0] <= '9' {
		return "" // IPv4 literal
	}
	return h[strings.IndexByte(h, '.')+1:]
}

// maxTrackedPaths bounds the per-host path table of the query-variant rule.
const maxTrackedPaths = 4096

// queryVariant counts a URL with a query against its path's free variants and reports
// whether it is past them (so it counts as generated). Called under f.mu.
func (h *host) queryVariant(url string, free int) bool {
	path, query := splitURL(url)
	if query == "" || free < 0 {
		return false
	}
	if h.paths == nil {
		h.paths = make(map[string]uint16)
	}
	n, ok := h.paths[path]
	if !ok && len(h.paths) >= maxTrackedPaths {
		return true
	}
	if n < 65535 {
		h.paths[path] = n + 1
	}
	return int(n) >= free
}
