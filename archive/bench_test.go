package archive

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// BenchmarkWriteExchange writes 40 KB HTML-like pages (plus request and headers). MB/s counts
// page bytes. "serial" compresses under the lock, for comparison with the default.
func BenchmarkWriteExchange(b *testing.B) {
	const size = 40 << 10
	pages := make([]Exchange, 64)
	for i := range pages {
		pages[i] = exchange(2*i, size) // even seeds: compressible text
	}
	for _, level := range []int{gzip.BestSpeed, gzip.DefaultCompression} {
		for _, g := range []int{1, 4} {
			for _, serial := range []bool{false, true} {
				if serial && g == 1 {
					continue
				}
				name := fmt.Sprintf("level=%d/goroutines=%d", level, g)
				if serial {
					name += "/serial"
				}
				b.Run(name, func(b *testing.B) {
					cfg := testConfig(b.TempDir())
					cfg.CompressionLevel = level
					w := mustOpen(b, cfg)
					w.encodeSerial = serial
					b.SetBytes(size)
					b.ResetTimer()
					var next atomic.Int64
					var wg sync.WaitGroup
					for k := 0; k < g; k++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for {
								i := next.Add(1) - 1
								if i >= int64(b.N) {
									return
								}
								if _, _, err := w.WriteExchange(pages[i%int64(len(pages))]); err != nil {
									b.Error(err)
									return
								}
							}
						}()
					}
					wg.Wait()
					b.StopTimer()
					st := w.Stats()
					b.ReportMetric(float64(st.Bytes)/float64(b.N), "disk-B/op")
					if err := w.Close(); err != nil {
						b.Fatal(err)
					}
				})
			}
		}
	}
}

// BenchmarkWriteCompressedPayload writes 40 KB pages that arrived gzip-encoded (as most HTML
// on the web does when the crawler asks): their records are stored, not deflated again.
// MB/s counts payload bytes as received.
func BenchmarkWriteCompressedPayload(b *testing.B) {
	pages := make([]Exchange, 64)
	size := 0
	for i := range pages {
		ex := exchange(2*i, 40<<10)
		var zb bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&zb, gzip.BestSpeed)
		zw.Write(ex.ResponseBody)
		zw.Close()
		ex.ResponseHeader = append(ex.ResponseHeader[:len(ex.ResponseHeader):len(ex.ResponseHeader)], "\r\nContent-Encoding: gzip"...)
		ex.ResponseBody = zb.Bytes()
		ex.PayloadCompressed = CompressedPayload("gzip", "text/html")
		pages[i] = ex
		size += zb.Len()
	}
	w := mustOpen(b, testConfig(b.TempDir()))
	b.SetBytes(int64(size / len(pages)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := w.WriteExchange(pages[i%len(pages)]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(w.Stats().Bytes)/float64(b.N), "disk-B/op")
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}
