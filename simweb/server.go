package simweb

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/andybalholm/brotli"
)

// RequestRecord is one request simweb served.
type RequestRecord struct {
	Arrival      time.Time     `json:"arrival"`
	Finish       time.Time     `json:"finish"`
	Host         string        `json:"host"`      // canonical host name the request named
	Path         string        `json:"path"`      // escaped path as received
	RawQuery     string        `json:"raw_query"` // query as received
	CanonicalURL string        `json:"canonical_url"`
	Status       int           `json:"status"` // 0 = connection dropped
	Bytes        int64         `json:"bytes"`  // body bytes written (after encoding)
	UserAgent    string        `json:"user_agent"`
	RetryAfter   time.Duration `json:"retry_after,omitempty"` // Retry-After sent with the response
	Trap         string        `json:"trap,omitempty"`        // trap kind, "" outside traps
	RobotsFile   bool          `json:"robots_file,omitempty"` // /robots.txt or its redirect chain
	TrapHost     string        `json:"-"`                     // parent host of a trap request
	Refused      bool          `json:"refused,omitempty"`     // second connection to a ConnLimit host
	Client       string        `json:"client,omitempty"`      // the client's IP address (tells cluster nodes apart in containers)
	// Version is the version of a changing page (Config.ChangeIntervals) that the answer
	// carried (200) or confirmed (304); -1 for every other resource.
	Version int `json:"version"`
	// Conditional: the request had If-None-Match or If-Modified-Since.
	Conditional bool `json:"conditional,omitempty"`
}

// dropConn closes the request's connection without an answer.
func dropConn(rw http.ResponseWriter) {
	if hj, ok := rw.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// Web is one generated web: its server, its request log and its oracle.
type Web struct {
	cfg   Config
	hosts []*host

	mu     sync.Mutex
	log    []RequestRecord
	logged int64          // records ever appended to log (ResetLog keeps it)
	hits   map[string]int // requests per canonical URL (first-time 503/429 behaviour)

	connMu   sync.Mutex
	connOf   map[net.Conn]*connInfo
	hostConn map[string]*connInfo // ConnLimit host -> the connection holding it
	refused  int                  // requests refused for a second connection (under mu)

	cacheMu sync.Mutex
	mrCache map[string]*mustReachSet
	prCache map[string]map[string]float64

	epoch time.Time // page versions count from here (Config.ChangeIntervals)

	srvMu   sync.Mutex
	srv     *http.Server
	serveWG sync.WaitGroup
	done    chan struct{}
	closed  bool
}

// New generates a web. Generation is O(Hosts); pages are rendered on demand.
func New(cfg Config) (*Web, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Web{cfg: cfg, hits: map[string]int{}, mrCache: map[string]*mustReachSet{}, prCache: map[string]map[string]float64{},
		done: make(chan struct{}), epoch: cfg.Clock(), connOf: map[net.Conn]*connInfo{}, hostConn: map[string]*connInfo{}}
	w.generate()
	return w, nil
}

// Config returns the effective configuration (defaults filled in).
func (w *Web) Config() Config { return w.cfg }

// Seeds returns every host's home page, http://hN.<suffix>/.
func (w *Web) Seeds() []string {
	out := make([]string, len(w.hosts))
	for i, h := range w.hosts {
		out[i] = "http://" + h.name + "/"
	}
	return out
}

// WriteSeeds writes Seeds, one URL a line.
func (w *Web) WriteSeeds(path string) error {
	return os.WriteFile(path, []byte(strings.Join(w.Seeds(), "\n")+"\n"), 0o644)
}

// Handler serves every host by Host header, and the control endpoints under /_simweb/.
func (w *Web) Handler() http.Handler { return http.HandlerFunc(w.serveHTTP) }

// Start listens on addr ("127.0.0.1:0" allowed) and serves until Close or Shutdown.
func (w *Web) Start(addr string) (string, error) {
	w.srvMu.Lock()
	defer w.srvMu.Unlock()
	if w.closed {
		return "", ErrClosed
	}
	if w.srv != nil {
		return "", ErrStarted
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	w.srv = &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: nil, ConnContext: w.connContext, ConnState: w.connState}
	w.serveLocked(ln)
	return ln.Addr().String(), nil
}

// Listen serves the same web on one more address (after Start), e.g. 127.0.0.2:80 and
// 127.0.0.3:80 so that DNS can spread hosts over loopback addresses as the internet spreads
// them over machines.
func (w *Web) Listen(addr string) (string, error) {
	w.srvMu.Lock()
	defer w.srvMu.Unlock()
	if w.closed {
		return "", ErrClosed
	}
	if w.srv == nil {
		return "", errors.New("simweb: Listen before Start")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	w.serveLocked(ln)
	return ln.Addr().String(), nil
}

func (w *Web) serveLocked(ln net.Listener) {
	w.serveWG.Add(1)
	go func() {
		defer w.serveWG.Done()
		if err := w.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.cfg.Logger.Error("serve failed", "component", "simweb", "err", err)
		}
	}()
}

func (w *Web) stopHandlers() {
	if !w.closed {
		w.closed = true
		close(w.done)
	}
}

// Shutdown stops accepting, wakes slow handlers and waits for in-flight requests (or ctx).
func (w *Web) Shutdown(ctx context.Context) error {
	w.srvMu.Lock()
	w.stopHandlers()
	srv := w.srv
	w.srvMu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		srv.Close()
	}
	w.serveWG.Wait()
	return err
}

