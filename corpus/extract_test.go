package corpus

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	trafilatura "github.com/markusmobius/go-trafilatura"
	"golang.org/x/net/html"
	"golang.org/x/text/encoding/charmap"
)

func testExtractor(f Filters) *extractor {
	cfg := Config{Filters: f, PDF: testPDF()}
	cfg.setDefaults()
	return newExtractor(&cfg)
}

func htmlJob(url string) Job {
	return Job{URL: url, Status: 200, ContentType: "text/html; charset=utf-8", FetchTime: time.Unix(1_700_000_000, 0).UTC()}
}

func TestAnalyzeRealisticPage(t *testing.T) {
	paras := genParagraphs(7, 12, 60)
	page := genPage("Rivers of the north", paras, pageOpts{})
	j := htmlJob("http://h1.sim.test/a")
	a := testExtractor(Filters{}).analyze(&j, []byte(page))
	rec := a.rec
	if rec.Rejected != "" {
		t.Fatalf("rejected %q (%s)", rec.Rejected, rec.RejectDetail)
	}
	keptParas := 0
	for _, p := range paras {
		if strings.Contains(rec.Text, p) {
			keptParas++
		}
	}
	if keptParas != len(paras) {
		t.Errorf("text holds %d of %d article paragraphs", keptParas, len(paras))
	}
	for _, m := range []string{"Navmarker", "Footermarker", "Sidebarmarker", "Cookiemarker"} {
		if strings.Contains(rec.Text, m) {
			t.Errorf("text contains boilerplate %q", m)
		}
	}
	if rec.Title != "Rivers of the north" && !strings.HasPrefix(rec.Title, "Rivers of the north") {
		t.Errorf("title = %q", rec.Title)
	}
	if rec.Language != "en" {
		t.Errorf("language = %q, want en", rec.Language)
	}
	q := rec.Quality
	if q.TextLength < 3000 || q.Words < 600 {
		t.Errorf("text length %d, words %d: too small", q.TextLength, q.Words)
	}
	if q.LinkDensity != 0 {
		t.Errorf("link density %.3f of an article without links, want 0 (navigation, sidebar and footer links are not main text)", q.LinkDensity)
	}
	if q.BoilerplateShare <= 0.05 || q.BoilerplateShare >= 0.7 {
		t.Errorf("boilerplate share %.3f out of the expected range", q.BoilerplateShare)
	}
	if rec.ContentHash != ContentHash(rec.Text) || rec.SimHash == "" || a.simhash != SimHash(rec.Text) {
		t.Errorf("hashes not those of the text: %s %s", rec.ContentHash, rec.SimHash)
	}
	t.Logf("kept %d/%d chars of visible text (boilerplate share %.2f, link density %.2f)",
		countNonSpace(rec.Text), q.VisibleChars, q.BoilerplateShare, q.LinkDensity)
}

