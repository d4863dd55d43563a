package fetch

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
)

func portOf(t testing.TB, addr string) string {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDoBasic(t *testing.T) {
	var gotReq atomic.Pointer[http.Request]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotReq.Store(r)
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Last-Modified", "Sun, 22 Nov 2026 06:00:00 GMT")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		io.WriteString(w, "<html><body><a href=/x>x</a></body></html>")
	}))
	defer srv.Close()
	clk := &fakeClock{t: time.Unix(2_000_000_000, 0)}
	c := testClient(t, func(cfg *Config) { cfg.Now = clk.Now })
	resp, err := c.Do(context.Background(), Request{URL: srv.URL + "/p/a?q=1", IfNoneMatch: `"v0"`, IfModifiedSince: "Sat, 21 Nov 2026 00:00:00 GMT"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || resp.Kind != KindHTML || resp.ContentType != "text/html" {
		t.Fatalf("status %d kind %s ct %q", resp.Status, resp.Kind, resp.ContentType)
	}
	if !bytes.Contains(resp.Body, []byte("<a href=/x>")) || &resp.Body[0] != &resp.RawBody[0] {
		t.Fatalf("body %q", resp.Body)
	}
	if resp.ETag != `"v1"` || resp.LastModified != "Sun, 22 Nov 2026 06:00:00 GMT" {
		t.Fatalf("validators %q %q", resp.ETag, resp.LastModified)
	}
	if got := resp.Header.Values("X-Multi"); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("X-Multi = %q", got)
	}
	if resp.RemoteIP != "127.0.0.1" || !resp.Started.Equal(clk.t) || !resp.Finished.Equal(clk.t) {
		t.Fatalf("remote %q started %v", resp.RemoteIP, resp.Started)
	}
	r := gotReq.Load()
	if r.Header.Get("If-None-Match") != `"v0"` || r.Header.Get("If-Modified-Since") == "" ||
		r.UserAgent() != DefaultUserAgent || r.URL.RequestURI() != "/p/a?q=1" {
		t.Fatalf("server saw %v %v", r.URL, r.Header)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	wantStart := "GET /p/a?q=1 HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: " + DefaultUserAgent + "\r\n"
	if !bytes.HasPrefix(resp.RawRequest, []byte(wantStart)) || !bytes.HasSuffix(resp.RawRequest, []byte("\r\n\r\n")) {
		t.Fatalf("raw request %q", resp.RawRequest)
	}
	if !bytes.HasPrefix(resp.RawHeader, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(resp.RawHeader, []byte("\r\n\r\n")) ||
		!bytes.Contains(resp.RawHeader, []byte("Etag: \"v1\"\r\n")) {
		t.Fatalf("raw header %q", resp.RawHeader)
	}
}

func TestResolveRulesKeepHost(t *testing.T) {
	var mu sync.Mutex
	var hosts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	port := portOf(t, addr)
	wild, _ := ParseResolve("*.sim.test=" + addr)
	exact, _ := ParseResolve("exact.example=127.0.0.1") // keeps the URL's port
	c := testClient(t, func(cfg *Config) { cfg.Resolve = []ResolveRule{wild, exact} })
	ctx := context.Background()
	for _, u := range []string{"http://a.sim.test/", "http://B.Sim.Test/x", "http://exact.example:" + port + "/"} {
		resp, err := c.Do(ctx, Request{URL: u})
		if err != nil || resp.Status != 200 {
			t.Fatalf("%s: %v", u, err)
		}
	}
	mu.Lock()
	want := []string{"a.sim.test", "B.Sim.Test", "exact.example:" + port}
	if fmt.Sprint(hosts) != fmt.Sprint(want) {
		t.Fatalf("server saw hosts %q, want %q", hosts, want)
	}
	mu.Unlock()
	// Not matched by any rule: goes to the (fake) DNS, which has no answer.
	_, err := c.Do(ctx, Request{URL: "http://sim.test/"})
	if Classify(err) != ClassDNS || IsTransient(err) {
		t.Fatalf("unmatched host: err %v class %q transient %v", err, Classify(err), IsTransient(err))
	}
}

func TestDNSCacheUsedByDial(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Host) }))
	defer srv.Close()
	port := portOf(t, strings.TrimPrefix(srv.URL, "http://"))
	res := &fakeResolver{hosts: map[string][]netip.Addr{"dns.test": {netip.MustParseAddr("127.0.0.1")}}}
	c := testClient(t, func(cfg *Config) { cfg.Resolver = res; cfg.MaxIdleConnDuration = time.Millisecond })
	for i := 0; i < 3; i++ {
		resp, err := c.Do(context.Background(), Request{URL: "http://dns.test:" + port + "/"})
		if err != nil || string(resp.Body) != "dns.test:"+port {
			t.Fatalf("%v %v", err, resp)
		}
		time.Sleep(5 * time.Millisecond) // let idle connections expire so we dial again
	}
	if n := res.calls.Load(); n != 1 {
		t.Fatalf("resolver calls = %d, want 1", n)
	}
}

