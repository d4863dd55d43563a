package node

// The node's HTTP API (JSON). Errors are {"error": "..."} with a stable "code"; unknown routes
// get 404, malformed bodies 400; request bodies are limited to 1 MiB.
//
//	GET  /healthz                 alive
//	GET  /readyz                  storage writable and the crawl loop running
//	GET  /metrics                 Prometheus metrics (crawlnode_*)
//	GET  /v1/crawl/status         the node's figures (pages, queue, rate, errors by class, ...)
//	POST /v1/crawl/seeds          {"urls": [...]} -> 202 {"job_id","seeds_queued","status","rejected":[...]}
//	GET  /v1/pages/{url_hash}     a page's fetch facts, corpus record and text (hex URL hash)
//	GET  /v1/pages?url=URL        the same by URL

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/corpus"
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
func (n *Node) handler() http.Handler {
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
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no route %s %s", r.Method, r.URL.Path)
	})
	return http.MaxBytesHandler(mux, maxRequestBody)
}

// startAPI listens on cfg.HTTPAddr and records the bound address in the data directory
// (http.addr) so tools and tests can find a port chosen by the system.
func (n *Node) startAPI() (stop func(), err error) {
	if n.cfg.HTTPAddr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", n.cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("http api: %w", err)
	}
	addr := ln.Addr().String()
	if err := os.WriteFile(filepath.Join(n.dir.Path, "http.addr"), []byte(addr+"\n"), 0o644); err != nil {
		ln.Close()
		return nil, fmt.Errorf("http api: %w", err)
	}
	srv := &http.Server{
		Handler:           n.handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http api", "err", err)
		}
	}()
	n.log.Info("http api listening", "addr", addr)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
		os.Remove(filepath.Join(n.dir.Path, "http.addr"))
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
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "node": n.Name()})
}

// Status is the node's figures as the API reports them.
type Status struct {
	Node           string           `json:"node"`
	State          string           `json:"state"`
	Uptime         string           `json:"uptime"`
	PagesCrawled   int64            `json:"pages_crawled"`
	PagesQueued    int64            `json:"pages_queued"`
	InFlight       int64            `json:"in_flight"`
	RetryPending   int64            `json:"retry_pending"`
	DeadLetters    int64            `json:"dead_letters"`
	CrawlRate      float64          `json:"crawl_rate"`
	HostsKnown     int64            `json:"hosts_known"`
	HostsActive    int64            `json:"hosts_active"`
	SeenURLs       int64            `json:"seen_urls"`
	BytesFetched   int64            `json:"bytes_fetched"`
	ExtractBacklog int64            `json:"extract_backlog"`
	Responses      map[string]int64 `json:"responses"`
	Errors         map[string]int64 `json:"errors"`
}

// Status returns the node's current figures.
func (n *Node) Status() Status {
	fs := n.front.Stats()
	st := Status{
		Node:           n.Name(),
		State:          "running",
		Uptime:         n.cfg.Now().Sub(n.started).Round(time.Second).String(),
		PagesCrawled:   n.stats.fetched.Load(),
		PagesQueued:    int64(fs.Queued),
		InFlight:       int64(fs.InFlight),
		RetryPending:   int64(fs.RetryPending),
		DeadLetters:    int64(fs.DeadLetters),
		CrawlRate:      n.rate.perSecond(),
		HostsKnown:     int64(fs.Hosts),
		HostsActive:    int64(fs.ReadyHosts + fs.WaitingHosts),
		SeenURLs:       int64(fs.Seen),
		BytesFetched:   n.stats.bytes.Load(),
		ExtractBacklog: int64(n.stage.Backlog()),
		Responses: map[string]int64{
			"2xx": n.stats.ok2xx.Load(), "3xx": n.stats.redirects.Load(),
			"4xx": n.stats.client4xx.Load(), "5xx": n.stats.server5xx.Load(),
		},
		Errors: n.stats.errorsByClass(),
	}
	if n.running.Load() == 0 {
		st.State = "stopped"
	}
	return st
}

func (n *Node) status(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, n.Status())
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
	resp := seedsResponse{JobID: "default", Status: "accepted"}
	var cands []frontier.Candidate
	for _, u := range req.URLs {
		c, err := urlnorm.Canonicalize(u)
		if err != nil {
			resp.Rejected = append(resp.Rejected, rejectedSeed{URL: u, Reason: err.Error()})
			continue
		}
		cands = append(cands, frontier.Candidate{URL: c, Host: urlnorm.HostKey(c), Priority: prio})
	}
	if len(cands) > 0 {
		res, err := n.front.Add(cands)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "storage", "queue seeds: %v", err)
			return
		}
		resp.SeedsQueued, resp.AlreadySeen = res.Added, res.AlreadySeen
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
