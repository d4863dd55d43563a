package archive

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// BenchmarkGzipCorpus compresses pages of a corpus one gzip member each, as a record is,
// at the levels --warc-gzip-level offers, to compare deflate's cost on different text.
// CRAWLNODE_GZIP_CORPUS is a file glob: each HTML file is a page; a .warc.gz file (a
// crawl's archive, e.g. kept by bench/colly -keep) is read whole and cut into 40 KB
// pages. Skipped when unset. MB/s counts input; "ratio" is input over output bytes.
func BenchmarkGzipCorpus(b *testing.B) {
	glob := os.Getenv("CRAWLNODE_GZIP_CORPUS")
	if glob == "" {
		b.Skip("CRAWLNODE_GZIP_CORPUS not set")
	}
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		b.Fatalf("CRAWLNODE_GZIP_CORPUS %q: no files (%v)", glob, err)
	}
	var pages [][]byte
	total := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		if strings.HasSuffix(f, ".warc.gz") {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				b.Fatalf("%s: %v", f, err)
			}
			all, err := io.ReadAll(zr)
			if err != nil {
				b.Fatalf("%s: %v", f, err)
			}
			for len(all) >= 40<<10 {
				pages, all = append(pages, all[:40<<10]), all[40<<10:]
			}
			continue
		}
		pages = append(pages, data)
	}
	for _, p := range pages {
		total += len(p)
	}
	b.Logf("%d pages, mean %d bytes", len(pages), total/len(pages))
	for _, level := range []int{gzip.HuffmanOnly, gzip.BestSpeed, 2, gzip.DefaultCompression} {
		b.Run(fmt.Sprintf("level=%d", level), func(b *testing.B) {
			zw, _ := gzip.NewWriterLevel(io.Discard, level)
			var buf bytes.Buffer
			in, out := 0, 0
			b.SetBytes(int64(total / len(pages)))
			for i := 0; i < b.N; i++ {
				p := pages[i%len(pages)]
				buf.Reset()
				zw.Reset(&buf)
				zw.Write(p)
				if err := zw.Close(); err != nil {
					b.Fatal(err)
				}
				in, out = in+len(p), out+buf.Len()
			}
			b.ReportMetric(float64(in)/float64(out), "ratio")
		})
	}
}

// BenchmarkIndexEntry measures what the CDXJ index adds to a record: building its line on the
// write path (SURT, JSON, offset) and, per line, sorting and writing the index at close.
// Compare with BenchmarkWriteExchange/level=1/goroutines=1 (the record itself).
func BenchmarkIndexEntry(b *testing.B) {
	pages := make([]Exchange, 64)
	encs := make([]*encoded, len(pages))
	for i := range pages {
		pages[i] = exchange(2*i, 40<<10)
		pages[i].URL = fmt.Sprintf("https://www.Example-%d.com/path/to/page-%d?b=2&a=%d", i%7, i, i)
		encs[i] = &encoded{date: t0, mainLen: 12345, payloadDigest: "sha1:AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH"}
	}
	b.Run("line", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			k := i % len(pages)
			_ = lineAt(exchangeLinePrefix(&pages[k], nil, encs[k]), int64(i)*40000, "crawlnode-20250304050607-00001-n1.warc.gz")
		}
	})
	b.Run("sort-and-write-at-close", func(b *testing.B) {
		const n = 20000 // a 1 GiB file of 50 KB records
		lines := make([]string, n)
		for i := range lines {
			k := i % len(pages)
			lines[i] = lineAt(exchangeLinePrefix(&pages[k], nil, encs[k]), int64(i)*40000, "f.warc.gz")
		}
		dir := b.TempDir()
		b.ReportAllocs()
		for b.Loop() {
			batch := slices.Clone(lines)
			rand.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
			if err := writeIndexFile(filepath.Join(dir, "x.cdxj"), batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/line")
	})
}
