package corpus

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	trafilatura "github.com/markusmobius/go-trafilatura"
	"golang.org/x/net/html/charset"
)

// realPage is one page of go-trafilatura's real-world comparison set with the snippets its
// annotators expect in the main text (with) and out of it (without).
type realPage struct {
	url, file     string
	body          []byte
	with, without []string
}

const trafilaturaModule = "github.com/markusmobius/go-trafilatura"

// trafilaturaDir is the module cache directory of the go-trafilatura version this module
// requires (go list -m, offline), or "" when it cannot be found.
func trafilaturaDir() string {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", trafilaturaModule)
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

var (
	realPagesOnce sync.Once
	realPagesList []realPage
	realPagesErr  string
)

// loadRealPages reads the comparison set: the URL -> {File, With, Without} map literal of
// scripts/comparison/data.go (read with go/parser, not copied) and the HTML files under
// test-files/comparison or test-files/mock. The test is skipped when the module directory or
// the set is absent.
func loadRealPages(tb testing.TB) []realPage {
	tb.Helper()
	realPagesOnce.Do(func() {
		dir := trafilaturaDir()
		if dir == "" {
			realPagesErr = "go-trafilatura module directory not found"
			return
		}
		data := filepath.Join(dir, "scripts", "comparison", "data.go")
		f, err := parser.ParseFile(token.NewFileSet(), data, nil, parser.SkipObjectResolution)
		if err != nil {
			realPagesErr = "comparison set not readable: " + err.Error()
			return
		}
		var lit *ast.CompositeLit
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].Name == "comparisonData" && len(vs.Values) == 1 {
				lit, _ = vs.Values[0].(*ast.CompositeLit)
			}
			return lit == nil
		})
		if lit == nil {
			realPagesErr = "comparisonData not found in " + data
			return
		}
		str := func(e ast.Expr) string {
			if bl, ok := e.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				s, err := strconv.Unquote(bl.Value)
				if err == nil {
					return s
				}
			}
			return ""
		}
		strs := func(e ast.Expr) []string {
			var out []string
			if cl, ok := e.(*ast.CompositeLit); ok {
				for _, x := range cl.Elts {
					out = append(out, str(x))
				}
			}
			return out
		}
		for _, elt := range lit.Elts {
			kv, ok := elt.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			p := realPage{url: str(kv.Key)}
			entry, ok := kv.Value.(*ast.CompositeLit)
			if !ok {
				continue
			}
			for _, fe := range entry.Elts {
				fkv, ok := fe.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				switch fkv.Key.(*ast.Ident).Name {
				case "File":
					p.file = str(fkv.Value)
				case "With":
					p.with = strs(fkv.Value)
				case "Without":
					p.without = strs(fkv.Value)
				}
			}
			for _, sub := range []string{"comparison", "mock"} {
				if b, err := os.ReadFile(filepath.Join(dir, "test-files", sub, p.file)); err == nil {
					p.body = b
					break
				}
			}
			if p.body != nil && p.url != "" {
				realPagesList = append(realPagesList, p)
			}
		}
		if len(realPagesList) == 0 {
			realPagesErr = "no comparison pages under " + dir
		}
	})
	if realPagesErr != "" {
		tb.Skip("real-world pages absent: " + realPagesErr)
	}
	return realPagesList
}

// snippetScore is go-trafilatura's comparison score (scripts/comparison, evaluateEntry):
// expected snippets found are true positives, missed ones false negatives; unwanted snippets
// found are false positives, absent ones true negatives. An empty text finds nothing.
type snippetScore struct{ tp, fn, fp, tn int }

func (s *snippetScore) add(p *realPage, text string) {
	for _, w := range p.with {
		if text != "" && strings.Contains(text, w) {
			s.tp++
		} else {
			s.fn++
		}
	}
	for _, w := range p.without {
		if text != "" && strings.Contains(text, w) {
			s.fp++
		} else {
			s.tn++
		}
	}
}

func (s snippetScore) precision() float64 { return float64(s.tp) / float64(s.tp+s.fp) }
func (s snippetScore) recall() float64    { return float64(s.tp) / float64(s.tp+s.fn) }
func (s snippetScore) f1() float64        { return 2 * float64(s.tp) / float64(2*s.tp+s.fp+s.fn) }

