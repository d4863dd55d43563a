package linkscan

import (
	"bytes"

	"golang.org/x/net/html"
)

// scan is Parse's fast path: the same walk as parseTokens, over the body in place.
//
// The x/net/html tokenizer reads a body one byte at a time through its own
// buffer, text included; on a 40 KB page that byte loop was most of Parse's
// cost (and about 15% of the whole fetch stage's CPU). scan finds the next '<'
// with bytes.IndexByte and reproduces the tokenizer's token boundaries only
// where Parse needs them: start and end tags (with the tokenizer's attribute
// rules, so a '>' inside a quoted value does not end a tag), comments, "<!"
// and "<?" declarations, "</>", and the raw text of the elements the tokenizer
// reads raw (iframe, noembed, noframes, noscript, plaintext, script, style,
// textarea, title, xmp). Text between tags is skipped unread.
//
// It declines (returns false, and Parse runs the tokenizer instead) for a
// page with a NUL inside a tag Parse reads the attributes of (TagAttr's
// replacement of it is left to TagAttr). FuzzParse, TestScanMatchesTokenizer
// and TestScanRealPages hold every page scan accepts against parseTokens,
// field by field.
//
// A hand-written scanner rather than another library's lexer: the point is to
// give x/net/html's answers (the extract stage and every browser-like reading
// of a page agree with it), and a second lexer has edge cases of its own that
// no test could hold against the tokenizer.
func scan(body []byte, dst *Page) bool {
	var (
		titleDone bool
		svgDepth  int
		baseDone  bool
	)
	i := 0
	for {
		j := bytes.IndexByte(body[i:], '<')
		if j < 0 || i+j+1 >= len(body) {
			return true // text to the end
		}
		lt := i + j
		c := body[lt+1]
		switch {
		case isLetter(c):
			end, ok := tagEnd(body[lt:])
			if !ok {
				return true // the tokenizer's ErrorToken: a tag cut by the end of the body
			}
			end += lt
			raw := body[lt:end]
			name := rawTagName(raw)
			selfClosing := raw[len(raw)-2] == '/'
			var lname [9]byte // "plaintext", the longest name that matters
			ln := ""
			if len(name) <= len(lname) {
				for k, c := range name {
					if 'A' <= c && c <= 'Z' {
						c += 'a' - 'A'
					}
					lname[k] = c
				}
				ln = string(lname[:len(name)])
			}
			switch ln {
			case "a", "area", "frame", "iframe", "link", "meta", "base":
				if bytes.IndexByte(raw, 0) >= 0 {
					return false // TagAttr's NUL replacement: the tokenizer decides
				}
				a := attrs{b: raw, i: attrStart(raw)}
				a.skipWhiteSpace()
				switch ln {
				case "a":
					addLink(dst, a, Anchor, "href")
				case "area":
					addLink(dst, a, Area, "href")
				case "frame":
					addLink(dst, a, Frame, "src")
				case "iframe":
					addLink(dst, a, IFrame, "src")
				case "link":
					readLinkTag(dst, a)
				case "meta":
					readMeta(dst, a)
				case "base":
					if !baseDone {
						for k, v, ok := a.next(); ok; k, v, ok = a.next() {
							if string(k) == "href" {
								dst.Base, baseDone = string(a.value(v)), true
								break
							}
						}
					}
				}
			case "svg":
				if !selfClosing {
					svgDepth++
				}
			}
			if len(dst.Links) >= MaxLinks {
				return true
			}
			i = end
			// Raw text: the tokenizer flags it on the start tag's name,
			// self-closing or not; Parse turns it off for noscript, noframes
			// and noembed start tags.
			switch ln {
			case "noscript", "noframes", "noembed":
				if selfClosing {
					i = rawTextEnd(body, end, ln)
				}
			case "iframe", "style", "textarea", "xmp":
				i = rawTextEnd(body, end, ln)
			case "title":
				i = rawTextEnd(body, end, ln)
				if !titleDone && svgDepth == 0 && !selfClosing {
					dst.Title = cleanTitle(titleText(body[end:i]))
					titleDone = true
				}
			case "script":
				i = scriptEnd(body, end)
			case "plaintext":
				return true // the rest of the body is text
			}
		case c == '/':
			if lt+2 >= len(body) {
				return true
			}
			c2 := body[lt+2]
			switch {
			case c2 == '>':
				i = lt + 3 // "</>": an empty comment
			case isLetter(c2):
				end, ok := tagEnd(body[lt+1:])
				if !ok {
					return true
				}
				end += lt + 1
				name := rawTagName(body[lt:end])
				if equalFold(name, "svg") && svgDepth > 0 {
					svgDepth--
				}
				i = end
			default:
				i = closeAngle(body, lt+2) // a bogus comment
			}
		case c == '!':
			i = declarationEnd(body, lt+2)
		case c == '?':
			i = closeAngle(body, lt+2)
		default:
			i = lt + 1 // '<' as text
		}
		if i >= len(body) {
			return true
		}
	}
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// attrStart returns where the attributes of a raw tag ("<" or "</", the name's
// first byte, ...) begin: after the name and the one white space byte that ended
// it, as the tokenizer's readTagName consumes it.
func attrStart(b []byte) int {
	i := 2
	for i < len(b) {
		c := b[i]
		if isSpace(c) {
			return i + 1
		}
		if c == '/' || c == '>' {
			return i
		}
		i++
	}
	return i
}

// tagEnd returns the length of the tag that b starts with ("<" or "/", then the
// name's first letter): up to and including the '>' that closes it by the
// tokenizer's readTag rules; ok is false when the body ends first.
func tagEnd(b []byte) (n int, ok bool) {
	a := attrs{b: b, i: attrStart(b)}
	a.skipWhiteSpace()
	for _, _, more := a.next(); more; _, _, more = a.next() {
	}
	if a.i >= len(b) {
		return 0, false
	}
	return a.i + 1, true
}

// closeAngle returns the index after the first '>' at or after i, or len(b).
func closeAngle(b []byte, i int) int {
	if j := bytes.IndexByte(b[i:], '>'); j >= 0 {
		return i + j + 1
	}
	return len(b)
}

// declarationEnd returns where the "<!" token whose content starts at i ends:
// a comment ("<!--") by the tokenizer's readComment, anything else (doctype,
// CDATA, bogus comment) at the next '>'.
func declarationEnd(b []byte, i int) int {
	if i+2 > len(b) {
		return len(b)
	}
	if b[i] != '-' || b[i+1] != '-' {
		return closeAngle(b, i)
	}
	dashes, beginning := 0, true
	for k := i + 2; k < len(b); k++ {
		switch b[k] {
		case '-':
			dashes++
			continue
		case '>':
			if dashes >= 2 || beginning {
				return k + 1
			}
		case '!':
			if dashes >= 2 {
				k++
				if k >= len(b) {
					return len(b)
				}
				switch b[k] {
				case '>':
					return k + 1
				case '-':
					dashes, beginning = 1, false
					continue
				}
			}
		}
		dashes, beginning = 0, false
	}
	return len(b)
}

// rawTextEnd returns where the raw text of element name (lower case), starting
// at i, ends: at the first "</" + name (any case) + white space, '/' or '>';
// else the end of the body.
func rawTextEnd(b []byte, i int, name string) int {
	for {
		j := bytes.Index(b[i:], []byte("</"))
		if j < 0 {
			return len(b)
		}
		k := i + j + 2
		if k+len(name) >= len(b) {
			return len(b)
		}
		if equalFold(b[k:k+len(name)], name) {
			switch b[k+len(name)] {
			case ' ', '\n', '\r', '\t', '\f', '/', '>':
				return i + j
			}
		}
		i = i + j + 1
	}
}

// scriptEnd returns where the text of a <script>, starting at i, ends: the
// tokenizer's readScript (the script data states of the HTML standard: a
// "</script" inside "<!--" ... "-->" that itself follows "<script" does not
// end it), ported state for state over the body.
func scriptEnd(b []byte, i int) int {
	p := i
	// endTag is readRawEndTag for "script", after "</": on a match it leaves p
	// at the '<'.
	endTag := func() (matched, eof bool) {
		for k := 0; k < len("script"); k++ {
			if p >= len(b) {
				return false, true
			}
			c := b[p]
			p++
			if c != "script"[k] && c != "SCRIPT"[k] {
				p--
				return false, false
			}
		}
		if p >= len(b) {
			return false, true
		}
		switch b[p] {
		case ' ', '\n', '\r', '\t', '\f', '/', '>':
			p -= len("</script")
			return true, false
		}
		return false, false
	}
	var (
		c      byte
		dashes int
	)
	next := func() bool {
		if p >= len(b) {
			return false
		}
		c = b[p]
		p++
		return true
	}

scriptData:
	if j := bytes.IndexByte(b[p:], '<'); j >= 0 {
		p += j + 1
	} else {
		return len(b)
	}
	// scriptDataLessThanSign
	if !next() {
		return len(b)
	}
	switch c {
	case '/':
		if m, eof := endTag(); m {
			return p
		} else if eof {
			return len(b)
		}
		goto scriptData
	case '!':
		// scriptDataEscapeStart
		if !next() {
			return len(b)
		}
		if c != '-' {
			p--
			goto scriptData
		}
		// scriptDataEscapeStartDash
		if !next() {
			return len(b)
		}
		if c != '-' {
			p--
			goto scriptData
		}
		dashes = 2 // scriptDataEscapedDashDash
		goto escaped
	}
	p--
	goto scriptData

	// The escaped states (script data escaped, escaped dash, escaped dash dash) as one
	// loop with a count of the dashes just read; the double escaped ones likewise.
scriptDataEscaped:
	dashes = 0
escaped:
	if !next() {
		return len(b)
	}
	switch c {
	case '-':
		dashes++
		goto escaped
	case '<':
		goto scriptDataEscapedLessThanSign
	case '>':
		if dashes >= 2 {
			goto scriptData
		}
	}
	goto scriptDataEscaped

scriptDataEscapedLessThanSign:
	if !next() {
		return len(b)
	}
	if c == '/' {
		if m, eof := endTag(); m {
			return p
		} else if eof {
			return len(b)
		}
		goto scriptDataEscaped
	}
	if !isLetter(c) {
		p--
		goto scriptData
	}
	// scriptDataDoubleEscapeStart
	p--
	for k := 0; k < len("script"); k++ {
		if !next() {
			return len(b)
		}
		if c != "script"[k] && c != "SCRIPT"[k] {
			p--
			goto scriptDataEscaped
		}
	}
	if !next() {
		return len(b)
	}
	switch c {
	case ' ', '\n', '\r', '\t', '\f', '/', '>':
		goto scriptDataDoubleEscaped
	}
	p--
	goto scriptDataEscaped

scriptDataDoubleEscaped:
	dashes = 0
doubleEscaped:
	if !next() {
		return len(b)
	}
	switch c {
	case '-':
		dashes++
		goto doubleEscaped
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	case '>':
		if dashes >= 2 {
			goto scriptData
		}
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedLessThanSign:
	if !next() {
		return len(b)
	}
	if c != '/' {
		p--
		goto scriptDataDoubleEscaped
	}
	// scriptDataDoubleEscapeEnd
	if m, eof := endTag(); m {
		p += len("</script>")
		goto scriptDataEscaped
	} else if eof {
		return len(b)
	}
	goto scriptDataDoubleEscaped
}

// titleText is the tokenizer's Text for a title's RCDATA: newlines normalized,
// NUL replaced, character references decoded.
func titleText(t []byte) []byte {
	t = convertNewlines(t)
	if bytes.IndexByte(t, 0) >= 0 {
		t = bytes.ReplaceAll(t, []byte{0}, []byte("\ufffd"))
	}
	if bytes.IndexByte(t, '&') >= 0 {
		t = []byte(html.UnescapeString(string(t)))
	}
	return t
}
