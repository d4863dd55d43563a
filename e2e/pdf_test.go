package e2e

// The PDF check of issue 39 (item 2): simweb's binary hosts serve real PDFs of known text
// (declared application/pdf at /files/N.pdf, and behind a text/html label at
// /mislabeled/N.html); the exported corpus must hold each with its text, title, language
// and Markdown headings, judged by simweb's truth, not by the crawler's counters.

import (
	"regexp"
	"strings"
	"testing"

	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/simweb"
)

// pdfWeb: 12 hosts, half of them binary hosts (a PDF, a mislabeled PDF, a PNG, binary .html).
func pdfWeb(c *simweb.Config) {
	c.Hosts = 12
	c.Seed = 31
	c.MeanPages = 20
	c.BinaryHosts = 6
	c.CrawlDelayHosts = 0
}

var e2eWord = regexp.MustCompile(`[\pL\pN]+`)

// wordRecall is the share of want's words (as a bag, lower case) found in got.
func wordRecall(got, want string) float64 {
	bag := map[string]int{}
	for _, w := range e2eWord.FindAllString(strings.ToLower(got), -1) {
		bag[w]++
	}
	n, found := 0, 0
	for _, w := range e2eWord.FindAllString(strings.ToLower(want), -1) {
		n++
		if bag[w] > 0 {
			bag[w]--
			found++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(found) / float64(n)
}

func TestCorpusPDF(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	w, addr := web(t, pdfWeb)
	recs := exportAll(t, crawlWeb(t, w, addr))
	byURL := map[string]corpus.Record{}
	for _, r := range recs {
		byURL[canon(r.URL)] = r
	}
	want := 0
	declared, mislabeled, optedOut := 0, 0, 0
	for _, u := range w.MustReach(reportOptions(0)) {
		pi, ok := w.Page(u)
		if !ok || !pi.PDF {
			continue
		}
		want++
		r, ok := byURL[u]
		if !ok {
			t.Errorf("%s: PDF without a corpus record", u)
			continue
		}
		if len(pi.OptOut) > 0 {
			optedOut++
			if r.Rejected != corpus.RejectOptOut || r.Text != "" {
				t.Errorf("%s: planted opt-out %v, record rejected %q", u, pi.OptOut, r.Rejected)
			}
			continue
		}
		if !r.Kept() {
			t.Errorf("%s: rejected %q (%s), duplicate of %q", u, r.Rejected, r.RejectDetail, r.DuplicateOf)
			continue
		}
		if strings.HasPrefix(pi.ContentType, "application/pdf") {
			declared++
		} else {
			mislabeled++
		}
		truth := pi.Title + "\n" + strings.Join(pi.MainText, "\n")
		if rc := wordRecall(r.Text, truth); rc < 0.99 {
			t.Errorf("%s: %.3f of the PDF's words in the record's text", u, rc)
		}
		if rc := wordRecall(truth, r.Text); rc < 0.99 {
			t.Errorf("%s: %.3f of the record's words in the PDF", u, rc)
		}
		if r.Title != pi.Title || r.Language != pi.Language || r.PDFPages < 1 {
			t.Errorf("%s: title %q (want %q), language %q (want %q), %d pages", u, r.Title, pi.Title, r.Language, pi.Language, r.PDFPages)
		}
		if !strings.Contains(r.Markdown, "# "+pi.Title+"\n") || strings.Count(r.Markdown, "\n## ") != 2 {
			t.Errorf("%s: Markdown lacks the title heading or the two section headings:\n%.300s", u, r.Markdown)
		}
	}
	t.Logf("%d PDFs to reach: %d declared and %d mislabeled kept with their text, %d opted out", want, declared, mislabeled, optedOut)
	if declared == 0 || mislabeled == 0 {
		t.Fatalf("the web must serve both declared and mislabeled PDFs (%d, %d)", declared, mislabeled)
	}
	// Other binary bodies still get no text.
	for u, r := range byURL {
		if pi, ok := w.Page(u); ok && (pi.ContentType == "image/png" || pi.ContentType == "application/octet-stream") && r.Text != "" {
			t.Errorf("%s (%s) has text", u, pi.ContentType)
		}
	}
}
