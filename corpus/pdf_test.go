package corpus

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/internal/clustertest"
	"github.com/crawlnode/crawlnode/simweb"
)

// testPDF is the PDF configuration of the tests: compiled code cached across test runs, so
// that only the first run of a machine compiles the engine.
func testPDF() PDFConfig {
	return PDFConfig{CacheDir: filepath.Join(os.TempDir(), "crawlnode-pdfium-test-cache")}
}

func testPDFEngine(t *testing.T, cfg PDFConfig) *pdfEngine {
	t.Helper()
	cfg.setDefaults()
	e := newPDFEngine(cfg, 2)
	t.Cleanup(func() { e.close() })
	return e
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "pdf", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var wordRE = regexp.MustCompile(`[\pL\pN]+`)

// wordF1 scores got against want as bags of lower-case words (letters and digits): the
// harmonic mean of the shares of got's words found in want and of want's found in got.
func wordF1(got, want string) (f1, precision, recall float64) {
	bag := func(s string) map[string]int {
		m := map[string]int{}
		for _, w := range wordRE.FindAllString(strings.ToLower(s), -1) {
			m[w]++
		}
		return m
	}
	g, w := bag(got), bag(want)
	common, ng, nw := 0, 0, 0
	for k, c := range g {
		common += min(c, w[k])
		ng += c
	}
	for _, c := range w {
		nw += c
	}
	if ng == 0 || nw == 0 {
		return 0, 0, 0
	}
	precision, recall = float64(common)/float64(ng), float64(common)/float64(nw)
	if common == 0 {
		return 0, precision, recall
	}
	return 2 * precision * recall / (precision + recall), precision, recall
}

// realPDFs are real-world PDFs from Debian's documentation (testdata/pdf/README.md), with
// their text as poppler's pdftotext 22.12 gives it, and headings their Markdown must have.
var realPDFs = []struct {
	file, ref string
	pages     int
	headings  []string
}{
	{"libtasn1.pdf", "libtasn1.pdftotext.txt", 36, []string{"# Libtasn1", "## 1 Introduction", "### 2.1 ASN.1 syntax", "## 4 Function reference"}},
	{"shared-mime-info-spec.pdf", "shared-mime-info-spec.pdftotext.txt", 17, []string{"# Shared MIME-info Database", "## 1. Introduction", "### 2.1. Directory layout"}},
}

// TestPDFRealWorld holds the text of real PDFs to pdftotext's (word F1 at least 0.97) and
// checks the headings told by font size, the title and the language.
func TestPDFRealWorld(t *testing.T) {
	ex := newExtractor(&Config{PDF: testPDF(), Filters: Filters{MinTextLength: 200, MaxLinkDensity: 0.5}, MaxBodyBytes: DefaultMaxBodyBytes})
	ex.pdf.cfg.setDefaults()
	defer ex.pdf.close()
	for _, c := range realPDFs {
		t.Run(c.file, func(t *testing.T) {
			body := readTestdata(t, c.file)
			j := Job{URL: "http://docs.test/" + c.file, Status: 200, ContentType: "application/pdf"}
			a := ex.analyze(&j, body)
			r := a.rec
			if !r.Kept() {
				t.Fatalf("rejected %q %q", r.Rejected, r.RejectDetail)
			}
			f1, p, rc := wordF1(r.Text, string(readTestdata(t, c.ref)))
			t.Logf("%s: %d pages, %d characters, word F1 %.4f (precision %.4f, recall %.4f), title %q, language %q",
				c.file, r.PDFPages, r.Quality.TextLength, f1, p, rc, r.Title, r.Language)
			if f1 < 0.97 {
				t.Errorf("word F1 against pdftotext %.4f, want >= 0.97", f1)
			}
			if r.PDFPages != c.pages {
				t.Errorf("pdf_pages %d, want %d", r.PDFPages, c.pages)
			}
			if r.Language != "en" {
				t.Errorf("language %q, want en", r.Language)
			}
			if want := strings.TrimPrefix(c.headings[0], "# "); r.Title != want {
				t.Errorf("title %q, want %q (first heading: the document info has none)", r.Title, want)
			}
			lines := map[string]bool{}
			for _, l := range strings.Split(r.Markdown, "\n") {
				lines[l] = true
			}
			for _, h := range c.headings {
				if !lines[h] {
					t.Errorf("Markdown lacks the heading line %q", h)
				}
			}
		})
	}
}

// TestPDFSimweb reads the PDFs simweb serves: its known title, headings and paragraphs.
func TestPDFSimweb(t *testing.T) {
	paras := genParagraphs(5, 3, 70)
	body := simweb.MakePDF("Quarterly figures", []simweb.PDFBlock{
		{Level: 1, Text: "Quarterly figures"}, {Text: paras[0]},
		{Level: 2, Text: "1 Revenue (and costs)"}, {Text: paras[1]},
		{Level: 2, Text: "2 Outlook"}, {Text: paras[2]},
	})
	e := testPDFEngine(t, testPDF())
	doc, err := e.extract(context.Background(), body)
	if err != nil {
		t.Fatal(err)
	}
	out := pdfLayout(doc.lines)
	if doc.title != "Quarterly figures" || doc.pages != 1 {
		t.Errorf("title %q pages %d", doc.title, doc.pages)
	}
	want := "# Quarterly figures\n\n" + escapeMarkdown(paras[0], true) + "\n\n## 1 Revenue (and costs)\n\n" + escapeMarkdown(paras[1], true) +
		"\n\n## 2 Outlook\n\n" + escapeMarkdown(paras[2], true)
	if out.markdown != want {
		t.Errorf("markdown:\n%s\nwant:\n%s", out.markdown, want)
	}
	if wantText := strings.Join([]string{"Quarterly figures", paras[0], "1 Revenue (and costs)", paras[1], "2 Outlook", paras[2]}, "\n"); out.text != wantText {
		t.Errorf("text:\n%s\nwant:\n%s", out.text, wantText)
	}
}

func TestPDFLayout(t *testing.T) {
	line := func(text string, size, bottom float64, page int) pdfLine {
		return pdfLine{text: text, size: size, top: bottom + size, bottom: bottom, page: page}
	}
	cases := []struct {
		name  string
		lines []pdfLine
		text  string
		md    string
	}{
		{"paragraphs by gap", []pdfLine{
			line("First line of one", 10, 700, 0), line("paragraph goes on.", 10, 688, 0),
			line("A second paragraph.", 10, 660, 0), line("Its second line.", 10, 648, 0),
		}, "First line of one paragraph goes on.\nA second paragraph. Its second line.",
			"First line of one paragraph goes on.\n\nA second paragraph. Its second line."},
		{"headings by size, levels by rank", []pdfLine{
			line("Title", 24, 780, 0), line("1 Part", 16, 740, 0), line("Body text here and more.", 10, 720, 0),
			line("Body again.", 10, 708, 0), line("1.1 Sub", 12, 680, 0), line("More body text, quite long.", 10, 660, 0),
			line("Still body.", 10, 648, 0),
		}, "Title\n1 Part\nBody text here and more. Body again.\n1.1 Sub\nMore body text, quite long. Still body.",
			"# Title\n\n## 1 Part\n\nBody text here and more. Body again.\n\n### 1.1 Sub\n\nMore body text, quite long. Still body."},
		{"hyphenation and page breaks", []pdfLine{
			line("An exam\x02", 10, 700, 0), line("ple of well\x02", 10, 688, 0), line("Known words", 10, 676, 0),
			line("continued on the next page.", 10, 780, 1), line("New page, new paragraph.", 10, 700, 2),
		}, "An example of well-Known words continued on the next page.\nNew page, new paragraph.",
			"An example of well-Known words continued on the next page.\n\nNew page, new paragraph."},
		{"too many headings: none", []pdfLine{
			line("Slide title", 30, 700, 0), line("Big point", 20, 600, 0), line("Other point", 20, 500, 0),
			line("small print, longer than the rest together", 10, 400, 0),
		}, "Slide title\nBig point Other point\nsmall print, longer than the rest together",
			"Slide title\n\nBig point Other point\n\nsmall print, longer than the rest together"},
		{"markdown escaped", []pdfLine{
			line("* not a list, 1. nor [a link](x)", 10, 700, 0), line("or <b>", 10, 688, 0), line("2. item", 10, 650, 0),
		}, "* not a list, 1. nor [a link](x) or <b>\n2. item", "\\* not a list, 1. nor \\[a link\\](x) or \\<b>\n\n2\\. item"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := pdfLayout(c.lines)
			if got.text != c.text {
				t.Errorf("text:\n%q\nwant\n%q", got.text, c.text)
			}
			if got.markdown != c.md {
				t.Errorf("markdown:\n%q\nwant\n%q", got.markdown, c.md)
			}
		})
	}
}

