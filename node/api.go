package node

// The node's HTTP API (JSON). Errors are {"error": "..."} with a stable "code"; unknown routes
// get 404, malformed bodies 400; request bodies are limited to 1 MiB.
//
//	GET  /                        the live dashboard (package dashboard)
//	GET  /healthz                 alive
//	GET  /readyz                  storage writable and the crawl loop running
//	GET  /metrics                 Prometheus metrics (crawlnode_*)
//	GET  /v1/crawl/status         the node's figures (pages, queue, rate, errors by class, ...)
//	POST /v1/crawl/seeds          {"urls": [...], "priority": "high|normal", "crawl_depth": N}
//	                              -> 202 {"job_id","seeds_queued","status","rejected":[...]}
//	GET  /v1/pages/{url_hash}     a page's fetch facts, corpus record and text (hex URL hash)
//	GET  /v1/pages?url=URL        the same by URL
//	POST /v1/crawl/pause|resume   stop or restart fetching (in-flight fetches finish) -> 204
//	POST|DELETE /v1/domains/{domain}/block   block or unblock a domain and its subdomains -> 204
//	GET  /v1/domains/blocked      the blocked domains
//	GET  /v1/hosts/{host}         a host's queue, delay, robots.txt facts and last errors
//	GET  /v1/hosts?top=N&by=queue|errors     the top hosts
//	GET  /v1/errors/recent?limit=N           recent fetch errors, newest first
//	GET  /v1/deadletters?limit=N             dead letters
//	GET  /v1/cluster              members, their state and partitions, the leader
//
// With Config.APIToken set, every mutating request (POST, PUT, DELETE) needs the header
// "Authorization: Bearer <token>" (401 otherwise); reads stay open.

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/dashboard"
	"github.com/crawlnode/crawlnode/fetch"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/urlnorm"
)

const maxRequestBody = 1 << 20

// apiError is the JSON error body.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, format string, a ...any) {
	writeJSON(w, status, apiError{Error: fmt.Sprintf(format, a...), Code: code})
}

// handler returns the API's routes.
// handler is the public API; withInternal adds the node-to-node endpoints under
// /internal/ (when they have no listener of their own).
func (n *Node) handler(withInternal bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "node": n.Name()})
	})
	mux.HandleFunc("GET /readyz", n.readyz)
	mux.Handle("GET /metrics", n.met.handler())
	mux.HandleFunc("GET /v1/crawl/status", n.status)
	mux.HandleFunc("POST /v1/crawl/seeds", n.postSeeds)
	mux.HandleFunc("GET /v1/pages/{hash}", n.pageByHash)
	mux.HandleFunc("GET /v1/pages", n.pageByURL)
	mux.HandleFunc("POST /v1/crawl/pause", n.setPause(true))
	mux.HandleFunc("POST /v1/crawl/resume", n.setPause(false))
	mux.HandleFunc("POST /v1/domains/{domain}/block", n.block(true))
	mux.HandleFunc("DELETE /v1/domains/{domain}/block", n.block(false))
	mux.HandleFunc("GET /v1/domains/blocked", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string][]string{"domains": n.Blocked()})
	})
	mux.HandleFunc("GET /v1/hosts/{host}", n.hostView)
	mux.HandleFunc("GET /v1/hosts", n.topHosts)
	mux.HandleFunc("GET /v1/errors/recent", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"errors": n.RecentErrors(queryInt(r, "limit", 20, 200), r.URL.Query().Get("host"))})
	})
	mux.HandleFunc("GET /v1/deadletters", n.deadLetters)
	mux.HandleFunc("GET /v1/cluster", n.cluster)
	mux.HandleFunc("POST /v1/node/leave", n.leaveHandler)
	mux.HandleFunc("GET /v1/job", n.getJob)
	mux.HandleFunc("PATCH /v1/job", n.patchJob)
	if n.cfg.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("GET /{$}", dashboard.Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no route %s %s", r.Method, r.URL.Path)
	})
	public := http.MaxBytesHandler(n.requireToken(mux), maxRequestBody)
	if !withInternal {
		return public
	}
	internal := n.internalHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/internal/") {
			internal.ServeHTTP(w, r)
			return
		}
		public.ServeHTTP(w, r)
	})
}

