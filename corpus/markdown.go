package corpus

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// newMarkdownConverter returns the HTML to Markdown converter of the stage (CommonMark plus
// GFM tables and strikethrough). It is safe for concurrent use: each conversion has its own
// state.
func newMarkdownConverter() *converter.Converter {
	return converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(),
		// A cell with lines of its own (<p>s, <br>) keeps them as <br />: without this the
		// converter gives up the whole table. GFM tables need a header row: a table
		// without one gets its first row promoted.
		table.NewTablePlugin(table.WithNewlineBehavior(table.NewlineBehaviorPreserve), table.WithHeaderPromotion(true)),
		strikethrough.NewStrikethroughPlugin(),
	))
}

// markdownOf renders content, go-trafilatura's main-content tree of the page (ContentNode;
// it is changed), as Markdown, with the page's links and images put back (restoreLinks).
// pageURL and the page's <base href> (w.base) resolve them to absolute URLs.
func markdownOf(conv *converter.Converter, content *html.Node, w *pageWalk, pageURL string) (md string, err error) {
	if content == nil {
		return "", nil
	}
	// A page that trips the converter loses its Markdown, not the node.
	defer func() {
		if r := recover(); r != nil {
			md, err = "", fmt.Errorf("corpus: markdown: %v", r)
		}
	}()
	base := pageBase(pageURL, w.base)
	prepareTree(content, false)
	restoreLinks(content, w, base)
	var opts []converter.ConvertOptionFunc
	if base != nil {
		opts = append(opts, converter.WithDomain(base.String()))
	}
	out, err := conv.ConvertNode(content, opts...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// prepareTree mends what go-trafilatura's main-content tree has that Markdown cannot show:
//   - a <pre> that holds code, and <pre><code> of highlighted code, become a <code> element
//     among blocks (<code><code>...</code></code>), which would read as inline code: it is
//     made <pre><code> again, and dropped when it holds only white space; a <code> around
//     whole blocks (tables of a <pre>) is undone;
//   - a heading inside a table cell (GFM cells hold no blocks, and the converter would give up
//     the whole table) becomes <strong>, and each cell gets a trailing space so that cells of
//     a table that still cannot be a table do not run together;
//   - list items outside any list (<blockquote><li>...) get a <ul> each run of them.
func prepareTree(n *html.Node, inCell bool) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		switch a := atomOf(c); {
		case a == atom.Code && hasBlock(c):
			// go-trafilatura's <code> around whole blocks (a <pre> holding tables): the
			// blocks, not one code block.
			first := c.FirstChild
			for k := c.FirstChild; k != nil; k = c.FirstChild {
				c.RemoveChild(k)
				n.InsertBefore(k, c)
			}
			n.RemoveChild(c)
			if first == nil {
				return
			}
			c = first.PrevSibling
			if c == nil {
				prepareTree(n, inCell) // the moved children are n's first: start over
				return
			}
			continue
		case a == atom.Code && !inCell && codeBlock(n, c):
			if strings.TrimSpace(textOf(c)) == "" {
				prev := c.PrevSibling
				n.RemoveChild(c)
				if c = prev; c == nil {
					prepareTree(n, inCell)
					return
				}
				continue
			}
			c.Data, c.DataAtom = "pre", atom.Pre
			if k := c.FirstChild; k == nil || k.NextSibling != nil || k.Type != html.ElementNode || atomOf(k) != atom.Code {
				code := &html.Node{Type: html.ElementNode, Data: "code", DataAtom: atom.Code}
				moveChildren(c, code)
				c.AppendChild(code)
			}
			continue
		case inCell && paragraphLike(a) && a != atom.P && a != atom.Pre:
			c.Data, c.DataAtom = "strong", atom.Strong
		case a == atom.Td || a == atom.Th:
			prepareTree(c, true)
			c.AppendChild(&html.Node{Type: html.TextNode, Data: " "})
			continue
		case a == atom.Li && atomOf(n) != atom.Ul && atomOf(n) != atom.Ol:
			ul := &html.Node{Type: html.ElementNode, Data: "ul", DataAtom: atom.Ul}
			n.InsertBefore(ul, c)
			for c.Type == html.ElementNode && atomOf(c) == atom.Li || c.Type == html.TextNode && strings.TrimSpace(c.Data) == "" {
				next := c.NextSibling
				n.RemoveChild(c)
				ul.AppendChild(c)
				if next == nil {
					break
				}
				c = next
			}
			prepareTree(ul, inCell)
			c = ul
			continue
		}
		prepareTree(c, inCell)
	}
}