// hostilePDFs builds the hostile set: each with the reasons its record may carry.
func hostilePDFs(t *testing.T) []struct {
	name    string
	body    []byte
	reasons []string
} {
	sim := simweb.MakePDF("Plain", []simweb.PDFBlock{{Level: 1, Text: "Plain"}, {Text: strings.Join(genParagraphs(9, 2, 60), " ")}})
	real := readTestdata(t, "libtasn1.pdf")
	garbage := []byte("%PDF-1.7\n")
	r := uint64(42)
	for len(garbage) < 8192 {
		r = r*6364136223846793005 + 1442695040888963407
		garbage = append(garbage, byte(r>>56))
	}
	// Garbage cross-reference table: every offset wrong, startxref past the end.
	badXref := append([]byte(nil), sim...)
	if i := bytes.Index(badXref, []byte("xref\n")); i > 0 {
		for k := i + 5; k < len(badXref); k++ {
			if badXref[k] >= '0' && badXref[k] <= '9' {
				badXref[k] = '7'
			}
		}
	}
	return []struct {
		name    string
		body    []byte
		reasons []string
	}{
		{"garbage", garbage, []string{RejectPDFBroken}},
		{"truncated header", real[:600], []string{RejectPDFBroken, RejectPDFNoTextLayer}},
		// PDFium rebuilds a broken cross-reference table by scanning the objects, as
		// readers do: the text may well come back.
		{"garbage xref", badXref, []string{"", RejectPDFBroken, RejectTooShort}},
		{"truncated half", real[:len(real)/2], []string{"", RejectPDFBroken, RejectPDFNoTextLayer}},
		{"encrypted", readTestdata(t, "encrypted.pdf"), []string{RejectPDFEncrypted}},
		{"huge page count", hugePageCountPDF(200_000), []string{RejectPDFTooManyPages}},
		{"decompression bomb", readTestdata(t, "bomb.pdf"), []string{RejectTooLarge, RejectPDFNoTextLayer, RejectPDFTimeout, RejectPDFBroken}},
		{"deeply nested", nestedPDF(200_000), []string{RejectPDFBroken, RejectPDFNoTextLayer, RejectTooShort}},
		{"no text layer", simweb.MakePDF("", nil), []string{RejectPDFNoTextLayer}},
		{"too large", append(append([]byte(nil), sim...), make([]byte, 2<<20)...), []string{RejectTooLarge}},
	}
}