func TestAnalyzeFilters(t *testing.T) {
	article := genParagraphs(3, 8, 50)
	good := genPage("Good page", article, pageOpts{})
	short := genPage("Short", []string{"Just a few words here."}, pageOpts{navLinks: 3})
	navHeavy := genPage("Links", genParagraphs(4, 1, 30), pageOpts{navLinks: 400})
	linkList := genPage("Links", linkParagraphs(5, 6, 40, 1), pageOpts{})
	german := genPage("Deutsch", []string{strings.Repeat("Der Fluss fließt durch die Stadt und die Kinder spielen am Ufer, während die Eltern im Garten sitzen und über das Wetter sprechen. ", 6)}, pageOpts{lang: "de"})

	cases := []struct {
		name    string
		job     func(*Job)
		body    string
		filters Filters
		reason  string
		optOut  []string
		text    bool
	}{
		{name: "kept", body: good, text: true},
		{name: "status", job: func(j *Job) { j.Status = 404 }, body: good, reason: RejectStatus},
		{name: "content type", job: func(j *Job) { j.ContentType = "image/png" }, body: good, reason: RejectContentType},
		{name: "declared pdf, html body", job: func(j *Job) { j.ContentType = "application/pdf" }, body: good, reason: RejectPDFBroken},
		{name: "xhtml ok", job: func(j *Job) { j.ContentType = "application/xhtml+xml" }, body: good, text: true},
		{name: "too short", body: short, filters: Filters{MaxLinkDensity: 1}, reason: RejectTooShort},
		{name: "too short lowered", body: short, filters: Filters{MinTextLength: 5, MaxLinkDensity: 1}, text: true},
		{name: "nav-heavy short article", body: navHeavy, reason: RejectTooShort},
		{name: "nav-heavy short article allowed", body: navHeavy, filters: Filters{MinTextLength: 10}, text: true},
		{name: "link density", body: linkList, reason: RejectLinkDensity},
		{name: "link density allowed", body: linkList, filters: Filters{MaxLinkDensity: 1}, text: true},
		{name: "language kept", body: good, filters: Filters{Languages: []string{"de", "en"}}, text: true},
		{name: "language rejected", body: german, filters: Filters{Languages: []string{"en"}}, reason: RejectLanguage},
		{name: "german kept", body: german, filters: Filters{Languages: []string{"de"}}, text: true},
		{name: "too large", body: good + strings.Repeat(" ", DefaultMaxBodyBytes), reason: RejectTooLarge},
		{name: "noindex header", job: func(j *Job) { j.XRobotsTag = []string{"noindex, nofollow"} }, body: good, reason: RejectOptOut, optOut: []string{OptOutNoIndex}},
		{name: "other bot header", job: func(j *Job) { j.XRobotsTag = []string{"googlebot: noindex"} }, body: good, text: true},
		{name: "our bot header", job: func(j *Job) { j.XRobotsTag = []string{"googlebot: noai, crawlnode: noindex"} }, body: good, reason: RejectOptOut, optOut: []string{OptOutNoIndex}},
		{name: "noai meta", body: genPage("x", article, pageOpts{head: []string{`<meta name="robots" content="noai, noimageai">`}}), reason: RejectOptOut, optOut: []string{OptOutNoAI}},
		{name: "none meta for us", body: genPage("x", article, pageOpts{head: []string{`<meta name="CrawlNode" content="none">`}}), reason: RejectOptOut, optOut: []string{OptOutNoIndex}},
		{name: "meta for other bot", body: genPage("x", article, pageOpts{head: []string{`<meta name="googlebot" content="noindex">`}}), text: true},
		{name: "tdm header", job: func(j *Job) { j.TDMReservation = "1" }, body: good, reason: RejectOptOut, optOut: []string{OptOutTDMReservation}},
		{name: "tdm header 0", job: func(j *Job) { j.TDMReservation = "0" }, body: good, text: true},
		{name: "tdm meta", body: genPage("x", article, pageOpts{head: []string{`<meta name="tdm-reservation" content="1"><meta name="tdm-policy" content="https://h1.sim.test/policy.json">`}}), reason: RejectOptOut, optOut: []string{OptOutTDMReservation}},
		{name: "tdm host", job: func(j *Job) { j.HostTDMReserved = true }, body: good, reason: RejectOptOut, optOut: []string{OptOutTDMReservation}},
		{name: "opt-out included", job: func(j *Job) { j.HostTDMReserved = true; j.XRobotsTag = []string{"noai"} }, body: good, filters: Filters{IncludeOptOut: true}, optOut: []string{OptOutNoAI, OptOutTDMReservation}, text: true},
		{name: "noindex meta included", body: genPage("x", article, pageOpts{head: []string{`<meta name="robots" content="noindex">`}}), filters: Filters{IncludeOptOut: true}, optOut: []string{OptOutNoIndex}, text: true},
		{name: "empty body", body: "", reason: RejectNoText},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := htmlJob("http://h1.sim.test/p")
			if c.job != nil {
				c.job(&j)
			}
			a := testExtractor(c.filters).analyze(&j, []byte(c.body))
			r := a.rec
			if r.Rejected != c.reason {
				t.Fatalf("rejected = %q (%s), want %q", r.Rejected, r.RejectDetail, c.reason)
			}
			if !slices.Equal(r.OptOut, c.optOut) {
				t.Errorf("opt-out = %v, want %v", r.OptOut, c.optOut)
			}
			if (r.Text != "") != c.text {
				t.Errorf("text present = %v, want %v", r.Text != "", c.text)
			}
			if c.text && !a.hasText {
				t.Errorf("kept without hashes")
			}
			if c.name == "tdm meta" && r.TDMPolicy != "https://h1.sim.test/policy.json" {
				t.Errorf("tdm policy = %q", r.TDMPolicy)
			}
		})
	}
}

