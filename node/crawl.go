package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/dedup"
	"github.com/crawlnode/crawlnode/fetch"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/linkscan"
	"github.com/crawlnode/crawlnode/ring"
	"github.com/crawlnode/crawlnode/urlnorm"
)

// workerState is a worker's reusable scratch space, so the fetch path allocates little.
type workerState struct {
	// reserved: admit took a page of the cluster's page limit for this lease's request.
	reserved bool
	page     linkscan.Page
	cands    []frontier.Candidate
	// links are the URLs this lease discovered (redirect target, page links, sitemap
	// entries), in scope; the committer adds them before it records the lease.
	links []frontier.Candidate
	// job is the page's extract-stage job, queued by the committer; nil when none.
	job *corpus.Job
	// payload is a payload archived in a full response record, registered with its
	// digest's owner by the committer; nil when none.
	payload *dedup.PayloadRecord
	// finished is when the host's last response (or failure) of this lease ended: the
	// host's delay runs from there (frontier.Outcome.Finished).
	finished time.Time
}

// truncatedGrace is added to the end of a response whose body we cut (--max-body), or of a
// request we gave up on (oversized headers, a malformed answer; a timeout gets a longer
// rest, timeoutRestMax), before the host's delay starts to run: the server learns of our
// close only when a write of its fails, and until then it still counts the request as in
// flight.
const truncatedGrace = time.Second

// timeoutRestMax bounds the rest a host gets after a request to it timed out (as long as
// the request took; frontier.Outcome.Finished honours up to a minute ahead).
const timeoutRestMax = 30 * time.Second

// pendingDone is a finished lease whose links, extract job and payload registration wait
// for the group commit; the committer records the lease after writing them.
type pendingDone struct {
	l       *frontier.Lease
	o       frontier.Outcome
	links   []frontier.Candidate
	job     *corpus.Job
	payload *dedup.PayloadRecord
}

// committers is the number of goroutines committing links and recording leases. The
// frontier serializes its seen-set writes, so more would only queue there; three pipeline
// the work: other batches' Done records, extract jobs and payload entries are written (and
// Badger merges those commits) while one batch's links are added.
const committers = 3

// maxCommitBatch bounds the leases whose links go into one frontier.Add.
const maxCommitBatch = 512

// commitQueue is how many finished leases may wait for the group commit while their slots
// fetch again, in the hand-off channel or in a committer's batch (a slot takes a token
// from Node.unrecorded before it hands a lease over; the committer gives it back once the
// lease is recorded). It bounds both the memory held by waiting leases and what a kill -9
// re-issues (--concurrency + this); when it is full, the slots wait (back-pressure from
// the disk).
func commitQueue(concurrency int) int { return min(max(concurrency, 64), 4096) }

