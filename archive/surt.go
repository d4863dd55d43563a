package archive

import (
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// SURT returns the Sort-friendly URI Reordering Transform of rawURL as pywb computes CDX(J)
// keys: the Python surt package's surt(url) with its defaults (Google's canonicalizer, then
// IA's). Scheme, user info and fragment are dropped. The host is percent-decoded,
// IDNA-encoded (punycode) and lower-cased, a leading "www" or "wwwN" label is stripped, a
// numeric host becomes a dotted IPv4 address, and its labels are reversed and comma-joined
// (IPv4 addresses too, as surt's reverse_ipaddr default does). A default port (80 for http,
// 443 for https) is dropped, another kept as ":port"; then ")". The path is decoded
// repeatedly, "." and ".." segments resolved and empty ones dropped, re-escaped minimally
// (bytes up to space, from DEL up, '#' and '%'), lower-cased, ASP.NET session ids removed and
// a trailing slash dropped unless the path is "/". The query is decoded and re-escaped the
// same way, jsessionid, phpsessid, sid, aspsessionid and cfid/cftoken arguments removed,
// lower-cased and its arguments sorted by (name, value); an empty query is dropped. Pure.
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
	for _, p := range []string{"http://", "https://"} { // "http://https://host", as surt reads it
		if len(s) > len(p) && strings.EqualFold(s[:len(p)], p) {
			scheme, s = p[:len(p)-3], s[len(p):]
		}
	}
	s = strings.TrimLeft(s, "/") // "http:////host"
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	auth, rest := s, ""
	if i := strings.IndexAny(s, "/?"); i >= 0 {
		auth, rest = s[:i], s[i:]
	}
	p, q := rest, ""
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		p, q = rest[:i], rest[i+1:]
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
	if q = surtQuery(q); q != "" {
		b.WriteByte('?')
		b.WriteString(q)
	}
	return b.String()
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
// in the host. IPv6 brackets are dropped, as Python's urlsplit drops them.
func splitHostPort(auth string) (host, port string) {
	if strings.HasPrefix(auth, "[") {
		if i := strings.IndexByte(auth, ']'); i > 0 {
			host, rest := auth[1:i], auth[i+1:]
			if strings.HasPrefix(rest, ":") && isDigits(rest[1:]) {
				return host, trimPort(rest[1:])
			}
			return host, ""
		}
	}
	if i := strings.LastIndexByte(auth, ':'); i >= 0 && isDigits(auth[i+1:]) {
		return auth[:i], trimPort(auth[i+1:])
	}
	return strings.TrimSuffix(auth, ":"), ""
}

// trimPort drops leading zeros ("08080" is port 8080).
func trimPort(p string) string {
	if t := strings.TrimLeft(p, "0"); t != "" {
		return t
	}
	return "0"
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

// surtHost canonicalizes host (decode, IDNA, dots, numeric IPv4, lower case, "www."), then
// reverses its labels.
func surtHost(host string) string {
	host = unescapeRepeatedly(host)
	if a, err := idna.Punycode.ToASCII(host); err == nil {
		host = a
	}
	host = strings.Trim(strings.ReplaceAll(host, "..", "."), ".")
	if ip, ok := numericIPv4(host); ok {
		host = ip
	} else {
		host = strings.ToLower(escapeMinimal(host))
		if strings.HasPrefix(host, "www") {
			host = wwwLabel.ReplaceAllString(host, "")
		}
	}
	labels := strings.Split(host, ".")
	slices.Reverse(labels)
	return strings.Join(labels, ",")
}

// numericIPv4 reads host as an IPv4 address the way inet_aton does for the forms IA's
// canonicalizer accepts: one to four dot-separated numbers, decimal or (leading 0) octal, the
// last filling the remaining bytes; a bare number is taken modulo 2^32.
func numericIPv4(host string) (string, bool) {
	if isDigits(host) {
		v, err := strconv.ParseUint(host, 10, 64)
		if err != nil {
			return "", false
		}
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String(), true
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return "", false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		if !isDigits(p) {
			return "", false
		}
		base := 10
		if len(p) > 1 && p[0] == '0' {
			base = 8
		}
		v, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return "", false
		}
		vals[i] = v
	}
	var ip uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return "", false
		}
		ip |= v << (24 - 8*i)
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return "", false
	}
	ip |= last
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}).String(), true
}

