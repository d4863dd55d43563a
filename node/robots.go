package node

import (
	"context"
	"encoding/json"
	"time"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/fetch"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/urlnorm"
)

// hostMeta is what the node keeps per host in the frontier's host state: the robots.txt of
// each scheme (parsed form, so a restart does not fetch it again) and the count of failed
// robots.txt fetches in a row.
type hostMeta struct {
	Robots         map[string][]byte     `json:"robots,omitempty"`
	RobotsFailures int                   `json:"robots_failures,omitempty"`
	ParkedUntil    time.Time             `json:"parked_until,omitzero"` // robots.txt gave up: park new URLs without asking again
	TDM            map[string]*tdmPolicy `json:"tdm,omitempty"`         // by scheme: the host's tdmrep.json
}

// robotsParkTime is how long a host whose robots.txt stayed unreachable through its retries
// keeps its URLs parked without robots.txt being asked again.
const robotsParkTime = time.Hour

// robotsFor returns the host's robots rules. When they are unknown or expired it fetches
// robots.txt in this lease's slot (a request to the host like any other) and returns
// ok=false with the outcome to record for the lease (requeued, not attempted).
func (n *Node) robotsFor(ctx context.Context, scheme, hostKey string, l *frontier.Lease, ws *workerState) (*fetch.Robots, frontier.Outcome, bool) {
	key := scheme + "://" + hostKey
	now := n.cfg.Now()
	if r, ok := n.robots.get(key); ok && !r.Expired(now) {
		return r, frontier.Outcome{}, true
	}
	meta := n.hostMeta(hostKey)
	if b, ok := meta.Robots[scheme]; ok {
		r := new(fetch.Robots)
		if err := r.UnmarshalBinary(b); err == nil && !r.Expired(now) {
			n.robots.put(key, r)
			n.applyCrawlDelay(hostKey, r)
			return r, frontier.Outcome{}, true
		}
	}

	if now.Before(meta.ParkedUntil) {
		// robots.txt stayed unreachable through its retries a short while ago: URLs found
		// since are parked at once, without asking the host again.
		return nil, frontier.Outcome{Kind: frontier.Retry, Park: true, NoRequest: true, Err: "robots.txt unreachable"}, false
	}
	n.stats.robotsReq.Add(1)
	// Each redirect hop is a request to the host: the hops keep the default delay apart.
	rr, err := n.client.FetchRobotsDelay(ctx, scheme, hostKey, time.Duration(n.delay.Load()))
	ws.finished = n.cfg.Now()
	if err == nil {
		ws.finished = rr.Finished
	}
	if ctx.Err() != nil {
		return nil, frontier.Outcome{Kind: frontier.Requeue}, false
	}
	var r *fetch.Robots
	if fetch.Classify(err) == fetch.ClassForbiddenAddress {
		// The host's own address is refused: nothing was sent, and every URL of it is a
		// dead letter of that class, this one now (a later one asks again: DNS may change).
		ws.finished = time.Time{}
		return nil, n.forbidden(l.URL, hostKey, err), false
	}
	if err != nil && n.net.failed(hostKey, err, ws.finished) {
		// This node's network is down: robots.txt was not asked (netWatch).
		n.front.DeferHost(hostKey, offlineRetry)
		return nil, frontier.Outcome{Kind: frontier.Requeue, NoRequest: true}, false
	}
	if err != nil {
		r = fetch.UnreachableRobots(n.cfg.Now())
	} else {
		n.net.responded(rr.Started)
		r = fetch.ParseRobots(rr.Status, rr.Body, rr.Finished)
		n.archiveRobots(rr)
	}
	if r.Unreachable() {
		// 5xx or unreachable: disallow all for now and try again later; after
		// RobotsMaxTries the host's URLs are parked so a batch crawl still ends.
		meta.RobotsFailures++
		parked := meta.RobotsFailures >= n.cfg.RobotsMaxTries
		if parked {
			meta.ParkedUntil = n.cfg.Now().Add(robotsParkTime)
		}
		n.saveHostMeta(hostKey, meta)
		if parked {
			parked, perr := n.front.ParkHost(hostKey, "robots.txt unreachable")
			n.log.Warn("robots.txt unreachable, host parked", "host", hostKey, "tries", meta.RobotsFailures, "parked", parked, "err", perr)
			// ParkHost leaves leased URLs alone: the lease's own URL is parked here.
			return nil, frontier.Outcome{Kind: frontier.Retry, Park: true, Err: "robots.txt unreachable"}, false
		}
		wait := n.cfg.RobotsRetryBase << (meta.RobotsFailures - 1)
		n.front.DeferHost(hostKey, wait)
		return nil, frontier.Outcome{Kind: frontier.Requeue}, false
	}
	b, err := r.MarshalBinary()
	if err == nil {
		if meta.Robots == nil {
			meta.Robots = map[string][]byte{}
		}
		meta.Robots[scheme] = b
		meta.RobotsFailures = 0
		n.saveHostMeta(hostKey, meta)
	}
	n.robots.put(key, r)
	n.applyCrawlDelay(hostKey, r)
	// Sitemaps named by robots.txt join the crawl.
	var cands []frontier.Candidate
	for _, sm := range r.Sitemaps() {
		if c, err := urlnorm.Canonicalize(sm); err == nil {
			cands = append(cands, frontier.Candidate{URL: c, Host: urlnorm.HostKey(c), Depth: 1, From: key + "/robots.txt"})
		}
	}
	ws.keep(n, cands)
	// The slot was spent on robots.txt: the URL goes back, unattempted.
	return nil, frontier.Outcome{Kind: frontier.Requeue}, false
}

func (n *Node) applyCrawlDelay(hostKey string, r *fetch.Robots) {
	if d, ok := r.CrawlDelay(n.userAgent()); ok {
		n.front.SetHostDelay(hostKey, d)
	}
}

func (n *Node) hostMeta(hostKey string) hostMeta {
	var m hostMeta
	b, err := n.front.HostMeta(hostKey)
	if err == nil && len(b) > 0 {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

func (n *Node) saveHostMeta(hostKey string, m hostMeta) {
	b, _ := json.Marshal(m)
	if err := n.front.SetHostMeta(hostKey, b); err != nil {
		n.log.Error("save host state", "host", hostKey, "err", err)
	}
}

// archiveRobots writes every hop of a robots.txt fetch (redirects included) as WARC, each
// marked truncated when its body was cut (robots.txt is read up to 500 KiB).
func (n *Node) archiveRobots(rr *fetch.RobotsResult) {
	for _, hop := range rr.Hops {
		if hop == nil || len(hop.RawRequest) == 0 {
			continue
		}
		ex := archive.Exchange{
			URL:            hop.URL,
			Date:           hop.Started,
			IP:             hop.RemoteIP,
			Request:        hop.RawRequest,
			ResponseHeader: hop.RawHeader,
			ResponseBody:   hop.RawBody,
		}
		if hop.Truncated {
			ex.Truncated = "length"
		}
		if _, _, err := n.warc.WriteExchange(ex); err != nil {
			n.log.Error("write WARC (robots.txt)", "url", hop.URL, "err", err)
		}
	}
}
