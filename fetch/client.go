package fetch

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Request is one GET.
type Request struct {
	// URL is absolute http(s), already canonical; it is sent as given.
	URL string
	// IfNoneMatch and IfModifiedSince make the GET conditional (a 304 then
	// carries no body). Empty: not sent.
	IfNoneMatch, IfModifiedSince string
}

// Response is the outcome of one request. Do never follows redirects.
type Response struct {
	URL    string
	Status int
	// Header holds the received headers under canonical keys, including
	// Transfer-Encoding even when the body was de-chunked.
	Header http.Header
	// ContentType is the media type only, lower case ("text/html").
	ContentType string
	// Kind says what the crawl loop should do with Body; see ContentKind.
	Kind ContentKind
	// Body is the decoded payload (Content-Encoding gzip, deflate, br
	// removed), at most MaxBodySize bytes. For a gzip-compressed sitemap
	// file (Kind == KindSitemap) it is the uncompressed XML. When no
	// decoding happened Body and RawBody share memory.
	Body []byte
	// Truncated is set when the body (raw or decoded) exceeded MaxBodySize
	// and was cut there.
	Truncated bool
	// DecodeErr is set when the Content-Encoding could not be decoded; Body
	// is then empty, Kind is KindOther, and RawBody still holds what came.
	DecodeErr error
	// RawRequest is the request exactly as written to the connection.
	RawRequest []byte
	// RawHeader is the status line and headers exactly as received, up to
	// and including the blank line, except that Transfer-Encoding lines are
	// removed when the body was chunked: RawBody is de-chunked, so the pair
	// is a consistent HTTP message for WARC.
	RawHeader []byte
	// RawBody is the payload as received: still content-encoded,
	// de-chunked, at most MaxBodySize bytes.
	RawBody []byte
	// RemoteIP is the peer address of the connection used.
	RemoteIP string
	// Started and Finished are taken from Config.Now around the request.
	Started, Finished time.Time
	// RetryAfter is parsed from Retry-After (delta seconds or HTTP date,
	// relative to Finished) on any status; 0 if absent or in the past.
	RetryAfter time.Duration
	// Location is the Location header resolved against URL (not
	// canonicalized), set for 3xx only; empty if absent or unparsable.
	Location string
	// ETag and LastModified are the validators for a later conditional GET.
	ETag, LastModified string
}

// Client fetches URLs over HTTP/1.1. It is safe for concurrent use.
type Client struct {
	cfg     Config
	resolve *resolveTable
	guard   addrGuard
	dns     *dnsCache
	headers atomic.Pointer[[]byte] // User-Agent, Accept, Accept-Encoding lines (SetUserAgent replaces them)

	mu      sync.Mutex
	hosts   map[hostKey]*hostEntry
	inserts int
	closed  atomic.Bool

	readers sync.Pool // *bufio.Reader
	scratch sync.Pool // *[]byte, header read buffer
}

type hostKey struct {
	tls  bool
	addr string // host:port
}

type hostEntry struct {
	client  *fasthttp.HostClient
	lastUse atomic.Int64 // unix nanos, real clock
}

// New builds a Client. It starts no goroutines of its own; fasthttp runs
// one idle-connection cleaner per host with open connections, which exits
// within MaxIdleConnDuration after the host's last connection closes.
func New(cfg Config) (*Client, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Resolver == nil {
		dc, err := NewDNSClient(DNSClientConfig{Servers: cfg.DNSServers, Timeout: cfg.DNSTimeout})
		if err != nil {
			return nil, err
		}
		cfg.Resolver = dc
	}
	c := &Client{
		cfg:     cfg,
		resolve: newResolveTable(cfg.Resolve),
		guard:   addrGuard{allow: cfg.AllowIPs},
		dns:     newDNSCache(cfg.Resolver, cfg.DNSCacheTTL, cfg.NegativeTTL, cfg.DNSCacheSize, cfg.Now),
		hosts:   make(map[hostKey]*hostEntry),
	}
	c.dns.tempTTL = cfg.TempFailTTL
	c.SetUserAgent(cfg.UserAgent)
	c.readers.New = func() any { return bufio.NewReaderSize(nil, 8<<10) }
	c.scratch.New = func() any { b := make([]byte, 0, 4<<10); return &b }
	return c, nil
}

// DNSStats returns the DNS cache's counters.
func (c *Client) DNSStats() DNSStats { return c.dns.stats() }

