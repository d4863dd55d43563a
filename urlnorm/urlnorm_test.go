package urlnorm

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const page = "http://h1.sim.test/a/b.html"

var errAny = errors.New("any error wrapping ErrInvalid")

// resolveCases: ref resolved against base (page when empty).
var resolveCases = []struct {
	base, ref, want string
	err             error // nil, ErrNotHTTP or errAny (ErrInvalid)
}{
	// The examples of docs/CANONICAL_URLS.md.
	{ref: "../c.html#top", want: "http://h1.sim.test/c.html"},
	{ref: "HTTP://H2.SIM.TEST:80/", want: "http://h2.sim.test/"},
	{ref: "//h3.sim.test/x?b=2&a=1&utm_source=z", want: "http://h3.sim.test/x?a=1&b=2"},
	{ref: "/p;jsessionid=ABC?sid=9&q=%7euser", want: "http://h1.sim.test/p?q=~user"},
	{ref: "https://h4.sim.test:443", want: "https://h4.sim.test/"},
	{ref: "mailto:a@b.c", err: ErrNotHTTP},
	{ref: "http://bücher.sim.test/", want: "http://xn--bcher-kva.sim.test/"},

	// Relative forms.
	{ref: "", want: page},
	{ref: "#frag", want: page},
	{ref: "c.html", want: "http://h1.sim.test/a/c.html"},
	{ref: "./c.html", want: "http://h1.sim.test/a/c.html"},
	{ref: ".", want: "http://h1.sim.test/a/"},
	{ref: "..", want: "http://h1.sim.test/"},
	{ref: "../../../../x", want: "http://h1.sim.test/x"},
	{ref: "d/e/../f", want: "http://h1.sim.test/a/d/f"},
	{ref: "d/%2e%2E/f", want: "http://h1.sim.test/a/f"},
	{ref: "d/.%2e", want: "http://h1.sim.test/a/"},
	{ref: "?x=1", want: "http://h1.sim.test/a/b.html?x=1"},
	{base: "http://h1.sim.test/a?old=1", ref: "#f", want: "http://h1.sim.test/a?old=1"},
	{base: "http://h1.sim.test/a?old=1", ref: "?", want: "http://h1.sim.test/a"},
	{base: "http://h1.sim.test/a?old=1", ref: "b", want: "http://h1.sim.test/b"},
	{base: "http://h1.sim.test", ref: "x", want: "http://h1.sim.test/x"},
	{base: "https://h1.sim.test:8443/a/", ref: "//h9.sim.test", want: "https://h9.sim.test/"},
	{base: "https://h1.sim.test:8443/a/", ref: "b", want: "https://h1.sim.test:8443/a/b"},
	{ref: "/a//b/", want: "http://h1.sim.test/a//b/"},
	{ref: "/A/B", want: "http://h1.sim.test/A/B"}, // path case is significant
	{ref: "/a/", want: "http://h1.sim.test/a/"},   // trailing slash is significant
	{ref: "http:c.html", want: "http://h1.sim.test/a/c.html"},
	{ref: "https:c.html", want: "https://c.html/"},
	{ref: "\\\\h5.sim.test\\p\\q", want: "http://h5.sim.test/p/q"}, // backslashes are slashes
	{ref: "  /x\t/y\n ", want: "http://h1.sim.test/x/y"},
	{ref: "/x y", want: "http://h1.sim.test/x%20y"},
	{ref: "/x?a b=c d", want: "http://h1.sim.test/x?a%20b=c%20d"},

	// Schemes.
	{ref: "javascript:void(0)", err: ErrNotHTTP},
	{ref: " JavaScript:alert(1)", err: ErrNotHTTP},
	{ref: "data:text/html,<b>hi</b>", err: ErrNotHTTP},
	{ref: "tel:+123", err: ErrNotHTTP},
	{ref: "ftp://h.sim.test/", err: ErrNotHTTP},
	{ref: "file:///etc/passwd", err: ErrNotHTTP},
	{ref: "hTTpS://H.Sim.Test/", want: "https://h.sim.test/"},

	// Host.
	{ref: "http://user:pass@h.sim.test/", want: "http://h.sim.test/"},
	{ref: "http://h.sim.test./x", want: "http://h.sim.test/x"},
	{ref: "http://h.sim.test../x", err: errAny},
	{ref: "http://./x", err: errAny},
	{ref: "http:///x", want: "http://x/"},
	{ref: "http://", err: errAny},
	{ref: "http://[2001:DB8::1]/", want: "http://[2001:db8::1]/"},
	{ref: "http://[2001:db8:0:0:0:0:0:1]:8080/", want: "http://[2001:db8::1]:8080/"},
	{ref: "http://[::1]:80/", want: "http://[::1]/"},
	{ref: "http://[::1/", err: errAny},
	{ref: "http://127.0.0.1:8080/x", want: "http://127.0.0.1:8080/x"},
	{ref: "http://1.2.3.4./", want: "http://1.2.3.4/"},
	{ref: "http://[::ffff:1.2.3.4]/", want: "http://[::ffff:102:304]/"},
	{ref: "http://a_b.sim.test/", want: "http://a_b.sim.test/"},
	{ref: "http://h.sim.test:0/", want: "http://h.sim.test:0/"},
	{ref: "http://0x7f.1/", want: "http://127.0.0.1/"},
	{ref: "http://%41.sim.test/", want: "http://a.sim.test/"},
	{ref: "http://xn--bcher-kva.sim.test/", want: "http://xn--bcher-kva.sim.test/"},
	{ref: "http://BÜCHER.sim.test/", want: "http://xn--bcher-kva.sim.test/"},
	{ref: "http://a b.sim.test/", err: errAny},
	{ref: "http://h.sim.test:99999/", err: errAny},
	{ref: "http://h.sim.test:abc/", err: errAny},

	// Port.
	{ref: "http://h.sim.test:8080", want: "http://h.sim.test:8080/"},
	{ref: "http://h.sim.test:0080/", want: "http://h.sim.test/"},
	{ref: "https://h.sim.test:80/", want: "https://h.sim.test:80/"},
	{ref: "http://h.sim.test:443/", want: "http://h.sim.test:443/"},
	{ref: "http://h.sim.test:/", want: "http://h.sim.test/"},

	// Percent-escapes.
	{ref: "/%7e%41%2d%5F%2e", want: "http://h1.sim.test/~A-_."},
	{ref: "/a%2fb%3a", want: "http://h1.sim.test/a%2Fb%3A"},
	{ref: "/%zz%", want: "http://h1.sim.test/%25zz%25"},
	{ref: "/%%36%31", want: "http://h1.sim.test/%2561"},
	{ref: "/ü/日本", want: "http://h1.sim.test/%C3%BC/%E6%97%A5%E6%9C%AC"},
	{ref: "/%c3%bc", want: "http://h1.sim.test/%C3%BC"},
	{ref: "/?q=ü", want: "http://h1.sim.test/?q=%C3%BC"},

	// Path parameters.
	{ref: "/p;JSESSIONID=abc", want: "http://h1.sim.test/p"},
	{ref: "/p;jsessionid=abc;x=1/q", want: "http://h1.sim.test/p;x=1/q"},
	{ref: "/p;x=1;jsessionid=abc", want: "http://h1.sim.test/p;x=1"},
	{ref: "/p;jsessionid", want: "http://h1.sim.test/p;jsessionid"}, // no '=': not the parameter
	{ref: "/a/..;jsessionid=1/b", want: "http://h1.sim.test/b"},
	{ref: "/a/.;jsessionid=1", want: "http://h1.sim.test/a/"},

	// Query.
	{ref: "/x?", want: "http://h1.sim.test/x"},
	{ref: "/x?&&", want: "http://h1.sim.test/x"},
	{ref: "/x?&b&&a=&", want: "http://h1.sim.test/x?a=&b"},
	{ref: "/x?b=1&a=2&a=1", want: "http://h1.sim.test/x?a=1&a=2&b=1"},
	{ref: "/x?q=a%26b%3dc&z=%3D", want: "http://h1.sim.test/x?q=a%26b%3Dc&z=%3D"},
	{ref: "/x?a=1+2&%61=0", want: "http://h1.sim.test/x?a=0&a=1+2"},
	{ref: "/x?UTM_Source=a&utm_medium=b&fbclid=1&gclid=2&dclid=3&msclkid=4&mc_eid=5",
		want: "http://h1.sim.test/x"},
	{ref: "/x?SessionID=1&session_id=2&sid&PHPSESSID=3&jsessionid=4&keep=1", want: "http://h1.sim.test/x?keep=1"},
	{ref: "/x?utm%5Fsource=1&sidx=1&xsid=2", want: "http://h1.sim.test/x?sidx=1&xsid=2"},
	{ref: "/x?==&=", want: "http://h1.sim.test/x?=&=="},
	{ref: "/x?a=?b/c", want: "http://h1.sim.test/x?a=?b/c"},
	{ref: "/x?a'b", want: "http://h1.sim.test/x?a%27b"},

	// Length.
	{ref: "/" + strings.Repeat("a", MaxLength), err: errAny},
	{ref: "/" + strings.Repeat("a", MaxInputLength), err: errAny},
	{ref: "/x#" + strings.Repeat("a", MaxLength), want: "http://h1.sim.test/x"},
}