// pathSessionIDs are IA's ASP.NET session-id path patterns (URLRegexTransformer).
var pathSessionIDs = []*regexp.Regexp{
	regexp.MustCompile(`(?i)^(.*/)(\((?:[a-z]\([0-9a-z]{24}\))+\)/)([^?]+\.aspx.*)$`),
	regexp.MustCompile(`(?i)^(.*/)(\([0-9a-z]{24}\)/)([^?]+\.aspx.*)$`),
}

// surtPath canonicalizes the path as Google's canonicalizer (decode, normalize, escape) and
// then IA's (lower case, session ids, trailing slash) do.
func surtPath(p string) string {
	p = strings.ToLower(escapeMinimal(normalizePath(unescapeRepeatedly(p))))
	if strings.Contains(p, ".aspx") {
		for _, re := range pathSessionIDs {
			if m := re.FindStringSubmatch(p); m != nil {
				p = m[1] + m[3]
			}
		}
	}
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}

// normalizePath resolves "." and ".." segments (a ".." with nothing to pop is kept) and drops
// empty segments except a trailing one, as GoogleURLCanonicalizer.normalizePath does.
func normalizePath(p string) string {
	if p == "" {
		return "/"
	}
	segs := strings.Split(p, "/")[1:]
	kept := make([]string, 0, len(segs))
	for _, s := range segs {
		switch s {
		case ".":
		case "..":
			if len(kept) > 0 {
				kept = kept[:len(kept)-1]
			} else {
				kept = append(kept, s)
			}
		default:
			kept = append(kept, s)
		}
	}
	var b strings.Builder
	b.WriteByte('/')
	for i, s := range kept {
		if i == len(kept)-1 {
			b.WriteString(s)
		} else if s != "" {
			b.WriteString(s)
			b.WriteByte('/')
		}
	}
	return b.String()
}

// querySessionIDs are IA's query session-id patterns (URLRegexTransformer), applied to the
// whole query in order, keeping groups 1 and 2.
var querySessionIDs = []*regexp.Regexp{
	regexp.MustCompile(`(?i)^(.*)(?:jsessionid=[0-9a-zA-Z]{32})(?:&(.*))?$`),
	regexp.MustCompile(`(?i)^(.*)(?:phpsessid=[0-9a-zA-Z]{32})(?:&(.*))?$`),
	regexp.MustCompile(`(?i)^(.*)(?:sid=[0-9a-zA-Z]{32})(?:&(.*))?$`),
	regexp.MustCompile(`(?i)^(.*)(?:aspsessionid[a-zA-Z]{8}=[a-zA-Z]{24})(?:&(.*))?$`),
	regexp.MustCompile(`(?i)^(.*)(?:cfid=[^&]+&cftoken=[^&]+)(?:&(.*))?$`),
}

// surtQuery canonicalizes the query: decode and re-escape, strip session ids, lower-case,
// sort the arguments by (name, value) as IA's alphaReorderQuery does (empty arguments stay).
func surtQuery(q string) string {
	if q == "" {
		return ""
	}
	q = escapeMinimal(unescapeRepeatedly(q))
	lq := strings.ToLower(q)
	if strings.Contains(lq, "sid") || strings.Contains(lq, "sessionid") || strings.Contains(lq, "cfid") {
		for _, re := range querySessionIDs {
			if m := re.FindStringSubmatch(q); m != nil {
				q = m[1] + m[2]
			}
		}
	}
	q = strings.ToLower(q)
	if len(q) <= 1 {
		return q
	}
	args := strings.Split(q, "&")
	slices.SortStableFunc(args, func(a, b string) int {
		an, av, aok := strings.Cut(a, "=")
		bn, bv, bok := strings.Cut(b, "=")
		if c := strings.Compare(an, bn); c != 0 {
			return c
		}
		if aok != bok { // ("a",) sorts before ("a", "")
			if aok {
				return 1
			}
			return -1
		}
		return strings.Compare(av, bv)
	})
	return strings.Join(args, "&")
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
