package api

import (
	"github.com/crawlnode/crawlnode/internal/httpjson"

	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"

	"github.com/crawlnode/crawlnode/dashboard"
)

// MaxRequestBody is the largest request body the API reads, in bytes.
const MaxRequestBody = 1 << 20

// Config is the API's settings.
type Config struct {
	// Token, the operator's token, when set, guards mutating requests and the profiling
	// endpoints, and opens every read (see the package doc's Auth). Default "": with no
	// ReadToken either, everything is open (a node on loopback or a trusted network).
	Token string
	// ReadToken, when set, opens reads (never writes): for dashboards, exporters and
	// readers of the corpus that must not change the crawl. Default "".
	ReadToken string
	// ProtectReads says which reads need a credential once a token is set: ProtectData
	// (default, ""): the crawl's data only (pages, text, export files); ProtectAll:
	// every read but health, readiness, metrics and the dashboard page.
	ProtectReads string
	// Peer, if set, reports whether r comes from an authenticated member of the cluster:
	// such callers may read (reads one node routes to the node that holds the page).
	// It never opens a write.
	Peer func(r *http.Request) bool
	// Pprof serves net/http/pprof under /debug/pprof/. Default false: a profile costs the
	// node CPU while it runs, and it is not for the public.
	Pprof bool
	// Metrics serves GET /metrics (the node's Prometheus registry). Nil: 404.
	Metrics http.Handler
	// Logger receives the handlers' warnings. Nil: slog.Default().
	Logger *slog.Logger
}

// Error is an error with its HTTP status and stable code, as the API answers it.
type Error struct {
	Status  int    // HTTP status
	Code    string // stable, snake_case
	Message string
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with a formatted message.
func Errorf(status int, code, format string, a ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, a...)}
}

// WriteJSON writes v as indented JSON with the given status (the one shape every
// endpoint, internal ones included, answers in: internal/httpjson).
func WriteJSON(w http.ResponseWriter, status int, v any) { httpjson.Write(w, status, v) }

// WriteError writes the JSON error body with the given status and code.
func WriteError(w http.ResponseWriter, status int, code, format string, a ...any) {
	httpjson.WriteError(w, status, code, format, a...)
}

// writeErr answers err: an *Error with its status and code, any other a 500 "storage"
// with prefix before the message.
func writeErr(w http.ResponseWriter, err error, prefix string) {
	if e, ok := errors.AsType[*Error](err); ok {
		WriteError(w, e.Status, e.Code, "%s", e.Message)
		return
	}
	WriteError(w, http.StatusInternalServerError, "storage", "%s%v", prefix, err)
}

// Read protection (Config.ProtectReads).
const (
	// ProtectData (the default): with any token set, the crawl's data (pages and their
	// text, the export files) needs a read credential; the operational views stay open.
	ProtectData = "data"
	// ProtectAll: with any token set, every read but health, readiness, metrics and the
	// dashboard's page needs a read credential.
	ProtectAll = "all"
)

// access is what a request needs.
type access int

const (
	accessOpen  access = iota // health, readiness, metrics, the dashboard page
	accessView                // operational views: status, cluster, job, hosts, errors, dead letters, blocked domains
	accessData                // the crawl's data: pages and text, export files
	accessWrite               // every mutating request, and the profiling endpoints
)

// classify says what r needs (see the package doc's Auth).
func classify(r *http.Request) access {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/debug/pprof/"):
		return accessWrite
	case r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions:
		return accessWrite
	case p == "/healthz" || p == "/readyz" || p == "/metrics" || p == "/":
		return accessOpen
	case p == "/v1/pages" || strings.HasPrefix(p, "/v1/pages/") || strings.HasPrefix(p, "/v1/export/"):
		return accessData
	}
	return accessView
}

// ValidProtectReads checks a Config.ProtectReads value.
func ValidProtectReads(v string) error {
	switch v {
	case "", ProtectData, ProtectAll:
		return nil
	}
	return fmt.Errorf("api: protect reads %q: want %q or %q", v, ProtectData, ProtectAll)
}