// hugePageCountPDF is a PDF of n pages in a few KB: a page tree whose nodes list the same
// child many times.
func hugePageCountPDF(n int) []byte {
	const fan = 1000
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	var off []int
	obj := func(s string) { off = append(off, b.Len()); fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(off), s) }
	kids := func(ref string, k int) string { return strings.TrimSpace(strings.Repeat(ref+" ", k)) }
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj(fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", kids("3 0 R", n/fan), n))
	obj(fmt.Sprintf("<< /Type /Pages /Parent 2 0 R /Kids [%s] /Count %d >>", kids("4 0 R", fan), fan))
	obj("<< /Type /Page /Parent 3 0 R /MediaBox [0 0 200 200] >>")
	return finishPDF(&b, off)
}

// nestedPDF has a page whose resources hold an array nested depth deep.
func nestedPDF(depth int) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	var off []int
	obj := func(s string) { off = append(off, b.Len()); fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(off), s) }
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj("<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
	obj("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Resources << /X " +
		strings.Repeat("[", depth) + strings.Repeat("]", depth) + " >> /Contents 4 0 R >>")
	obj("<< /Length 0 >>\nstream\n\nendstream")
	return finishPDF(&b, off)
}

func finishPDF(b *bytes.Buffer, off []int) []byte {
	x := b.Len()
	fmt.Fprintf(b, "xref\n0 %d\n0000000000 65535 f \n", len(off)+1)
	for _, o := range off {
		fmt.Fprintf(b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(off)+1, x)
	return b.Bytes()
}

// bombPDF is a page whose content stream, compressed twice (/FlateDecode twice), is a few
// KB and inflates to size bytes of spaces.
func bombPDF(size int64) []byte {
	var inner bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&inner, zlib.BestCompression)
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	for n := int64(0); n < size; n += int64(len(chunk)) {
		zw.Write(chunk)
	}
	zw.Close()
	var outer bytes.Buffer
	zw, _ = zlib.NewWriterLevel(&outer, zlib.BestCompression)
	zw.Write(inner.Bytes())
	zw.Close()
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	var off []int
	obj := func(s string) { off = append(off, b.Len()); fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(off), s) }
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj("<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
	obj("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R >>")
	obj(fmt.Sprintf("<< /Length %d /Filter [/FlateDecode /FlateDecode] >>\nstream\n%s\nendstream", outer.Len(), outer.Bytes()))
	return finishPDF(&b, off)
}

