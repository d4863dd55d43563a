package corpus

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	trafilatura "github.com/markusmobius/go-trafilatura"
	"golang.org/x/net/html"
)

func reportPagesPerSec(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pages/s")
}

// BenchmarkExtract is the extract stage's CPU cost per page on one core: ~40 KB realistic page.
//
//	stage:             what a worker does (parse once, DOM walk, go-trafilatura on the same DOM)
//	stage-fallback:    the same with Config.Fallback (readability + dom-distiller candidates)
//	trafilatura-plain: trafilatura.Extract(reader) with default options, for comparison
//	parse, walk:       the parts of the stage path
func BenchmarkExtract(b *testing.B) {
	page := []byte(benchPage(1))
	j := htmlJob("http://h1.sim.test/bench")
	b.Run("stage", func(b *testing.B) {
		ex := testExtractor(Filters{})
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			if a := ex.analyze(&j, page); a.rec.Rejected != "" {
				b.Fatal(a.rec.Rejected)
			}
		}
		reportPagesPerSec(b)
	})
	b.Run("stage-fallback", func(b *testing.B) {
		cfg := Config{Fallback: true}
		cfg.setDefaults()
		ex := newExtractor(&cfg)
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			ex.analyze(&j, page)
		}
		reportPagesPerSec(b)
	})
	b.Run("trafilatura-plain", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			if _, err := trafilatura.Extract(bytes.NewReader(page), trafilatura.Options{}); err != nil {
				b.Fatal(err)
			}
		}
		reportPagesPerSec(b)
	})
	b.Run("parse", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			html.Parse(bytes.NewReader(page))
		}
		reportPagesPerSec(b)
	})
	b.Run("walk", func(b *testing.B) {
		doc, _ := html.Parse(bytes.NewReader(page))
		for b.Loop() {
			walkPage(doc, "crawlnode")
		}
		reportPagesPerSec(b)
	})
	b.Run("rejected-early", func(b *testing.B) {
		// An opted-out page (meta noai) is dropped after parse + walk, without trafilatura.
		p := []byte(strings.Replace(string(page), "<head>", `<head><meta name="robots" content="noai">`, 1))
		ex := testExtractor(Filters{})
		for b.Loop() {
			if a := ex.analyze(&j, p); a.rec.Rejected != RejectOptOut {
				b.Fatal(a.rec.Rejected)
			}
		}
		reportPagesPerSec(b)
	})
}

func BenchmarkSimHash(b *testing.B) {
	text400 := strings.Join(words400(1), " ")
	ex := testExtractor(Filters{})
	j := htmlJob("http://h1.sim.test/bench")
	long := ex.analyze(&j, []byte(benchPage(1))).rec.Text
	for _, c := range []struct {
		name string
		text string
	}{{"400words", text400}, {fmt.Sprintf("benchpage-%dwords", strings.Count(NormalizeText(long), " ")+1), long}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			for b.Loop() {
				SimHash(c.text)
			}
		})
		b.Run(c.name+"+contenthash", func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			for b.Loop() {
				SimHash(c.text)
				contentHashNormalized(NormalizeText(c.text))
			}
		})
	}
}

func BenchmarkNearIndexLookup(b *testing.B) {
	fill := func(idx NearIndex, n int) []uint64 {
		r := rand.New(rand.NewPCG(1, 2))
		hs := make([]uint64, n)
		for i := range hs {
			hs[i] = r.Uint64()
			idx.Insert(hs[i], fmt.Sprintf("http://h%d.sim.test/page\t%d", i, i))
		}
		return hs
	}
	lookups := func(b *testing.B, idx NearIndex, hs []uint64) {
		r := rand.New(rand.NewPCG(3, 4))
		hits := 0
		for b.Loop() {
			var q uint64
			if r.IntN(2) == 0 {
				q = flipBits(r, hs[r.IntN(len(hs))], r.IntN(4))
			} else {
				q = r.Uint64()
			}
			_, found, _, _ := idx.Lookup(q)
			if found {
				hits++
			}
		}
		b.ReportMetric(float64(hits)/float64(b.N), "hit-rate")
	}
	b.Run("mem-1M", func(b *testing.B) {
		idx := NewMemNearIndex()
		hs := fill(idx, 1_000_000)
		b.ResetTimer()
		lookups(b, idx, hs)
	})
	b.Run("badger-100k", func(b *testing.B) {
		db := openMemDB(b)
		idx := NewBadgerNearIndex(db)
		r := rand.New(rand.NewPCG(1, 2))
		hs := make([]uint64, 100_000)
		wb := db.NewWriteBatch()
		for i := range hs {
			hs[i] = r.Uint64()
			for t := 0; t < NearTables; t++ {
				wb.Set(nearKey(hs[i], t), []byte(fmt.Sprintf("http://h%d.sim.test/page\t%d", i, i)))
			}
		}
		if err := wb.Flush(); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		lookups(b, idx, hs)
	})
	b.Run("badger-insert", func(b *testing.B) {
		idx := NewBadgerNearIndex(openMemDB(b))
		r := rand.New(rand.NewPCG(5, 6))
		for b.Loop() {
			idx.Insert(r.Uint64(), "http://h.sim.test/page\t1")
		}
	})
}

