package corpus

import (
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pdfText is a PDF's text made from its lines: Text has one paragraph (or heading) a line,
// Markdown the same blocks with headings marked, and heading the first heading's text.
type pdfText struct {
	text, markdown, heading string
}

// pdfBlock is a paragraph or a heading (level 1..3) made of one or more lines.
type pdfBlock struct {
	level int
	text  string
}

// pdfLayout turns PDFium's lines into paragraphs and headings. It is pure, so that it can
// be tested from tables of lines:
//
//   - The body size is the font size most of the characters are set in. A line set at least
//     15% larger, of at most 200 characters, with a letter, is a heading line; consecutive
//     heading lines of one size are one heading. Heading sizes rank into levels, largest
//     first: #, ##, and ### for the rest. A document where more than half of the lines
//     would be headings has none (slides, posters: size tells nothing there).
//   - A paragraph ends where the vertical gap to the next line is over 1.5 times the page's
//     usual line gap, the next line starts higher up (a new column), the heading level or
//     the font size (by more than 15%) changes, or a page ends (unless the next page goes
//     on with a lower-case letter).
//   - A hyphen PDFium marked at a line end (U+0002) joins the word's halves when the next
//     line goes on in lower case; otherwise it stays a hyphen.
func pdfLayout(lines []pdfLine) pdfText {
	body := bodySize(lines)
	heading := make([]bool, len(lines))
	var sizes []float64
	n := 0
	for i, l := range lines {
		if body > 0 && l.size >= body*1.15 && utf8.RuneCountInString(l.text) <= 200 &&
			strings.IndexFunc(l.text, unicode.IsLetter) >= 0 {
			heading[i] = true
			n++
			if s := roundSize(l.size); !slices.Contains(sizes, s) {
				sizes = append(sizes, s)
			}
		}
	}
	if n*2 > len(lines) {
		clear(heading)
		sizes = nil
	}
	slices.SortFunc(sizes, func(a, b float64) int { return -compareFloat(a, b) })
	gaps := pageGaps(lines)

	var blocks []pdfBlock
	var cur []string
	curLevel := 0
	end := func() {
		if len(cur) > 0 {
			blocks = append(blocks, pdfBlock{level: curLevel, text: joinPDFLines(cur)})
		}
		cur = cur[:0]
	}
	for i, l := range lines {
		level := 0
		if heading[i] {
			level = min(3, slices.Index(sizes, roundSize(l.size))+1)
		}
		if i > 0 && (level != curLevel || breaksBefore(lines, i, gaps) ||
			level > 0 && roundSize(l.size) != roundSize(lines[i-1].size) ||
			math.Abs(l.size-lines[i-1].size) > 0.15*max(l.size, lines[i-1].size)) {
			end()
		}
		curLevel = level
		cur = append(cur, l.text)
	}
	end()

	var out pdfText
	var t, md strings.Builder
	for _, b := range blocks {
		if b.level > 0 && out.heading == "" {
			out.heading = b.text
		}
		t.WriteString(b.text)
		t.WriteByte('\n')
		if md.Len() > 0 {
			md.WriteByte('\n')
		}
		if b.level > 0 {
			md.WriteString(strings.Repeat("#", b.level) + " ")
		}
		md.WriteString(escapeMarkdown(b.text, b.level == 0))
		md.WriteByte('\n')
	}
	out.text, out.markdown = strings.TrimSpace(t.String()), strings.TrimSpace(md.String())
	return out
}

func roundSize(s float64) float64 { return math.Round(s*2) / 2 }

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// bodySize is the (rounded) font size that most characters are set in.
func bodySize(lines []pdfLine) float64 {
	weight := map[float64]int{}
	best, bestN := 0.0, 0
	for _, l := range lines {
		if l.size <= 0 {
			continue
		}
		s := roundSize(l.size)
		weight[s] += utf8.RuneCountInString(l.text)
		if w := weight[s]; w > bestN || w == bestN && s < best {
			best, bestN = s, w
		}
	}
	return best
}

// pageGaps returns each page's median gap between the bottoms of consecutive lines that go
// down the page (0 when a page has none).
func pageGaps(lines []pdfLine) map[int]float64 {
	by := map[int][]float64{}
	for i := 1; i < len(lines); i++ {
		if lines[i].page == lines[i-1].page {
			if g := lines[i-1].bottom - lines[i].bottom; g > 0 {
				by[lines[i].page] = append(by[lines[i].page], g)
			}
		}
	}
	out := make(map[int]float64, len(by))
	for p, g := range by {
		slices.Sort(g)
		out[p] = g[(len(g)-1)/2] // the lower median: most gaps are within paragraphs
	}
	return out
}

// breaksBefore tells whether line i starts a new paragraph (see pdfLayout).
func breaksBefore(lines []pdfLine, i int, gaps map[int]float64) bool {
	prev, l := lines[i-1], lines[i]
	if l.page != prev.page {
		r, _ := utf8.DecodeRuneInString(l.text)
		return !unicode.IsLower(r)
	}
	g := prev.bottom - l.bottom
	if g <= 0 {
		return true // same line split, or a new column up the page
	}
	usual := gaps[l.page]
	return usual > 0 && g > usual*1.5
}

// joinPDFLines joins a paragraph's lines with spaces, undoing line-end hyphenation.
func joinPDFLines(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			prev := b.String()
			if strings.HasSuffix(prev, "\x02") {
				r, _ := utf8.DecodeRuneInString(l)
				s := strings.TrimSuffix(prev, "\x02")
				b.Reset()
				b.WriteString(s)
				if !unicode.IsLower(r) {
					b.WriteByte('-')
				}
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(l)
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(b.String(), "\x02", "-")), " ")
}

// escapeMarkdown escapes what would read as Markdown syntax in a block of plain text: inline
// emphasis, code, links and HTML, and, in a paragraph (not after a heading's #), block
// markers at its start.
func escapeMarkdown(s string, paragraph bool) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '\\', '*', '_', '`', '[', ']', '<':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	out := b.String()
	if !paragraph {
		return out
	}
	switch {
	case strings.HasPrefix(out, "#"), strings.HasPrefix(out, ">"), strings.HasPrefix(out, "-"),
		strings.HasPrefix(out, "+"), strings.HasPrefix(out, "="), strings.HasPrefix(out, "|"):
		return "\\" + out
	}
	// "1. " or "1) " at the start would start an ordered list ("2.1 ..." would not).
	if i := strings.IndexFunc(out, func(r rune) bool { return r < '0' || r > '9' }); i > 0 && i < len(out) &&
		(out[i] == '.' || out[i] == ')') && (i+1 == len(out) || out[i+1] == ' ') {
		return out[:i] + "\\" + out[i:]
	}
	return out
}