func TestAnalyzeCharset(t *testing.T) {
	paras := []string{strings.Repeat("Le café de la rivière est très élégant et la façade est belle, près du marché où les enfants jouent. ", 12)}
	page := genPage("Café", paras, pageOpts{lang: "fr"})
	latin1, err := charmap.ISO8859_1.NewEncoder().String(page)
	if err != nil {
		t.Fatal(err)
	}
	j := htmlJob("http://h1.sim.test/fr")
	j.ContentType = "text/html; charset=iso-8859-1"
	r := testExtractor(Filters{}).analyze(&j, []byte(latin1)).rec
	if r.Rejected != "" {
		t.Fatalf("rejected %q", r.Rejected)
	}
	if !strings.Contains(r.Text, "café de la rivière est très élégant") {
		t.Errorf("latin-1 text not decoded: %.80q", r.Text)
	}
	if r.Language != "fr" {
		t.Errorf("language = %q", r.Language)
	}
}

func TestParseRobotsDirectives(t *testing.T) {
	cases := []struct {
		in          string
		noIdx, noAI bool
	}{
		{"noindex", true, false},
		{"NoIndex, NoFollow", true, false},
		{"none", true, false},
		{"noai, noimageai", false, true},
		{"nofollow", false, false},
		{"googlebot: noindex", false, false},
		{"crawlnode: noindex", true, false},
		{"googlebot: noindex, crawlnode: noai", false, true},
		{"unavailable_after: 25 Jun 2010 15:00:00 PST", false, false},
		{"max-snippet: 20, noindex", true, false},
		{"", false, false},
	}
	for _, c := range cases {
		var d robotsDirectives
		parseRobotsDirectives(c.in, "crawlnode", &d)
		if d.noIndex != c.noIdx || d.noAI != c.noAI {
			t.Errorf("%q: noindex=%v noai=%v, want %v %v", c.in, d.noIndex, d.noAI, c.noIdx, c.noAI)
		}
	}
}

// TestExtractMatchesTrafilatura holds the stage's cheaper path (our parse, no date extraction,
// no charset sniffing) to go-trafilatura's own entry point: same text and title.
func TestExtractMatchesTrafilatura(t *testing.T) {
	pages := []string{
		benchPage(1),
		genPage("Rivers", genParagraphs(11, 6, 70), pageOpts{}),
		genPage("Café", []string{strings.Repeat("Le café de la rivière est très élégant. ", 20)}, pageOpts{lang: "fr"}),
	}
	for i, p := range pages {
		j := htmlJob("http://h1.sim.test/x")
		got := testExtractor(Filters{}).analyze(&j, []byte(p)).rec
		u, _ := url.Parse(j.URL)
		want, err := trafilatura.Extract(strings.NewReader(p), trafilatura.Options{ExcludeComments: true, OriginalURL: u})
		if err != nil {
			t.Fatal(err)
		}
		if got.Text != strings.TrimSpace(want.ContentText) || got.Title != want.Metadata.Title || got.Language != want.Metadata.Language {
			t.Errorf("page %d: stage text/title/lang differ from trafilatura.Extract:\n%.200q %q %q\n%.200q %q %q", i,
				got.Text, got.Title, got.Language, want.ContentText, want.Metadata.Title, want.Metadata.Language)
		}
	}
}