func TestTLSWithResolveKeepsSNI(t *testing.T) {
	var sni atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sni.Store(r.TLS.ServerName + " " + r.Host)
		io.WriteString(w, "secure")
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	rule, _ := ParseResolve("*.example.com=" + addr)
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c := testClient(t, func(cfg *Config) {
		cfg.Resolve = []ResolveRule{rule}
		cfg.TLSConfig = &tls.Config{RootCAs: pool}
	})
	resp, err := c.Do(context.Background(), Request{URL: "https://www.example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Body) != "secure" || sni.Load() != "www.example.com www.example.com" {
		t.Fatalf("body %q sni/host %q", resp.Body, sni.Load())
	}
	// A name the certificate does not cover fails verification: class tls.
	rule2, _ := ParseResolve("wrong.test=" + addr)
	c2 := testClient(t, func(cfg *Config) {
		cfg.Resolve = []ResolveRule{rule2}
		cfg.TLSConfig = &tls.Config{RootCAs: pool}
	})
	_, err = c2.Do(context.Background(), Request{URL: "https://wrong.test/"})
	if Classify(err) != ClassTLS {
		t.Fatalf("err %v class %q, want tls", err, Classify(err))
	}
}

func TestBodyLimit(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		switch r.URL.Path {
		case "/exact":
			w.Write(big[:100<<10])
		case "/chunked":
			for i := 0; i < len(big); i += 32 << 10 {
				w.Write(big[i : i+32<<10])
				w.(http.Flusher).Flush()
			}
		default:
			w.Write(big)
		}
	}))
	defer srv.Close()
	c := testClient(t, func(cfg *Config) { cfg.MaxBodySize = 100 << 10 })
	for _, p := range []string{"/big", "/chunked"} {
		resp, err := c.Do(context.Background(), Request{URL: srv.URL + p})
		if err != nil {
			t.Fatal(p, err)
		}
		if !resp.Truncated || len(resp.Body) != 100<<10 || !bytes.Equal(resp.Body, big[:100<<10]) {
			t.Fatalf("%s: truncated %v len %d", p, resp.Truncated, len(resp.Body))
		}
	}
	resp, err := c.Do(context.Background(), Request{URL: srv.URL + "/exact"})
	if err != nil || resp.Truncated || len(resp.Body) != 100<<10 {
		t.Fatalf("exact: %v truncated %v len %d", err, resp.Truncated, len(resp.Body))
	}
}