// Close stops the server at once.
func (w *Web) Close() error {
	w.srvMu.Lock()
	w.stopHandlers()
	srv := w.srv
	w.srvMu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Close()
	w.serveWG.Wait()
	return err
}

// Log returns a copy of every request recorded since the last ResetLog.
func (w *Web) Log() []RequestRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]RequestRecord(nil), w.log...)
}

// ResetLog forgets every recorded request (and the first-request state of 503/429 URLs).
func (w *Web) ResetLog() {
	w.mu.Lock()
	w.log = nil
	w.hits = map[string]int{}
	w.mu.Unlock()
}

type countingWriter struct {
	http.ResponseWriter
	status int
	n      int64
	// lastPiece is when the last piece that went out whole began to be written, failed
	// that a write failed: a response that ends in a failed write (the client went away or
	// stopped reading) ended, as load on the server, when it last made progress, not when
	// the write gave up. The piece's start, not its return: a write that waited for the
	// client to read returns when the server's goroutine next runs, which under load (CI,
	// -race) has been tens of milliseconds after the client took the data and hung up.
	lastPiece time.Time
	failed    bool
	clock     func() time.Time
}

func (c *countingWriter) WriteHeader(s int) {
	if c.status == 0 {
		c.status = s
	}
	c.ResponseWriter.WriteHeader(s)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = 200
	}
	// Large bodies go out in pieces so that lastPiece follows the client's reading: one
	// Write of a 600 KB robots.txt that a crawler cuts at its 500 KiB limit blocks until
	// the reset arrives, and would otherwise end the response then, when the server's
	// goroutine next runs, not when the client last took data.
	written := 0
	for written < len(p) {
		end := min(len(p), written+writePiece)
		var began time.Time
		if c.clock != nil {
			began = c.clock()
		}
		n, err := c.ResponseWriter.Write(p[written:end])
		written += n
		c.n += int64(n)
		if err != nil {
			c.failed = true
			return written, err
		}
		c.lastPiece = began
	}
	return written, nil
}

// writePiece is the largest single write of a response body (see countingWriter.Write).
const writePiece = 32 << 10

