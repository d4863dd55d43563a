package simweb

import (
	"net/url"
	"sort"
	"strings"

	"golang.org/x/net/idna"
)

// Canonicalize turns ref, found in a document whose base URL is base (absolute; "" when ref
// must itself be absolute), into its canonical URL under docs/CANONICAL_URLS.md. ok is false
// when the link is dropped (unparsable, or a scheme other than http/https).
//
// This is simweb's own implementation of the written rule; it shares no code with the
// crawler's urlnorm package on purpose.
func Canonicalize(base, ref string) (canonical string, ok bool) {
	ref = strings.Trim(ref, " \t\r\n\f\x00")
	ref = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(ref)
	r, err := url.Parse(ref)
	if err != nil {
		return "", false
	}
	if base != "" && !r.IsAbs() {
		b, err := url.Parse(base)
		if err != nil || !b.IsAbs() {
			return "", false
		}
		r = b.ResolveReference(r)
	}
	return canonicalAbs(r)
}

func canonicalAbs(u *url.URL) (string, bool) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	host, ok := canonicalHost(u.Hostname())
	if !ok {
		return "", false
	}
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	var sb strings.Builder
	sb.Grow(len(host) + len(u.EscapedPath()) + len(u.RawQuery) + 16)
	sb.WriteString(scheme)
	sb.WriteString("://")
	sb.WriteString(host)
	if port != "" {
		sb.WriteByte(':')
		sb.WriteString(port)
	}
	sb.WriteString(canonicalPath(u.EscapedPath()))
	if q := canonicalQuery(u.RawQuery); q != "" {
		sb.WriteByte('?')
		sb.WriteString(q)
	}
	return sb.String(), true
}

// canonicalHost lower-cases, removes one trailing dot and converts IDNs to punycode.
func canonicalHost(h string) (string, bool) {
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "", false
	}
	ascii := true
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if !ascii {
		a, err := idna.Lookup.ToASCII(h)
		if err != nil {
			return "", false
		}
		h = a
	}
	return strings.ToLower(h), true
}

// CanonicalPathQuery canonicalizes an escaped path and a raw query as they arrive in a
// request line. The server uses it to route and log.
func CanonicalPathQuery(escapedPath, rawQuery string) string {
	p := canonicalPath(escapedPath)
	if q := canonicalQuery(rawQuery); q != "" {
		return p + "?" + q
	}
	return p
}

func isUnreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

const upperHex = "0123456789ABCDEF"

// normEscapes upper-cases percent-escapes, decodes escapes of unreserved characters and
// escapes bytes that may not appear raw (controls, space, non-ASCII, '"<>`{}').
func normEscapes(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' || c <= ' ' || c >= 0x7f || strings.IndexByte("\"<>`{}", c) >= 0 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				d := hi<<4 | lo
				if isUnreserved(d) {
					b.WriteByte(d)
				} else {
					b.WriteByte('%')
					b.WriteByte(upperHex[d>>4])
					b.WriteByte(upperHex[d&15])
				}
				i += 2
				continue
			}
		}
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"<>`{}", c) >= 0 {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func canonicalPath(p string) string {
	p = normEscapes(p)
	if p == "" {
		return "/"
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	// remove ;jsessionid=... path parameters (case-insensitive name)
	if strings.IndexByte(p, ';') >= 0 {
		var b strings.Builder
		for i := 0; i < len(p); {
			if p[i] == ';' && len(p)-i >= 12 && strings.EqualFold(p[i+1:i+12], "jsessionid=") {
				j := i + 1
				for j < len(p) && p[j] != ';' && p[j] != '/' {
					j++
				}
				i = j
				continue
			}
			b.WriteByte(p[i])
			i++
		}
		p = b.String()
	}
	return removeDots(p)
}

// removeDots resolves "." and ".." segments (RFC 3986 5.2.4) in an absolute path.
func removeDots(p string) string {
	if !strings.Contains(p, "/.") {
		return p
	}
	segs := strings.Split(p[1:], "/")
	out := make([]string, 0, len(segs))
	trailing := false
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			trailing = last
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			trailing = last
		default:
			out = append(out, s)
			trailing = false
		}
	}
	r := "/" + strings.Join(out, "/")
	if trailing && !strings.HasSuffix(r, "/") {
		r += "/"
	}
	return r
}

var trackingNames = map[string]bool{
	"fbclid": true, "gclid": true, "dclid": true, "msclkid": true, "mc_eid": true,
	"sessionid": true, "session_id": true, "sid": true, "phpsessid": true, "jsessionid": true,
}

// IsTrackingParam reports whether a query item name is removed by canonicalization.
func IsTrackingParam(name string) bool {
	n := strings.ToLower(name)
	return strings.HasPrefix(n, "utm_") || trackingNames[n]
}

func canonicalQuery(q string) string {
	if q == "" {
		return ""
	}
	items := strings.Split(q, "&")
	kept := items[:0]
	for _, it := range items {
		if it == "" {
			continue
		}
		it = normEscapes(it)
		name := it
		if i := strings.IndexByte(it, '='); i >= 0 {
			name = it[:i]
		}
		if IsTrackingParam(name) {
			continue
		}
		kept = append(kept, it)
	}
	if len(kept) == 0 {
		return ""
	}
	sort.Strings(kept)
	return strings.Join(kept, "&")
}