func TestChunkedRawHeaderAndKeepAlive(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<p>part one</p>")
		w.(http.Flusher).Flush()
		io.WriteString(w, "<p>part two</p>")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := testClient(t, func(cfg *Config) { cfg.MaxIdleConnDuration = time.Second })
	for i := 0; i < 3; i++ {
		resp, err := c.Do(context.Background(), Request{URL: srv.URL + "/"})
		if err != nil {
			t.Fatal(err)
		}
		if string(resp.Body) != "<p>part one</p><p>part two</p>" {
			t.Fatalf("body %q", resp.Body)
		}
		if resp.Header.Get("Transfer-Encoding") != "chunked" || bytes.Contains(bytes.ToLower(resp.RawHeader), []byte("transfer-encoding")) {
			t.Fatalf("header %v raw %q", resp.Header, resp.RawHeader)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("server saw %d connections, want 1 (keep-alive)", n)
	}
}

func TestStaleKeepAliveRetried(t *testing.T) {
	var conns atomic.Int64
	addr := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		conns.Add(1)
		if _, ok := readReq(br); !ok {
			return
		}
		// Looks keep-alive, but the server closes right after.
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	c := testClient(t, func(cfg *Config) { cfg.MaxIdleConnDuration = time.Second })
	for i := 0; i < 3; i++ {
		resp, err := c.Do(context.Background(), Request{URL: "http://" + addr + "/"})
		if err != nil || string(resp.Body) != "ok" {
			t.Fatalf("request %d: %v", i, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("connections %d, want 3", n)
	}
}

func compress(t testing.TB, enc string, data []byte) []byte {
	var b bytes.Buffer
	var w io.WriteCloser
	switch enc {
	case "gzip":
		w, _ = gzip.NewWriterLevel(&b, gzip.BestSpeed)
	case "deflate":
		w = zlib.NewWriter(&b)
	case "rawdeflate":
		w, _ = flate.NewWriter(&b, flate.BestSpeed)
	case "br":
		w = brotli.NewWriterLevel(&b, 5)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return b.Bytes()
}

func TestDecoding(t *testing.T) {
	page := []byte(strings.Repeat("<p>hello compressed world</p>", 200))
	bodies := map[string][]byte{}
	for _, e := range []string{"gzip", "deflate", "rawdeflate", "br"} {
		bodies[e] = compress(t, e, page)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := strings.TrimPrefix(r.URL.Path, "/")
		w.Header().Set("Content-Type", "text/html")
		ce := e
		if e == "rawdeflate" {
			ce = "deflate"
		}
		if e == "bogus" {
			w.Header().Set("Content-Encoding", "gzip")
			io.WriteString(w, "not gzip at all")
			return
		}
		w.Header().Set("Content-Encoding", ce)
		w.Write(bodies[e])
	}))
	defer srv.Close()
	c := testClient(t, nil)
	for e, raw := range bodies {
		resp, err := c.Do(context.Background(), Request{URL: srv.URL + "/" + e})
		if err != nil {
			t.Fatal(e, err)
		}
		if !bytes.Equal(resp.Body, page) || !bytes.Equal(resp.RawBody, raw) || resp.Truncated || resp.Kind != KindHTML {
			t.Fatalf("%s: body len %d raw len %d trunc %v kind %s err %v", e, len(resp.Body), len(resp.RawBody), resp.Truncated, resp.Kind, resp.DecodeErr)
		}
	}
	resp, err := c.Do(context.Background(), Request{URL: srv.URL + "/bogus"})
	if err != nil || resp.DecodeErr == nil || resp.Kind != KindOther || len(resp.Body) != 0 || string(resp.RawBody) != "not gzip at all" {
		t.Fatalf("bogus: err %v resp %+v", err, resp)
	}
}

func TestCompressionBombsCut(t *testing.T) {
	zeros := make([]byte, 64<<20)
	bombs := map[string][]byte{"gzip": compress(t, "gzip", zeros), "br": compress(t, "br", zeros[:16<<20])}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := strings.TrimPrefix(r.URL.Path, "/")
		w.Header().Set("Content-Encoding", e)
		w.Header().Set("Content-Type", "text/html")
		w.Write(bombs[e])
	}))
	defer srv.Close()
	c := testClient(t, func(cfg *Config) { cfg.MaxBodySize = 1 << 20 })
	for e, raw := range bombs {
		if len(raw) > 1<<20 {
			t.Fatalf("%s bomb is %d bytes, should be under the limit", e, len(raw))
		}
		resp, err := c.Do(context.Background(), Request{URL: srv.URL + "/" + e})
		if err != nil {
			t.Fatal(e, err)
		}
		if !resp.Truncated || len(resp.Body) != 1<<20 || len(resp.RawBody) != len(raw) {
			t.Fatalf("%s: truncated %v body %d raw %d", e, resp.Truncated, len(resp.Body), len(resp.RawBody))
		}
	}
}