func (c *countingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if hj, ok := c.ResponseWriter.(http.Hijacker); ok {
		return hj.Hijack()
	}
	return nil, nil, http.ErrNotSupported
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// requestHost canonicalizes a Host header (port dropped).
func requestHost(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	c, ok := canonicalHost(h)
	if !ok {
		return strings.ToLower(h)
	}
	return c
}

func (w *Web) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	arrival := w.cfg.Clock()
	if strings.HasPrefix(r.URL.Path, "/_simweb/") {
		w.control(rw, r)
		return
	}
	hostname := requestHost(r.Host)
	escPath, rawQ := r.URL.EscapedPath(), r.URL.RawQuery
	if strings.HasPrefix(r.RequestURI, "/") {
		escPath, rawQ, _ = strings.Cut(r.RequestURI, "?")
	}
	pq := CanonicalPathQuery(escPath, rawQ)
	rs := w.route(hostname, pq)
	rec := RequestRecord{Arrival: arrival, Host: hostname, Path: escPath, RawQuery: rawQ,
		CanonicalURL: "http://" + hostname + pq, UserAgent: r.UserAgent(), Trap: rs.trap, RobotsFile: rs.isRobotsFile(),
		Version: -1, Conditional: r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != ""}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		rec.Client = ip
	}
	if rs.h != nil {
		rec.TrapHost = rs.h.name
	}
	w.mu.Lock()
	w.hits[rec.CanonicalURL]++
	nth := w.hits[rec.CanonicalURL]
	w.mu.Unlock()
	cw := &countingWriter{ResponseWriter: rw, clock: w.cfg.Clock}
	switch {
	case !w.claimConn(r, rs.h):
		// A second connection to a host that serves one at a time: refused.
		w.mu.Lock()
		w.refused++
		w.mu.Unlock()
		rec.Refused = true
		dropConn(cw)
	case rs.h != nil && rs.h.robots == robotsTimeout:
		// Never answers: hold the request until the client gives up, then drop it.
		w.sleep(r.Context(), w.cfg.TimeoutHang)
		dropConn(cw)
	case !w.sleep(r.Context(), w.requestLatency(rs.h, rec.CanonicalURL, nth)):
		// The client gave up during the first-byte wait: nothing was sent.
	default:
		var out flushWriter = cw
		if rs.h != nil && rs.h.rate > 0 {
			out = &pacedWriter{countingWriter: cw, ctx: r.Context(), w: w, rate: rs.h.rate}
		}
		rec.RetryAfter = w.serve(out, r, rs, nth == 1, arrival, &rec.Version)
	}
	rec.Status, rec.Bytes = cw.status, cw.n
	rec.Finish = w.cfg.Clock()
	if cw.failed && !cw.lastPiece.IsZero() {
		// The client was gone: a write blocked until the connection died (a client cut off
		// by a network partition) or failed at once (a client that cut the body short).
		rec.Finish = cw.lastPiece
	}
	w.mu.Lock()
	w.log = append(w.log, rec)
	w.logged++
	w.mu.Unlock()
}

// loggedTotal is how many requests were ever logged, ResetLog or not. A request is logged
// when its handler returns, which can be just after the client has read the whole answer.
func (w *Web) loggedTotal() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.logged
}

func (w *Web) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-w.done:
	}
	return false
}

