package simweb

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"strings"
	"sync"
)

// PDFBlock is a heading (Level 1 or 2) or a paragraph (Level 0) of a generated PDF.
type PDFBlock struct {
	Level int
	Text  string
}

// PDF layout: A4 in points, Helvetica (a standard font every reader has, so nothing is
// embedded), a paragraph at 11 pt, headings at 20 and 15 pt.
const (
	pdfWidth, pdfHeight = 595, 842
	pdfMargin           = 72
	pdfLineChars        = 80 // 11 pt Helvetica averages ~5.5 pt a character: 451 pt a line
)

func pdfSize(level int) (size, leading float64) {
	switch level {
	case 1:
		return 20, 28
	case 2:
		return 15, 22
	}
	return 11, 14
}

// MakePDF writes a real PDF 1.4 file with title in its document information and blocks
// set line by line (wrapped at about 80 characters), as many A4 pages as they need. Text is
// Latin-1 (WinAnsi): other characters are written as '?'. Readers find the text, headings
// by their font size, and the title.
func MakePDF(title string, blocks []PDFBlock) []byte {
	var pages []string
	var cs strings.Builder
	y := float64(pdfHeight - pdfMargin)
	for _, b := range blocks {
		size, lead := pdfSize(b.Level)
		lines := wrapPDF(b.Text, int(float64(pdfLineChars)*11/size))
		for _, l := range lines {
			if y-lead < pdfMargin {
				pages = append(pages, cs.String())
				cs.Reset()
				y = float64(pdfHeight - pdfMargin)
			}
			y -= lead
			fmt.Fprintf(&cs, "BT /F1 %g Tf 1 0 0 1 %d %.1f Tm (%s) Tj ET\n", size, pdfMargin, y, pdfString(l))
		}
		y -= 8 // paragraph spacing
	}
	pages = append(pages, cs.String())

	var out bytes.Buffer
	var offsets []int
	obj := func(body string) {
		offsets = append(offsets, out.Len())
		fmt.Fprintf(&out, "%d 0 obj\n%s\nendobj\n", len(offsets), body)
	}
	out.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	var kids []string
	for i := range pages {
		kids = append(kids, fmt.Sprintf("%d 0 R", 5+2*i))
	}
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj(fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)))
	obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	obj(fmt.Sprintf("<< /Title (%s) /Producer (simweb) >>", pdfString(title)))
	for i, p := range pages {
		obj(fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>",
			pdfWidth, pdfHeight, 6+2*i))
		obj(fmt.Sprintf("<< /Length %d >>\nstream\n%sendstream", len(p), p))
	}
	xref := out.Len()
	fmt.Fprintf(&out, "xref\n0 %d\n0000000000 65535 f \n", len(offsets)+1)
	for _, o := range offsets {
		fmt.Fprintf(&out, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&out, "trailer\n<< /Size %d /Root 1 0 R /Info 4 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(offsets)+1, xref)
	return out.Bytes()
}

// wrapPDF breaks text into lines of at most width characters at spaces.
func wrapPDF(text string, width int) []string {
	var lines []string
	var cur strings.Builder
	for _, w := range strings.Fields(text) {
		if cur.Len() > 0 && cur.Len()+1+len(w) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(w)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}

// pdfString escapes s for a PDF literal string in WinAnsi (Latin-1 here).
func pdfString(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '(' || r == ')' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r >= 0xa0 && r <= 0xff:
			fmt.Fprintf(&b, "\\%03o", r)
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}

// pdfDoc is the text of the PDF simweb serves at a host's /files/N.pdf (and, under
// another seed, behind a text/html label at /mislabeled/N.html): a title, two sections
// and English paragraphs of known text. paras are the blocks after the title, section
// headings included (the oracle's MainText).
func (w *Web) pdfDoc(h *host, n int) (title string, blocks []PDFBlock, paras []string) {
	hidx, hname := w.binaryOwner(h)
	r := newRng(mix(uint64(w.cfg.Seed), 13, hidx, uint64(n)))
	lb := &langBanks[0]
	para := func(words int) string {
		var b strings.Builder
		left := 0
		for i := 0; i < words; i++ {
			wd := lb.words[r.intn(len(lb.words))]
			if left == 0 {
				left = 6 + r.intn(12)
				wd = capitalize(wd)
			}
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(wd)
			left--
			if left == 0 || i == words-1 {
				b.WriteString(".")
				left = 0
			}
		}
		return b.String()
	}
	title = fmt.Sprintf("Annual %s report %d of %s", capitalize(lb.words[r.intn(len(lb.words))]), n, hname)
	blocks = append(blocks, PDFBlock{Level: 1, Text: title})
	for s := 1; s <= 2; s++ {
		head := fmt.Sprintf("%d %s", s, capitalize(lb.words[r.intn(len(lb.words))]))
		paras = append(paras, head)
		blocks = append(blocks, PDFBlock{Level: 2, Text: head})
		for p := 0; p < 2; p++ {
			t := para(60 + r.intn(60))
			paras = append(paras, t)
			blocks = append(blocks, PDFBlock{Text: t})
		}
	}
	return title, blocks, paras
}

// pdfBody is that PDF's bytes.
// binaryOwner is the host index and name a binary file's bytes are made from: the host's
// own, or one for all hosts with Config.SharedBinaries.
func (w *Web) binaryOwner(h *host) (uint64, string) {
	if w.cfg.SharedBinaries {
		return 0, "the shared files"
	}
	return uint64(h.idx), h.name
}

func (w *Web) pdfBody(h *host, n int) []byte {
	title, blocks, _ := w.pdfDoc(h, n)
	return MakePDF(title, blocks)
}

// mislabeledPDF shifts the text seed of the PDFs served as text/html, so that they are not
// copies of the declared ones.
const mislabeledPDF = 100

// hostilePDFName names /files/N.pdf's hostile PDF (Config.HostilePDFs), "" for N = 1.
func hostilePDFName(n int) string {
	switch n {
	case 2:
		return "broken"
	case 3:
		return "pages"
	case 4:
		return "bomb"
	}
	return ""
}

var (
	bombOnce sync.Once
	bombPDF  []byte
)

// hostilePDF returns the bytes of hostile PDF n (the same for every host). The bomb is
// compressed once per process (about 2 s of CPU).
func hostilePDF(n int) []byte {
	switch hostilePDFName(n) {
	case "broken":
		b := []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n")
		for i := 0; len(b) < 4096; i++ {
			b = append(b, byte(i*131+7))
		}
		return b
	case "pages":
		// One page node listed 1,000 times by a node listed 200 times.
		return rawPDF([]string{
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [" + strings.Repeat("3 0 R ", 200) + "] /Count 200000 >>",
			"<< /Type /Pages /Parent 2 0 R /Kids [" + strings.Repeat("4 0 R ", 1000) + "] /Count 1000 >>",
			"<< /Type /Page /Parent 3 0 R /MediaBox [0 0 200 200] >>",
		})
	case "bomb":
		bombOnce.Do(func() {
			var inner, outer bytes.Buffer
			zw, _ := zlib.NewWriterLevel(&inner, zlib.BestCompression)
			chunk := bytes.Repeat([]byte(" "), 1<<20)
			for i := 0; i < 1024; i++ {
				zw.Write(chunk)
			}
			zw.Close()
			zw, _ = zlib.NewWriterLevel(&outer, zlib.BestCompression)
			zw.Write(inner.Bytes())
			zw.Close()
			bombPDF = rawPDF([]string{
				"<< /Type /Catalog /Pages 2 0 R >>",
				"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
				"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R >>",
				fmt.Sprintf("<< /Length %d /Filter [/FlateDecode /FlateDecode] >>\nstream\n%s\nendstream", outer.Len(), outer.Bytes()),
			})
		})
		return bombPDF
	}
	return nil
}

// rawPDF writes objects 1..n with a valid cross-reference table.
func rawPDF(objs []string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	off := make([]int, len(objs))
	for i, o := range objs {
		off[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	x := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range off {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, x)
	return b.Bytes()
}