// SetUserAgent changes the User-Agent of requests sent from now on.
func (c *Client) SetUserAgent(ua string) {
	h := []byte("User-Agent: " + ua + "\r\n" +
		"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,text/plain;q=0.8,*/*;q=0.5\r\n" +
		"Accept-Encoding: gzip, deflate, br\r\n")
	c.headers.Store(&h)
}

// Close closes idle connections and makes later calls fail with ErrClosed.
// Requests in flight finish normally; their connections are closed after.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed.Store(true)
	c.mu.Unlock()
	c.CloseIdle()
	return nil
}

// CloseIdle closes the connections no request uses now; the next request to their host
// connects again.
func (c *Client) CloseIdle() {
	c.mu.Lock()
	hosts := make([]*hostEntry, 0, len(c.hosts))
	for _, h := range c.hosts {
		hosts = append(hosts, h)
	}
	c.mu.Unlock()
	for _, h := range hosts {
		h.client.CloseIdleConnections()
	}
}

// Do performs a GET of req.URL. Redirects are returned, not followed.
// Errors wrap one of the class sentinels (see Classify); an HTTP error
// status is a Response, not an error.
func (c *Client) Do(ctx context.Context, req Request) (*Response, error) {
	return c.do(ctx, req, c.cfg.MaxBodySize, true)
}

type target struct {
	u         *url.URL
	tls       bool
	host      string // lower case, no brackets
	port      string
	reqURI    string
	hostField string
}

func parseTarget(raw string) (target, error) {
	var t target
	u, err := url.Parse(raw)
	if err != nil {
		return t, classErr(ClassBadURL, raw, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		t.port = "80"
	case "https":
		t.tls, t.port = true, "443"
	default:
		return t, classErr(ClassBadURL, raw, fmt.Errorf("scheme %q not supported", u.Scheme))
	}
	t.host = strings.ToLower(u.Hostname())
	if t.host == "" || u.Opaque != "" {
		return t, classErr(ClassBadURL, raw, errors.New("no host"))
	}
	for i := 0; i < len(u.Host); i++ {
		if u.Host[i] >= 0x80 {
			return t, classErr(ClassBadURL, raw, errors.New("non-ASCII host (want punycode)"))
		}
	}
	if p := u.Port(); p != "" {
		t.port = p
	}
	t.u = u
	t.reqURI = u.RequestURI()
	if !strings.HasPrefix(t.reqURI, "/") {
		return t, classErr(ClassBadURL, raw, errors.New("bad path"))
	}
	t.hostField = u.Host
	if strings.ContainsAny(t.reqURI, " \r\n\x00") || strings.ContainsAny(t.hostField, " \r\n\x00") {
		return t, classErr(ClassBadURL, raw, errors.New("control characters in url"))
	}
	return t, nil
}

func (c *Client) buildRequest(t target, req Request) ([]byte, error) {
	if strings.ContainsAny(req.IfNoneMatch, "\r\n\x00") || strings.ContainsAny(req.IfModifiedSince, "\r\n\x00") {
		return nil, classErr(ClassBadURL, req.URL, errors.New("control characters in validators"))
	}
	n := 32 + len(t.reqURI) + len(t.hostField) + len(*c.headers.Load()) + len(req.IfNoneMatch) + len(req.IfModifiedSince) + 40
	b := make([]byte, 0, n)
	b = append(b, "GET "...)
	b = append(b, t.reqURI...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, t.hostField...)
	b = append(b, "\r\n"...)
	b = append(b, *c.headers.Load()...)
	if req.IfNoneMatch != "" {
		b = append(b, "If-None-Match: "...)
		b = append(b, req.IfNoneMatch...)
		b = append(b, "\r\n"...)
	}
	if req.IfModifiedSince != "" {
		b = append(b, "If-Modified-Since: "...)
		b = append(b, req.IfModifiedSince...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return b, nil
}

func (c *Client) do(ctx context.Context, req Request, maxBody int, detectKind bool) (*Response, error) {
	started := c.cfg.Now()
	if err := ctx.Err(); err != nil {
		return nil, ctxErr(req.URL, err)
	}
	t, err := parseTarget(req.URL)
	if err != nil {
		return nil, err
	}
	rawReq, err := c.buildRequest(t, req)
	if err != nil {
		return nil, err
	}
	h, err := c.hostClient(t)
	if err != nil {
		return nil, err
	}
	realStart := time.Now()
	deadline := realStart.Add(c.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// Every request consults the DNS cache, not only new connections: an answer
	// whose TTL ran out is asked again, and a kept-alive connection to an address
	// the name no longer has is not reused.
	addrs, err := c.resolveFor(ctx, t)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxErr(req.URL, ctx.Err())
		}
		return nil, wrapErr(req.URL, err)
	}
	moved := false

	for attempt := 0; ; attempt++ {
		acquireStart := time.Now()
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return nil, classErr(ClassTimeout, req.URL, errors.New("deadline passed before connect"))
		}
		cc, err := h.client.AcquireConn(remaining, false)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctxErr(req.URL, ctx.Err())
			}
			return nil, wrapErr(req.URL, err)
		}
		reused := cc.CreatedTime().Before(acquireStart)
		conn := cc.Conn()
		if reused && !moved && len(addrs) > 0 && !hasAddr(addrs, conn.RemoteAddr()) {
			moved = true // the name moved: dial afresh, once
			h.client.CloseConn(cc)
			attempt--
			continue
		}
		stop := noStop
		if ctx.Done() != nil {
			stop = context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
		}
		resp := &Response{URL: req.URL, RawRequest: rawReq, Started: started}
		if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
			if ip, ok := netip.AddrFromSlice(a.IP); ok {
				resp.RemoteIP = ip.Unmap().String()
			}
		}
		rt := roundTrip{c: c, conn: conn, maxBody: maxBody, deadline: deadline}
		keep, gotBytes, err := rt.run(resp)
		interrupted := !stop()
		if err != nil || !keep || interrupted || c.closed.Load() {
			if err != nil || interrupted || resp.Truncated {
				abortConn(conn)
			}
			h.client.CloseConn(cc)
		} else {
			_ = conn.SetDeadline(time.Time{})
			h.client.ReleaseConn(cc)
		}
		h.lastUse.Store(time.Now().UnixNano())
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctxErr(req.URL, ctx.Err())
			}
			// A kept-alive connection the server closed while idle: retry
			// once on a fresh one, as browsers do.
			if attempt == 0 && reused && !gotBytes && Classify(err) == ClassReset {
				continue
			}
			return nil, wrapErr(req.URL, err)
		}
		resp.Finished = c.cfg.Now()
		c.finish(resp, t, maxBody, detectKind)
		return resp, nil
	}
}

