package node

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/fetch"
	"github.com/crawlnode/crawlnode/frontier"
)

// Crawl orders (Config.Priority, --priority, the job's "priority").
const (
	PriorityOPIC = "opic"
	PriorityBFS  = "bfs"
)

// seedCash is the OPIC cash a seed starts with (0 in breadth-first mode).
func (n *Node) seedCash() float64 {
	if n.bfs.Load() {
		return 0
	}
	return 1
}

// splitCash gives each of cands an equal share of cash.
func splitCash(cands []frontier.Candidate, cash float64) {
	if cash <= 0 || len(cands) == 0 {
		return
	}
	share := cash / float64(len(cands))
	for i := range cands {
		cands[i].Cash = share
	}
}

// bodyHash identifies a version of a page: xxhash64 of the decoded body, never 0.
func bodyHash(b []byte) uint64 {
	return xxhash.Sum64(b) | 1
}

// changeHint turns a sitemap entry's changefreq (or, without one, its lastmod's age) into
// the page's first revisit interval; 0 when the sitemap says neither.
func changeHint(changefreq string, lastmod, now time.Time) time.Duration {
	const day = 24 * time.Hour
	switch strings.ToLower(strings.TrimSpace(changefreq)) {
	case "always":
		return time.Minute
	case "hourly":
		return time.Hour
	case "daily":
		return day
	case "weekly":
		return 7 * day
	case "monthly":
		return 30 * day
	case "yearly", "never":
		return 365 * day
	}
	if !lastmod.IsZero() && lastmod.Before(now) {
		// A page last changed a while ago is expected to keep about that pace.
		return max(now.Sub(lastmod), time.Minute)
	}
	return 0
}

// unchangedRevisit records a revisit that found the page as it was: a 304, or a 200 whose
// body hashes as the last fetch's did. It writes a WARC revisit record that refers to the
// URL's earlier capture and no corpus record, and returns the outcome (which schedules
// the next visit). done is false when the page changed (or the answer is no version of
// it): the caller goes on as for a first fetch.
func (n *Node) unchangedRevisit(l *frontier.Lease, resp *fetch.Response) (frontier.Outcome, bool) {
	var profile string
	ver := &frontier.Version{ETag: resp.ETag, LastModified: resp.LastModified}
	switch {
	case resp.Status == http.StatusNotModified:
		profile = archive.ProfileServerNotModified
		ver.NotModified = true
		n.stats.notModified.Add(1)
	case resp.Status == http.StatusOK && !resp.Truncated && l.Validators.Hash != 0 && bodyHash(resp.Body) == l.Validators.Hash:
		profile = archive.ProfileIdenticalPayloadDigest
		ver.Hash = l.Validators.Hash
		n.stats.unchanged.Add(1)
	default:
		return frontier.Outcome{}, false
	}
	ex := archive.Exchange{
		URL: l.URL, Date: resp.Started, IP: resp.RemoteIP,
		Request: resp.RawRequest, ResponseHeader: resp.RawHeader,
	}
	rv := archive.Revisit{Profile: profile, RefersToURI: l.URL}
	if l.Validators.Fetched != 0 {
		rv.RefersToDate = time.Unix(0, l.Validators.Fetched).UTC()
	}
	if profile == archive.ProfileIdenticalPayloadDigest {
		rv.PayloadDigest = archive.PayloadDigest(resp.RawBody)
	}
	loc, err := n.warc.WriteRevisit(ex, rv)
	if err != nil {
		if errors.Is(err, archive.ErrDiskFull) {
			n.pauseForDisk(err)
			return frontier.Outcome{Kind: frontier.Requeue, Status: resp.Status}, true
		}
		n.log.Error("write WARC revisit", "url", l.URL, "err", err)
		return frontier.Outcome{Kind: frontier.Retry, Status: resp.Status, Err: "warc write failed: " + err.Error()}, true
	}
	n.stats.fetched.Add(1)
	if resp.Status == http.StatusOK {
		n.stats.ok2xx.Add(1)
	} else {
		n.stats.redirects.Add(1)
	}
	meta, _ := loc.MarshalBinary()
	return frontier.Outcome{Kind: frontier.Fetched, Status: resp.Status, Meta: meta, Version: ver}, true
}