// TestWriteBombPDF writes testdata/pdf/bomb.pdf (4 GiB of spaces inflated) when
// CORPUS_WRITE_BOMB is set: compressing 4 GiB takes a while, so the file is kept.
func TestWriteBombPDF(t *testing.T) {
	if os.Getenv("CORPUS_WRITE_BOMB") == "" {
		t.Skip("set CORPUS_WRITE_BOMB=1 to write testdata/pdf/bomb.pdf")
	}
	b := bombPDF(4 << 30)
	if err := os.WriteFile(filepath.Join("testdata", "pdf", "bomb.pdf"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("bomb.pdf: %d bytes", len(b))
}

// TestPDFHostile runs the hostile set through a stage: each PDF gets a record with one of
// its reasons, and the stage goes on to extract a good PDF queued after them all.
func TestPDFHostile(t *testing.T) {
	db := openMemDB(t)
	dir := t.TempDir()
	st := newSite()
	var jobs []Job
	hostile := hostilePDFs(t)
	for i, h := range hostile {
		u := "http://bad.test/" + strings.ReplaceAll(h.name, " ", "-") + ".pdf"
		st.add(u, string(h.body))
		j := jobFor(u, i)
		j.ContentType = "application/pdf"
		jobs = append(jobs, j)
	}
	good := simweb.MakePDF("After the storm", []simweb.PDFBlock{{Level: 1, Text: "After the storm"}, {Text: strings.Join(genParagraphs(3, 3, 60), " ")}})
	st.add("http://good.test/after.pdf", string(good))
	j := jobFor("http://good.test/after.pdf", 99)
	j.ContentType = "application/pdf"
	jobs = append(jobs, j)

	cfg := testConfig(db, dir, st)
	cfg.PDF = testPDF()
	cfg.PDF.MaxBytes = 2 << 20
	cfg.PDF.MaxMemory = 256 << 20
	cfg.PDF.Timeout = 20 * time.Second
	start := time.Now()
	runToEnd(t, cfg, jobs)
	byURL := map[string]Record{}
	for _, r := range readAll(t, dir) {
		byURL[r.URL] = r
	}
	if len(byURL) != len(jobs) {
		t.Fatalf("%d records for %d jobs", len(byURL), len(jobs))
	}
	for _, h := range hostile {
		r := byURL["http://bad.test/"+strings.ReplaceAll(h.name, " ", "-")+".pdf"]
		t.Logf("%-20s %7d bytes: rejected %q (%.80s), %d pages, %d characters", h.name, len(h.body), r.Rejected, r.RejectDetail, r.PDFPages, r.Quality.TextLength)
		if !slices.Contains(h.reasons, r.Rejected) {
			t.Errorf("%s: rejected %q, want one of %q", h.name, r.Rejected, h.reasons)
		}
	}
	if r := byURL["http://good.test/after.pdf"]; !r.Kept() || r.Title != "After the storm" {
		t.Errorf("the good PDF after the hostile ones: rejected %q %q, title %q", r.Rejected, r.RejectDetail, r.Title)
	}
	t.Logf("hostile set and one good PDF in %s", time.Since(start).Round(time.Millisecond))
}

// TestPDFTimeout: a document that takes longer than PDFConfig.Timeout is stopped inside
// PDFium and rejected; the engine serves the next document.
func TestPDFTimeout(t *testing.T) {
	cfg := testPDF()
	cfg.Timeout = 5 * time.Millisecond
	e := testPDFEngine(t, cfg)
	body := readTestdata(t, "libtasn1.pdf")
	if _, err := e.get(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := e.extract(context.Background(), body)
	var r *pdfRejection
	if !errors.As(err, &r) || r.reason != RejectPDFTimeout {
		t.Fatalf("err %v, want %s", err, RejectPDFTimeout)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("stopped after %s, timeout 5ms", el)
	}
	e.cfg.Timeout = time.Minute
	doc, err := e.extract(context.Background(), body)
	if err != nil || doc.pages != 36 {
		t.Fatalf("after a timeout: %v, %d pages", err, doc.pages)
	}
}

// TestPDFStage: PDFs by Content-Type and by their bytes (mislabeled as HTML or octet-stream)
// get text, title, language and Markdown; a copy under another URL is an exact duplicate,
// one with a word added a near duplicate;
// other binary types are dropped without reading their body; PDF.Disabled drops PDFs.
func TestPDFStage(t *testing.T) {
	paras := genParagraphs(21, 3, 70)
	doc := simweb.MakePDF("Field notes", []simweb.PDFBlock{{Level: 1, Text: "Field notes"}, {Text: paras[0]}, {Level: 2, Text: "Method"}, {Text: paras[1] + " " + paras[2]}})
	near := simweb.MakePDF("Field notes", []simweb.PDFBlock{{Level: 1, Text: "Field notes"}, {Text: paras[0]}, {Level: 2, Text: "Method"}, {Text: strings.Replace(paras[1], " ", " zebra ", 1) + " " + paras[2]}})
	other := simweb.MakePDF("Other notes", []simweb.PDFBlock{{Level: 1, Text: "Other notes"}, {Text: strings.Join(genParagraphs(22, 3, 70), " ")}})
	run := func(t *testing.T, pdf PDFConfig) (map[string]Record, *site) {
		db := openMemDB(t)
		dir := t.TempDir()
		st := newSite()
		var jobs []Job
		for i, c := range []struct{ url, ct, body string }{
			{"http://a.test/notes.pdf", "application/pdf", string(doc)},
			{"http://b.test/copy.pdf", "application/pdf", string(doc)},
			{"http://b.test/edited.pdf", "application/pdf", string(near)},
			{"http://c.test/page.html", "text/html", string(other)},
			{"http://d.test/download", "application/octet-stream", string(append([]byte(nil), other[:len(other)-1]...)) + "\n"},
			{"http://e.test/image.png", "image/png", "\x89PNG..."},
			{"http://f.test/blob", "application/octet-stream", "\x7fELF binary"},
		} {
			st.add(c.url, c.body)
			j := jobFor(c.url, i)
			j.ContentType = c.ct
			jobs = append(jobs, j)
		}
		cfg := testConfig(db, dir, st)
		cfg.PDF = pdf
		cfg.Workers = 1 // the copy comes second
		runToEnd(t, cfg, jobs)
		out := map[string]Record{}
		for _, r := range readAll(t, dir) {
			out[r.URL] = r
		}
		return out, st
	}
	recs, st := run(t, testPDF())
	a := recs["http://a.test/notes.pdf"]
	if !a.Kept() || a.Title != "Field notes" || a.Language != "en" || a.PDFPages != 1 {
		t.Errorf("notes.pdf: rejected %q %q, title %q, language %q, pages %d", a.Rejected, a.RejectDetail, a.Title, a.Language, a.PDFPages)
	}
	for _, p := range paras {
		if !strings.Contains(a.Text, p) {
			t.Errorf("notes.pdf text lacks %.40q", p)
		}
	}
	if !strings.Contains(a.Markdown, "# Field notes\n") || !strings.Contains(a.Markdown, "\n## Method\n") {
		t.Errorf("notes.pdf Markdown lacks its headings:\n%s", a.Markdown)
	}
	if b := recs["http://b.test/copy.pdf"]; b.DuplicateKind != DupExact || b.DuplicateOf != "http://a.test/notes.pdf" {
		t.Errorf("copy.pdf: duplicate %q of %q", b.DuplicateKind, b.DuplicateOf)
	}
	if b := recs["http://b.test/edited.pdf"]; b.DuplicateKind != DupNear || b.DuplicateOf != "http://a.test/notes.pdf" {
		t.Errorf("edited.pdf (one word added): duplicate %q of %q", b.DuplicateKind, b.DuplicateOf)
	}
	for _, u := range []string{"http://c.test/page.html", "http://d.test/download"} {
		if r := recs[u]; r.Rejected != "" || r.Title != "Other notes" {
			t.Errorf("%s (mislabeled PDF): rejected %q %q, title %q, dup of %q", u, r.Rejected, r.RejectDetail, r.Title, r.DuplicateOf)
		}
	}
	if r := recs["http://e.test/image.png"]; r.Rejected != RejectContentType || st.loads["http://e.test/image.png"] != 0 {
		t.Errorf("image: rejected %q, body read %d times", r.Rejected, st.loads["http://e.test/image.png"])
	}
	if r := recs["http://f.test/blob"]; r.Rejected != RejectContentType {
		t.Errorf("binary octet-stream: rejected %q", r.Rejected)
	}

	t.Run("disabled", func(t *testing.T) {
		recs, st := run(t, PDFConfig{Disabled: true})
		if r := recs["http://a.test/notes.pdf"]; r.Rejected != RejectPDFDisabled || st.loads["http://a.test/notes.pdf"] != 0 {
			t.Errorf("declared PDF with PDFs off: rejected %q, body read %d times", r.Rejected, st.loads["http://a.test/notes.pdf"])
		}
		if r := recs["http://c.test/page.html"]; r.Rejected != RejectPDFDisabled {
			t.Errorf("mislabeled PDF with PDFs off: rejected %q", r.Rejected)
		}
		if r := recs["http://d.test/download"]; r.Rejected != RejectContentType {
			t.Errorf("octet-stream with PDFs off: rejected %q", r.Rejected)
		}
	})
}

// TestPDFGate: PDF extraction passes the same CPU gate as pages: while the machine is busy a
// queued PDF is not even read back, and it is extracted once the machine is idle.
func TestPDFGate(t *testing.T) {
	db := openMemDB(t)
	dir := t.TempDir()
	st := newSite()
	const u = "http://pdf.test/gated.pdf"
	st.add(u, string(simweb.MakePDF("Gated", []simweb.PDFBlock{{Level: 1, Text: "Gated"}, {Text: strings.Join(genParagraphs(31, 2, 60), " ")}})))
	j := jobFor(u, 1)
	j.ContentType = "application/pdf"
	var mu sync.Mutex
	busy, ticks := true, 0.0
	saved := gateReader
	gateReader = func([]int) (cpuSample, error) {
		mu.Lock()
		defer mu.Unlock()
		ticks += 20
		s := cpuSample{total: ticks, cpus: 2}
		if !busy {
			s.idle = ticks
		}
		return s, nil
	}
	t.Cleanup(func() { gateReader = saved })
	cfg := testConfig(db, dir, st)
	cfg.Nice = 5
	cfg.PDF = testPDF()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	clustertest.Eventually(t, 5*time.Second, "the gate to close", func() bool { return !s.gate.open.Load() })
	if err := s.Enqueue(j); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // four more readings of a busy machine
	st.mu.Lock()
	loads := st.loads[u]
	st.mu.Unlock()
	if n := s.Stats().Processed; n != 0 || loads != 0 {
		t.Fatalf("while the machine was busy: %d records, PDF read back %d times", n, loads)
	}
	mu.Lock()
	busy = false
	mu.Unlock()
	clustertest.Eventually(t, 30*time.Second, "the PDF extracted", func() bool { return s.Stats().Kept == 1 })
}

// TestPDFOwnerOnlyEncrypted: encryption with an empty user password (owner restrictions
// only) is read, as readers read it.
func TestPDFOwnerOnlyEncrypted(t *testing.T) {
	e := testPDFEngine(t, testPDF())
	doc, err := e.extract(context.Background(), readTestdata(t, "owner-only-encrypted.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	if out := pdfLayout(doc.lines); !strings.Contains(out.text, "encrypted with a user password") || doc.title != "Secret plans" {
		t.Errorf("title %q, text %q", doc.title, out.text)
	}
}

// TestPDFInstanceReuse: one instance serves documents one after another and nothing of
// one reaches the next.
func TestPDFInstanceReuse(t *testing.T) {
	cfg := testPDF()
	cfg.setDefaults()
	e := newPDFEngine(cfg, 1)
	defer e.close()
	for i, title := range []string{"First document", "Second document", "Third document"} {
		doc, err := e.extract(context.Background(), simweb.MakePDF(title, []simweb.PDFBlock{{Level: 1, Text: title}, {Text: genParagraphs(uint64(40+i), 1, 50)[0]}}))
		if err != nil {
			t.Fatal(err)
		}
		out := pdfLayout(doc.lines)
		if doc.title != title || strings.Count(out.text, "document") != 1 {
			t.Errorf("document %d: title %q, text %.80q", i, doc.title, out.text)
		}
	}
}