func noStop() bool { return true }

// abortConn makes the coming Close reset the connection (SO_LINGER 0) instead of
// finishing it: what we still had to send is dropped, not delivered late. A request we
// gave up on (timeout, error) must not reach the server after a network partition heals
// (the kernel would retransmit it, and a node that no longer holds the host would fetch
// it once more: a chaos run saw two such requests a few ms after the new owner's), and a
// server still sending a body we cut learns at once that nobody reads it.
func abortConn(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}

func ctxErr(rawURL string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return classErr(ClassTimeout, rawURL, err)
	}
	return classErr(ClassCanceled, rawURL, err)
}

// finish fills the derived fields: decoding, kind, validators, redirects.
func (c *Client) finish(r *Response, t target, maxBody int, detectKind bool) {
	r.ContentType = mediaType(r.Header.Get("Content-Type"))
	r.ETag = r.Header.Get("Etag")
	r.LastModified = r.Header.Get("Last-Modified")
	if v := r.Header.Get("Retry-After"); v != "" {
		r.RetryAfter = parseRetryAfter(v, r.Finished)
	}
	if r.Status >= 300 && r.Status < 400 {
		if loc := strings.TrimSpace(r.Header.Get("Location")); loc != "" {
			// Browsers send raw spaces escaped; so do we, the rest as given.
			if lu, err := t.u.Parse(strings.ReplaceAll(loc, " ", "%20")); err == nil {
				r.Location = lu.String()
			}
		}
	}
	body, trunc, err := decodeBody(r.Header.Values("Content-Encoding"), r.RawBody, maxBody, r.Truncated)
	r.Truncated = r.Truncated || trunc
	if err != nil {
		r.DecodeErr = err
		r.Kind = KindOther
		return
	}
	r.Body = body
	if detectKind {
		var gz bool
		r.Kind, gz = detectContentKind(t.u.EscapedPath(), r.ContentType, r.Body)
		if gz {
			xml, trunc, err := gunzipCapped(r.Body, maxBody)
			if err == nil && sniffSitemapXML(xml) {
				r.Kind = KindSitemap
				r.Body = xml
				r.Truncated = r.Truncated || trunc
			} else {
				r.Kind = KindOther
			}
		}
	}
}

