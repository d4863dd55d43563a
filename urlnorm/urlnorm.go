package urlnorm

import (
	"errors"
	"fmt"
	"strings"

	wurl "github.com/nlnwa/whatwg-url/url"
)

// Sentinel errors. Callers drop the link on either.
var (
	// ErrNotHTTP: the URL's scheme is not http or https (mailto:, javascript:,
	// data:, ftp:, ...). Returned unwrapped: it is common and cheap.
	ErrNotHTTP = errors.New("urlnorm: scheme is not http or https")
	// ErrInvalid: the input is not a valid URL, or is too long. Always wrapped
	// with a reason.
	ErrInvalid = errors.New("urlnorm: invalid url")
)

const (
	// MaxLength is the longest canonical URL accepted, in bytes. Longer URLs are
	// nearly always traps or junk; the frontier may enforce a smaller limit.
	MaxLength = 4096
	// MaxInputLength bounds the work on one input, in bytes (before fragment
	// and tracking parameters are removed).
	MaxInputLength = 2 * MaxLength
)

var (
	errTooLong        = fmt.Errorf("%w: too long", ErrInvalid)
	errRelativeNoBase = fmt.Errorf("%w: relative reference without base", ErrInvalid)
	errEmptyLabel     = fmt.Errorf("%w: empty host label", ErrInvalid)
	errNoHost         = fmt.Errorf("%w: no host", ErrInvalid)
	errLongHost       = fmt.Errorf("%w: host name or label too long for DNS", ErrInvalid)
	errBadIDN         = fmt.Errorf("%w: host does not survive IDNA round trip", ErrInvalid)
)

// parser is the WHATWG parser with the standard's defaults. It holds no
// mutable state, so one value serves every goroutine.
var parser = wurl.NewParser()

// Canonicalize returns the canonical form of the absolute URL raw.
// It returns ErrNotHTTP for other schemes and an error wrapping ErrInvalid
// for anything that is not a valid absolute http(s) URL.
func Canonicalize(raw string) (string, error) {
	return resolve(nil, raw)
}

// Resolve resolves ref against base (both by the WHATWG URL standard) and
// returns the canonical result. To resolve many links against one base, use a
// Resolver.
func Resolve(base, ref string) (string, error) {
	r, err := NewResolver(base)
	if err != nil {
		return "", err
	}
	return r.Resolve(ref)
}

// Resolver resolves references against one base URL. The base is parsed
// once. A Resolver is immutable and safe for concurrent use.
type Resolver struct {
	canon  string    // canonical base URL
	prefix string    // "scheme://authority" of canon
	https  bool      // scheme of canon
	path   string    // path of canon, starts with '/'
	query  string    // query of canon without '?', "" if none
	lib    *wurl.Url // canon parsed by the library, for the slow path
}

