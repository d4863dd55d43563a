package simweb

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// smallPage finds a short article (~300 words, a few KB) on a plain host.
func smallPage(b *testing.B, w *Web) string {
	for _, h := range w.hosts {
		if h.feat != 0 || h.robots != robotsNone || h.mirrorOf >= 0 {
			continue
		}
		for k := 1; k < h.pages; k++ {
			if w.wordsFor(h.content, uint64(k)) < 400 {
				return "http://" + h.name + w.articlePath(h, k)
			}
		}
	}
	b.Fatal("no small page")
	return ""
}

// BenchmarkServeSmallPage: the handler alone (generation + routing + logging), in process.
func BenchmarkServeSmallPage(b *testing.B) {
	w, _ := New(DefaultConfig())
	u := smallPage(b, w)
	req := httptest.NewRequest("GET", u, nil)
	h := w.Handler()
	dw := &discardWriter{h: http.Header{}}
	_, _, body := serveOnce(w, u)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clear(dw.h)
		h.ServeHTTP(dw, req)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	if len(w.Log()) < b.N {
		b.Fatal("requests not logged")
	}
}

// BenchmarkServeSmallPageLoopback: real HTTP/1.1 over loopback with keep-alive clients
// (client and server share the machine's cores).
func BenchmarkServeSmallPageLoopback(b *testing.B) {
	w, cl := startWeb(b, DefaultConfig())
	u := smallPage(b, w)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("GET", u, nil)
			resp, err := cl.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Error(resp.Status)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	if !strings.HasPrefix(u, "http://") {
		b.Fatal(u)
	}
}
