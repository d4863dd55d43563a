package urlnorm

// The fast path: see "Fast path" in the package doc. fastResolve either
// handles a reference completely (ok == true), rejects it (err != nil), or
// declines (ok == false, err == nil) and leaves it to the WHATWG library.

// plain marks the bytes the fast path accepts before the fragment: printable
// ASCII that WHATWG copies unchanged into path and query of an http(s) URL
// and that has no special meaning to its parser.
var plain = func() (t [256]bool) {
	for c := 0x21; c <= 0x7e; c++ {
		t[c] = true
	}
	for _, c := range []byte("\"'<>\\^`{|}") {
		t[c] = false
	}
	return t
}()

func fastResolve(dst []byte, r *Resolver, ref string) ([]byte, bool, error) {
	end := len(ref)
	for i := 0; i < len(ref); i++ {
		c := ref[i]
		if c == '#' {
			end = i
			break
		}
		if !plain[c] {
			return nil, false, nil
		}
	}
	s := ref[:end] // the fragment is dropped, and WHATWG never fails on one

	// Scheme, if any.
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			continue
		}
		if i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			continue
		}
		if c != ':' || i == 0 {
			break
		}
		var https bool
		switch {
		case i == 4 && hasPrefixFoldString(s, "http"):
		case i == 5 && hasPrefixFoldString(s, "https"):
			https = true
		default:
			return nil, false, ErrNotHTTP
		}
		rest := s[i+1:]
		if len(rest) < 2 || rest[0] != '/' || rest[1] != '/' {
			return nil, false, nil // "http:x" is relative to an http base; rare
		}
		return fastAuthority(dst, https, rest[2:])
	}

	if r == nil {
		return nil, false, errRelativeNoBase
	}
	switch {
	case len(s) >= 2 && s[0] == '/' && s[1] == '/':
		return fastAuthority(dst, r.https, s[2:])
	case s == "":
		return append(dst, r.canon...), true, nil
	case s[0] == '?':
		dst = append(dst, r.prefix...)
		dst = append(dst, r.path...)
		return appendQuery(dst, s[1:]), true, nil
	}
	p, q := splitQuery(s)
	dst = append(dst, r.prefix...)
	pathStart := len(dst)
	if p != "" && p[0] == '/' {
		p = p[1:]
	} else {
		// Merge: the base path without its last segment, then p.
		k := len(r.path) - 1
		for r.path[k] != '/' {
			k--
		}
		dst = append(dst, r.path[:k]...)
	}
	dst, created := appendPath(dst, pathStart, p)
	if created {
		return nil, false, nil
	}
	return appendQuery(dst, q), true, nil
}

func splitQuery(s string) (path, query string) {
	for i := 0; i < len(s); i++ {
		if s[i] == '?' {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// fastAuthority handles t, the part of an http(s) URL after "//", when its
// authority is a plain DNS name with an optional port.
func fastAuthority(dst []byte, https bool, t string) ([]byte, bool, error) {
	aend := len(t)
	for i := 0; i < len(t); i++ {
		if t[i] == '/' || t[i] == '?' {
			aend = i
			break
		}
	}
	auth, tail := t[:aend], t[aend:]
	host, port := auth, ""
	hasPort := false
	for i := 0; i < len(auth); i++ {
		if auth[i] == ':' {
			host, port, hasPort = auth[:i], auth[i+1:], true
			break
		}
	}
	if len(host) > 0 && host[len(host)-1] == '.' {
		host = host[:len(host)-1] // one trailing dot
	}
	if !plainHost(host) {
		return nil, false, nil
	}
	portN := 0
	if hasPort {
		if len(port) == 0 || len(port) > 5 {
			return nil, false, nil
		}
		for i := 0; i < len(port); i++ {
			c := port[i]
			if c < '0' || c > '9' {
				return nil, false, nil
			}
			portN = portN*10 + int(c-'0')
		}
		if portN > 65535 {
			return nil, false, nil
		}
		if https && portN == 443 || !https && portN == 80 {
			hasPort = false
		}
	}
	dst = appendScheme(dst, https)
	for i := 0; i < len(host); i++ {
		c := host[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	if hasPort {
		dst = append(dst, ':')
		dst = appendInt(dst, portN)
	}
	pathStart := len(dst)
	p, q := splitQuery(tail)
	if p == "" {
		dst = append(dst, '/')
	} else {
		var created bool
		if dst, created = appendPath(dst, pathStart, p[1:]); created {
			return nil, false, nil
		}
	}
	return appendQuery(dst, q), true, nil
}

// plainHost reports whether h is a non-empty dot-separated list of non-empty
// LDH labels, none starting with "xn--", whose last label starts with a
// letter (so WHATWG cannot read it as an IPv4 address). For such a host,
// WHATWG host parsing and IDNA amount to ASCII lower-casing.
func plainHost(h string) bool {
	if h == "" || !dnsLengthOK(h) {
		return false
	}
	labelStart := 0
	for i := 0; i <= len(h); i++ {
		if i < len(h) {
			c := h[i]
			if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
				continue
			}
			if c != '.' {
				return false
			}
		}
		if i == labelStart {
			return false // empty label
		}
		if i-labelStart >= 4 && hasPrefixFoldString(h[labelStart:], "xn--") {
			return false
		}
		if i == len(h) {
			c := h[labelStart]
			return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		}
		labelStart = i + 1
	}
	return false
}

func hasPrefixFoldString(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

func appendInt(dst []byte, n int) []byte {
	var b [5]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(dst, b[i:]...)
}