// NewResolver canonicalizes base and prepares it for resolving references.
// base must be an absolute http(s) URL.
func NewResolver(base string) (*Resolver, error) {
	c, err := Canonicalize(base)
	if err != nil {
		return nil, err
	}
	lib, err := parser.Parse(c)
	if err != nil { // cannot happen for a canonical URL; be safe anyway
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	// The library initializes a URL's search parameters lazily, on first
	// use, and resolving against a base uses them (Url.Clone): do it now, so
	// that concurrent Resolve calls only read the shared base.
	_ = lib.SearchParams()
	r := &Resolver{canon: c, lib: lib}
	r.https = strings.HasPrefix(c, "https:")
	rest := c[len("http://"):]
	if r.https {
		rest = c[len("https://"):]
	}
	slash := strings.IndexByte(rest, '/')
	r.prefix = c[:len(c)-len(rest)+slash]
	p := rest[slash:]
	if q := strings.IndexByte(p, '?'); q >= 0 {
		r.query = p[q+1:]
		p = p[:q]
	}
	r.path = p
	return r, nil
}

// Base returns the canonical base URL.
func (r *Resolver) Base() string { return r.canon }

// Resolve resolves ref against the base and canonicalizes the result.
func (r *Resolver) Resolve(ref string) (string, error) {
	return resolve(r, ref)
}

func resolve(r *Resolver, ref string) (string, error) {
	if len(ref) > MaxInputLength {
		return "", errTooLong
	}
	var buf [256]byte
	out, ok, err := fastResolve(buf[:0], r, ref)
	if err != nil {
		return "", err
	}
	if !ok {
		out, err = slowResolve(buf[:0], r, ref)
		if err != nil {
			return "", err
		}
	}
	if len(out) > MaxLength {
		return "", errTooLong
	}
	if r != nil && string(out) == r.canon {
		return r.canon, nil // "", "#frag", "?same": no allocation
	}
	return string(out), nil
}

// slowResolve parses ref with the WHATWG library and canonicalizes the result.
func slowResolve(dst []byte, r *Resolver, ref string) ([]byte, error) {
	var (
		u   *wurl.Url
		err error
	)
	if r == nil {
		u, err = parser.Parse(ref)
	} else {
		u, err = r.lib.Parse(ref)
	}
	if err != nil {
		// A reference that starts with a non-http scheme is dropped for
		// its scheme even when the rest of it does not parse.
		if s, ok := schemeOf(ref); ok && s != schemeHTTP && s != schemeHTTPS {
			return nil, ErrNotHTTP
		}
		if r == nil {
			if _, ok := schemeOf(ref); !ok {
				return nil, errRelativeNoBase
			}
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	var https bool
	switch u.Scheme() {
	case "http":
	case "https":
		https = true
	default:
		return nil, ErrNotHTTP
	}
	host := u.Hostname()
	if strings.HasSuffix(host, ".") {
		host = host[:len(host)-1]
		if host == "" || strings.HasSuffix(host, ".") {
			return nil, errEmptyLabel
		}
	}
	if host == "" {
		return nil, errNoHost
	}
	if !u.IsIPv6() && !dnsLengthOK(host) {
		return nil, errLongHost
	}
	if strings.Contains(host, "xn--") {
		// IDNA ToASCII is not always reversible (x/net/idna rejects some
		// punycode it produced); a host that would not survive a second
		// pass is invalid, or canonicalization would not be idempotent.
		again, err := parser.Parse("http://" + host + "/")
		if err != nil || again.Hostname() != host {
			return nil, errBadIDN
		}
	}
	dst = appendScheme(dst, https)
	dst = append(dst, host...)
	if p := u.Port(); p != "" {
		dst = append(dst, ':')
		dst = append(dst, p...)
	}
	pathStart := len(dst)
	p := u.Pathname()
	if p == "" || p[0] != '/' {
		return nil, fmt.Errorf("%w: opaque path", ErrInvalid)
	}
	dst, _ = appendPath(dst, pathStart, p[1:])
	dst = appendQuery(dst, u.Query())
	return dst, nil
}

func appendScheme(dst []byte, https bool) []byte {
	if https {
		return append(dst, "https://"...)
	}
	return append(dst, "http://"...)
}

const (
	schemeOther = iota
	schemeHTTP
	schemeHTTPS
)

// schemeOf reports the scheme class of s if s starts with a WHATWG scheme
// ("alpha *(alnum / + / - / .) :"), ignoring leading C0 controls and spaces
// and embedded tabs and newlines as WHATWG does.
func schemeOf(s string) (int, bool) {
	i := 0
	for i < len(s) && s[i] <= ' ' {
		i++
	}
	var name [6]byte
	n := 0
	first := true
	for ; i < len(s); i++ {
		c := s[i]
		if c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case !first && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		case c == ':' && !first:
			switch string(name[:min(n, len(name))]) {
			case "http":
				if n == 4 {
					return schemeHTTP, true
				}
			case "https":
				if n == 5 {
					return schemeHTTPS, true
				}
			}
			return schemeOther, true
		default:
			return 0, false
		}
		first = false
		if n < len(name) {
			name[n] = c | 0x20
		}
		n++
	}
	return 0, false
}

// HostKey returns the host key of a canonical URL: its host, plus ":port"
// when the port is not the scheme's default (a canonical URL carries a port
// only then). It returns "" when the input does not look like a canonical URL.
func HostKey(canonicalURL string) string {
	_, hk, err := SplitHostKey(canonicalURL)
	if err != nil {
		return ""
	}
	return hk
}

// SplitHostKey splits a canonical URL into its scheme ("http" or "https")
// and host key. It does not canonicalize: pass it Canonicalize's output.
func SplitHostKey(u string) (scheme, hostKey string, err error) {
	var rest string
	switch {
	case strings.HasPrefix(u, "http://"):
		scheme, rest = "http", u[len("http://"):]
	case strings.HasPrefix(u, "https://"):
		scheme, rest = "https", u[len("https://"):]
	default:
		if _, ok := schemeOf(u); ok {
			return "", "", ErrNotHTTP
		}
		return "", "", fmt.Errorf("%w: not a canonical url", ErrInvalid)
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if end == 0 {
		return "", "", errNoHost
	}
	return scheme, rest[:end], nil
}

// dnsLengthOK reports whether a host name fits DNS: labels of at most 63
// bytes, the name at most 253. Longer names cannot resolve, and the IDNA
// library does not round-trip some over-long labels.
func dnsLengthOK(h string) bool {
	if len(h) > 253 {
		return false
	}
	n := 0
	for i := 0; i < len(h); i++ {
		if h[i] == '.' {
			n = 0
			continue
		}
		if n++; n > 63 {
			return false
		}
	}
	return true
}
