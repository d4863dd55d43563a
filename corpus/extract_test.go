package corpus

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	trafilatura "github.com/markusmobius/go-trafilatura"
	"golang.org/x/text/encoding/charmap"
)

func testExtractor(f Filters) *extractor {
	cfg := Config{Filters: f}
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
	if q.LinkDensity <= 0.05 || q.LinkDensity >= 0.6 {
		t.Errorf("link density %.3f out of the expected range", q.LinkDensity)
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
	linkFarm := genPage("Links", genParagraphs(4, 1, 30), pageOpts{navLinks: 400})
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
		{name: "content type", job: func(j *Job) { j.ContentType = "application/pdf" }, body: good, reason: RejectContentType},
		{name: "xhtml ok", job: func(j *Job) { j.ContentType = "application/xhtml+xml" }, body: good, text: true},
		{name: "too short", body: short, filters: Filters{MaxLinkDensity: 1}, reason: RejectTooShort},
		{name: "too short lowered", body: short, filters: Filters{MinTextLength: 5, MaxLinkDensity: 1}, text: true},
		{name: "link density", body: linkFarm, reason: RejectLinkDensity},
		{name: "link density allowed", body: linkFarm, filters: Filters{MaxLinkDensity: 1, MinTextLength: 10}, text: true},
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
		{name: "empty body", body: "", reason: RejectTooShort},
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
