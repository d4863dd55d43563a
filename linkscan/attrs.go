package linkscan

import (
	"bytes"
	"strings"

	"golang.org/x/net/html"
)

// attrs iterates over the attributes of the current start tag.
//
// The x/net/html tokenizer's TagAttr returns fresh copies of every key and
// value (two allocations per attribute, most of Parse's garbage). For a tag
// whose raw text holds no NUL, TagAttr's result is the raw bytes with
// newlines normalized and character references decoded (no NUL to replace),
// so attrs reads the attributes straight from the raw token with the
// tokenizer's own attribute-splitting rules (readTag, readTagAttrKey and
// readTagAttrVal, ported below), and callers decode the values they keep with
// value (CR LF and CR to LF, then attribute-mode character references, as the
// tokenizer does). Tags with a NUL go through TagAttr. Either way, keys are matched lower-case
// and a repeated key keeps its first value. FuzzParse holds this reader
// against TagAttr.
type attrs struct {
	z       *html.Tokenizer
	useZ    bool
	hasMore bool   // for useZ
	b       []byte // raw token, for !useZ
	i       int
	lower   [16]byte
}

func newAttrs(z *html.Tokenizer, raw []byte) attrs {
	if bytes.IndexByte(raw, 0) >= 0 {
		_, has := z.TagName()
		return attrs{z: z, useZ: true, hasMore: has}
	}
	a := attrs{b: raw}
	// readTagName: "<" and the name's first byte, then up to white space
	// (consumed) or '/' or '>' (not consumed).
	i := 2
	for i < len(raw) {
		c := raw[i]
		if isSpace(c) {
			i++
			break
		}
		if c == '/' || c == '>' {
			break
		}
		i++
	}
	a.i = i
	a.skipWhiteSpace()
	return a
}

func (a *attrs) skipWhiteSpace() {
	for a.i < len(a.b) && isSpace(a.b[a.i]) {
		a.i++
	}
}

// next returns the next attribute with a non-empty key; the key is
// lower-cased. The slices are valid until the tokenizer moves on.
func (a *attrs) next() (key, val []byte, ok bool) {
	if a.useZ {
		if !a.hasMore {
			return nil, nil, false
		}
		key, val, a.hasMore = a.z.TagAttr()
		return key, val, true
	}
	b := a.b
	for {
		if a.i >= len(b) || b[a.i] == '>' {
			return nil, nil, false
		}
		// readTagAttrKey
		ks := a.i
		for a.i < len(b) {
			c := b[a.i]
			a.i++
			if c == '=' && a.i == ks+1 {
				continue // '=' as the key's first character
			}
			if c == '=' || isSpace(c) || c == '/' || c == '>' {
				a.i--
				break
			}
		}
		k := b[ks:a.i]
		// readTagAttrVal
		v := a.readVal()
		a.skipWhiteSpace()
		if len(k) == 0 {
			continue
		}
		if len(k) <= len(a.lower) {
			for j, c := range k {
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				a.lower[j] = c
			}
			k = a.lower[:len(k)]
		} // longer keys are never ones we look for; leave them as written
		return k, v, true
	}
}

func (a *attrs) readVal() []byte {
	b := a.b
	a.skipWhiteSpace()
	if a.i >= len(b) {
		return nil
	}
	c := b[a.i]
	a.i++
	if c == '/' {
		return nil
	}
	if c != '=' {
		a.i--
		return nil
	}
	a.skipWhiteSpace()
	if a.i >= len(b) {
		return nil
	}
	q := b[a.i]
	a.i++
	switch q {
	case '>':
		a.i--
		return nil
	case '\'', '"':
		s := a.i
		for a.i < len(b) {
			if b[a.i] == q {
				a.i++
				return b[s : a.i-1]
			}
			a.i++
		}
		return b[s:]
	default:
		s := a.i - 1
		for a.i < len(b) {
			c := b[a.i]
			if isSpace(c) {
				a.i++
				return b[s : a.i-1]
			}
			if c == '>' {
				return b[s:a.i]
			}
			a.i++
		}
		return b[s:]
	}
}

// value returns v, an attribute value from next, with its newlines
// normalized and its character references decoded by the tokenizer's
// attribute rules. It allocates only when v holds a '&' or a CR and came
// from the raw token.
func (a *attrs) value(v []byte) []byte {
	if a.useZ {
		return v // TagAttr decoded it already
	}
	v = convertNewlines(v)
	i := bytes.IndexByte(v, '&')
	if i < 0 {
		return v
	}
	out := make([]byte, 0, len(v))
	for i >= 0 {
		out = append(out, v[:i]...)
		v = v[i:]
		n, dec := attrCharRef(v)
		if n == 0 {
			out = append(out, '&')
			v = v[1:]
		} else {
			out = append(out, dec...)
			v = v[n:]
		}
		i = bytes.IndexByte(v, '&')
	}
	return append(out, v...)
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// attrCharRef decodes the character reference at the start of s (s[0] is
// '&') as the HTML tokenizer does inside an attribute value: it returns the
// length consumed and the decoded text, or 0 when the '&' is literal. The
// decoding itself is html.UnescapeString's; only the span, and the attribute
// rules (no prefix matching of names, "&name=" stays literal), are decided here.
func attrCharRef(s []byte) (int, string) {
	i := 1
	if len(s) > 1 && s[1] == '#' {
		i = 2
		hex := len(s) > 2 && (s[2] == 'x' || s[2] == 'X')
		if hex {
			i++
		}
		j := i
		for j < len(s) && (hex && isHex(s[j]) || !hex && '0' <= s[j] && s[j] <= '9') {
			j++
		}
		if j == i {
			return 0, ""
		}
		if j < len(s) && s[j] == ';' {
			j++
		}
		return j, html.UnescapeString(string(s[:j]))
	}
	for i < len(s) && isAlnum(s[i]) {
		i++
	}
	if i == 1 {
		return 0, ""
	}
	if i < len(s) && s[i] == ';' {
		i++
	} else if i < len(s) && s[i] == '=' {
		return 0, "" // "&name=" in an attribute is literal
	}
	ref := string(s[:i])
	dec := html.UnescapeString(ref)
	// UnescapeString also decodes a longest-prefix match ("&copyx" -> "©x"),
	// which attributes do not: a full match leaves no letter or digit, as no
	// named reference stands for one.
	if dec == ref || strings.IndexFunc(dec, func(r rune) bool { return r < 0x80 && isAlnum(byte(r)) }) >= 0 {
		return 0, ""
	}
	return i, dec
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// convertNewlines returns b with "\r\n" and lone "\r" turned into "\n", as
// the tokenizer does to text and attribute values; a copy when it changes
// anything.
func convertNewlines(b []byte) []byte {
	if bytes.IndexByte(b, '\r') < 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == '\r' {
			c = '\n'
			if i+1 < len(b) && b[i+1] == '\n' {
				i++
			}
		}
		out = append(out, c)
	}
	return out
}