// linkParagraphs returns n paragraphs of about words words each, in which every linkEvery-th
// sentence-like run of words is a link (linkEvery 1: the paragraph is all links, with plain
// separators between them).
func linkParagraphs(seed uint64, n, words, linkEvery int) []string {
	var out []string
	for i, p := range genParagraphs(seed, n, words) {
		f := strings.Fields(p)
		var b strings.Builder
		for k := 0; k*5 < len(f); k++ {
			run := strings.Join(f[k*5:min(len(f), k*5+5)], " ")
			if k > 0 {
				b.WriteString(" | ")
			}
			if k%linkEvery == 0 {
				fmt.Fprintf(&b, `<a href="/t/%d/%d">%s</a>`, i, k, run)
			} else {
				b.WriteString(run)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// TestLinkDensityOfMainText: link density is measured on the main text, not the page. A
// short article on a page that is mostly navigation links is kept, a main text made of links is
// rejected, and the measured density follows the true share of the article's characters
// inside links.
func TestLinkDensityOfMainText(t *testing.T) {
	navHeavy := genPage("Rivers", genParagraphs(21, 4, 60), pageOpts{navLinks: 400})
	j := htmlJob("http://h1.sim.test/nav")
	doc, err := html.Parse(strings.NewReader(navHeavy))
	if err != nil {
		t.Fatal(err)
	}
	if w := walkPage(doc, "crawlnode"); float64(w.linkChars)/float64(w.visible) <= DefaultMaxLinkDensity {
		t.Fatalf("test page's own link density %.2f: not a nav-heavy page", float64(w.linkChars)/float64(w.visible))
	}
	r := testExtractor(Filters{}).analyze(&j, []byte(navHeavy)).rec
	if r.Rejected != "" || r.Quality.LinkDensity > 0.02 {
		t.Errorf("nav-heavy article page: rejected %q, link density %.3f; want kept, ~0", r.Rejected, r.Quality.LinkDensity)
	}

	for _, every := range []int{1, 3, 4} {
		paras := linkParagraphs(uint64(30+every), 6, 50, every)
		page := genPage("Links", paras, pageOpts{})
		var linked, all int
		for _, p := range paras {
			pd, err := html.Parse(strings.NewReader(p))
			if err != nil {
				t.Fatal(err)
			}
			w := walkPage(pd, "crawlnode")
			linked += w.linkChars
			all += w.visible
		}
		want := float64(linked) / float64(all)
		a := testExtractor(Filters{MaxLinkDensity: 1}).analyze(&j, []byte(page))
		got := a.rec.Quality.LinkDensity
		if a.rec.Rejected != "" || got < want-0.02 || got > want+0.02 {
			t.Errorf("one run in %d linked: rejected %q, link density %.3f, want %.3f +- 0.02", every, a.rec.Rejected, got, want)
		}
		t.Logf("one run in %d linked: link density %.3f, true share %.3f", every, got, want)
		dflt := testExtractor(Filters{}).analyze(&j, []byte(page)).rec
		if wantReject := every == 1; (dflt.Rejected == RejectLinkDensity) != wantReject {
			t.Errorf("one run in %d linked (density %.2f): default filters rejected %q", every, want, dflt.Rejected)
		}
	}
}

// TestShortcut: only a page without any text go-trafilatura could use skips it; text that is
// not visible but that its baseline can still return (<title>, <noscript>) keeps a page in.
func TestShortcut(t *testing.T) {
	j := htmlJob("http://h1.sim.test/s")
	cases := []struct {
		name     string
		page     string
		shortcut bool
		reason   string
	}{
		{"empty", "", true, RejectNoText},
		{"scripts only", `<html><head><style>p{}</style><script>var app = "shell";</script></head><body><div id="app"></div><script>render()</script></body></html>`, true, RejectNoText},
		{"title only", `<html><head><title>` + strings.Repeat("Title words ", 30) + `</title></head><body><div id="app"></div></body></html>`, false, ""},
		{"noscript only", `<html><body><noscript>` + strings.Repeat("Please enable JavaScript to read this page. ", 6) + `</noscript></body></html>`, false, ""},
		{"json-ld", `<html><head><script type="application/ld+json">{"@type": "Article", "articleBody": "` + strings.Repeat("Words of the article body. ", 12) + `"}</script></head><body></body></html>`, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ex := testExtractor(Filters{MinTextLength: 10})
			a := ex.analyze(&j, []byte(c.page))
			full := ex.analyzeFull(&j, []byte(c.page))
			if a.shortcut != c.shortcut || full.shortcut != c.shortcut {
				t.Errorf("shortcut %v / %v, want %v", a.shortcut, full.shortcut, c.shortcut)
			}
			if c.shortcut && full.rec.Rejected == "" {
				t.Errorf("skipped, but the full path keeps the page: %.80q", full.rec.Text)
			}
			if a.rec.Rejected != full.rec.Rejected {
				t.Errorf("rejected %q, full path %q", a.rec.Rejected, full.rec.Rejected)
			}
			if c.reason != "" && a.rec.Rejected != c.reason {
				t.Errorf("rejected %q, want %q", a.rec.Rejected, c.reason)
			}
			t.Logf("rejected %q, full path text %.60q", full.rec.Rejected, full.rec.Text)
		})
	}
	cfg := Config{Fallback: true}
	cfg.setDefaults()
	if a := newExtractor(&cfg).analyze(&j, []byte("")); a.shortcut {
		t.Error("shortcut taken with the fallback extractors")
	}
}
