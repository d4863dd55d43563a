package node

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/crawlnode/crawlnode/dedup"
	"github.com/crawlnode/crawlnode/fetch"
	"github.com/crawlnode/crawlnode/frontier"
)

// TDMRep (W3C Text and Data Mining Reservation Protocol): a host may publish
// /.well-known/tdmrep.json, a JSON array of {"location", "tdm-reservation", "tdm-policy"}
// rules. A page whose path matches a rule with tdm-reservation 1 has its text-and-data-mining
// rights reserved; the corpus leaves such pages out by default (they stay in WARC).
//
// The file is fetched once per scheme and host, after robots.txt and only if robots.txt
// allows it, in a lease's slot like robots.txt (so it is paced like any other request). It
// is kept in the host state for tdmTTL. A missing file (any non-200, bad JSON, a transport
// error) means no reservation. Written here because no Go library for TDMRep exists.

const (
	tdmPath   = "/.well-known/tdmrep.json"
	tdmTTL    = 24 * time.Hour
	tdmMaxLen = 64 << 10
)

// tdmRule is one entry of tdmrep.json.
type tdmRule struct {
	Location    string `json:"location"`
	Reservation int    `json:"tdm-reservation"`
	Policy      string `json:"tdm-policy,omitempty"`
}

// tdmPolicy is a host's parsed tdmrep.json.
type tdmPolicy struct {
	Rules     []tdmRule `json:"rules,omitempty"`
	FetchedAt time.Time `json:"fetched_at"`
}

func (p *tdmPolicy) expired(now time.Time) bool { return now.Sub(p.FetchedAt) > tdmTTL }

// reserved reports whether the rules reserve TDM rights for path (path plus query). The
// most specific (longest) matching location wins, as in robots.txt.
func (p *tdmPolicy) reserved(path string) (bool, string) {
	best := -1
	var rule tdmRule
	for _, r := range p.Rules {
		if tdmMatch(r.Location, path) && len(r.Location) > best {
			best, rule = len(r.Location), r
		}
	}
	return best >= 0 && rule.Reservation == 1, rule.Policy
}

// tdmMatch matches a TDMRep location pattern: a path prefix where '*' matches any run of
// characters and a trailing '$' anchors the end.
func tdmMatch(pattern, path string) bool {
	if pattern == "" {
		return false
	}
	anchored := strings.HasSuffix(pattern, "$")
	pattern = strings.TrimSuffix(pattern, "$")
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(path, parts[0]) {
		return false
	}
	rest := path[len(parts[0]):]
	for i, part := range parts[1:] {
		last := i == len(parts)-2
		if last && anchored {
			return strings.HasSuffix(rest, part)
		}
		j := strings.Index(rest, part)
		if j < 0 {
			return false
		}
		rest = rest[j+len(part):]
	}
	return !anchored || rest == ""
}

func parseTDMRep(body []byte, now time.Time) *tdmPolicy {
	p := &tdmPolicy{FetchedAt: now}
	var rules []tdmRule
	if len(body) <= tdmMaxLen && json.Unmarshal(body, &rules) == nil {
		for _, r := range rules {
			if strings.HasPrefix(r.Location, "/") {
				p.Rules = append(p.Rules, r)
			}
		}
	}
	return p
}

// tdmFor returns the host's TDMRep policy, fetching it in this lease's slot when unknown
// (then ok is false and the outcome requeues the lease's URL, unattempted).
func (n *Node) tdmFor(ctx context.Context, scheme, hostKey string, rules *fetch.Robots, ws *workerState) (*tdmPolicy, frontier.Outcome, bool) {
	key := scheme + "://" + hostKey
	now := n.cfg.Now()
	if p, ok := n.tdmPolicies.get(key); ok && !p.expired(now) {
		return p, frontier.Outcome{}, true
	}
	meta := n.hostMeta(hostKey)
	if p, ok := meta.TDM[scheme]; ok && p != nil && !p.expired(now) {
		n.tdmPolicies.put(key, p)
		return p, frontier.Outcome{}, true
	}
	url := key + tdmPath
	var p *tdmPolicy
	if !rules.Allowed(n.userAgent(), url) {
		p = &tdmPolicy{FetchedAt: now} // not ours to fetch: no reservation known
	} else {
		resp, err := n.client.Do(ctx, fetch.Request{URL: url})
		if ctx.Err() != nil {
			return nil, frontier.Outcome{Kind: frontier.Requeue}, false
		}
		if err != nil && n.net.failed(hostKey, err, n.cfg.Now()) {
			// This node's network is down: the file was not asked (netWatch).
			ws.finished = n.cfg.Now()
			n.front.DeferHost(hostKey, offlineRetry)
			return nil, frontier.Outcome{Kind: frontier.Requeue, NoRequest: true}, false
		}
		if err != nil {
			if fetch.Classify(err) != fetch.ClassForbiddenAddress {
				ws.finished = n.cfg.Now()
			} // else nothing was sent: the URL goes on at once (and meets the same refusal)
			p = &tdmPolicy{FetchedAt: now}
		} else {
			ws.finished = resp.Finished
			n.net.responded(resp.Started)
			if loc, err := n.archive(ctx, resp, url); err == nil && loc.register != nil {
				n.payloads.Register([]dedup.PayloadRecord{*loc.register})
			}
			if resp.Status == http.StatusOK {
				p = parseTDMRep(resp.Body, now)
			} else {
				p = &tdmPolicy{FetchedAt: now}
			}
		}
	}
	if meta.TDM == nil {
		meta.TDM = map[string]*tdmPolicy{}
	}
	meta.TDM[scheme] = p
	n.saveHostMeta(hostKey, meta)
	n.tdmPolicies.put(key, p)
	if ws.finished.IsZero() {
		// Nothing was sent (robots.txt disallows the file): the URL goes on at once.
		return p, frontier.Outcome{}, true
	}
	return nil, frontier.Outcome{Kind: frontier.Requeue}, false
}
