package simweb

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// smallConfig is a fast web: every behaviour present, short delays.
func smallConfig() Config {
	c := DefaultConfig()
	c.Hosts, c.MeanPages, c.MaxPages = 30, 12, 40
	c.MaxWords = 3000
	c.RobotsRulesHosts, c.RobotsGroupsHosts, c.CrawlDelayHosts = 2, 1, 1
	c.CrawlDelay, c.CrawlDelayMaxPages = 100*time.Millisecond, 6
	c.Robots5xxHosts, c.RobotsUnreachableHosts, c.Robots4xxHosts, c.RobotsRedirectHosts, c.RobotsOversizeHosts = 1, 1, 1, 1, 1
	c.SitemapHosts = 4
	c.CalendarTrapHosts, c.SessionTrapHosts, c.DeepTrapHosts, c.FacetTrapHosts, c.SubdomainTrapHosts = 1, 1, 1, 1, 1
	c.MirrorHosts, c.NearDupHosts, c.CanonicalHosts = 2, 4, 4
	c.RedirectHosts, c.ErrorHosts, c.RetryAfterHosts = 3, 3, 1
	c.SlowHosts, c.SlowFirstByte, c.TrickleHosts, c.TrickleDuration = 1, 150*time.Millisecond, 1, 200*time.Millisecond
	c.HugeHosts, c.HugeBodyBytes = 1, 2<<20
	c.BinaryHosts, c.EncodingHosts, c.MalformedHosts, c.BaseHrefHosts, c.NofollowHosts, c.OptOutHosts = 3, 3, 3, 3, 3, 2
	return c
}

func startWeb(t testing.TB, c Config) (*Web, *http.Client) {
	t.Helper()
	w, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := w.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 4,
	}
	cl := &http.Client{Transport: &loggedTransport{base: tr, w: w}, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		w.Close()
	})
	return w, cl
}

type fetched struct {
	status int
	hdr    http.Header
	body   []byte
	err    error
	took   time.Duration
}

func get(cl *http.Client, u string, hdr ...string) fetched {
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("User-Agent", "crawlnode/0.1 (+https://crawlnode.dev)")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	t0 := time.Now()
	resp, err := cl.Do(req)
	if err != nil {
		return fetched{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return fetched{status: resp.StatusCode, hdr: resp.Header, body: b, err: err, took: time.Since(t0)}
}

func gunzip(b []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil
	}
	out, _ := io.ReadAll(zr)
	return out
}

// pageLinks extracts links a crawler follows from an HTML page: the canonical targets of
// a/area href, iframe src, link rel=canonical; whether meta robots says nofollow; and the
// canonical targets of rel=nofollow links separately.
func pageLinks(pageURL string, body []byte) (follow, nofollow []string, metaNofollow bool) {
	base := pageURL
	z := html.NewTokenizer(bytes.NewReader(body))
	type raw struct {
		ref string
		nf  bool
	}
	var refs []raw
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		a := map[string]string{}
		for _, at := range tok.Attr {
			a[at.Key] = at.Val
		}
		switch tok.Data {
		case "base":
			if v, ok := a["href"]; ok {
				if u, ok := Canonicalize(pageURL, v); ok {
					base = u
				}
			}
		case "a", "area":
			if v, ok := a["href"]; ok {
				refs = append(refs, raw{v, strings.Contains(strings.ToLower(a["rel"]), "nofollow")})
			}
		case "iframe", "frame":
			if v, ok := a["src"]; ok {
				refs = append(refs, raw{v, false})
			}
		case "link":
			if strings.EqualFold(a["rel"], "canonical") {
				refs = append(refs, raw{a["href"], false})
			}
		case "meta":
			if strings.EqualFold(a["name"], "robots") && strings.Contains(strings.ToLower(a["content"]), "nofollow") {
				metaNofollow = true
			}
		}
	}
	for _, r := range refs {
		u, ok := Canonicalize(base, r.ref)
		if !ok {
			continue
		}
		if r.nf {
			nofollow = append(nofollow, u)
		} else {
			follow = append(follow, u)
		}
	}
	return
}

func hostWith(w *Web, pred func(h *host) bool) *host {
	for _, h := range w.hosts {
		if pred(h) {
			return h
		}
	}
	return nil
}

// loggedTransport makes a test's reads of the request log see every request it has
// finished: closing a response body waits (up to 5 s) until the server has logged as many
// requests as this client has finished. The server logs a request when its handler
// returns, which can come just after the client has read the whole answer (CI saw a
// report taken right after a GET miss it).
type loggedTransport struct {
	base     http.RoundTripper
	w        *Web
	finished atomic.Int64
}

func (t *loggedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || strings.HasPrefix(req.URL.Path, "/_simweb/") {
		return resp, err
	}
	resp.Body = &loggedBody{ReadCloser: resp.Body, t: t}
	return resp, nil
}

type loggedBody struct {
	io.ReadCloser
	t    *loggedTransport
	done bool
}

func (b *loggedBody) Close() error {
	err := b.ReadCloser.Close()
	if !b.done {
		b.done = true
		n := b.t.finished.Add(1)
		for deadline := time.Now().Add(5 * time.Second); b.t.w.loggedTotal() < n && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	return err
}