func (w *Web) write(rw http.ResponseWriter, r *http.Request, h *host, status int, ctype string, body []byte) {
	hd := rw.Header()
	hd.Set("Content-Type", ctype)
	if h != nil && h.has(fEncoding) && len(body) > 256 && (strings.HasPrefix(ctype, "text/") || strings.Contains(ctype, "xml")) {
		ae := r.Header.Get("Accept-Encoding")
		var buf bytes.Buffer
		switch {
		case h.brotli && strings.Contains(ae, "br"):
			// Level 1: the format is what the crawler must decode, not the ratio; level 4
			// cost simweb 2.6 times the CPU of the plain answer under -race.
			bw := brotli.NewWriterLevel(&buf, 1)
			bw.Write(body)
			bw.Close()
			hd.Set("Content-Encoding", "br")
			body = buf.Bytes()
		case strings.Contains(ae, "gzip"):
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
			zw.Write(body)
			zw.Close()
			hd.Set("Content-Encoding", "gzip")
			body = buf.Bytes()
		}
		hd.Set("Vary", "Accept-Encoding")
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	rw.WriteHeader(status)
	if r.Method != http.MethodHead {
		rw.Write(body)
	}
}

const htmlType = "text/html; charset=utf-8"

// serve answers one routed request; it returns the Retry-After it sent.
// flushWriter is a ResponseWriter that can flush and hijack (countingWriter, pacedWriter).
type flushWriter interface {
	http.ResponseWriter
	http.Flusher
	http.Hijacker
}

func (w *Web) serve(rw flushWriter, r *http.Request, rs res, first bool, now time.Time, version *int) time.Duration {
	h := rs.h
	hd := rw.Header()
	redirect := func(code int, loc string) {
		hd.Set("Location", loc)
		w.write(rw, r, h, code, htmlType, w.smallHTML("Moved", "This page has moved."))
	}
	switch rs.kind {
	case kUnknownHost:
		w.write(rw, r, nil, http.StatusNotFound, "text/plain; charset=utf-8", []byte("simweb: unknown host\n"))
	case kNotFound:
		w.write(rw, r, h, http.StatusNotFound, htmlType, w.smallHTML("Not found", "No such page."))
	case kRobots, kRobotsAlt:
		if rs.sub > 0 {
			w.write(rw, r, nil, 404, "text/plain", []byte("not found\n"))
			return 0
		}
		switch h.robots {
		case robotsNone:
			w.write(rw, r, nil, 404, "text/plain", []byte("not found\n"))
		case robots4xx:
			w.write(rw, r, nil, 403, "text/plain", []byte("forbidden\n"))
		case robots5xx:
			w.write(rw, r, nil, 500+3*(h.idx%2), "text/plain", []byte("server error\n"))
		case robotsUnreachable:
			dropConn(rw)
			return 0
		case robotsRedirect:
			_, p := splitURL("http://x" + rs.pathq)
			switch p {
			case "/robots.txt":
				redirect(301, "http://"+h.name+"/robots-moved.txt")
			case "/robots-moved.txt":
				redirect(302, "/cfg/robots.txt")
			default:
				w.write(rw, r, nil, 200, "text/plain; charset=utf-8", h.robotsBody)
			}
		default:
			w.write(rw, r, nil, 200, "text/plain; charset=utf-8", h.robotsBody)
		}
	case kRedirect, kLoop, kOut:
		code, loc := w.redirectOf(rs)
		redirect(code, loc)
	case kGone:
		w.write(rw, r, h, http.StatusGone, htmlType, w.smallHTML("Gone", "This page was removed."))
	case kError:
		w.write(rw, r, h, http.StatusInternalServerError, htmlType, w.smallHTML("Internal error", "Something broke."))
	case kBusy, kLimited:
		if first {
			secs := int((w.cfg.RetryAfter + time.Second - 1) / time.Second)
			hd.Set("Retry-After", strconv.Itoa(secs))
			code := http.StatusServiceUnavailable
			if rs.kind == kLimited {
				code = http.StatusTooManyRequests
			}
			w.write(rw, r, h, code, htmlType, w.smallHTML("Busy", "Please retry later."))
			return time.Duration(secs) * time.Second
		}
		d, _ := w.buildDoc(rs)
		w.write(rw, r, h, 200, htmlType, w.renderHTML(d))
	case kPDF:
		if hostilePDFName(rs.n) != "" {
			w.write(rw, r, h, 200, "application/pdf", hostilePDF(rs.n))
			break
		}
		w.write(rw, r, h, 200, "application/pdf", w.pdfBody(h, rs.n))
	case kPNG:
		w.write(rw, r, h, 200, "image/png", w.pngBody(h, rs.n))
	case kBin:
		w.write(rw, r, h, 200, "application/octet-stream", w.binBody(h, rs.n))
	case kMislabeled:
		w.write(rw, r, h, 200, htmlType, w.pdfBody(h, mislabeledPDF+rs.n))
	case kSitemap, kSitemapIndex, kSitemapPart:
		ct := "application/xml"
		if rs.kind == kSitemapPart && rs.n == 1 {
			ct = "application/gzip"
		}
		w.write(rw, r, h, 200, ct, w.renderSitemap(rs))
	case kTDMRep:
		w.write(rw, r, nil, 200, "application/json", []byte(`[{"location":"/","tdm-reservation":1,"tdm-policy":"http://`+h.name+`/tdm-policy.json"}]`+"\n"))
	case kSlow:
		if !w.sleep(r.Context(), w.cfg.SlowFirstByte) {
			return 0
		}
		d, _ := w.buildDoc(rs)
		w.write(rw, r, h, 200, htmlType, w.renderHTML(d))
	case kTrickle:
		d, _ := w.buildDoc(rs)
		body := w.renderHTML(d)
		hd.Set("Content-Type", htmlType)
		hd.Set("Content-Length", strconv.Itoa(len(body)))
		rw.WriteHeader(200)
		const chunks = 10
		step := (len(body) + chunks - 1) / chunks
		for i := 0; i < len(body); i += step {
			if i > 0 && !w.sleep(r.Context(), w.cfg.TrickleDuration/chunks) {
				return 0
			}
			if _, err := rw.Write(body[i:min(i+step, len(body))]); err != nil {
				return 0
			}
			rw.Flush()
		}
	case kHuge:
		hd.Set("Content-Type", htmlType)
		rw.WriteHeader(200)
		rw.Write([]byte("<!DOCTYPE html><html><head><title>Huge</title></head><body>\n"))
		chunk := bytes.Repeat([]byte("<p>All work and no play makes a very large page indeed.</p>\n"), 546)
		for sent := int64(0); sent < w.cfg.HugeBodyBytes; sent += int64(len(chunk)) {
			if _, err := rw.Write(chunk); err != nil {
				return 0
			}
			select {
			case <-w.done:
				return 0
			default:
			}
		}
	default:
		d, ok := w.buildDoc(rs)
		if !ok {
			w.write(rw, r, h, http.StatusNotFound, htmlType, w.smallHTML("Not found", "No such page."))
			return 0
		}
		if d.xRobots != "" {
			hd.Set("X-Robots-Tag", d.xRobots)
		}
		if d.tdmHeader {
			hd.Set("tdm-reservation", "1")
		}
		if len(w.cfg.ChangeIntervals) > 0 && (rs.kind == kHome || rs.kind == kArticle) {
			v, begin := w.versionAt(d.url, w.changeInterval(rs), now)
			etag := etagOf(d.url, v)
			hd.Set("ETag", etag)
			hd.Set("Last-Modified", begin.UTC().Format(http.TimeFormat))
			*version = v
			if notModified(r, etag, begin) {
				rw.WriteHeader(http.StatusNotModified)
				return 0
			}
			d.revision = v
		}
		w.write(rw, r, h, 200, htmlType, w.renderHTML(d))
	}
	return 0
}

// redirectOf returns the status and Location (as written) of a redirect resource.
func (w *Web) redirectOf(rs res) (int, string) {
	h := rs.h
	switch rs.kind {
	case kRedirect:
		if rs.hops > 1 {
			p := "/r/" + strconv.Itoa(rs.code) + "/" + strconv.Itoa(rs.hops-1) + "/" + strconv.Itoa(rs.n) + ".html"
			if rs.hops%2 == 0 {
				return rs.code, "http://" + h.name + p
			}
			return rs.code, p
		}
		return rs.code, "../../../moved/" + strconv.Itoa(rs.n) + ".html"
	case kLoop:
		if rs.str == "a.html" {
			return 302, "b.html"
		}
		return 301, "/loop/a.html"
	case kOut:
		return 301, "http://" + w.hosts[rs.n].name + "/moved/" + strconv.Itoa(crossMovedTo) + ".html"
	}
	return 0, ""
}

// redirectTarget is the canonical URL a redirect resource points to.
func (w *Web) redirectTarget(rs res) string {
	_, loc := w.redirectOf(rs)
	u, _ := Canonicalize("http://"+rs.host+rs.pathq, loc)
	return u
}
