package e2e

// The PDF check of issue 39 (item 2): simweb's binary hosts serve real PDFs of known text
// (declared application/pdf at /files/1.pdf, and behind a text/html label at
// /mislabeled/1.html) and three hostile ones (/files/2-4.pdf: broken, 200,000 pages, a
// decompression bomb); the exported corpus must hold each good one with its text, title,
// language and Markdown headings, and each hostile one with its reason, judged by simweb's
// truth, not by the crawler's counters; the crawl ends normally.

import (
	"regexp"
	"strings"
	"testing"

	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/simweb"
)

// pdfWeb: 12 hosts, half of them binary hosts (a PDF, a mislabeled PDF, a PNG, binary .html,
// and three hostile PDFs).
func pdfWeb(c *simweb.Config) {
	c.Hosts = 12
	c.Seed = 31
	c.MeanPages = 20
	c.BinaryHosts = 6
	c.HostilePDFs = true
	c.CrawlDelayHosts = 0
}

// hostileReason is the record each of simweb's hostile PDFs must get.
var hostileReason = map[string]string{
	"broken": corpus.RejectPDFBroken,
	"pages":  corpus.RejectPDFTooManyPages,
	"bomb":   corpus.RejectTooLarge, // past --pdf-max-memory
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
	// A 128 MiB cap on the engine's memory: the 1 GiB bomb passes it.
	recs := exportAll(t, crawlWeb(t, w, addr, "--pdf-max-memory", "134217728"))
	byURL := map[string]corpus.Record{}
	for _, r := range recs {
		byURL[canon(r.URL)] = r
	}
	want := 0
	declared, mislabeled, optedOut := 0, 0, 0
	hostile := map[string]int{}
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
		if pi.PDFHostile != "" {
			hostile[pi.PDFHostile]++
			want := hostileReason[pi.PDFHostile]
			if len(pi.OptOut) > 0 {
				want = corpus.RejectOptOut // dropped before it is opened
			}
			if r.Rejected != want {
				t.Errorf("%s (hostile %s): rejected %q (%.100s), want %q", u, pi.PDFHostile, r.Rejected, r.RejectDetail, want)
			}
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
	t.Logf("%d PDFs to reach: %d declared and %d mislabeled kept with their text, %d opted out; hostile ones, each with its record: %v",
		want, declared, mislabeled, optedOut, hostile)
	if declared == 0 || mislabeled == 0 || len(hostile) != len(hostileReason) {
		t.Fatalf("the web must serve declared, mislabeled and every hostile PDF (%d, %d, %v)", declared, mislabeled, hostile)
	}
	// Other binary bodies still get no text.
	for u, r := range byURL {
		if pi, ok := w.Page(u); ok && (pi.ContentType == "image/png" || pi.ContentType == "application/octet-stream") && r.Text != "" {
			t.Errorf("%s (%s) has text", u, pi.ContentType)
		}
	}
}