// committer is a group commit: it adds the links of many leases in one frontier.Add, their
// extract jobs in one Enqueue and their payload-index entries in one transaction, then
// records the leases in one frontier.DoneBatch, so that a URL leaves its queue only once
// what it discovered is durable. Fetch slots do not wait for it: a slot releases the
// host (frontier.Release: the host's politeness clock runs from the response's end, and
// its next request may come after its delay while the URL stays leased), hands the lease
// over and leases its next URL. It returns when in is closed and drained.
//
// A failed write (a disk error, a full disk) is retried with backoff until it succeeds,
// and the slots wait meanwhile (the hand-off queue fills): nothing is recorded as done
// before what it discovered is durable. When the node stops while a links or jobs write
// still fails, the batch's leases go back to their queues (Requeue): their pages are
// fetched again later rather than lost. A lease whose outcome cannot be recorded at all
// (the frontier closed at shutdown) stays queued on disk and is leased again at the next
// start.
func (n *Node) committer(ctx context.Context, in <-chan pendingDone) {
	batch := make([]pendingDone, 0, maxCommitBatch)
	var links, scratch []frontier.Candidate
	var jobs []corpus.Job
	var payloads []dedup.PayloadRecord
	var cs []frontier.Completion
	for first := range in {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < maxCommitBatch {
			select {
			case p, ok := <-in:
				if !ok {
					break fill
				}
				batch = append(batch, p)
			default:
				break fill
			}
		}
		links, jobs, payloads, cs = links[:0], jobs[:0], payloads[:0], cs[:0]
		for _, p := range batch {
			links = append(links, p.links...)
			if p.job != nil {
				jobs = append(jobs, *p.job)
			}
			if p.payload != nil {
				payloads = append(payloads, *p.payload)
			}
			cs = append(cs, frontier.Completion{Lease: p.l, Outcome: p.o})
		}
		// The batch's WARC records are fsynced before anything that points at them (extract
		// jobs, payload entries, the "done" records) is written: otherwise a power cut could
		// keep a page recorded as fetched whose record never reached the disk. One fsync
		// serves every committer waiting (groupSync).
		synced := n.cfg.NoSync || n.durably(ctx, "fsync WARC records", func() error {
			return n.warcSync.Wait(context.Background())
		})
		durable := synced && n.durably(ctx, "queue discovered links", func() error {
			if len(links) == 0 {
				return nil
			}
			// route filters its argument in place: a retry needs the batch intact.
			scratch = append(scratch[:0], links...)
			if err := n.commitFault("links"); err != nil {
				return err
			}
			_, _, err := n.route(context.Background(), scratch)
			return err
		}) && n.durably(ctx, "queue pages for extraction", func() error {
			return n.enqueueJobs(ctx, jobs)
		})
		if !durable {
			n.log.Warn("stopping with links or pages not written: their URLs go back to the queue", "leases", len(cs))
			for i := range cs {
				cs[i].Outcome.Kind, cs[i].Outcome.Status, cs[i].Outcome.Err = frontier.Requeue, 0, ""
			}
		}
		// The full records are written and fsynced: later identical payloads may refer to
		// them.
		if synced {
			n.payloads.Register(payloads)
		}
		n.recordDone(ctx, cs)
		n.stats.commitBatches.Add(1)
		n.stats.commitLeases.Add(int64(len(cs)))
		n.stats.commitLinks.Add(int64(len(links)))
		n.stats.busy.Add(-int64(len(batch)))
		for range batch {
			<-n.unrecorded
		}
		clear(batch)
		clear(links)
		clear(scratch)
		clear(jobs)
		clear(payloads)
		clear(cs)
	}
}

// recordDone records the leases' outcomes, retrying those a write error kept out.
func (n *Node) recordDone(ctx context.Context, cs []frontier.Completion) {
	pending := cs
	n.durably(ctx, "record fetch outcomes", func() error {
		if err := n.commitFault("done"); err != nil {
			return err
		}
		var failed []frontier.Completion
		var last error
		n.front.DoneBatch(pending, func(i int, err error) {
			if permanentCommitErr(err) {
				n.log.Error("record outcome", "url", pending[i].Lease.URL, "err", err)
				return
			}
			failed, last = append(failed, pending[i]), err
		})
		pending = failed
		return last
	})
}

// permanentCommitErr: retrying the write cannot help (the frontier closed, or the lease
// was not ours to record).
func permanentCommitErr(err error) bool {
	return errors.Is(err, frontier.ErrClosed) || errors.Is(err, frontier.ErrLeaseDone) ||
		errors.Is(err, frontier.ErrBadLease) || errors.Is(err, frontier.ErrBadOutcome) ||
		errors.Is(err, corpus.ErrClosed)
}

// Backoff of the committer's retries of a failed write.
const (
	commitRetryFirst = 100 * time.Millisecond
	commitRetryMax   = 5 * time.Second
)

// durably runs write until it returns nil (true), a permanent error or ctx's end (false),
// backing off between tries. A full disk also pauses new leases (pauseForDisk).
func (n *Node) durably(ctx context.Context, what string, write func() error) bool {
	wait := commitRetryFirst
	for try := 1; ; try++ {
		err := write()
		if err == nil {
			return true
		}
		if permanentCommitErr(err) {
			n.log.Error(what+" failed", "err", err)
			return false
		}
		n.stats.commitRetries.Add(1)
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			n.pauseForDisk(err)
		}
		if try == 1 || try%10 == 0 {
			n.log.Error(what+" failed; retrying", "tries", try, "retry_in", wait, "err", err)
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, commitRetryMax)
	}
}

