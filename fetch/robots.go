package fetch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/jimsmart/grobotstxt"
)

// Robots limits and lifetimes.
const (
	// MaxRobotsSize is the part of a robots.txt that is read and parsed
	// (RFC 9309 section 2.5 asks for at least 500 KiB).
	MaxRobotsSize = 500 << 10
	// RobotsTTL is how long a 2xx or 4xx robots.txt is trusted (RFC 9309
	// section 2.4: SHOULD NOT use a cached copy for more than 24 hours).
	RobotsTTL = 24 * time.Hour
	// RobotsRetryTTL is how soon a 5xx/429/unreachable robots.txt expires so
	// that the caller fetches it again; until then the host is disallowed.
	RobotsRetryTTL = time.Minute
	// MaxCrawlDelay caps Crawl-delay, so that a hostile robots.txt cannot
	// park a host's queue (and its memory) for days.
	MaxCrawlDelay = 60 * time.Second
	// maxSitemaps bounds the Sitemap: lines kept from one robots.txt.
	maxSitemaps = 1000
)

type robotsMode uint8

const (
	modeRules robotsMode = iota
	modeAllowAll
	modeDisallowAll
)

type recKind uint8

const (
	recUA recKind = iota
	recAllow
	recDisallow
	recDelay
)

type robotsRec struct {
	kind  recKind
	value string
}

// Robots is a parsed robots.txt (or the verdict that stands in for one). It
// is immutable after construction and safe for concurrent use.
//
// The body is parsed once, with grobotstxt's tokenizer (same line handling,
// key typos and pattern escaping as Google's parser), into a list of
// directives. Allowed then replays grobotstxt's RobotsMatcher logic (group
// selection, longest match, Allow wins ties, the index.html quirk) over
// that list without touching the text again; the rules for one user agent
// are compiled on first use and cached. A differential test holds the
// result against grobotstxt.AgentAllowed.
type Robots struct {
	status      int
	fetchedAt   time.Time
	unreachable bool
	body        string // cut at MaxRobotsSize; recs hold substrings of it

	mode     robotsMode
	recs     []robotsRec
	sitemaps []string
	agent    atomic.Pointer[agentRules]
}

// ParseRobots interprets a robots.txt response (RFC 9309 section 2.3.1):
// 2xx: parse the body (cut at MaxRobotsSize, at a line end); 3xx left over
// after redirects and 4xx other than 429: allow all ("unavailable"); 5xx
// and 429: disallow all, Unreachable() true, expires after RobotsRetryTTL.
// Any other status is treated like 5xx.
func ParseRobots(status int, body []byte, fetchedAt time.Time) *Robots {
	r := &Robots{status: status, fetchedAt: fetchedAt}
	switch {
	case status >= 200 && status < 300:
		r.body = string(cutRobots(body))
		r.parse()
	case status == 429 || status >= 500 || status < 200:
		r.mode = modeDisallowAll
		r.unreachable = true
	default: // 3xx, 4xx
		r.mode = modeAllowAll
	}
	return r
}

// UnreachableRobots stands for a robots.txt that could not be fetched at
// all (transport failure): disallow all, retry after RobotsRetryTTL.
func UnreachableRobots(fetchedAt time.Time) *Robots {
	return &Robots{fetchedAt: fetchedAt, unreachable: true, mode: modeDisallowAll}
}

func cutRobots(b []byte) []byte {
	if len(b) <= MaxRobotsSize {
		return b
	}
	b = b[:MaxRobotsSize]
	if i := bytes.LastIndexAny(b, "\r\n"); i >= 0 {
		b = b[:i+1]
	}
	return b
}

// Status is the HTTP status the verdict came from (0: unreachable).
func (r *Robots) Status() int { return r.status }

// FetchedAt is when the robots.txt was fetched.
func (r *Robots) FetchedAt() time.Time { return r.fetchedAt }

// Unreachable reports a 5xx/429/transport failure: everything is disallowed
// and the caller should fetch robots.txt again once Expired.
func (r *Robots) Unreachable() bool { return r.unreachable }

// Expired reports whether the verdict should be refreshed: after RobotsTTL
// for 2xx/3xx/4xx, after RobotsRetryTTL for unreachable ones.
func (r *Robots) Expired(now time.Time) bool {
	ttl := RobotsTTL
	if r.unreachable {
		ttl = RobotsRetryTTL
	}
	return !now.Before(r.fetchedAt.Add(ttl))
}

