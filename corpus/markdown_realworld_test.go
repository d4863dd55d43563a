package corpus

import (
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	trafilatura "github.com/markusmobius/go-trafilatura"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

var (
	// Lines of a block quote start with "> ", a list item's heading with its marker.
	mdHeadingLine = regexp.MustCompile(`(?m)^(?:> ?)*[ \t]*(?:(?:[-*+]|\d{1,9}[.)]) +)?#{1,6} \S`) // in a list item too
	mdItemLine    = regexp.MustCompile(`(?m)^(?:> ?)*[ \t]*(?:[-*+]|\d{1,9}[.)]) \S`)
	mdTableRule   = regexp.MustCompile(`(?m)^(?:> ?)*\|(?:[ \t]*:?-{3,}:?[ \t]*\|)+[ \t]*$`)
	mdLinkTarget  = regexp.MustCompile(`\]\([^)\s]*\)`)
	mdImage       = regexp.MustCompile(`!\[[^\]]*\]\([^)\s]*\)`)
	mdMarks       = strings.NewReplacer(`\`, "", "*", "", "_", "", "`", "", "[", "", "]", "", "#", "", "|", " ", "!", "")
)

// mdPlain is Markdown with its marks and link targets taken out:
// what the set's snippets are looked for in.
// White space is taken out altogether: the text and the Markdown space punctuation
// differently ("Demos :" and "**Demos**:").
func mdPlain(md string) string {
	return strings.Join(strings.Fields(mdMarks.Replace(mdLinkTarget.ReplaceAllString(md, "]"))), "")
}

// mdStructure counts the headings, list items and tables with text in go-trafilatura's
// main-content tree: what the Markdown must show as such.
type mdStructure struct{ headings, items, tables int }

func treeStructure(n *html.Node) mdStructure {
	var s mdStructure
	var walk func(n *html.Node, inTable bool)
	walk = func(n *html.Node, inTable bool) {
		if n.Type == html.ElementNode {
			hasText := strings.TrimSpace(textOf(n)) != ""
			switch atomOf(n) {
			case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
				if hasText && !inTable {
					s.headings++
				}
			case atom.Li:
				if hasText && !inTable { // GFM table cells hold no blocks
					s.items++
				}
			case atom.Table:
				if hasText && !inTable {
					s.tables++
				}
				inTable = true
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inTable)
		}
	}
	walk(n, false)
	return s
}

// TestRealWorldMarkdown holds the Markdown to go-trafilatura's real-world comparison pages
// (every 8th page, as -race is slow; CORPUS_REALWORLD=all for every page): the headings,
// list items and tables of the main-content tree are found as Markdown headings, list items
// and tables; an unwanted snippet of the set that the text leaves out is never in the
// Markdown (images' alt text aside); a wanted snippet the text has is in the Markdown too;
// and the links are absolute.
func TestRealWorldMarkdown(t *testing.T) {
	pages := loadRealPages(t)
	ex := testExtractor(Filters{})
	var tree, md mdStructure
	n, leaks, textWith, mdWith, links, relLinks := 0, 0, 0, 0, 0, 0
	for i := range pages {
		if i%8 != 0 && os.Getenv("CORPUS_REALWORLD") != "all" {
			continue
		}
		p := &pages[i]
		j := realJob(p)
		rec := ex.analyze(&j, p.body).rec
		if rec.Text == "" {
			continue
		}
		if rec.Markdown == "" {
			t.Errorf("%s: kept without Markdown", p.url)
			continue
		}
		n++
		// The tree the stage converted, from a run of its own.
		doc, err := parseHTML(p.body, realJob(p).ContentType)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(p.url)
		res, err := trafilatura.ExtractDocument(doc, trafilatura.Options{ExcludeComments: true, HtmlDateMode: trafilatura.Disabled, OriginalURL: u})
		if err != nil {
			t.Fatalf("%s: the stage kept it, a second run fails: %v", p.url, err)
		}
		ts := treeStructure(res.ContentNode)
		tree.headings += ts.headings
		tree.items += ts.items
		tree.tables += ts.tables
		md.headings += len(mdHeadingLine.FindAllString(rec.Markdown, -1))
		md.items += len(mdItemLine.FindAllString(rec.Markdown, -1))
		md.tables += len(mdTableRule.FindAllString(rec.Markdown, -1))

		plain := mdPlain(rec.Markdown)
		// Images' alt text is kept on purpose (the set marks some captions unwanted); the
		// rest of the Markdown must hold nothing unwanted the text leaves out.
		noAlt := mdPlain(mdImage.ReplaceAllString(rec.Markdown, ""))
		text := mdPlain(rec.Text) // as the Markdown: marks and white space aside
		for _, s := range p.without {
			if s := mdPlain(s); !strings.Contains(text, s) && strings.Contains(noAlt, s) {
				leaks++
				t.Errorf("%s: unwanted snippet %q in the Markdown, not in the text", p.url, s)
			}
		}
		for _, s := range p.with {
			if s := mdPlain(s); strings.Contains(text, s) {
				textWith++
				if strings.Contains(plain, s) {
					mdWith++
				}
			}
		}
		for _, m := range regexp.MustCompile(`\]\(([^)\s]*)\)`).FindAllStringSubmatch(rec.Markdown, -1) {
			links++
			if lu, err := url.Parse(m[1]); err != nil || !lu.IsAbs() {
				relLinks++
			}
		}
	}
	share := func(a, b int) float64 {
		if b == 0 {
			return 1
		}
		return float64(a) / float64(b)
	}
	t.Logf("%d kept pages: headings %d in the tree, %d in the Markdown; list items %d / %d; tables %d / %d; "+
		"wanted snippets the text has, found in the Markdown %d of %d; unwanted ones leaked %d; links %d, not absolute %d",
		n, tree.headings, md.headings, tree.items, md.items, tree.tables, md.tables, mdWith, textWith, leaks, links, relLinks)
	if share(md.headings, tree.headings) < 0.98 || share(md.items, tree.items) < 0.95 || share(md.tables, tree.tables) < 0.95 {
		t.Errorf("structure lost: headings %.3f, list items %.3f, tables %.3f of the tree's",
			share(md.headings, tree.headings), share(md.items, tree.items), share(md.tables, tree.tables))
	}
	if share(mdWith, textWith) < 0.97 {
		t.Errorf("the Markdown has %.3f of the wanted snippets the text has", share(mdWith, textWith))
	}
	if relLinks > 0 {
		t.Errorf("%d links not absolute", relLinks)
	}
}