func TestSlowTrickleBoundedByTimeout(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	trickle := func(c net.Conn, s string) {
		for i := 0; i < len(s); i++ {
			if _, err := c.Write([]byte{s[i]}); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	bodyAddr := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		readReq(br)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
		trickle(c, strings.Repeat("x", 100000))
	})
	headAddr := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		readReq(br)
		trickle(c, "HTTP/1.1 200 OK\r\nX-Slow: "+strings.Repeat("y", 10000)+"\r\n\r\n")
	})
	c := testClient(t, func(cfg *Config) { cfg.Timeout = 300 * time.Millisecond })
	for _, a := range []string{bodyAddr, headAddr} {
		start := time.Now()
		_, err := c.Do(context.Background(), Request{URL: "http://" + a + "/"})
		el := time.Since(start)
		if Classify(err) != ClassTimeout || !IsTransient(err) {
			t.Fatalf("%s: err %v class %q", a, err, Classify(err))
		}
		if el < 250*time.Millisecond || el > 2*time.Second {
			t.Fatalf("took %v, want about 300ms", el)
		}
	}
}

func TestFirstByteTimeout(t *testing.T) {
	addr := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		readReq(br)
		io.Copy(io.Discard, br) // never answer; return when the client closes
	})
	c := testClient(t, func(cfg *Config) { cfg.FirstByteTimeout = 100 * time.Millisecond; cfg.Timeout = 5 * time.Second })
	start := time.Now()
	_, err := c.Do(context.Background(), Request{URL: "http://" + addr + "/"})
	if Classify(err) != ClassTimeout || !errors.Is(err, errFirstByte) || time.Since(start) > time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

func TestEndlessBody(t *testing.T) {
	addr := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		readReq(br)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n")
		chunk := bytes.Repeat([]byte("<p>more</p>"), 1000)
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	c := testClient(t, func(cfg *Config) { cfg.MaxBodySize = 256 << 10 })
	resp, err := c.Do(context.Background(), Request{URL: "http://" + addr + "/"})
	if err != nil || !resp.Truncated || len(resp.Body) != 256<<10 {
		t.Fatalf("err %v resp %v", err, resp)
	}
}

func TestHugeHeaders(t *testing.T) {
	oneLine := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		readReq(br)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Junk: "+strings.Repeat("j", 100<<10)+"\r\n\r\n")
	})
	manyLines := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		readReq(br)
		io.WriteString(c, "HTTP/1.1 200 OK\r\n"+strings.Repeat("X-A: b\r\n", 20000)+"\r\n")
	})
	c := testClient(t, func(cfg *Config) { cfg.MaxHeaderSize = 16 << 10 })
	for _, a := range []string{oneLine, manyLines} {
		_, err := c.Do(context.Background(), Request{URL: "http://" + a + "/"})
		if Classify(err) != ClassTooLargeHeader || IsTransient(err) {
			t.Fatalf("err %v class %q", err, Classify(err))
		}
	}
}

func TestConnectionResetAndShortBody(t *testing.T) {
	rst := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		readReq(br)
		c.(*net.TCPConn).SetLinger(0)
	})
	short := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		readReq(br)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly a little")
	})
	c := testClient(t, nil)
	for _, a := range []string{rst, short} {
		_, err := c.Do(context.Background(), Request{URL: "http://" + a + "/"})
		if Classify(err) != ClassReset || !IsTransient(err) {
			t.Fatalf("%s: err %v class %q", a, err, Classify(err))
		}
	}
}

func TestConnectRefused(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c := testClient(t, nil)
	_, err := c.Do(context.Background(), Request{URL: "http://" + addr + "/"})
	if Classify(err) != ClassConnect || !IsTransient(err) {
		t.Fatalf("err %v class %q", err, Classify(err))
	}
}

func TestMalformedResponse(t *testing.T) {
	addr := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		readReq(br)
		io.WriteString(c, "SSH-2.0-OpenSSH\r\n\r\n")
	})
	c := testClient(t, nil)
	_, err := c.Do(context.Background(), Request{URL: "http://" + addr + "/"})
	if Classify(err) != ClassProtocol || IsTransient(err) {
		t.Fatalf("err %v class %q", err, Classify(err))
	}
}

