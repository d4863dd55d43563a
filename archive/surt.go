package archive

import (
	"net"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/net/idna"
)

// SURT returns the Sort-friendly URI Reordering Transform of rawURL as pywb and the Python
// surt package (IA's canonicalizer, their defaults) compute it for CDX(J) keys: scheme, user
// info and fragment dropped; host lower-cased, IDNA-encoded (punycode), a leading "www" or
// "wwwN" label stripped, its labels reversed and comma-joined (an IP address stays as is); a
// default port (80 for http, 443 for https) dropped, another kept as ":port"; then ")";
// path and query unescaped repeatedly, re-escaped minimally (bytes up to space, from DEL,
// '#' and '%'), "." and ".." segments resolved, a trailing slash dropped unless the path is
// "/", common session ids removed (jsessionid, phpsessid, sid, aspsessionid, cfid, cftoken),
// query arguments sorted and empty ones dropped; all lower-cased. Pure.
//
//	SURT("https://www.Example.com:443/A/b/?q=2&a=1#x") == "com,example)/a/b?a=1&q=2"
func SURT(rawURL string) string {
	s := strings.Map(func(r rune) rune {
		if r == '\t' || r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, strings.TrimSpace(rawURL))
	scheme := "http"
	if i := strings.Index(s, "://"); i > 0 && isScheme(s[:i]) {
		scheme, s = strings.ToLower(s[:i]), s[i+3:]
	}
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	auth, rest := s, ""
	if i := strings.IndexAny(s, "/?"); i >= 0 {
		auth, rest = s[:i], s[i:]
	}
	p, q := rest, ""
	hasQuery := false
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		p, q, hasQuery = rest[:i], rest[i+1:], true
	}
	if i := strings.LastIndexByte(auth, '@'); i >= 0 {
		auth = auth[i+1:]
	}
	host, port := splitHostPort(auth)
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}

	var b strings.Builder
	b.Grow(len(rawURL) + 2)
	b.WriteString(surtHost(host))
	if port != "" {
		b.WriteByte(':')
		b.WriteString(port)
	}
	b.WriteByte(')')
	b.WriteString(surtPath(p))
	if hasQuery {
		if q = surtQuery(q); q != "" {
			b.WriteByte('?')
			b.WriteString(q)
		}
	}
	return strings.ToLower(b.String())
}

func isScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

// splitHostPort splits "host:port", "[v6]:port" or a bare host; a non-numeric port is kept
// in the host.
func splitHostPort(auth string) (host, port string) {
	if strings.HasPrefix(auth, "[") {
		if i := strings.IndexByte(auth, ']'); i > 0 {
			host, rest := auth[:i+1], auth[i+1:]
			if strings.HasPrefix(rest, ":") && isDigits(rest[1:]) {
				return host, strings.TrimLeft(rest[1:], "0")
			}
			return host, ""
		}
	}
	if i := strings.LastIndexByte(auth, ':'); i >= 0 && isDigits(auth[i+1:]) {
		return auth[:i], strings.TrimLeft(auth[i+1:], "0")
	}
	return strings.TrimSuffix(auth, ":"), ""
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

var wwwLabel = regexp.MustCompile(`^www\d*\.`)

// surtHost lower-cases, IDNA-encodes, strips "www." and reverses the labels of host.
func surtHost(host string) string {
	host = strings.ToLower(unescapeRepeatedly(host))
	host = strings.Trim(host, ".")
	for strings.Contains(host, "..") {
		host = strings.ReplaceAll(host, "..", ".")
	}
	if strings.HasPrefix(host, "[") || net.ParseIP(host) != nil {
		return host
	}
	if a, err := idna.Punycode.ToASCII(host); err == nil {
		host = a
	}
	if strings.HasPrefix(host, "www") {
		host = wwwLabel.ReplaceAllString(host, "")
	}
	labels := strings.Split(host, ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	return escapeMinimal(strings.Join(labels, ","))
}

var pathSessionID = regexp.MustCompile(`(?i);jsessionid=[0-9a-z$]{10,}`)

// surtPath canonicalizes the path: unescape, resolve dot segments, re-escape, drop session
// ids and a trailing slash.
func surtPath(p string) string {
	p = unescapeRepeatedly(p)
	if p == "" {
		return "/"
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		switch s {
		case ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case "":
			if i == len(segs)-1 && len(out) > 0 {
				out = append(out, "") // keep a trailing slash for now
			}
		default:
			out = append(out, s)
		}
	}
	p = "/" + strings.Join(out, "/")
	p = escapeMinimal(p)
	if strings.Contains(p, ";") {
		p = pathSessionID.ReplaceAllString(p, "")
	}
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}

var querySessionIDs = []*regexp.Regexp{
	regexp.MustCompile(`(?i)^jsessionid=[0-9a-z$]{10,}$`),
	regexp.MustCompile(`(?i)^phpsessid=[0-9a-z]{16,}$`),
	regexp.MustCompile(`(?i)^sid=[0-9a-z]{32}$`),
	regexp.MustCompile(`(?i)^aspsessionid[a-z]{8}=[a-z]{24}$`),
	regexp.MustCompile(`(?i)^cfid=[0-9]+$`),
	regexp.MustCompile(`(?i)^cftoken=[0-9-]+$`),
}

// surtQuery canonicalizes the query: unescape, re-escape, drop empty and session-id
// arguments, sort the rest.
func surtQuery(q string) string {
	q = escapeMinimal(unescapeRepeatedly(q))
	args := strings.Split(q, "&")
	kept := args[:0]
	for _, a := range args {
		if a == "" {
			continue
		}
		drop := false
		for _, re := range querySessionIDs {
			if !mayBeSessionID(a) {
				break
			}
			if re.MatchString(a) {
				drop = true
				break
			}
		}
		if !drop {
			kept = append(kept, strings.ToLower(a))
		}
	}
	sort.Strings(kept)
	return strings.Join(kept, "&")
}

// mayBeSessionID is a cheap filter before the session-id patterns.
func mayBeSessionID(arg string) bool {
	if len(arg) < 5 {
		return false
	}
	switch arg[0] | 0x20 {
	case 'j', 'p', 's', 'a', 'c':
		return true
	}
	return false
}

// unescapeRepeatedly percent-decodes s until it no longer changes; invalid escapes stay.
func unescapeRepeatedly(s string) string {
	for range 8 {
		if !strings.Contains(s, "%") {
			return s
		}
		u, err := url.PathUnescape(s)
		if err != nil {
			u = unescapeValid(s)
		}
		if u == s {
			return s
		}
		s = u
	}
	return s
}

// unescapeValid decodes the well-formed %XX escapes of s and keeps the rest.
func unescapeValid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// escapeMinimal percent-encodes bytes up to space, from DEL up, '#' and '%'.
func escapeMinimal(s string) string {
	const hexDigits = "0123456789ABCDEF"
	n := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '#' || c == '%' {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '#' || c == '%' {
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
			continue
		}
		b = append(b, c)
	}
	return string(b)
}