func checkErr(t *testing.T, name string, got, want error) {
	t.Helper()
	switch {
	case want == nil && got != nil:
		t.Errorf("%s: unexpected error %v", name, got)
	case want == ErrNotHTTP && got != ErrNotHTTP:
		t.Errorf("%s: error %v, want ErrNotHTTP", name, got)
	case want == errAny && !errors.Is(got, ErrInvalid):
		t.Errorf("%s: error %v, want one wrapping ErrInvalid", name, got)
	}
}

func TestResolve(t *testing.T) {
	for _, tc := range resolveCases {
		base := tc.base
		if base == "" {
			base = page
		}
		got, err := Resolve(base, tc.ref)
		name := base + " + " + truncate(tc.ref)
		checkErr(t, name, err, tc.err)
		if got != tc.want {
			t.Errorf("%s = %q, want %q", name, got, tc.want)
		}
		// The fast and the library path must agree wherever the fast path
		// takes the input.
		r, _ := NewResolver(base)
		fast, ok, ferr := fastResolve(nil, r, tc.ref)
		if ok || ferr != nil {
			slow, serr := slowResolve(nil, r, tc.ref)
			if string(fast) != string(slow) || (ferr == nil) != (serr == nil) {
				t.Errorf("%s: fast %q (%v) != slow %q (%v)", name, fast, ferr, slow, serr)
			}
		}
		if err == nil {
			again, err := Canonicalize(got)
			if err != nil || again != got {
				t.Errorf("%s: not idempotent: %q -> %q, %v", name, got, again, err)
			}
		}
	}
}

