package corpus

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// mdFiller is a paragraph long enough for go-trafilatura to see an article.
func mdFiller(n int) string {
	return fmt.Sprintf("<p>Paragraph %d tells how the rivers of the north carry melt water from the high plateau "+
		"down to the coast, where the deltas have grown by several metres every year since the survey began.</p>\n", n)
}

// mdPage wraps an article body in a page with the boilerplate the main text leaves out:
// header navigation, a sidebar and a footer, all with links.
func mdPage(head, article string) string {
	return `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Rivers of the north</title>` + head + `</head><body>
<header><div class="logo"><img src="/logo.png" alt="Site logo"></div><nav class="menu"><ul>
<li><a href="/">Home</a></li><li><a href="/about/">About the editors</a></li><li><a href="/archive/">Old issues archive</a></li></ul></nav></header>
<main><article>` + mdFiller(1) + article + mdFiller(2) + mdFiller(3) + `</article></main>
<aside class="sidebar"><div class="newsletter">Subscribe to our weekly newsletter today</div></aside>
<footer><p>Copyright Northern Rivers Press, all rights reserved</p><p><a href="/privacy">Privacy policy and cookie settings</a></p></footer>
</body></html>`
}

// TestMarkdownStructure converts pages whose main content holds each structure the Markdown
// keeps, and checks the Markdown for it (want: regular expressions that must match) and for
// the page's boilerplate (never: substrings that must not appear).
func TestMarkdownStructure(t *testing.T) {
	boilerplate := []string{"About the editors", "Old issues archive", "weekly newsletter", "Copyright Northern",
		"Privacy policy", "Site logo"}
	cases := []struct {
		name, url, head, article string
		want, never              []string
	}{
		{
			name:    "headings",
			article: "<h2>Where the water goes</h2>\n" + mdFiller(10) + "<h3>Spring floods</h3>\n" + mdFiller(11) + "<h4>Late thaw</h4>\n" + mdFiller(12),
			want:    []string{`(?m)^## Where the water goes$`, `(?m)^### Spring floods$`, `(?m)^#### Late thaw$`},
		},
		{
			name: "nested lists",
			article: "<ul><li>Northern basins<ul><li>Upper plateau</li><li>Coastal plain</li></ul></li><li>Southern basins</li></ul>\n" +
				"<ol><li>First survey</li><li>Second survey</li></ol>",
			want: []string{`(?m)^- Northern basins$`, `(?m)^\s{2,}- Upper plateau$`, `(?m)^\s{2,}- Coastal plain$`, `(?m)^- Southern basins$`,
				`(?m)^1\. First survey$`, `(?m)^2\. Second survey$`},
		},
		{
			name: "table",
			article: "<table><thead><tr><th>River</th><th>Length</th></tr></thead>" +
				"<tbody><tr><td>Vuoksi</td><td>162 km</td></tr><tr><td>Kemijoki</td><td>550 km</td></tr></tbody></table>",
			want: []string{`(?m)^\|\s*River\s*\|\s*Length\s*\|$`, `(?m)^\|\s*:?-{3,}:?\s*\|\s*:?-{3,}:?\s*\|$`,
				`(?m)^\|\s*Vuoksi\s*\|\s*162 km\s*\|$`, `(?m)^\|\s*Kemijoki\s*\|\s*550 km\s*\|$`},
		},
		{
			name:    "code",
			article: "<pre><code>func flow(q float64) float64 {\n\treturn q * 2\n}</code></pre>\n<p>Call <code>flow(3)</code> to double it, as the model of the delta assumes for every spring.</p>",
			want:    []string{"(?m)^```\\w*\nfunc flow\\(q float64\\) float64 \\{\n\treturn q \\* 2\n\\}\n```$", "`flow\\(3\\)`"},
		},
		{
			name:    "emphasis",
			article: "<p>The delta is <em>young</em> but <strong>growing fast</strong>, and <del>shrinking</del> is wrong, say those who measured every summer.</p>",
			want:    []string{`[*_]young[*_]`, `\*\*growing fast\*\*`},
		},
		{
			name: "links made absolute",
			url:  "http://h.sim.test/reports/2026/rivers.html",
			article: `<p>See <a href="../methods/survey.html">the survey method</a> and <a href="/data/flows.csv">the flow data</a>` +
				` and <a href="https://other.sim.test/x?a=1&amp;b=2">a partner study</a>, or <a href="javascript:void(0)">share this</a>.</p>` +
				// Around inline code go-trafilatura keeps the link's text and the "." after it
				// in text nodes of their own.
				`<p>To find it, enable the <code>Performance/Detect</code> cop. Here is a <a href="https://docs.sim.test/cops">link to the documentation</a>.` +
				` And (<a href="/b">see this</a>) before the next season of surveys starts.</p>`,
			want: []string{`\[the survey method\]\(http://h\.sim\.test/reports/methods/survey\.html\)`,
				`\[link to the documentation\]\(https://docs\.sim\.test/cops\)\.`, `\(\[see this\]\(http://h\.sim\.test/b\)\)`,
				`\[the flow data\]\(http://h\.sim\.test/data/flows\.csv\)`, `\[a partner study\]\(https://other\.sim\.test/x\?a=1&b=2\)`,
				`share this`},
			never: []string{"javascript:"},
		},
		{
			name:    "links against base",
			url:     "http://h.sim.test/a/page.html",
			head:    `<base href="http://mirror.sim.test/root/">`,
			article: `<p>Read <a href="notes/one.html">the field notes</a> before the <em><a href="two.html">second chapter</a></em> of this report.</p>`,
			want:    []string{`\[the field notes\]\(http://mirror\.sim\.test/root/notes/one\.html\)`, `\[[*_]second chapter[*_]\]\(http://mirror\.sim\.test/root/two\.html\)`},
		},
		{
			name: "image alt",
			url:  "http://h.sim.test/a/page.html",
			article: `<p>The chart below shows the flows of the last ten years, measured at the mouth of the river.</p>` +
				`<p><img src="img/chart.png" alt="Chart of yearly flows"></p>` +
				`<p>Flows rose in every year but two, which the survey puts down to the dry summers of those years.</p>`,
			// Between two blocks: a paragraph of its own.
			want: []string{`(?m)^!\[Chart of yearly flows\]\(http://h\.sim\.test/a/img/chart\.png\)$`},
		},
		{
			name: "image alt inline, images without alt or in dropped parts left out",
			url:  "http://h.sim.test/a/page.html",
			article: `<p>The gauge <img src="/icons/gauge.svg" alt="gauge icon"> at the mouth reads the level every hour of the year, in rain and snow.</p>` +
				`<p>Nothing marks <img src="/spacer.gif" alt=""> the old ford any more, since the bridge was built a little further up the river.</p>` +
				`<figure><img src="/img/ford.jpg" alt="The old ford"><figcaption>The ford in 1950</figcaption></figure>`,
			want:  []string{`gauge !\[gauge icon\]\(http://h\.sim\.test/icons/gauge\.svg\) at the mouth`},
			never: []string{"spacer.gif", "The old ford", "ford.jpg"},
		},
	}
	ex := testExtractor(Filters{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := c.url
			if u == "" {
				u = "http://h.sim.test/a/page.html"
			}
			j := htmlJob(u)
			a := ex.analyze(&j, []byte(mdPage(c.head, c.article)))
			if a.rec.Rejected != "" {
				t.Fatalf("rejected %q (%s)", a.rec.Rejected, a.rec.RejectDetail)
			}
			md := a.rec.Markdown
			if md == "" {
				t.Fatal("no Markdown")
			}
			for _, w := range c.want {
				if !regexp.MustCompile(w).MatchString(md) {
					t.Errorf("Markdown lacks %s:\n%s", w, md)
				}
			}
			for _, nv := range append(c.never, boilerplate...) {
				if strings.Contains(md, nv) {
					t.Errorf("Markdown has %q:\n%s", nv, md)
				}
			}
			// The Markdown is the text's content: every word of the text is in it.
			for _, w := range strings.Fields(NormalizeText(a.rec.Text)) {
				if !strings.Contains(strings.ToLower(md), w) {
					t.Errorf("text word %q not in the Markdown:\n%s", w, md)
					break
				}
			}
		})
	}
}

