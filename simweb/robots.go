package simweb

import (
	"strconv"
	"strings"
	"time"
)

// robotsMaxBytes is how much of a robots.txt counts (RFC 9309: at least 500 KiB).
const robotsMaxBytes = 500 << 10

type robotsRule struct {
	allow   bool
	pattern string
}

type robotsGroup struct {
	agents   []string
	rules    []robotsRule
	delay    time.Duration
	hasDelay bool
}

type robotsFile struct {
	groups   []robotsGroup
	sitemaps []string
}

// parseRobots parses a robots.txt body (RFC 9309). Only the first robotsMaxBytes count; a
// line cut by that limit is dropped.
func parseRobots(body []byte) robotsFile {
	if len(body) > robotsMaxBytes {
		body = body[:robotsMaxBytes]
		if i := strings.LastIndexByte(string(body), '\n'); i >= 0 {
			body = body[:i+1]
		}
	}
	var f robotsFile
	var cur *robotsGroup
	inRules := false
	for _, line := range strings.Split(string(body), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key = strings.ToLower(strings.TrimSpace(key))
		val = strings.TrimSpace(val)
		switch key {
		case "user-agent":
			if cur == nil || inRules {
				f.groups = append(f.groups, robotsGroup{})
				cur = &f.groups[len(f.groups)-1]
				inRules = false
			}
			cur.agents = append(cur.agents, strings.ToLower(val))
		case "allow", "disallow":
			if cur == nil {
				continue
			}
			inRules = true
			if val != "" {
				cur.rules = append(cur.rules, robotsRule{allow: key == "allow", pattern: val})
			}
		case "crawl-delay":
			if cur == nil {
				continue
			}
			inRules = true
			if s, err := strconv.ParseFloat(val, 64); err == nil && s >= 0 && !cur.hasDelay {
				cur.delay, cur.hasDelay = time.Duration(s*float64(time.Second)), true
			}
		case "sitemap":
			if u, ok := Canonicalize("", val); ok {
				f.sitemaps = append(f.sitemaps, u)
			}
		}
	}
	return f
}

// ProductToken is the robots.txt product token of a User-Agent: the text before the first
// '/' (or space), lower-cased.
func ProductToken(ua string) string {
	ua = strings.TrimSpace(ua)
	if i := strings.IndexAny(ua, "/ "); i >= 0 {
		ua = ua[:i]
	}
	return strings.ToLower(ua)
}

// robotsPolicy is the outcome of robots.txt for one user agent on one host.
type robotsPolicy struct {
	disallowAll bool
	rules       []robotsRule
	delay       time.Duration
	hasDelay    bool
	sitemaps    []string
}

// policyFor selects the groups for the product token (merged), else the '*' groups.
func (f robotsFile) policyFor(token string) robotsPolicy {
	p := robotsPolicy{sitemaps: f.sitemaps}
	pick := func(match func(string) bool) bool {
		found := false
		for _, g := range f.groups {
			for _, a := range g.agents {
				if match(a) {
					found = true
					p.rules = append(p.rules, g.rules...)
					if g.hasDelay && !p.hasDelay {
						p.delay, p.hasDelay = g.delay, true
					}
					break
				}
			}
		}
		return found
	}
	if token == "" || !pick(func(a string) bool { return a == token }) {
		pick(func(a string) bool { return a == "*" })
	}
	return p
}

// allowed applies longest match (Allow wins a tie) to a path?query.
func (p robotsPolicy) allowed(pathq string) bool {
	if p.disallowAll {
		return false
	}
	if pathq == "/robots.txt" {
		return true
	}
	best, allow := -1, true
	for _, r := range p.rules {
		if !robotsMatch(r.pattern, pathq) {
			continue
		}
		n := len(r.pattern)
		if n > best || (n == best && r.allow) {
			best, allow = n, r.allow
		}
	}
	return allow
}

// robotsMatch matches a robots pattern ('*' any run, trailing '$' end anchor) as a prefix.
func robotsMatch(pat, s string) bool {
	anchored := strings.HasSuffix(pat, "$")
	if anchored {
		pat = pat[:len(pat)-1]
	}
	parts := strings.Split(pat, "*")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	pos := len(parts[0])
	for i := 1; i < len(parts); i++ {
		if i == len(parts)-1 && anchored {
			return len(s)-len(parts[i]) >= pos && strings.HasSuffix(s, parts[i])
		}
		j := strings.Index(s[pos:], parts[i])
		if j < 0 {
			return false
		}
		pos += j + len(parts[i])
	}
	if anchored {
		return pos == len(s)
	}
	return true
}

// policy returns the robots outcome for a (sub)host and product token, as a correct crawler
// sees it after following robots.txt redirects.
func (w *Web) policy(h *host, sub int, token string) robotsPolicy {
	if sub > 0 {
		return robotsPolicy{}
	}
	switch h.robots {
	case robotsNone, robots4xx:
		return robotsPolicy{}
	case robots5xx, robotsUnreachable, robotsTimeout:
		return robotsPolicy{disallowAll: true}
	}
	return parseRobots(h.robotsBody).policyFor(token)
}