func truncate(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

func TestCanonicalize(t *testing.T) {
	cases := []struct {
		in, want string
		err      error
	}{
		{in: "http://h.sim.test", want: "http://h.sim.test/"},
		{in: "HTTPS://H.SIM.TEST:443/A?b=1&a=2#x", want: "https://h.sim.test/A?a=2&b=1"},
		{in: "/relative", err: errAny},
		{in: "relative.html", err: errAny},
		{in: "//h.sim.test/", err: errAny},
		{in: "", err: errAny},
		{in: "   ", err: errAny},
		{in: "mailto:x@y", err: ErrNotHTTP},
		{in: "javascript:", err: ErrNotHTTP},
		{in: "data:,", err: ErrNotHTTP},
		{in: "http:x", want: "http://x/"}, // WHATWG: special scheme, slashes optional
		{in: "http://h.sim.test/" + strings.Repeat("x", MaxLength), err: errAny},
		{in: "http://h.sim.test/?utm_source=1", want: "http://h.sim.test/"},
	}
	for _, tc := range cases {
		got, err := Canonicalize(tc.in)
		checkErr(t, truncate(tc.in), err, tc.err)
		if got != tc.want {
			t.Errorf("Canonicalize(%q) = %q, want %q", truncate(tc.in), got, tc.want)
		}
	}
}

func TestResolverBase(t *testing.T) {
	for _, b := range []string{"mailto:x@y", "/rel", "http://"} {
		if _, err := NewResolver(b); err == nil {
			t.Errorf("NewResolver(%q) accepted", b)
		}
	}
	r, err := NewResolver("HTTP://H.sim.test/a;jsessionid=1/b?utm_source=x&z=1#f")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Base(), "http://h.sim.test/a/b?z=1"; got != want {
		t.Fatalf("Base() = %q, want %q", got, want)
	}
	// Resolving against the canonical base equals resolving against the raw
	// base and canonicalizing after.
	for _, ref := range []string{"", "#x", "c", "../c", "?q=1", "//o.sim.test/p"} {
		got, err := r.Resolve(ref)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := parser.Parse("HTTP://H.sim.test/a;jsessionid=1/b?utm_source=x&z=1#f")
		if err != nil {
			t.Fatal(err)
		}
		u, err := raw.Parse(ref)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Canonicalize(u.Href(false))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("ref %q: %q, want %q", ref, got, want)
		}
	}
}