// codeBlock says whether <code> element c in parent n is a block: it sits among blocks (in
// the tree's root, a <div>, <blockquote>, <section>, <article>), or holds lines of its own
// outside a paragraph.
func codeBlock(n, c *html.Node) bool {
	if n.Type != html.ElementNode {
		return false
	}
	switch atomOf(n) {
	case atom.Body, atom.Div, atom.Blockquote, atom.Section, atom.Article, atom.Main:
		return true
	}
	return !inline(atomOf(n)) && !paragraphLike(atomOf(n)) && strings.Contains(textOf(c), "\n")
}

// textOf is the text of n's subtree.
func textOf(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(textOf(c))
	}
	return b.String()
}

// hasBlock says whether n holds a table, list, paragraph, heading or division.
func hasBlock(n *html.Node) bool {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		switch atomOf(c) {
		case atom.Table, atom.Ul, atom.Ol, atom.Dl, atom.P, atom.Div, atom.Blockquote,
			atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
			return true
		}
		if hasBlock(c) {
			return true
		}
	}
	return false
}

// paragraphLike elements hold inline content only.
func paragraphLike(a atom.Atom) bool {
	switch a {
	case atom.P, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Pre:
		return true
	}
	return false
}

func moveChildren(from, to *html.Node) {
	for k := from.FirstChild; k != nil; k = from.FirstChild {
		from.RemoveChild(k)
		to.AppendChild(k)
	}
}

// pageBase is the URL the page's relative references resolve against: its <base href> when
// that is an absolute http(s) URL or resolves to one against the page URL, else the page URL;
// nil when neither parses.
func pageBase(pageURL, baseHref string) *url.URL {
	pu, err := url.Parse(pageURL)
	if err != nil {
		return nil
	}
	if baseHref = strings.TrimSpace(baseHref); baseHref != "" {
		if b, err := pu.Parse(baseHref); err == nil && (b.Scheme == "http" || b.Scheme == "https") {
			return b
		}
	}
	return pu
}

// absoluteRef resolves ref against base; "" for references a reader cannot follow
// (javascript:, data:, unparseable) or when there is no base for a relative one.
func absoluteRef(base *url.URL, ref string) string {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return ""
	}
	var u *url.URL
	var err error
	if base != nil {
		u, err = base.Parse(ref)
	} else {
		u, err = url.Parse(ref)
	}
	if err != nil {
		return ""
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "mailto", "ftp":
		return u.String()
	}
	return ""
}

// mdWord is one word of a text node of the main-content tree, and the page word it is aligned
// with (-1: none).
type mdWord struct {
	node       *html.Node
	start, end int
	page       int
	// joinNext: the word runs on into the next one (a text node's edge cut it); outside: it
	// is punctuation of a page word only partly inside a link, outside that link.
	joinNext, outside bool
}

// restoreLinks puts the page's links and images back into go-trafilatura's main-content tree,
// which keeps neither (doc.go, "Markdown"). Its words are aligned with the page's words, in
// document order, as for link density (aligner): a run of words that sit in the same <a href>
// on the page becomes a link, and an image with alt text that sits between two words kept
// next to each other (no page word between them was dropped) is put before the second. A
// word the alignment cannot place carries no link.
func restoreLinks(content *html.Node, w *pageWalk, base *url.URL) {
	al := w.words.aligner()
	if al == nil {
		return
	}
	var words []mdWord
	var collect func(n *html.Node)
	collect = func(n *html.Node) {
		if n.Type == html.TextNode {
			from := len(words)
			words = appendWords(words, n)
			// A word cut by an element's edge ("documentation" + "." where the link
			// ended) is one word of the page: its pieces are placed together.
			if from > 0 && from < len(words) && words[from].start == 0 {
				if p := &words[from-1]; p.end == len(p.node.Data) && blockOf(p.node) == blockOf(n) {
					p.joinNext = true
				}
			}
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			collect(c)
		}
	}
	collect(content)
	placeWords(al, words)

	// The resolved target of each word (hrefs resolved once each).
	resolved := make(map[int32]string)
	target := func(wd *mdWord) string {
		if wd.page < 0 || wd.outside {
			return ""
		}
		id := w.words.hrefs[wd.page]
		if id <= 0 {
			return ""
		}
		t, ok := resolved[id]
		if !ok {
			t = absoluteRef(base, w.hrefs[id-1])
			resolved[id] = t
		}
		return t
	}
	linked := func(wd *mdWord) int { return int(w.words.links[wd.page]) }
	// Images before word i: images[img] placed where its neighbours were kept together.
	before := make(map[int][]pageImage)
	img, prev := 0, -1
	for i := range words {
		pg := words[i].page
		if pg < 0 {
			continue
		}
		for img < len(w.images) && int(w.images[img].at) < pg {
			img++
		}
		for ; img < len(w.images) && int(w.images[img].at) == pg; img++ {
			if prev >= 0 && pg == prev+1 {
				if src := absoluteRef(base, w.images[img].src); src != "" {
					im := w.images[img]
					im.src = src
					before[i] = append(before[i], im)
				}
			}
		}
		prev = pg
	}

	for i := 0; i < len(words); {
		j := i
		for j < len(words) && words[j].node == words[i].node {
			j++
		}
		rewriteText(words[i:j], i, before, target, linked)
		i = j
	}
	mergeLinks(content)
}