// Guard serves next to the requests cfg's credentials allow (the package doc's Auth):
// writes and the profiling endpoints need the operator token (Config.Token); reads of
// the crawl's data (and with ProtectAll every read but health, readiness, metrics and the
// dashboard page) need the operator token, the read token or, for reads another node
// routes here, an authenticated cluster member (Config.Peer). With no token at all,
// everything is open. A refusal is 401 unauthorized with WWW-Authenticate; tokens are
// compared in constant time.
func Guard(cfg Config, next http.Handler) http.Handler {
	if cfg.Token == "" && cfg.ReadToken == "" {
		return next
	}
	write := []byte("Bearer " + cfg.Token)
	read := []byte("Bearer " + cfg.ReadToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need := classify(r)
		if need == accessView && cfg.ProtectReads != ProtectAll {
			need = accessOpen
		}
		if need == accessOpen {
			next.ServeHTTP(w, r)
			return
		}
		got := []byte(r.Header.Get("Authorization"))
		ok := cfg.Token != "" && subtle.ConstantTimeCompare(got, write) == 1
		if !ok && need != accessWrite {
			ok = (cfg.ReadToken != "" && subtle.ConstantTimeCompare(got, read) == 1) || (cfg.Peer != nil && cfg.Peer(r))
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="crawlnode"`)
			what := "the api token"
			if need != accessWrite {
				what = "the api token or the read token"
			}
			WriteError(w, http.StatusUnauthorized, "unauthorized", "this request needs Authorization: Bearer <%s>", what)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// NotFound answers every request with 404 not_found; where names the listener in the
// message ("" for the public one).
func NotFound(where string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, "not_found", "no route %s %s%s", r.Method, r.URL.Path, where)
	}
}

// server holds the handlers' dependencies.
type server struct {
	cfg     Config
	backend Backend
	log     *slog.Logger
}

// New returns the public API's handler, served from b. Request bodies are limited to
// MaxRequestBody, and cfg's tokens guard what the package doc lists (Guard).
func New(cfg Config, b Backend) http.Handler {
	s := &server{cfg: cfg, backend: b, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	mux.HandleFunc("GET /v1/crawl/status", s.status)
	mux.HandleFunc("POST /v1/crawl/seeds", s.postSeeds)
	mux.HandleFunc("GET /v1/pages/{hash}", s.pageByHash)
	mux.HandleFunc("GET /v1/pages", s.pageByURL)
	mux.HandleFunc("POST /v1/crawl/pause", s.setPaused(true))
	mux.HandleFunc("POST /v1/crawl/resume", s.setPaused(false))
	mux.HandleFunc("POST /v1/domains/{domain}/block", s.block(true))
	mux.HandleFunc("DELETE /v1/domains/{domain}/block", s.block(false))
	mux.HandleFunc("GET /v1/domains/blocked", s.blocked)
	mux.HandleFunc("GET /v1/hosts/{host}", s.hostView)
	mux.HandleFunc("GET /v1/hosts", s.topHosts)
	mux.HandleFunc("GET /v1/errors/recent", s.recentErrors)
	mux.HandleFunc("GET /v1/deadletters", s.deadLetters)
	mux.HandleFunc("GET /v1/cluster", s.cluster)
	mux.HandleFunc("POST /v1/node/leave", s.leave)
	mux.HandleFunc("GET /v1/job", s.getJob)
	mux.HandleFunc("PATCH /v1/job", s.patchJob)
	mux.HandleFunc("GET /v1/export/files", s.exportFiles)
	mux.HandleFunc("GET /v1/export/files/{kind}/{name}", s.exportFile)
	if cfg.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("GET /{$}", dashboard.Handler())
	mux.HandleFunc("/", NotFound(""))
	return http.MaxBytesHandler(Guard(cfg, mux), MaxRequestBody)
}

// queryInt reads a positive number from the query: def when absent or not positive, at
// most max.
func queryInt(r *http.Request, name string, def, max int) int {
	v, err := strconv.Atoi(r.URL.Query().Get(name))
	if err != nil || v <= 0 {
		return def
	}
	return min(v, max)
}