func TestHostKey(t *testing.T) {
	cases := []struct {
		in, scheme, key string
		err             error
	}{
		{in: "http://h.sim.test/", scheme: "http", key: "h.sim.test"},
		{in: "https://h.sim.test:8443/x?y", scheme: "https", key: "h.sim.test:8443"},
		{in: "http://[::1]:8080/", scheme: "http", key: "[::1]:8080"},
		{in: "http://h.sim.test?x", scheme: "http", key: "h.sim.test"},
		{in: "http://h.sim.test", scheme: "http", key: "h.sim.test"},
		{in: "ftp://h.sim.test/", err: ErrNotHTTP},
		{in: "http:///x", err: errAny},
		{in: "h.sim.test", err: errAny},
	}
	for _, tc := range cases {
		s, k, err := SplitHostKey(tc.in)
		checkErr(t, tc.in, err, tc.err)
		if s != tc.scheme || k != tc.key {
			t.Errorf("SplitHostKey(%q) = %q, %q; want %q, %q", tc.in, s, k, tc.scheme, tc.key)
		}
		if hk := HostKey(tc.in); hk != tc.key {
			t.Errorf("HostKey(%q) = %q, want %q", tc.in, hk, tc.key)
		}
	}
	// Host key of canonical URLs: default ports vanish, others stay.
	for in, want := range map[string]string{
		"HTTP://Bücher.sim.test:80/x": "xn--bcher-kva.sim.test",
		"https://H.sim.test:443":      "h.sim.test",
		"https://H.sim.test:80":       "h.sim.test:80",
	} {
		c, err := Canonicalize(in)
		if err != nil {
			t.Fatal(err)
		}
		if hk := HostKey(c); hk != want {
			t.Errorf("HostKey(Canonicalize(%q)) = %q, want %q", in, hk, want)
		}
	}
}

func TestResolveAllocs(t *testing.T) {
	r, err := NewResolver(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"../c.html#top", "//h3.sim.test/x?b=2&a=1&utm_source=z", "/p;jsessionid=ABC?sid=9&q=%7euser"} {
		n := testing.AllocsPerRun(100, func() { _, _ = r.Resolve(ref) })
		if n > 1 {
			t.Errorf("Resolve(%q): %v allocs, want <= 1 (the result string)", ref, n)
		}
	}
	n := testing.AllocsPerRun(100, func() { _, _ = r.Resolve("#frag") })
	if n != 0 {
		t.Errorf("Resolve(#frag): %v allocs, want 0", n)
	}
}

func TestResolverConcurrent(t *testing.T) {
	r, err := NewResolver(page)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 50; i++ {
				for _, tc := range resolveCases {
					if tc.base != "" {
						continue
					}
					if got, _ := r.Resolve(tc.ref); got != tc.want {
						t.Errorf("%q: %q, want %q", tc.ref, got, tc.want)
						return
					}
				}
			}
		}()
	}
	for g := 0; g < 4; g++ {
		<-done
	}
}