// Sitemaps returns the absolute http(s) URLs of the Sitemap: lines, in
// order, without duplicates (at most 1000). Relative values are dropped.
func (r *Robots) Sitemaps() []string { return r.sitemaps }

// parse runs grobotstxt's tokenizer once over the body.
func (r *Robots) parse() {
	h := &recHandler{r: r, seen: map[string]bool{}}
	grobotstxt.Parse(r.body, h)
}

type recHandler struct {
	r    *Robots
	seen map[string]bool
}

func (h *recHandler) HandleRobotsStart()      {}
func (h *recHandler) HandleRobotsEnd()        {}
func (h *recHandler) add(k recKind, v string) { h.r.recs = append(h.r.recs, robotsRec{k, v}) }
func (h *recHandler) HandleUserAgent(_ int, v string) {
	h.add(recUA, v)
}
func (h *recHandler) HandleAllow(_ int, v string)    { h.add(recAllow, repairEscapes(v)) }
func (h *recHandler) HandleDisallow(_ int, v string) { h.add(recDisallow, repairEscapes(v)) }

// repairEscapes undoes a grobotstxt v1.0.3 bug: when it upper-cases
// "%c3%a9" its toUpper also clears bit 0x20 of digits, so "%c3" arrives as
// "%C\x13". Digits so damaged (0x10-0x19 right after '%') are restored, so
// that lower-case escapes in robots.txt match as RFC 9309 intends.
func repairEscapes(v string) string {
	var b []byte
	for i := 0; i+2 < len(v); i++ {
		if v[i] != '%' {
			continue
		}
		for j := i + 1; j <= i+2; j++ {
			if c := v[j]; c >= 0x10 && c <= 0x19 {
				if b == nil {
					b = []byte(v)
				}
				b[j] = c + 0x20
			}
		}
	}
	if b == nil {
		return v
	}
	return string(b)
}
func (h *recHandler) HandleSitemap(_ int, v string) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return
	}
	if len(h.r.sitemaps) < maxSitemaps && !h.seen[v] {
		h.seen[v] = true
		h.r.sitemaps = append(h.r.sitemaps, v)
	}
}
func (h *recHandler) HandleUnknownAction(_ int, action, v string) {
	switch strings.ToLower(action) {
	case "crawl-delay", "crawl_delay", "crawldelay":
		h.add(recDelay, v)
	}
}

// agentRules is the part of a robots.txt that concerns one product token.
type agentRules struct {
	token            string
	specific, global []rule
	everSeenSpecific bool
	delay            time.Duration
	hasDelay         bool
}

type rule struct {
	allow   bool
	pattern string
	alt     string // Allow ".../index.htm*" also tries ".../$" (grobotstxt quirk)
	plain   bool   // no '*' and no trailing '$': a prefix test suffices
}

func newRule(allow bool, p string) rule {
	ru := rule{allow: allow, pattern: p, plain: !strings.ContainsAny(p, "*$")}
	if allow {
		if i := strings.LastIndexByte(p, '/'); i >= 0 && strings.HasPrefix(p[i:], "/index.htm") {
			ru.alt = p[:i+1] + "$"
		}
	}
	return ru
}

// priority is the match length of the rule for path, -1 for no match.
func (ru *rule) priority(path string) int {
	if ru.plain {
		if strings.HasPrefix(path, ru.pattern) {
			return len(ru.pattern)
		}
	} else if matches(path, ru.pattern) {
		return len(ru.pattern)
	}
	if ru.alt != "" && matches(path, ru.alt) {
		return len(ru.alt)
	}
	return -1
}

// compile replays grobotstxt's group logic for one product token.
func (r *Robots) compile(token string) *agentRules {
	a := &agentRules{token: token}
	var seenGlobal, seenSpecific, seenSep bool
	var specDelay, globDelay []string
	for _, rec := range r.recs {
		switch rec.kind {
		case recUA:
			if seenSep {
				seenGlobal, seenSpecific, seenSep = false, false, false
			}
			v := rec.value
			if len(v) >= 1 && v[0] == '*' && (len(v) == 1 || unicode.IsSpace(rune(v[1]))) {
				seenGlobal = true
			} else if strings.EqualFold(productToken(v), token) {
				a.everSeenSpecific, seenSpecific = true, true
			}
		case recAllow, recDisallow:
			if !seenGlobal && !seenSpecific {
				continue
			}
			seenSep = true
			ru := newRule(rec.kind == recAllow, rec.value)
			if seenSpecific {
				a.specific = append(a.specific, ru)
			} else {
				a.global = append(a.global, ru)
			}
		case recDelay:
			if seenSpecific {
				specDelay = append(specDelay, rec.value)
			} else if seenGlobal {
				globDelay = append(globDelay, rec.value)
			}
		}
	}
	delays := globDelay
	if a.everSeenSpecific {
		delays = specDelay
	}
	for _, v := range delays {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) || f < 0 {
			continue
		}
		d := MaxCrawlDelay
		if f < MaxCrawlDelay.Seconds() {
			d = time.Duration(f * float64(time.Second))
		}
		if !a.hasDelay || d > a.delay {
			a.delay, a.hasDelay = d, true
		}
	}
	return a
}