// trimPunct returns how many bytes of punctuation to cut from word's start (leading) or end
// so that no more than linked characters remain, the punctuation next to a link being
// the likelier part outside it.
func trimPunct(word string, linked int, leading bool) int {
	n := utf8.RuneCountInString(word)
	cut := 0
	for n > linked && cut < len(word) {
		var r rune
		var size int
		if leading {
			r, size = utf8.DecodeRuneInString(word[cut:])
		} else {
			r, size = utf8.DecodeLastRuneInString(word[:len(word)-cut])
		}
		if !unicode.IsPunct(r) {
			break
		}
		cut += size
		n--
	}
	return cut
}

// placeWords aligns the words (pieces joined by joinNext as one) with the page's words. A
// piece of a word only partly inside a link that is punctuation alone is marked outside it.
func placeWords(al *aligner, words []mdWord) {
	chainEnd := func(i int) int {
		for i < len(words) && words[i].joinNext {
			i++
		}
		return i + 1
	}
	text := func(i, j int) string {
		if j == i+1 {
			return words[i].text()
		}
		var b strings.Builder
		for k := i; k < j; k++ {
			b.WriteString(words[k].text())
		}
		return b.String()
	}
	for i := 0; i < len(words); {
		j := chainEnd(i)
		w, next := text(i, j), ""
		if j < len(words) {
			next = text(j, chainEnd(j))
		}
		pg := al.place(w, next, j == len(words))
		partly := pg >= 0 && int(al.p.links[pg]) < utf8.RuneCountInString(w)
		for k := i; k < j; k++ {
			words[k].page = pg
			words[k].outside = partly && j > i+1 && strings.TrimFunc(words[k].text(), unicode.IsPunct) == ""
		}
		i = j
	}
}

// blockOf is n's nearest ancestor that is not inline.
func blockOf(n *html.Node) *html.Node {
	p := n.Parent
	for p != nil && p.Type == html.ElementNode && inline(atomOf(p)) {
		p = p.Parent
	}
	return p
}

func (wd *mdWord) text() string { return wd.node.Data[wd.start:wd.end] }

// appendWords appends the words of text node n (split at Unicode white space).
func appendWords(words []mdWord, n *html.Node) []mdWord {
	s, start := n.Data, -1
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			if start >= 0 {
				words = append(words, mdWord{node: n, start: start, end: i, page: -1})
				start = -1
			}
		} else if start < 0 {
			start = i
		}
		i += size
	}
	if start >= 0 {
		words = append(words, mdWord{node: n, start: start, end: len(s), page: -1})
	}
	return words
}

// rewriteText replaces the text node of words (all of one node; first is the index of
// words[0]) by text, <a href> around each run of words with one target, and the images due
// before its words. A node with neither is left alone.
func rewriteText(words []mdWord, first int, before map[int][]pageImage, target func(*mdWord) string, linkedChars func(*mdWord) int) {
	n := words[0].node
	changed := false
	for k := range words {
		if target(&words[k]) != "" || len(before[first+k]) > 0 {
			changed = true
			break
		}
	}
	if !changed || n.Parent == nil {
		return
	}
	parent, s, pos := n.Parent, n.Data, 0
	emitText := func(to int) {
		if to > pos {
			parent.InsertBefore(&html.Node{Type: html.TextNode, Data: s[pos:to]}, n)
			pos = to
		}
	}
	for k := 0; k < len(words); {
		if ims := before[first+k]; len(ims) > 0 {
			if blk := leadingBlock(n, k == 0); blk != nil {
				// The images came before this block on the page: a paragraph of their own.
				p := &html.Node{Type: html.ElementNode, Data: "p", DataAtom: atom.P}
				for _, im := range ims {
					p.AppendChild(imgNode(im))
				}
				blk.Parent.InsertBefore(p, blk)
			} else {
				emitText(words[k].start)
				for _, im := range ims {
					parent.InsertBefore(imgNode(im), n)
					parent.InsertBefore(&html.Node{Type: html.TextNode, Data: " "}, n)
				}
			}
		}
		t := target(&words[k])
		if t == "" {
			k++
			continue
		}
		m := k + 1
		for m < len(words) && len(before[first+m]) == 0 && target(&words[m]) == t {
			m++
		}
		from, to := words[k].start, words[m-1].end
		// A word only partly inside the link ("study," of <a>study</a>,) keeps its
		// punctuation outside.
		from += trimPunct(s[from:words[k].end], linkedChars(&words[k]), true)
		to -= trimPunct(s[words[m-1].start:to], linkedChars(&words[m-1]), false)
		emitText(from)
		a := &html.Node{Type: html.ElementNode, Data: "a", DataAtom: atom.A, Attr: []html.Attribute{{Key: "href", Val: t}}}
		a.AppendChild(&html.Node{Type: html.TextNode, Data: s[from:to]})
		parent.InsertBefore(a, n)
		pos = to
		k = m
	}
	emitText(len(s))
	parent.RemoveChild(n)
}