// BenchmarkStage runs the whole stage (Badger backlog, workers = cores, dedup, zstd shards) on
// distinct ~40 KB pages and reports pages/s and corpus bytes per page.
func BenchmarkStage(b *testing.B) {
	const pages = 200
	st := newSite()
	var jobs []Job
	for i := 0; i < pages; i++ {
		url := fmt.Sprintf("http://h%d.sim.test/bench", i)
		st.add(url, benchPage(uint64(i+1)))
		jobs = append(jobs, jobFor(url, i))
	}
	var bytesPerPage, textPerPage float64
	var done int
	start := time.Now()
	for b.Loop() {
		db := openMemDB(b)
		dir := b.TempDir()
		cfg := testConfig(db, dir, st)
		cfg.Workers = runtime.NumCPU()
		cfg.CommitInterval = time.Second
		s, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Enqueue(jobs...); err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		s.Start(ctx)
		if err := s.Drain(ctx); err != nil {
			b.Fatal(err)
		}
		s.Shutdown(ctx)
		done += pages
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		var size int64
		for _, f := range files {
			fi, _ := os.Stat(f)
			size += fi.Size()
		}
		var text int
		ReadShards(dir, func(r Record) error { text += len(r.Text); return nil })
		bytesPerPage = float64(size) / pages
		textPerPage = float64(text) / pages
		db.Close()
	}
	b.ReportMetric(float64(done)/time.Since(start).Seconds(), "pages/s")
	b.ReportMetric(bytesPerPage, "corpus-bytes/page")
	b.ReportMetric(textPerPage, "text-bytes/page")
	b.ReportMetric(float64(runtime.NumCPU()), "workers")
}

// dedupWorkload is the duplicate-decision workload of BenchmarkDedup (and of package
// dedup's BenchmarkDecide, which builds the same): distinct pages, every 10th an exact copy
// and every 10th (offset 5) a near copy (2 bits) of an earlier page.
func dedupWorkload(n int) (hashes [][]byte, fps []uint64) {
	r := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < n; i++ {
		h := make([]byte, 32)
		for j := range h {
			h[j] = byte(r.Uint32())
		}
		fp := r.Uint64()
		switch {
		case i > 10 && i%10 == 0:
			k := r.IntN(i)
			h, fp = hashes[k], fps[k]
		case i > 10 && i%10 == 5:
			fp = flipBits(r, fps[r.IntN(i)], 2)
		}
		hashes, fps = append(hashes, h), append(fps, fp)
	}
	return hashes, fps
}

// BenchmarkDedup is the stage's own duplicate decision (Config.Decider nil: this node's 'c'
// and 'n' keys, one page at a time), per page, on a 100k-page index.
func BenchmarkDedup(b *testing.B) {
	const warm = 100_000
	hashes, fps := dedupWorkload(warm + 200_000)
	s, err := New(Config{DB: openMemDB(b), OutDir: b.TempDir(), NodeName: "n1", Load: newSite().load})
	if err != nil {
		b.Fatal(err)
	}
	do := func(i int) {
		rec := Record{URL: fmt.Sprintf("http://h%d.sim.test/p", i), FetchTime: time.Unix(int64(i), 0)}
		a := analysis{hashBytes: hashes[i], simhash: fps[i]}
		if err := s.dedup(&rec, &a); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < warm; i++ {
		do(i)
	}
	i := warm
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for b.Loop() {
		do(i)
		i++
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N)/1e3, "cpu-us/page")
}
