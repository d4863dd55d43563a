package corpus

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/simweb"
)

// BenchmarkPDF measures PDF extraction on the real PDFs of testdata/pdf: process CPU a
// document and a page (a fresh engine instance a document, text, font sizes and
// positions, layout), the engine's WebAssembly memory after the document, and the Go heap
// in use (the engine's compiled code included). simweb-1-page is a one-page document: about
// the fixed cost of a document (its fresh instance). engine-start measures starting the engine with its code cached (cold: with
// CORPUS_PDF_COLD=1, compiled from scratch).
func BenchmarkPDF(b *testing.B) {
	b.Run("engine-start", func(b *testing.B) {
		for range b.N {
			cfg := testPDF()
			if os.Getenv("CORPUS_PDF_COLD") != "" {
				cfg.CacheDir = ""
			}
			cfg.setDefaults()
			e := newPDFEngine(cfg, 1)
			if _, err := e.get(); err != nil {
				b.Fatal(err)
			}
			e.close()
		}
	})
	docs := map[string][]byte{}
	names := []string{"simweb-1-page"}
	docs["simweb-1-page"] = simweb.MakePDF("One page", []simweb.PDFBlock{{Level: 1, Text: "One page"}, {Text: strings.Join(genParagraphs(3, 4, 60), " ")}})
	for _, c := range realPDFs {
		body, err := os.ReadFile("testdata/pdf/" + c.file)
		if err != nil {
			b.Fatal(err)
		}
		docs[c.file] = body
		names = append(names, c.file)
	}
	for _, name := range names {
		body := docs[name]
		b.Run(name, func(b *testing.B) {
			cfg := testPDF()
			cfg.setDefaults()
			e := newPDFEngine(cfg, 1)
			defer e.close()
			if _, err := e.get(); err != nil {
				b.Fatal(err)
			}
			var wasmMem uint64
			pages := 0
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				doc, err := e.extractWith(context.Background(), body, func(inst pdfMemReader) {
					if m, ok := inst.memory(); ok {
						wasmMem = max(wasmMem, m)
					}
				})
				if err != nil {
					b.Fatal(err)
				}
				_ = pdfLayout(doc.lines)
				pages = doc.pages
			}
			cpu := processCPU() - cpu0
			b.StopTimer()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			perDoc := cpu / time.Duration(b.N)
			b.ReportMetric(float64(perDoc.Microseconds())/1000, "cpu-ms/pdf")
			b.ReportMetric(float64(perDoc.Microseconds())/1000/float64(pages), "cpu-ms/page")
			b.ReportMetric(float64(wasmMem)/(1<<20), "wasm-MiB")
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
		})
	}
}