func (r *Robots) rulesFor(userAgent string) *agentRules {
	token := productToken(userAgent)
	if a := r.agent.Load(); a != nil && a.token == token {
		return a
	}
	a := r.compile(token)
	r.agent.Store(a)
	return a
}

// productToken is the leading run of RFC 9110 token characters, as
// grobotstxt extracts it ("crawlnode/0.1 (...)" -> "crawlnode").
func productToken(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("~#$%'*+-.^_`|", c) >= 0) {
			return s[:i]
		}
	}
	return s
}

// Allowed reports whether the product token of userAgent may fetch rawURL.
// /robots.txt itself is always allowed. An unparsable URL is disallowed,
// as grobotstxt does.
func (r *Robots) Allowed(userAgent, rawURL string) bool {
	path, ok := robotsPath(rawURL)
	if !ok {
		return false
	}
	if path == "/robots.txt" {
		return true
	}
	switch r.mode {
	case modeAllowAll:
		return true
	case modeDisallowAll:
		return false
	}
	a := r.rulesFor(userAgent)
	allowS, disS := bestMatch(a.specific, path)
	if allowS > 0 || disS > 0 {
		return disS <= allowS
	}
	if a.everSeenSpecific {
		return true
	}
	allowG, disG := bestMatch(a.global, path)
	if allowG > 0 || disG > 0 {
		return disG <= allowG
	}
	return true
}

func bestMatch(rules []rule, path string) (allow, disallow int) {
	allow, disallow = -1, -1
	for i := range rules {
		p := rules[i].priority(path)
		if rules[i].allow {
			allow = max(allow, p)
		} else {
			disallow = max(disallow, p)
		}
	}
	return allow, disallow
}

// CrawlDelay returns the Crawl-delay of the group that applies to the
// product token of userAgent (the largest if the group repeats it), capped
// at MaxCrawlDelay. grobotstxt does not expose Crawl-delay, so the groups
// are rebuilt here with grobotstxt's own grouping rules: a token-specific
// group hides the "*" group, for the delay as for the rules.
func (r *Robots) CrawlDelay(userAgent string) (time.Duration, bool) {
	if r.mode != modeRules {
		return 0, false
	}
	a := r.rulesFor(userAgent)
	return a.delay, a.hasDelay
}

// robotsPath extracts path, params and query the way grobotstxt's
// AgentsAllowed does (url.Parse, String, then its getPathParamsQuery).
func robotsPath(rawURL string) (string, bool) {
	if plainURL(rawURL) {
		// url.Parse + String is the identity on such URLs; skip it.
		return pathParamsQuery(rawURL), true
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", false
	}
	return pathParamsQuery(u.String()), true
}