// requireToken guards, when a token is configured, mutating requests and the profiling
// endpoints (--pprof: a profile or trace costs the node CPU for as long as it is asked to
// run, up to the server's write timeout) with the bearer token.
func (n *Node) requireToken(next http.Handler) http.Handler {
	if n.cfg.APIToken == "" {
		return next
	}
	want := []byte("Bearer " + n.cfg.APIToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions,
			strings.HasPrefix(r.URL.Path, "/debug/pprof/"):
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="crawlnode"`)
				writeError(w, http.StatusUnauthorized, "unauthorized", "this request needs Authorization: Bearer <api token>")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func queryInt(r *http.Request, name string, def, max int) int {
	v, err := strconv.Atoi(r.URL.Query().Get(name))
	if err != nil || v <= 0 {
		return def
	}
	return min(v, max)
}

func (n *Node) setPause(p bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := n.SetPaused(p); err != nil {
			writeError(w, http.StatusInternalServerError, "storage", "%v", err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func (n *Node) block(b bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := n.SetBlocked(r.PathValue("domain"), b); err != nil {
			if errors.Is(err, ErrBadDomain) {
				writeError(w, http.StatusBadRequest, "bad_domain", "%v", err)
				return
			}
			writeError(w, http.StatusInternalServerError, "storage", "%v", err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// HostView is GET /v1/hosts/{host}.
type HostView struct {
	frontier.HostInfo
	DelayMS      int64         `json:"delay_ms"`
	Blocked      bool          `json:"blocked"`
	Errors       int64         `json:"errors"`
	Robots       []RobotsView  `json:"robots,omitempty"`
	RecentErrors []RecentError `json:"recent_errors"`
}

// RobotsView is what the node knows of one robots.txt.
type RobotsView struct {
	URL         string    `json:"url"`
	Status      int       `json:"status"`
	FetchedAt   time.Time `json:"fetched_at"`
	Unreachable bool      `json:"unreachable"`
	CrawlDelay  string    `json:"crawl_delay,omitempty"`
	Sitemaps    []string  `json:"sitemaps,omitempty"`
}

func (n *Node) hostView(w http.ResponseWriter, r *http.Request) {
	host := strings.ToLower(r.PathValue("host"))
	if n.routeToOwner(w, r, host) {
		return
	}
	info, ok := n.front.Host(host)
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_host", "this node has no URL of host %q", host)
		return
	}
	v := HostView{HostInfo: info, DelayMS: info.Delay.Milliseconds(), Blocked: n.isBlocked(host), Errors: n.hostErrors(host),
		RecentErrors: n.RecentErrors(20, host)}
	meta := n.hostMeta(host)
	for _, scheme := range []string{"http", "https"} {
		b, ok := meta.Robots[scheme]
		if !ok {
			continue
		}
		rb := new(fetch.Robots)
		if rb.UnmarshalBinary(b) != nil {
			continue
		}
		rv := RobotsView{URL: scheme + "://" + host + "/robots.txt", Status: rb.Status(), FetchedAt: rb.FetchedAt(), Unreachable: rb.Unreachable(), Sitemaps: rb.Sitemaps()}
		if d, ok := rb.CrawlDelay(n.userAgent()); ok {
			rv.CrawlDelay = d.String()
		}
		v.Robots = append(v.Robots, rv)
	}
	writeJSON(w, http.StatusOK, v)
}

// TopHost is one row of GET /v1/hosts.
type TopHost struct {
	Host     string `json:"host"`
	Queued   int    `json:"queued"`
	InFlight int    `json:"in_flight"`
	Errors   int64  `json:"errors"`
	DelayMS  int64  `json:"delay_ms"`
}

func (n *Node) topHosts(w http.ResponseWriter, r *http.Request) {
	limit := queryInt(r, "top", 10, 1000)
	var rows []TopHost
	switch by := r.URL.Query().Get("by"); by {
	case "", "queue":
		for _, h := range n.front.TopHostsByQueue(limit) {
			rows = append(rows, TopHost{Host: h.Host, Queued: h.Queued, InFlight: h.InFlight, Errors: n.hostErrors(h.Host), DelayMS: h.Delay.Milliseconds()})
		}
	case "errors":
		for _, he := range n.topHostsByErrors(limit) {
			row := TopHost{Host: he.Host, Errors: he.Errors}
			if h, ok := n.front.Host(he.Host); ok {
				row.Queued, row.InFlight, row.DelayMS = h.Queued, h.InFlight, h.Delay.Milliseconds()
			}
			rows = append(rows, row)
		}
	default:
		writeError(w, http.StatusBadRequest, "bad_order", `"by" must be "queue" or "errors"`)
		return
	}
	if rows == nil {
		rows = []TopHost{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"hosts": rows})
}

func (n *Node) deadLetters(w http.ResponseWriter, r *http.Request) {
	limit := queryInt(r, "limit", 20, 1000)
	type row struct {
		URL       string    `json:"url"`
		Attempts  int       `json:"attempts"`
		Status    int       `json:"status"`
		LastError string    `json:"last_error"`
		At        time.Time `json:"at"`
	}
	rows := []row{}
	err := n.front.DeadLetters(func(d frontier.DeadLetter) bool {
		rows = append(rows, row{d.URL, d.Attempts, d.Status, d.LastErr, d.At})
		return len(rows) < limit
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "storage", "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"dead_letters": rows, "total": n.front.Stats().DeadLetters})
}

// startAPI listens on cfg.HTTPAddr and records the bound address in the data directory
// (http.addr) so tools and tests can find a port chosen by the system. With
// cfg.InternalAddr, the node-to-node endpoints get a listener of their own (recorded in
// internal.addr) and leave the public one.
func (n *Node) startAPI() (stop func(), err error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if n.cfg.HTTPAddr != "" {
		h := n.handler(n.cfg.InternalAddr == "")
		addr, stop, err := n.serve(n.cfg.HTTPAddr, h, "http.addr")
		if err != nil {
			return nil, fmt.Errorf("http api: %w", err)
		}
		n.httpAddr.Store(addr)
		stops = append(stops, stop)
	}
	if n.cfg.InternalAddr != "" {
		addr, stop, err := n.serve(n.cfg.InternalAddr, n.internalOnly(), "internal.addr")
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("internal api: %w", err)
		}
		n.internalAddr.Store(addr)
		stops = append(stops, stop)
	}
	return stopAll, nil
}

// peerAddr is the address peers reach this node's internal endpoints at.
func (n *Node) peerAddr() string {
	if a, _ := n.internalAddr.Load().(string); a != "" {
		return a
	}
	a, _ := n.httpAddr.Load().(string)
	return a
}

// serve runs an HTTP server for h on addr and writes the bound address to DIR/file.
func (n *Node) serve(addr string, h http.Handler, file string) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	bound := ln.Addr().String()
	path := filepath.Join(n.dir.Path, file)
	if err := os.WriteFile(path, []byte(bound+"\n"), 0o644); err != nil {
		ln.Close()
		return "", nil, err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       5 * time.Minute, // partition streams are long bodies
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server", "addr", bound, "err", err)
		}
	}()
	n.log.Info("http listening", "addr", bound, "file", file)
	return bound, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
		os.Remove(path)
	}, nil
}

func (n *Node) readyz(w http.ResponseWriter, r *http.Request) {
	probe := filepath.Join(n.dir.Path, ".ready-probe")
	if err := os.WriteFile(probe, []byte("ok"), 0o644); err != nil {
		writeError(w, http.StatusServiceUnavailable, "storage", "data directory not writable: %v", err)
		return
	}
	os.Remove(probe)
	if n.running.Load() == 0 {
		writeError(w, http.StatusServiceUnavailable, "not_running", "crawl loop not running")
		return
	}
	// Joined: in touch with a Raft leader, so the leases this node holds are current and
	// it may fetch (a node cut off from the leader fences itself and is not ready).
	if n.cl != nil && (!n.cl.Started() || !n.cl.InContact()) {
		writeError(w, http.StatusServiceUnavailable, "not_joined", "not in contact with a cluster leader")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "node": n.Name(), "partitions": n.cl.Held()})
}

// Status is the node's figures, as the API reports them and the progress line shows them.
type Status struct {
	Node         string        `json:"node"`
	State        string        `json:"state"`
	Uptime       string        `json:"uptime"`
	Elapsed      time.Duration `json:"-"`
	PagesCrawled int64         `json:"pages_crawled"`
	PagesQueued  int64         `json:"pages_queued"`
	InFlight     int64         `json:"in_flight"`
	RetryPending int64         `json:"retry_pending"`
	// Continuous crawling: revisits scheduled (or due and queued), done, and what they saw.
	RevisitsPending int64            `json:"revisits_pending"`
	Revisits        int64            `json:"revisits"`
	NotModified     int64            `json:"revisits_not_modified"`
	Unchanged       int64            `json:"revisits_unchanged"`
	Changed         int64            `json:"revisits_changed"`
	DeadLetters     int64            `json:"dead_letters"`
	CrawlRate       float64          `json:"crawl_rate"`
	HostsKnown      int64            `json:"hosts_known"`
	HostsActive     int64            `json:"hosts_active"`
	SeenURLs        int64            `json:"seen_urls"`
	BytesFetched    int64            `json:"bytes_fetched"`
	ExtractBacklog  int64            `json:"extract_backlog"`
	OutboxLinks     int64            `json:"outbox_links"`
	Partitions      int              `json:"partitions"`
	Responses       map[string]int64 `json:"responses"`
	Errors          map[string]int64 `json:"errors"`
	RateHistory     []RatePoint      `json:"rate_history"`
}

// Status returns the node's current figures.
func (n *Node) Status() Status {
	fs := n.front.Stats()
	st := Status{
		Node:            n.Name(),
		State:           "running",
		Uptime:          n.cfg.Now().Sub(n.started).Round(time.Second).String(),
		Elapsed:         n.cfg.Now().Sub(n.started),
		PagesCrawled:    n.stats.fetched.Load(),
		PagesQueued:     int64(fs.Queued),
		InFlight:        int64(fs.InFlight),
		RetryPending:    int64(fs.RetryPending),
		RevisitsPending: int64(fs.RevisitPending + fs.RevisitQueued),
		Revisits:        n.stats.revisits.Load(),
		NotModified:     n.stats.notModified.Load(),
		Unchanged:       n.stats.unchanged.Load(),
		Changed:         n.stats.changed.Load(),
		DeadLetters:     int64(fs.DeadLetters),
		CrawlRate:       n.rate.perSecond(),
		HostsKnown:      int64(fs.Hosts),
		HostsActive:     int64(fs.ReadyHosts + fs.WaitingHosts),
		SeenURLs:        int64(fs.Seen),
		BytesFetched:    n.stats.bytes.Load(),
		ExtractBacklog:  int64(n.stage.Backlog()),
		Responses: map[string]int64{
			"2xx": n.stats.ok2xx.Load(), "3xx": n.stats.redirects.Load(),
			"4xx": n.stats.client4xx.Load(), "5xx": n.stats.server5xx.Load(),
		},
		Errors: n.stats.errorsByClass(),
	}
	switch {
	case n.running.Load() == 0:
		st.State = "stopped"
	case n.Paused():
		st.State = "paused"
	}
	if n.cl != nil {
		st.OutboxLinks = int64(n.cl.Outbox().Queued())
		st.Partitions = n.cl.Held()
		if n.cl.Leaving() {
			st.State = "draining"
		}
	}
	st.RateHistory = n.rate.history()
	return st
}

// status is GET /v1/crawl/status: the whole cluster's figures (?local=1: this node's).
func (n *Node) status(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("local") != "" || n.cl == nil || n.cl.Gossip() == nil {
		writeJSON(w, http.StatusOK, n.Status())
		return
	}
	writeJSON(w, http.StatusOK, n.clusterStatus(r.Context()))
}

type seedsRequest struct {
	URLs       []string `json:"urls"`
	Priority   string   `json:"priority"`
	CrawlDepth *int     `json:"crawl_depth"`
}

type seedsResponse struct {
	JobID       string         `json:"job_id"`
	SeedsQueued int            `json:"seeds_queued"`
	AlreadySeen int            `json:"already_seen"`
	Status      string         `json:"status"`
	Rejected    []rejectedSeed `json:"rejected,omitempty"`
}

type rejectedSeed struct {
	URL    string `json:"url"`
	Reason string `json:"reason"`
}

func (n *Node) postSeeds(w http.ResponseWriter, r *http.Request) {
	var req seedsRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", "request body over %d bytes", maxRequestBody)
			return
		}
		writeError(w, http.StatusBadRequest, "bad_json", "malformed JSON: %v", err)
		return
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "bad_json", "trailing data after the JSON object")
		return
	}
	if len(req.URLs) == 0 {
		writeError(w, http.StatusBadRequest, "no_urls", `"urls" must list at least one URL`)
		return
	}
	var prio uint8
	switch req.Priority {
	case "", "normal":
		prio = 1
	case "high":
		prio = 0
	default:
		writeError(w, http.StatusBadRequest, "bad_priority", `"priority" must be "high" or "normal"`)
		return
	}
	if req.CrawlDepth != nil && *req.CrawlDepth < 0 {
		writeError(w, http.StatusBadRequest, "bad_depth", `"crawl_depth" must be >= 0`)
		return
	}
	// crawl_depth N: the seed enters at depth MaxDepth-N, so the global depth limit stops
	// its links N hops out (N is capped at MaxDepth). Within a host, shallower URLs still
	// come first.
	seedDepth := 0
	if req.CrawlDepth != nil {
		seedDepth = max(0, n.cfg.MaxDepth-*req.CrawlDepth)
	}
	resp := seedsResponse{JobID: "default", Status: "accepted"}
	var cands []frontier.Candidate
	for _, u := range req.URLs {
		c, err := urlnorm.Canonicalize(u)
		if err != nil {
			resp.Rejected = append(resp.Rejected, rejectedSeed{URL: u, Reason: err.Error()})
			continue
		}
		cands = append(cands, frontier.Candidate{URL: c, Host: urlnorm.HostKey(c), Priority: prio, Depth: seedDepth, Cash: n.seedCash()})
	}
	if len(cands) > 0 {
		hosts := make([]string, len(cands))
		for i, c := range cands {
			hosts[i] = c.Host
		}
		if err := n.addSeedHosts(hosts); err != nil {
			writeError(w, http.StatusInternalServerError, "storage", "queue seeds: %v", err)
			return
		}
		res, fwd, err := n.route(r.Context(), cands)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "storage", "queue seeds: %v", err)
			return
		}
		// Seeds for hosts another node holds are durable in the outbox: queued as far as
		// this node can tell (their owner drops the ones it has seen).
		resp.SeedsQueued, resp.AlreadySeen = res.Added+fwd, res.AlreadySeen
		for reason, k := range res.Rejected {
			resp.Rejected = append(resp.Rejected, rejectedSeed{URL: fmt.Sprintf("(%d URLs)", k), Reason: reason})
		}
	}
	if resp.SeedsQueued == 0 && resp.AlreadySeen == 0 {
		resp.Status = "rejected"
	}
	writeJSON(w, http.StatusAccepted, resp)
}

// Page is what the pages API returns.
type Page struct {
	URLHash   string            `json:"url_hash"`
	URL       string            `json:"url"`
	State     string            `json:"state"`
	Status    int               `json:"status,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	UpdatedAt time.Time         `json:"updated_at"`
	WARC      *archive.Location `json:"warc,omitempty"`
	Corpus    *corpus.Record    `json:"corpus,omitempty"`
}

func (n *Node) pageByHash(w http.ResponseWriter, r *http.Request) {
	b, err := hex.DecodeString(r.PathValue("hash"))
	if err != nil || len(b) != 16 {
		writeError(w, http.StatusBadRequest, "bad_hash", "url_hash must be 32 hex digits")
		return
	}
	var h [16]byte
	copy(h[:], b)
	sr, ok, err := n.front.LookupHash(h)
	if !ok && err == nil && n.askPeers(w, r) {
		return // the hash names no host: the node that has it answered
	}
	n.writePage(w, r, sr, ok, err)
}

func (n *Node) pageByURL(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query().Get("url")
	if raw == "" {
		writeError(w, http.StatusBadRequest, "no_url", "give ?url=URL")
		return
	}
	c, err := urlnorm.Canonicalize(raw)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_url", "%v", err)
		return
	}
	if n.routeToOwner(w, r, urlnorm.HostKey(c)) {
		return
	}
	sr, ok, err := n.front.Lookup(c)
	n.writePage(w, r, sr, ok, err)
}