func imgNode(im pageImage) *html.Node {
	return &html.Node{Type: html.ElementNode, Data: "img", DataAtom: atom.Img,
		Attr: []html.Attribute{{Key: "src", Val: im.src}, {Key: "alt", Val: im.alt}}}
}

// leadingBlock returns the paragraph-like block (p, heading, blockquote, pre) that text node
// n starts, when its first word (firstWord) is that block's first text; else nil.
func leadingBlock(n *html.Node, firstWord bool) *html.Node {
	if !firstWord {
		return nil
	}
	blk := n.Parent
	for blk != nil && blk.Type == html.ElementNode && inline(atomOf(blk)) {
		blk = blk.Parent
	}
	if blk == nil || blk.Parent == nil || blk.Type != html.ElementNode {
		return nil
	}
	switch atomOf(blk) {
	case atom.P, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Blockquote, atom.Pre:
	default:
		return nil
	}
	var firstText func(e *html.Node) *html.Node
	firstText = func(e *html.Node) *html.Node {
		for c := e.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode && strings.TrimSpace(c.Data) != "" {
				return c
			}
			if t := firstText(c); t != nil {
				return t
			}
		}
		return nil
	}
	if firstText(blk) != n {
		return nil
	}
	return blk
}

// mergeLinks makes one link of what the page had as one: an inline element holding nothing but
// one link (<em><a>x</a></em>) gets the link outside (<a><em>x</em></a>), and neighbouring
// links to the same target, with at most white space between them, become one.
func mergeLinks(n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && atomOf(c) != atom.A {
			mergeLinks(c)
			if inline(atomOf(c)) {
				if a := onlyLink(c); a != nil {
					// c > a > kids  becomes  a > c > kids, a in c's place.
					c.RemoveChild(a)
					for k := a.FirstChild; k != nil; k = a.FirstChild {
						a.RemoveChild(k)
						c.AppendChild(k)
					}
					n.InsertBefore(a, c)
					n.RemoveChild(c)
					a.AppendChild(c)
					c = a
				}
			}
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode || atomOf(c) != atom.A {
			continue
		}
		for {
			nx, gap := c.NextSibling, (*html.Node)(nil)
			if nx != nil && nx.Type == html.TextNode && strings.TrimSpace(nx.Data) == "" {
				gap, nx = nx, nx.NextSibling
			}
			if nx == nil || nx.Type != html.ElementNode || atomOf(nx) != atom.A || attr(nx, "href") != attr(c, "href") {
				break
			}
			if gap != nil {
				n.RemoveChild(gap)
				c.AppendChild(gap)
			}
			n.RemoveChild(nx)
			for k := nx.FirstChild; k != nil; k = nx.FirstChild {
				nx.RemoveChild(k)
				c.AppendChild(k)
			}
		}
	}
}

// onlyLink returns e's one <a> child when e holds nothing else but white space.
func onlyLink(e *html.Node) *html.Node {
	var a *html.Node
	for c := e.FirstChild; c != nil; c = c.NextSibling {
		switch {
		case c.Type == html.TextNode && strings.TrimSpace(c.Data) == "":
		case c.Type == html.ElementNode && atomOf(c) == atom.A && a == nil:
			a = c
		default:
			return nil
		}
	}
	return a
}

// atomOf is the atom of n's name: go-trafilatura creates elements with their name only, and
// renames some (<pre> to <code>) without their atom.
func atomOf(n *html.Node) atom.Atom {
	if n.DataAtom != 0 && n.DataAtom.String() == n.Data {
		return n.DataAtom
	}
	return atom.Lookup([]byte(n.Data))
}