func TestContextCancel(t *testing.T) {
	addr := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		readReq(br)
		io.Copy(io.Discard, br)
	})
	c := testClient(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.Do(ctx, Request{URL: "http://" + addr + "/"})
	if Classify(err) != ClassCanceled || time.Since(start) > time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

func TestRedirectAndRetryAfter(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a/moved":
			w.Header().Set("Location", "../new/place?x=1")
			w.WriteHeader(301)
		case "/busy":
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(503)
		case "/later":
			w.Header().Set("Retry-After", clk.Now().Add(90*time.Second).Format(http.TimeFormat))
			w.WriteHeader(429)
		}
	}))
	defer srv.Close()
	c := testClient(t, func(cfg *Config) { cfg.Now = clk.Now })
	resp, err := c.Do(context.Background(), Request{URL: srv.URL + "/a/moved"})
	if err != nil || resp.Status != 301 || resp.Location != srv.URL+"/new/place?x=1" {
		t.Fatalf("redirect: %v %+v", err, resp)
	}
	resp, err = c.Do(context.Background(), Request{URL: srv.URL + "/busy"})
	if err != nil || resp.Status != 503 || resp.RetryAfter != 120*time.Second || resp.Location != "" {
		t.Fatalf("busy: %v %+v", err, resp)
	}
	resp, err = c.Do(context.Background(), Request{URL: srv.URL + "/later"})
	if err != nil || resp.Status != 429 || resp.RetryAfter != 90*time.Second {
		t.Fatalf("later: %v %v", err, resp.RetryAfter)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"5", 5 * time.Second},
		{" 3600 ", time.Hour},
		{"-3", 0},
		{"99999999999", 30 * 24 * time.Hour},
		{"Sun, 22 Nov 2026 06:01:00 GMT", time.Minute},
		{"Sunday, 22-Nov-26 06:00:30 GMT", 30 * time.Second},
		{"Sun Nov 22 06:00:10 2026", 10 * time.Second},
		{"Sun, 22 Nov 2026 05:00:00 GMT", 0},
		{"soon", 0},
		{"", 0},
	}
	for _, c := range cases {
		if got := parseRetryAfter(c.in, now); got != c.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestBadURLs(t *testing.T) {
	c := testClient(t, nil)
	for _, u := range []string{"ftp://a.test/", "http:///nohost", "::bad", "mailto:x@y.z", "http://bücher.test/"} {
		_, err := c.Do(context.Background(), Request{URL: u})
		if Classify(err) != ClassBadURL {
			t.Errorf("%q: err %v class %q", u, err, Classify(err))
		}
	}
	_, err := c.Do(context.Background(), Request{URL: "http://127.0.0.1:1/", IfNoneMatch: "a\r\nX-Evil: 1"})
	if Classify(err) != ClassBadURL {
		t.Errorf("header injection not refused: %v", err)
	}
}

func TestParseHeaderBlock(t *testing.T) {
	cases := []struct {
		raw     string
		status  int
		hdr     map[string][]string
		wantErr bool
	}{
		{"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nset-cookie: a\r\nSet-Cookie: b\r\n\r\n", 200,
			map[string][]string{"Content-Type": {"text/html"}, "Set-Cookie": {"a", "b"}}, false},
		{"HTTP/1.0 404\r\nX-Folded: one\r\n  two\r\n\r\n", 404, map[string][]string{"X-Folded": {"one two"}}, false},
		{"HTTP/1.1 301 Moved\nLocation:   /x  \n\n", 301, map[string][]string{"Location": {"/x"}}, false},
		{"HTTP/2 200\r\n\r\n", 0, nil, true},
		{"HTTP/1.1 2000 OK\r\n\r\n", 0, nil, true},
		{"HTTP/1.1 abc OK\r\n\r\n", 0, nil, true},
		{"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", 0, nil, true},
		{"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", 0, nil, true},
		{"HTTP/1.1 200 OK\r\n folded-first\r\n\r\n", 0, nil, true},
	}
	for _, c := range cases {
		_, st, h, err := parseHeaderBlock(c.raw)
		if (err != nil) != c.wantErr {
			t.Errorf("%q: err %v", c.raw, err)
			continue
		}
		if err != nil {
			continue
		}
		if st != c.status || fmt.Sprint(map[string][]string(h)) != fmt.Sprint(c.hdr) {
			t.Errorf("%q: got %d %v", c.raw, st, h)
		}
	}
}

func TestInterimResponseSkipped(t *testing.T) {
	addr := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		readReq(br)
		io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
	})
	c := testClient(t, nil)
	resp, err := c.Do(context.Background(), Request{URL: "http://" + addr + "/"})
	if err != nil || resp.Status != 200 || string(resp.Body) != "hi" || !bytes.HasPrefix(resp.RawHeader, []byte("HTTP/1.1 200")) {
		t.Fatalf("%v %+v", err, resp)
	}
}