// plainURL reports an http(s) URL made only of characters that url.Parse
// and URL.String leave alone: lower-case scheme, RFC 3986 unreserved and
// sub-delims, ':', '/', '?', '#', and well-formed percent escapes.
func plainURL(s string) bool {
	var rest string
	switch {
	case strings.HasPrefix(s, "http://"):
		rest = s[7:]
	case strings.HasPrefix(s, "https://"):
		rest = s[8:]
	default:
		return false
	}
	if rest == "" || rest[0] == '/' {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-._~!$&'()*+,;=:/?#", c) >= 0:
		case c == '%':
			if i+2 >= len(rest) || !isHex(rest[i+1]) || !isHex(rest[i+2]) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// pathParamsQuery is grobotstxt's getPathParamsQuery.
func pathParamsQuery(uri string) string {
	searchStart := 0
	if len(uri) >= 2 && uri[0] == '/' && uri[1] == '/' {
		searchStart = 2
	}
	earlyPath := indexAnyFrom(uri, "/?;", searchStart)
	protocolEnd := indexFrom(uri, "://", searchStart)
	if earlyPath != -1 && earlyPath < protocolEnd {
		protocolEnd = -1
	}
	if protocolEnd == -1 {
		protocolEnd = searchStart
	} else {
		protocolEnd += 3
	}
	pathStart := indexAnyFrom(uri, "/?;", protocolEnd)
	if pathStart == -1 {
		return "/"
	}
	hashPos := indexFrom(uri, "#", searchStart)
	if hashPos != -1 && hashPos < pathStart {
		return "/"
	}
	pathEnd := hashPos
	if hashPos == -1 {
		pathEnd = len(uri)
	}
	if uri[pathStart] != '/' {
		return "/" + uri[pathStart:pathEnd]
	}
	return uri[pathStart:pathEnd]
}

func indexAnyFrom(s, chars string, i int) int {
	j := strings.IndexAny(s[i:], chars)
	if j != -1 {
		j += i
	}
	return j
}

func indexFrom(s, sub string, i int) int {
	j := strings.Index(s[i:], sub)
	if j != -1 {
		j += i
	}
	return j
}

// matches has grobotstxt.Matches' semantics (pattern anchored at the start
// of path, '*' matches any run, '$' anchors the end only as the last byte)
// but runs greedily in linear time without allocating: each '*'-separated
// segment is found at its earliest position after the previous one, which
// leaves the most room for the rest; with a final '$' the last segment
// must be a suffix of what remains. TestRobotsMatchesGrobotstxt holds the
// two against each other.
func matches(path, pattern string) bool {
	anchored := len(pattern) > 0 && pattern[len(pattern)-1] == '$'
	if anchored {
		pattern = pattern[:len(pattern)-1]
	}
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		if anchored {
			return path == pattern
		}
		return strings.HasPrefix(path, pattern)
	}
	if !strings.HasPrefix(path, pattern[:star]) {
		return false
	}
	path, pattern = path[star:], pattern[star+1:]
	for {
		star = strings.IndexByte(pattern, '*')
		if star < 0 {
			break
		}
		seg := pattern[:star]
		i := strings.Index(path, seg)
		if i < 0 {
			return false
		}
		path, pattern = path[i+len(seg):], pattern[star+1:]
	}
	if anchored {
		return strings.HasSuffix(path, pattern)
	}
	return strings.Contains(path, pattern)
}

const robotsCodecVersion = 1

// MarshalBinary encodes the verdict for the host state: version, flags,
// status, fetch time and the (cut) body; the rules are re-parsed on load.
func (r *Robots) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 2+3*binary.MaxVarintLen64+len(r.body))
	b = append(b, robotsCodecVersion)
	var flags byte
	if r.unreachable {
		flags |= 1
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(r.status))
	b = binary.AppendVarint(b, r.fetchedAt.UnixNano())
	b = binary.AppendUvarint(b, uint64(len(r.body)))
	b = append(b, r.body...)
	return b, nil
}

var errRobotsCodec = errors.New("fetch: bad robots encoding")

// UnmarshalBinary decodes what MarshalBinary wrote. Not safe to call on a
// Robots other goroutines use.
func (r *Robots) UnmarshalBinary(b []byte) error {
	if len(b) < 2 || b[0] != robotsCodecVersion {
		return fmt.Errorf("%w: version", errRobotsCodec)
	}
	flags := b[1]
	b = b[2:]
	status, n := binary.Uvarint(b)
	if n <= 0 || status > 999 {
		return fmt.Errorf("%w: status", errRobotsCodec)
	}
	b = b[n:]
	ts, n := binary.Varint(b)
	if n <= 0 {
		return fmt.Errorf("%w: time", errRobotsCodec)
	}
	b = b[n:]
	l, n := binary.Uvarint(b)
	if n <= 0 || l != uint64(len(b)-n) {
		return fmt.Errorf("%w: body length", errRobotsCodec)
	}
	body := b[n:]
	at := time.Unix(0, ts)
	var nr *Robots
	if flags&1 != 0 && status == 0 {
		nr = UnreachableRobots(at)
	} else {
		nr = ParseRobots(int(status), body, at)
	}
	r.status, r.fetchedAt, r.unreachable, r.body = nr.status, nr.fetchedAt, nr.unreachable, nr.body
	r.mode, r.recs, r.sitemaps = nr.mode, nr.recs, nr.sitemaps
	r.agent.Store(nil)
	return nil
}