func realJob(p *realPage) Job {
	j := htmlJob(p.url)
	j.ContentType = "text/html" // no charset: decoded by BOM or <meta charset> when not UTF-8
	return j
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRealWorld runs every page of go-trafilatura's real-world comparison set through the
// stage's extractor (one pass per iteration; run with -benchtime=1x) and reports the CPU per
// page (process user+system time, so garbage collection counts), the share of pages left
// without text, and the text's quality by the set's own snippets (precision, recall, F1 as
// its comparison script computes them), and the text and Markdown bytes a page.
// "stage-no-markdown" is the same with Config.NoMarkdown, "markdown-cost" the two paired
// page by page, and "trafilatura" go-trafilatura alone on the same pages, options as the
// stage's, for reference.
func BenchmarkRealWorld(b *testing.B) {
	pages := loadRealPages(b)
	stage := func(noMarkdown bool) func(b *testing.B) {
		return func(b *testing.B) {
			cfg := Config{NoMarkdown: noMarkdown}
			cfg.setDefaults()
			ex := newExtractor(&cfg)
			var sc snippetScore
			noText, passes, textBytes, mdBytes := 0, 0, 0, 0
			cpu0 := processCPU()
			for b.Loop() {
				sc, noText, textBytes, mdBytes = snippetScore{}, 0, 0, 0
				for i := range pages {
					j := realJob(&pages[i])
					rec := ex.analyze(&j, pages[i].body).rec
					if rec.Text == "" {
						noText++
					}
					textBytes += len(rec.Text)
					mdBytes += len(rec.Markdown)
					sc.add(&pages[i], rec.Text)
				}
				passes++
			}
			n := float64(passes * len(pages))
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/n, "cpu-ns/page")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/page")
			b.ReportMetric(float64(len(pages)), "pages")
			b.ReportMetric(float64(noText)/float64(len(pages)), "no-text-share")
			b.ReportMetric(sc.precision(), "precision")
			b.ReportMetric(sc.recall(), "recall")
			b.ReportMetric(sc.f1(), "F1")
			b.ReportMetric(float64(textBytes)/float64(len(pages)), "text-B/page")
			b.ReportMetric(float64(mdBytes)/float64(len(pages)), "md-B/page")
		}
	}
	// The stage as it runs (Markdown on), and without Markdown (Config.NoMarkdown): the
	// difference is Markdown's cost.
	b.Run("stage", stage(false))
	b.Run("stage-no-markdown", stage(true))
	// Markdown's cost paired page by page, so that the machine's load, which moves between
	// runs on a shared machine, falls on both alike: each page goes through the stage without
	// and with Markdown, in alternating order, each timed by the process's CPU.
	b.Run("markdown-cost", func(b *testing.B) {
		cfgOff := Config{NoMarkdown: true}
		cfgOff.setDefaults()
		on, off := testExtractor(Filters{}), newExtractor(&cfgOff)
		var cpuOn, cpuOff time.Duration
		passes := 0
		for b.Loop() {
			for i := range pages {
				j := realJob(&pages[i])
				first, second, d1, d2 := off, on, &cpuOff, &cpuOn
				if (i+passes)%2 == 1 {
					first, second, d1, d2 = on, off, &cpuOn, &cpuOff
				}
				c0 := processCPU()
				first.analyze(&j, pages[i].body)
				c1 := processCPU()
				second.analyze(&j, pages[i].body)
				*d1 += c1 - c0
				*d2 += processCPU() - c1
			}
			passes++
		}
		n := float64(passes * len(pages))
		b.ReportMetric(float64(cpuOff.Nanoseconds())/n, "off-cpu-ns/page")
		b.ReportMetric(float64(cpuOn.Nanoseconds())/n, "on-cpu-ns/page")
		b.ReportMetric(float64(cpuOn-cpuOff)/float64(cpuOff), "markdown-share")
	})
	b.Run("trafilatura", func(b *testing.B) {
		var sc snippetScore
		noText, passes := 0, 0
		cpu0 := processCPU()
		for b.Loop() {
			sc, noText = snippetScore{}, 0
			for i := range pages {
				p := &pages[i]
				u, _ := url.Parse(p.url)
				text := ""
				var r io.Reader = bytes.NewReader(p.body)
				if !utf8.Valid(p.body) { // decoded as the stage decodes it
					r, _ = charset.NewReader(r, "text/html")
				}
				if r != nil {
					res, err := trafilatura.Extract(r, trafilatura.Options{ExcludeComments: true, HtmlDateMode: trafilatura.Disabled, OriginalURL: u})
					if err == nil {
						text = strings.TrimSpace(res.ContentText)
					}
				}
				if text == "" {
					noText++
				}
				sc.add(p, text)
			}
			passes++
		}
		n := float64(passes * len(pages))
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/n, "cpu-ns/page")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/page")
		b.ReportMetric(float64(noText)/float64(len(pages)), "no-text-share")
		b.ReportMetric(sc.precision(), "precision")
		b.ReportMetric(sc.recall(), "recall")
		b.ReportMetric(sc.f1(), "F1")
	})
}
