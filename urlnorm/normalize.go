package urlnorm

import (
	"bytes"
	"slices"
)

const upperHex = "0123456789ABCDEF"

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func isUnreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// appendEscaped appends s with its percent-escapes normalized: escapes of
// unreserved characters decoded, other escapes in upper-case hex, and a '%'
// that starts no escape written as "%25".
func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			dst = append(dst, c)
			continue
		}
		if i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				v := hi<<4 | lo
				if isUnreserved(v) {
					dst = append(dst, v)
				} else {
					dst = append(dst, '%', upperHex[hi], upperHex[lo])
				}
				i += 2
				continue
			}
		}
		dst = append(dst, '%', '2', '5')
	}
	return dst
}

// appendPath appends the segments of p (a path without its leading '/') to
// dst, where dst[pathStart:] already holds zero or more "/segment" items
// without dot segments. Each segment has its escapes normalized and its
// ;jsessionid= parameters removed; "." and ".." segments are resolved as
// WHATWG does (a final one leaves a trailing slash). The result is never
// empty: an empty path becomes "/".
//
// created reports that removing ;jsessionid= turned a segment into a dot
// segment. WHATWG resolves dot segments before this package's steps run, so
// such a segment is resolved after the reference's own dot segments; only the
// library path, whose input has no dot segments left, gets that order right.
func appendPath(dst []byte, pathStart int, p string) (_ []byte, created bool) {
	for {
		seg := p
		last := true
		for j := 0; j < len(p); j++ {
			if p[j] == '/' {
				seg, p, last = p[:j], p[j+1:], false
				break
			}
		}
		segStart := len(dst)
		dst = append(dst, '/')
		dst = appendEscaped(dst, seg)
		if n := len(dst); n-segStart > 3 {
			dst = stripJSessionID(dst, segStart+1)
			if n-segStart > len(dst)-segStart && isDotSegment(dst[segStart+1:]) {
				created = true
			}
		}
		s := dst[segStart+1:]
		switch {
		case len(s) == 1 && s[0] == '.':
			dst = dst[:segStart]
			if last {
				dst = append(dst, '/')
			}
		case len(s) == 2 && s[0] == '.' && s[1] == '.':
			dst = dst[:segStart]
			if k := bytes.LastIndexByte(dst[pathStart:], '/'); k >= 0 {
				dst = dst[:pathStart+k]
			}
			if last {
				dst = append(dst, '/')
			}
		}
		if last {
			break
		}
	}
	if len(dst) == pathStart {
		dst = append(dst, '/')
	}
	return dst, created
}

func isDotSegment(s []byte) bool {
	return len(s) == 1 && s[0] == '.' || len(s) == 2 && s[0] == '.' && s[1] == '.'
}

// stripJSessionID removes ";jsessionid=value" (name case-insensitive) from
// the segment dst[start:], value running to the next ';' or the segment end.
func stripJSessionID(dst []byte, start int) []byte {
	const name = "jsessionid="
	for i := start; i < len(dst); i++ {
		if dst[i] != ';' || len(dst)-i-1 < len(name) || !hasPrefixFold(dst[i+1:], name) {
			continue
		}
		end := len(dst)
		if k := bytes.IndexByte(dst[i+1:], ';'); k >= 0 {
			end = i + 1 + k
		}
		dst = append(dst[:i], dst[end:]...)
		i--
	}
	return dst
}

// hasPrefixFold reports whether b starts with the lower-case ASCII prefix.
func hasPrefixFold(b []byte, prefix string) bool {
	if len(b) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// isTrackingName reports whether a query item name (escapes normalized)
// is one the canonical form drops.
func isTrackingName(n []byte) bool {
	if hasPrefixFold(n, "utm_") {
		return true
	}
	switch len(n) {
	case 3:
		return hasPrefixFold(n, "sid")
	case 5:
		return hasPrefixFold(n, "gclid") || hasPrefixFold(n, "dclid")
	case 6:
		return hasPrefixFold(n, "fbclid") || hasPrefixFold(n, "mc_eid")
	case 7:
		return hasPrefixFold(n, "msclkid")
	case 9:
		return hasPrefixFold(n, "sessionid") || hasPrefixFold(n, "phpsessid")
	case 10:
		return hasPrefixFold(n, "session_id") || hasPrefixFold(n, "jsessionid")
	}
	return false
}

type span struct{ start, end int }

// appendQuery appends "?" and the canonical form of the raw query q (without
// its '?'), or nothing when no item survives.
func appendQuery(dst []byte, q string) []byte {
	if q == "" {
		return dst
	}
	var (
		scratchArr [256]byte
		spansArr   [32]span
	)
	scratch := scratchArr[:0]
	spans := spansArr[:0]
	sorted := true
	for len(q) > 0 {
		item := q
		q = ""
		for j := 0; j < len(item); j++ {
			if item[j] == '&' {
				item, q = item[:j], item[j+1:]
				break
			}
		}
		if item == "" {
			continue
		}
		start := len(scratch)
		scratch = appendEscaped(scratch, item)
		it := scratch[start:]
		name := it
		if k := bytes.IndexByte(it, '='); k >= 0 {
			name = it[:k]
		}
		if isTrackingName(name) {
			scratch = scratch[:start]
			continue
		}
		if n := len(spans); n > 0 && sorted {
			p := spans[n-1]
			if bytes.Compare(scratch[p.start:p.end], it) > 0 {
				sorted = false
			}
		}
		spans = append(spans, span{start, len(scratch)})
	}
	if len(spans) == 0 {
		return dst
	}
	if !sorted {
		slices.SortFunc(spans, func(a, b span) int {
			return bytes.Compare(scratch[a.start:a.end], scratch[b.start:b.end])
		})
	}
	for i, s := range spans {
		if i == 0 {
			dst = append(dst, '?')
		} else {
			dst = append(dst, '&')
		}
		dst = append(dst, scratch[s.start:s.end]...)
	}
	return dst
}