func (n *Node) writePage(w http.ResponseWriter, r *http.Request, sr frontier.SeenRecord, ok bool, err error) {
	if err != nil {
		writeError(w, http.StatusInternalServerError, "storage", "%v", err)
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_page", "this node has not seen that URL")
		return
	}
	h := frontier.URLHash(sr.URL)
	p := Page{URLHash: hex.EncodeToString(h[:]), URL: sr.URL, State: string(sr.State), Status: sr.Status, Reason: sr.Reason, UpdatedAt: sr.At}
	if len(sr.Meta) > 0 {
		var loc archive.Location
		if loc.UnmarshalBinary(sr.Meta) == nil {
			p.WARC = &loc
		}
	}
	withText := !strings.EqualFold(r.URL.Query().Get("text"), "false")
	rec, err := n.stage.Page(r.Context(), sr.URL, withText)
	switch {
	case err == nil:
		p.Corpus = &rec
	case errors.Is(err, corpus.ErrNoPage):
	default:
		n.log.Warn("page text", "url", sr.URL, "err", err)
		p.Corpus = &rec
	}
	writeJSON(w, http.StatusOK, p)
}

// ErrorCount is transport errors plus 5xx/429 answers: the "errors" of the progress line.
func (s Status) ErrorCount() int64 {
	var n int64
	for _, c := range s.Errors {
		n += c
	}
	return n + s.Responses["5xx"]
}