// commitFault is the committer's fault injection for tests (nil in production).
func (n *Node) commitFault(point string) error {
	if n.commitHook == nil {
		return nil
	}
	return n.commitHook(point)
}

func (n *Node) worker(leaseCtx, fetchCtx context.Context, stop func(), commits chan<- pendingDone) {
	var ws workerState
	for {
		if n.budget.limitReached() {
			n.limitOnce.Do(func() {
				limit, pages, _ := n.budget.figures()
				n.log.Info("the cluster's page limit is reached: fetching stops", "max_pages", limit, "cluster_pages", pages)
			})
			if n.cfg.ExitWhenDone {
				stop()
				return
			}
			// Keep running (API, extract stage) and fetch again if the limit is raised.
			select {
			case <-leaseCtx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		if !n.budget.available() {
			// No page of the limit free here: wait for a grant rather than lease URLs that
			// could only be put back.
			select {
			case <-leaseCtx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if !n.waitPause(leaseCtx) {
			return
		}
		l, err := n.front.Next(leaseCtx)
		if err != nil {
			return
		}
		n.stats.busy.Add(1)
		n.stats.slots.Add(1)
		ws.finished = time.Time{}
		ws.links, ws.job, ws.payload = nil, nil, nil
		o := n.handle(fetchCtx, l, &ws)
		if ws.reserved {
			n.budget.settle(o.Kind == frontier.Fetched && !o.NoRequest)
			ws.reserved = false
		}
		o.Finished = ws.finished
		n.stats.slots.Add(-1)
		// The host's request is over: its next one may start after its delay, while the
		// committer makes this page's links durable (the URL stays leased until then).
		n.front.Release(l, o)
		// The committer records the lease once the links and the job are durable.
		// A token first: leases handed over and not yet recorded, queued or in a
		// committer's batch, stay within commitQueue (what a kill -9 may re-issue).
		n.unrecorded <- struct{}{}
		commits <- pendingDone{l: l, o: o, links: ws.links, job: ws.job, payload: ws.payload}
	}
}

// keep keeps in-scope links for the committer (cands is scratch space; it is copied).
func (ws *workerState) keep(n *Node, cands []frontier.Candidate) {
	cands = n.inScopeOnly(cands)
	ws.links = append(ws.links, cands...)
}

// handle does one lease's work and returns the outcome to record.
func (n *Node) handle(ctx context.Context, l *frontier.Lease, ws *workerState) frontier.Outcome {
	hostKey, tdm, o, ok := n.admit(ctx, l, ws)
	if !ok {
		return o
	}
	sent := n.cfg.Now()
	req := fetch.Request{URL: l.URL}
	if l.Revisit {
		n.stats.revisits.Add(1)
		req.IfNoneMatch, req.IfModifiedSince = l.Validators.ETag, l.Validators.LastModified
	}
	resp, err := n.client.Do(ctx, req)
	if err != nil {
		return n.fetchFailed(ctx, l, hostKey, sent, err, ws)
	}
	return n.record(ctx, l, hostKey, resp, tdm, ws)
}

// admit runs the checks before a request: the crawl's limits, the partition's lease, a
// blocked domain or a pause, robots.txt and the TDM reservation. ok false: o is the
// outcome, and no request is sent.
func (n *Node) admit(ctx context.Context, l *frontier.Lease, ws *workerState) (hostKey string, tdm *tdmPolicy, o frontier.Outcome, ok bool) {
	if ctx.Err() != nil {
		return hostKey, nil, frontier.Outcome{Kind: frontier.Requeue, NoRequest: true}, false
	}
	ok, held := n.budget.reserve()
	if !ok {
		return hostKey, nil, frontier.Outcome{Kind: frontier.Requeue, NoRequest: true}, false
	}
	ws.reserved = held
	scheme, hostKey, err := urlnorm.SplitHostKey(l.URL)
	if err != nil {
		return hostKey, nil, frontier.Outcome{Kind: frontier.Drop, Err: "bad url: " + err.Error(), NoRequest: true}, false
	}
	if !n.cluster.MayFetch(ring.PartitionOf(hostKey)) {
		// The lease moved, a handoff holds the partition, or the leader is out of touch:
		// not ours to fetch now. The fence pauses the partition within 100 ms.
		n.front.DeferHost(hostKey, 200*time.Millisecond)
		return hostKey, nil, frontier.Outcome{Kind: frontier.Requeue, NoRequest: true}, false
	}
	if n.isBlocked(hostKey) || n.Paused() || n.pausedUntil.Load() > n.cfg.Now().UnixNano() {
		// Blocked domain (or paused since the lease: by the operator, a full disk or output
		// waiting for the store; a slot that waited in frontier.Next through the start of a
		// pause must not fetch): the URL stays queued, untouched, and the host is looked at
		// again a few seconds later.
		n.front.DeferHost(hostKey, blockedRecheck)
		return hostKey, nil, frontier.Outcome{Kind: frontier.Requeue, NoRequest: true}, false
	}
	rules, o, ok := n.robotsFor(ctx, scheme, hostKey, l, ws)
	if !ok {
		return hostKey, nil, o, false
	}
	if !rules.Allowed(n.userAgent(), l.URL) {
		n.stats.robotsDeny.Add(1)
		return hostKey, nil, frontier.Outcome{Kind: frontier.Drop, Err: "disallowed by robots.txt", NoRequest: true}, false
	}
	tdm, o, ok = n.tdmFor(ctx, scheme, hostKey, rules, ws)
	return hostKey, tdm, o, ok
}

// fetchFailed is the outcome of a request that got no response: a retry, a requeue
// (shutdown, this node's network down) or a final failure.
func (n *Node) fetchFailed(ctx context.Context, l *frontier.Lease, hostKey string, sent time.Time, err error, ws *workerState) frontier.Outcome {
	ws.finished = n.cfg.Now()
	n.metrics.fetchLatency.WithLabelValues("error").Observe(ws.finished.Sub(sent).Seconds())
	if ctx.Err() != nil {
		// Aborted at shutdown: not an attempt of the server's doing.
		return frontier.Outcome{Kind: frontier.Requeue}
	}
	if fetch.Classify(err) == fetch.ClassForbiddenAddress {
		return n.forbidden(l.URL, hostKey, err)
	}
	if n.net.failed(hostKey, err, ws.finished) {
		// This node's network is down: not an attempt of the host's (netWatch).
		n.stats.countError("network_unreachable")
		n.front.DeferHost(hostKey, offlineRetry)
		return frontier.Outcome{Kind: frontier.Requeue, NoRequest: true}
	}
	cls := fetch.Classify(err)
	switch cls {
	case fetch.ClassTimeout:
		// A host too slow to answer in time is likely overloaded, and it may still be
		// working on the request we closed (CI runs saw a server's handler of a
		// timed-out request return 0.35 s and 1.9 s after our next request to the
		// host had arrived): it rests as long as the request took (at least the
		// grace, at most timeoutRestMax) before the host's delay starts.
		ws.finished = ws.finished.Add(min(max(truncatedGrace, ws.finished.Sub(sent)), timeoutRestMax))
	case fetch.ClassTooLargeHeader, fetch.ClassProtocol:
		// We closed a connection the server may still be answering on.
		ws.finished = ws.finished.Add(truncatedGrace)
	}
	class := string(cls)
	n.stats.countError(class)
	msg := class + ": " + err.Error()
	n.noteError(l.URL, hostKey, class, err.Error())
	n.log.Debug("fetch failed", "url", l.URL, "attempt", l.Attempts+1, "err", msg)
	if fetch.IsTransient(err) {
		return frontier.Outcome{Kind: frontier.Retry, Err: msg}
	}
	n.stats.fetched.Add(1)
	return frontier.Outcome{Kind: frontier.Fetched, Err: msg}
}

// forbidden is the outcome of a URL whose host's address the fetcher's address guard
// refused (loopback, private, link-local... and not in --allow-ips): nothing was sent, and
// asking again cannot help, so the URL becomes a dead letter at once with the class as its
// reason, counted in the errors and the metrics. Nothing is archived.
func (n *Node) forbidden(url, hostKey string, err error) frontier.Outcome {
	class := string(fetch.ClassForbiddenAddress)
	n.stats.countError(class)
	n.stats.forbidden.Add(1)
	n.noteError(url, hostKey, class, err.Error())
	n.log.Debug("address refused", "url", url, "err", err)
	return frontier.Outcome{Kind: frontier.Retry, Park: true, NoRequest: true, Err: class + ": " + err.Error()}
}

// record handles a response: archives it, counts it, and passes a page or a sitemap on
// (processHTML, processSitemap); it returns the URL's outcome.
func (n *Node) record(ctx context.Context, l *frontier.Lease, hostKey string, resp *fetch.Response, tdm *tdmPolicy, ws *workerState) frontier.Outcome {
	ws.finished = resp.Finished
	n.net.responded(resp.Started)
	if resp.Truncated {
		// We stopped reading and closed while the server was still sending: it learns of
		// the close only when a write of its fails, maybe after our delay has run (a chaos
		// run saw the next request arrive 62 ms before the server's handler of a cut 50 MB
		// body returned). Give it that time: the host's delay runs from a moment later.
		ws.finished = ws.finished.Add(truncatedGrace)
	}
	n.metrics.fetchLatency.WithLabelValues("response").Observe(resp.Finished.Sub(resp.Started).Seconds())
	n.stats.bytes.Add(int64(len(resp.RawBody)))

	switch {
	case resp.Status == http.StatusTooManyRequests || resp.Status == http.StatusServiceUnavailable:
		n.stats.server5xx.Add(1)
		n.noteError(l.URL, hostKey, "http_"+strconv.Itoa(resp.Status), http.StatusText(resp.Status))
		_, _ = n.archive(ctx, resp, l.URL) // kept for the record; the URL is retried either way
		ra := resp.RetryAfter
		if ra <= 0 {
			ra = n.cfg.RetryBase
		}
		return frontier.Outcome{Kind: frontier.Retry, Status: resp.Status, Err: "http " + http.StatusText(resp.Status), RetryAfter: ra}
	case resp.Status >= 500:
		n.stats.server5xx.Add(1)
		n.noteError(l.URL, hostKey, "http_"+strconv.Itoa(resp.Status), http.StatusText(resp.Status))
		_, _ = n.archive(ctx, resp, l.URL)
		return frontier.Outcome{Kind: frontier.Retry, Status: resp.Status, Err: "http " + http.StatusText(resp.Status)}
	}

	if l.Revisit {
		if o, done := n.unchangedRevisit(l, resp); done {
			return o
		}
	}

	// A final response: archive it before anything parses it.
	loc, err := n.archive(ctx, resp, l.URL)
	ws.payload = loc.register
	if err != nil {
		if errors.Is(err, archive.ErrDiskFull) {
			// The disk is full: stop intake for a while and put the URL back without
			// counting an attempt; nothing is lost and nothing is parked.
			n.pauseForDisk(err)
			return frontier.Outcome{Kind: frontier.Requeue, Status: resp.Status}
		}
		// Without the raw record the page would be lost for the corpus: retry it.
		return frontier.Outcome{Kind: frontier.Retry, Status: resp.Status, Err: "warc write failed: " + err.Error()}
	}
	n.stats.fetched.Add(1)
	meta, _ := loc.loc.MarshalBinary()
	out := frontier.Outcome{Kind: frontier.Fetched, Status: resp.Status, Meta: meta,
		Version: &frontier.Version{ETag: resp.ETag, LastModified: resp.LastModified}}
	if resp.Status == http.StatusOK && !resp.Truncated {
		out.Version.Hash = bodyHash(resp.Body)
		if l.Revisit {
			n.stats.changed.Add(1)
		}
	}

	switch {
	case resp.Status >= 300 && resp.Status < 400:
		n.stats.redirects.Add(1)
		if resp.Location != "" && l.Hops < n.cfg.MaxRedirects {
			if target, err := urlnorm.Canonicalize(resp.Location); err == nil {
				ws.keep(n, []frontier.Candidate{{URL: target, Host: urlnorm.HostKey(target), Depth: l.Depth, Hops: l.Hops + 1, From: l.URL, Priority: l.Priority, Cash: l.Cash}})
			}
		}
		return out
	case resp.Status >= 400:
		n.stats.client4xx.Add(1)
		return out
	}
	n.stats.ok2xx.Add(1)

	switch resp.Kind {
	case fetch.KindHTML:
		n.processHTML(ctx, l, resp, loc, tdm, ws)
	case fetch.KindSitemap:
		n.processSitemap(l, resp, ws)
	case fetch.KindOther:
		// PDFs, declared or by their bytes (also behind a text/html label): no links are
		// followed from them, but their text goes to the corpus.
		if corpus.IsPDF(resp.ContentType, resp.Body) {
			n.queueExtract(l, resp, loc, tdm, ws)
		}
	}
	return out
}

// processHTML extracts links (fast path) and queues the page for the extract stage.
func (n *Node) processHTML(ctx context.Context, l *frontier.Lease, resp *fetch.Response, loc warcLoc, tdm *tdmPolicy, ws *workerState) {
	linkscan.Parse(resp.Body, &ws.page)
	_, hdrNoFollow, _, _ := linkscan.HeaderSignals(resp.Header.Values("X-Robots-Tag"), resp.Header.Get("Tdm-Reservation"))
	if !hdrNoFollow {
		ws.cands = ws.cands[:0]
		depth := l.Depth + 1
		ws.page.Resolve(l.URL, func(canonical string, _ linkscan.Link) {
			ws.cands = append(ws.cands, frontier.Candidate{URL: canonical, Host: urlnorm.HostKey(canonical), Depth: depth, From: l.URL, Priority: l.Priority})
		})
		splitCash(ws.cands, l.Cash)
		ws.keep(n, ws.cands)
	}
	n.queueExtract(l, resp, loc, tdm, ws)
}

// queueExtract has the committer queue the page for the extract stage (unless NoExtract).
func (n *Node) queueExtract(l *frontier.Lease, resp *fetch.Response, loc warcLoc, tdm *tdmPolicy, ws *workerState) {
	if n.cfg.NoExtract {
		return
	}
	job := corpus.Job{
		URL:            l.URL,
		FetchTime:      resp.Started,
		Status:         resp.Status,
		ContentType:    resp.ContentType,
		WARCFile:       loc.payloadLoc.File,
		WARCOffset:     loc.payloadLoc.Offset,
		WARCLength:     loc.payloadLoc.Length,
		PayloadOf:      loc.payloadOf,
		XRobotsTag:     resp.Header.Values("X-Robots-Tag"),
		TDMReservation: resp.Header.Get("Tdm-Reservation"),
		TDMPolicy:      resp.Header.Get("Tdm-Policy"),
		// A fetch that is not a revisit is the frontier's first capture of the URL: a
		// capture of it that the duplicate index still names was made by a node whose
		// record is gone (lost with it: never shipped, or fetched after its last
		// replicated round, so its copy did not even know the URL), and this page
		// replaces it (dedup.Op.Refetch). A revisit of the same text stays a duplicate
		// of its earlier capture.
		Refetch: l.Refetch || !l.Revisit,
	}
	if reserved, policy := tdm.reserved(pathOf(l.URL)); reserved {
		job.HostTDMReserved = true
		if job.TDMPolicy == "" {
			job.TDMPolicy = policy
		}
	}
	// The committer queues it for the extract stage, batched with other pages' jobs.
	ws.job = &job
}

// enqueueJobs queues pages for the extract stage in one write. Back-pressure: when the
// backlog is full it waits for room until ctx ends (then it returns the error).
func (n *Node) enqueueJobs(ctx context.Context, jobs []corpus.Job) error {
	for len(jobs) > 0 {
		err := n.commitFault("jobs")
		if err == nil {
			err = n.stage.Enqueue(jobs...)
		}
		if err == nil || !errors.Is(err, corpus.ErrBacklogFull) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// processSitemap queues the URLs (or child sitemaps) a sitemap lists.
func (n *Node) processSitemap(l *frontier.Lease, resp *fetch.Response, ws *workerState) {
	ws.cands = ws.cands[:0]
	now := n.cfg.Now()
	_, err := linkscan.ParseSitemap(resp.Body, func(loc string, lastmod time.Time, changefreq string, _ float64) {
		if c, err := urlnorm.Resolve(l.URL, loc); err == nil {
			ws.cands = append(ws.cands, frontier.Candidate{URL: c, Host: urlnorm.HostKey(c), Depth: l.Depth + 1, From: l.URL, Priority: l.Priority,
				ChangeHint: changeHint(changefreq, lastmod, now)})
		}
	})
	if err != nil {
		n.log.Debug("sitemap parse", "url", l.URL, "err", err)
	}
	splitCash(ws.cands, l.Cash)
	ws.keep(n, ws.cands)
}

// enqueue routes discovered URLs that are in scope. On a single node every host is local.
// It filters cands in place.
func (n *Node) enqueue(cands []frontier.Candidate) {
	n.route1(n.inScopeOnly(cands))
}

// inScopeOnly filters cands in place to the URLs in scope.
func (n *Node) inScopeOnly(cands []frontier.Candidate) []frontier.Candidate {
	if n.scope.rules.Load().filtering() {
		kept := cands[:0]
		for _, c := range cands {
			if n.inScope(c.URL, c.Host) {
				kept = append(kept, c)
			}
		}
		cands = kept
	}
	return cands
}

// route1 routes in-scope candidates, logging a failure.
func (n *Node) route1(cands []frontier.Candidate) {
	if len(cands) == 0 {
		return
	}
	if _, _, err := n.route(context.Background(), cands); err != nil {
		n.log.Error("queue links", "n", len(cands), "err", err)
	}
}

// route queues candidates through the cluster (cluster.Route): those of partitions held
// here into the frontier, the others into the outbox for their lease holder.
func (n *Node) route(ctx context.Context, cands []frontier.Candidate) (frontier.AddResult, int, error) {
	return n.cluster.Route(ctx, cands)
}

// warcLoc is where a response went: loc is the record written for this fetch (response or
// revisit), payloadLoc the record in this node's WARC that holds the payload (the
// original for a revisit of a payload archived here); payloadOf the original's URL when
// it was archived on another node (payloadLoc empty then).
type warcLoc struct {
	loc, payloadLoc archive.Location
	payloadOf       string
	// register is the payload to register with its digest's owner once the committer has
	// recorded the lease (a payload archived in a full response record); nil when none.
	register *dedup.PayloadRecord
}

// archive writes the exchange as WARC. A 200's payload that the cluster archived before
// under another URL (its digest's owner says so, package dedup) is written as a revisit
// record (identical-payload-digest) referring to the original; a payload the owner does
// not know, or whose owner does not answer within the bound, is written in full.
func (n *Node) archive(ctx context.Context, resp *fetch.Response, url string) (warcLoc, error) {
	ex := archive.Exchange{
		URL:            url,
		Date:           resp.Started,
		IP:             resp.RemoteIP,
		Request:        resp.RawRequest,
		ResponseHeader: resp.RawHeader,
		ResponseBody:   resp.RawBody,
		// The fetcher parsed the header already: the archive need not scan it again.
		PayloadCompressed: archive.CompressedPayload(resp.Header.Get("Content-Encoding"), resp.ContentType),
	}
	if resp.Truncated {
		ex.Truncated = "length"
	}
	digest := archive.PayloadDigest(resp.RawBody)
	ex.PayloadDigest = digest
	whole := resp.Status == http.StatusOK && len(resp.RawBody) > 0 && !resp.Truncated
	if whole {
		orig, ok, err := n.payloads.Lookup(ctx, digest)
		if err != nil {
			n.log.Debug("payload lookup: writing a full record", "url", url, "err", err)
		}
		if ok && orig.URL != url {
			loc, err := n.warc.WriteRevisit(ex, archive.Revisit{
				Profile:       archive.ProfileIdenticalPayloadDigest,
				RefersToURI:   orig.URL,
				RefersToDate:  orig.Date,
				PayloadDigest: digest,
			})
			if err != nil {
				n.log.Error("write WARC revisit", "url", url, "err", err)
				return warcLoc{}, err
			}
			out := warcLoc{loc: loc}
			if orig.Node == n.dir.Node {
				out.payloadLoc = archive.Location{File: orig.File, Offset: orig.Offset, Length: orig.Length}
			} else {
				out.payloadOf = orig.URL
			}
			return out, nil
		}
	}
	loc, _, err := n.warc.WriteExchange(ex)
	if err != nil {
		n.log.Error("write WARC", "url", url, "err", err)
		return warcLoc{}, err
	}
	out := warcLoc{loc: loc, payloadLoc: loc}
	if whole {
		out.register = &dedup.PayloadRecord{Digest: digest, Original: dedup.Original{
			URL: url, Date: resp.Started, Node: n.dir.Node, File: loc.File, Offset: loc.Offset, Length: loc.Length}}
	}
	return out, nil
}

// blockedRecheck is how long a host of a blocked domain waits before it is looked at again.
const blockedRecheck = 5 * time.Second

// diskPause is how long intake stops after the disk filled up (the free-space check
// renews it every second while space stays short).
const diskPause = 3 * time.Second

// pauseForDisk stops new leases (and, through diskShort, every other writer) for diskPause
// and says so once per pause.
func (n *Node) pauseForDisk(err error) {
	until := n.cfg.Now().Add(diskPause).UnixNano()
	n.pausedUntil.Store(until)
	if prev := n.diskUntil.Swap(until); prev < n.cfg.Now().UnixNano() {
		n.log.Error("disk full: fetching, extraction and writes from peers and seeds paused; they resume by themselves once space is free", "data", n.dir.Path, "retry_in", diskPause, "err", err)
	}
}

// diskShort tells whether the disk is (nearly) full: free space under MinFreeDisk, or a
// write failed with ENOSPC less than diskPause ago. Every writer that takes work from
// outside (links from peers, partition imports, replica rounds, seeds) refuses it then, and
// the extract stage waits, so the node applies back-pressure instead of failing a Badger
// write half-way (Badger's memtable is a memory-mapped file: a full disk under it can fault).
func (n *Node) diskShort() bool {
	return n.diskUntil.Load() > n.cfg.Now().UnixNano()
}

// errDiskFull is the seeds API's answer while the disk is short: 507, nothing queued.
func (n *Node) errDiskFull() error {
	return &api.Error{Status: http.StatusInsufficientStorage, Code: "disk_full",
		Message: fmt.Sprintf("the data directory's disk is full (under --min-free-disk %d MiB free): nothing was queued; retry once space is freed", n.cfg.MinFreeDisk>>20)}
}

// waitPause blocks while intake is paused (full disk, or an operator's pause). It returns
// false if ctx ended.
func (n *Node) waitPause(ctx context.Context) bool {
	for {
		d := time.Duration(n.pausedUntil.Load() - n.cfg.Now().UnixNano())
		if n.Paused() {
			d = max(d, 200*time.Millisecond)
		}
		if d <= 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
		}
	}
}

// loadPage is the extract stage's loader: the page's decoded body, read back from WARC.
func (n *Node) loadPage(ctx context.Context, j corpus.Job) ([]byte, error) {
	rec, err := archive.ReadResponse(n.dir.WARCDir(), archive.Location{File: j.WARCFile, Offset: j.WARCOffset, Length: j.WARCLength})
	if err != nil {
		return nil, err
	}
	var enc []string
	if rec.HTTPHeader != nil {
		enc = rec.HTTPHeader.Values("Content-Encoding")
	}
	return fetch.Decode(enc, rec.Payload, n.cfg.MaxBodySize)
}

// pathOf is the path and query of an absolute URL ("/" when it has none).
func pathOf(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	if i := strings.IndexAny(u, "/?"); i >= 0 {
		if u[i] == '?' {
			return "/" + u[i:]
		}
		return u[i:]
	}
	return "/"
}