func TestMarkdownOff(t *testing.T) {
	cfg := Config{NoMarkdown: true}
	cfg.setDefaults()
	j := htmlJob("http://h.sim.test/a/page.html")
	a := newExtractor(&cfg).analyze(&j, []byte(mdPage("", "<h2>Where the water goes</h2>")))
	if a.rec.Text == "" || a.rec.Markdown != "" {
		t.Fatalf("NoMarkdown: text %d bytes, Markdown %q", len(a.rec.Text), a.rec.Markdown)
	}
}

func TestMarkdownRejectedHasNone(t *testing.T) {
	j := htmlJob("http://h.sim.test/a/page.html")
	a := testExtractor(Filters{MinTextLength: 100_000}).analyze(&j, []byte(mdPage("", "")))
	if a.rec.Rejected != RejectTooShort || a.rec.Markdown != "" {
		t.Fatalf("rejected %q, Markdown %q", a.rec.Rejected, a.rec.Markdown)
	}
}

func TestAbsoluteRef(t *testing.T) {
	base := pageBase("http://h.sim.test/a/b.html", "")
	for ref, want := range map[string]string{
		"c.html":                 "http://h.sim.test/a/c.html",
		"../x/y":                 "http://h.sim.test/x/y",
		"  /root  ":              "http://h.sim.test/root",
		"#sec":                   "http://h.sim.test/a/b.html#sec",
		"//cdn.sim.test/i.png":   "http://cdn.sim.test/i.png",
		"mailto:ed@example.test": "mailto:ed@example.test",
		"javascript:alert(1)":    "",
		"data:image/gif;base64,": "",
		"":                       "",
		"http://[::1":            "",
	} {
		if got := absoluteRef(base, ref); got != want {
			t.Errorf("absoluteRef(%q) = %q, want %q", ref, got, want)
		}
	}
	if b := pageBase("http://h.sim.test/a/b.html", "/other/"); b.String() != "http://h.sim.test/other/" {
		t.Errorf("relative <base>: %v", b)
	}
	if b := pageBase("http://h.sim.test/a/b.html", "javascript:x"); b.String() != "http://h.sim.test/a/b.html" {
		t.Errorf("bad <base> must fall back to the page URL: %v", b)
	}
}