// hostClient returns the connection pool for the target's scheme+host:port.
func (c *Client) hostClient(t target) (*hostEntry, error) {
	k := hostKey{tls: t.tls, addr: net.JoinHostPort(t.host, t.port)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if h, ok := c.hosts[k]; ok {
		return h, nil
	}
	h := &hostEntry{client: &fasthttp.HostClient{
		Addr:                k.addr,
		IsTLS:               t.tls,
		TLSConfig:           c.cfg.TLSConfig,
		DialTimeout:         c.dial,
		MaxConns:            c.cfg.MaxConnsPerHost,
		MaxIdleConnDuration: c.cfg.MaxIdleConnDuration,
		MaxConnWaitTimeout:  c.cfg.Timeout,
		ConnPoolStrategy:    fasthttp.LIFO,
	}}
	h.lastUse.Store(time.Now().UnixNano())
	c.hosts[k] = h
	c.inserts++
	if len(c.hosts) > 1024 && c.inserts%256 == 0 {
		c.sweepLocked()
	}
	return h, nil
}

// sweepLocked forgets pools without connections that were idle longer than
// MaxIdleConnDuration, so that the map does not grow with every host ever seen.
func (c *Client) sweepLocked() {
	cutoff := time.Now().Add(-c.cfg.MaxIdleConnDuration).UnixNano()
	for k, h := range c.hosts {
		if h.lastUse.Load() < cutoff && h.client.ConnsCount() == 0 {
			delete(c.hosts, k)
		}
	}
}

// resolveFor looks the target's host up in the DNS cache unless a --resolve
// rule or an IP literal decides where to connect (then it returns nil).
func (c *Client) resolveFor(ctx context.Context, t target) ([]netip.Addr, error) {
	if _, ok := c.resolve.lookup(t.host, t.port); ok {
		return nil, nil
	}
	if _, err := netip.ParseAddr(t.host); err == nil {
		return nil, nil
	}
	lctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	addrs, err := c.dns.lookup(lctx, t.host)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDNS, err)
	}
	return addrs, nil
}

func hasAddr(addrs []netip.Addr, ra net.Addr) bool {
	a, ok := ra.(*net.TCPAddr)
	if !ok {
		return true
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	if !ok {
		return true
	}
	ip = ip.Unmap()
	for _, x := range addrs {
		if x.Unmap() == ip {
			return true
		}
	}
	return false
}

// dial connects to addr ("host:port" of the URL): a --resolve rule first,
// then IP literals, then the DNS cache, trying each address in turn.
func (c *Client) dial(addr string, timeout time.Duration) (net.Conn, error) {
	if timeout <= 0 || timeout > c.cfg.ConnectTimeout {
		timeout = c.cfg.ConnectTimeout
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
	}
	if c.cfg.DialFault != nil {
		if err := c.cfg.DialFault(addr); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConnect, err)
		}
		conn, err := c.dialAddr(host, port, addr, timeout)
		if err != nil {
			return nil, err
		}
		return &faultConn{Conn: conn, addr: addr, fault: c.cfg.DialFault}, nil
	}
	return c.dialAddr(host, port, addr, timeout)
}

// faultConn is a connection under Config.DialFault: once the fault fails a connect to
// its address, the connection fails too (closed, with the fault's error), as a kept-alive
// connection does when the machine loses its network.
type faultConn struct {
	net.Conn
	addr  string
	fault func(addr string) error
}

func (f *faultConn) Read(b []byte) (int, error) {
	if err := f.fault(f.addr); err != nil {
		f.Conn.Close()
		return 0, err
	}
	return f.Conn.Read(b)
}

func (f *faultConn) Write(b []byte) (int, error) {
	if err := f.fault(f.addr); err != nil {
		f.Conn.Close()
		return 0, err
	}
	return f.Conn.Write(b)
}

// dialAddr connects to addr, split into host and port. A --resolve rule's address is
// dialed as given (the operator named it); an IP literal or every DNS answer passes the
// address guard first, so the address checked is the address dialed.
func (c *Client) dialAddr(host, port, addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	if to, ok := c.resolve.lookup(host, port); ok {
		conn, err := d.Dial("tcp", to)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConnect, err)
		}
		return conn, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := c.guard.check(ip); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrForbiddenAddress, err)
		}
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConnect, err)
		}
		return conn, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ips, err := c.dns.dialLookup(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDNS, err)
	}
	var lastErr, refused error
	for _, ip := range ips {
		if err := c.guard.check(ip); err != nil {
			if refused == nil {
				refused = err
			}
			continue
		}
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip.String(), port))
		if err == nil {
			return conn, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	if lastErr == nil && refused != nil {
		// Every address of the name is refused: nothing was dialed.
		return nil, fmt.Errorf("%w: %s: %w", ErrForbiddenAddress, host, refused)
	}
	return nil, fmt.Errorf("%w: %w", ErrConnect, lastErr)
}
