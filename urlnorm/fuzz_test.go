package urlnorm

import (
	"errors"
	"strings"
	"testing"
)

// FuzzCanonicalize checks, for any input: no panic; Canonicalize is
// idempotent and its output is bounded and has a host key; and the fast path
// agrees with the WHATWG library path wherever it takes the input, both for
// absolute URLs and for references resolved against a base.
func FuzzCanonicalize(f *testing.F) {
	for _, tc := range resolveCases {
		f.Add(tc.ref)
	}
	base, err := NewResolver("https://h1.sim.test:8443/a/b/c.html?x=1")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := Canonicalize(in)
		if err == nil {
			checkCanonical(t, in, c)
		} else if err != ErrNotHTTP && !errors.Is(err, ErrInvalid) {
			t.Fatalf("Canonicalize(%q): error %v is neither ErrNotHTTP nor ErrInvalid", in, err)
		}
		compareFastSlow(t, nil, in)

		rc, err := base.Resolve(in)
		if err == nil {
			checkCanonical(t, in, rc)
		}
		compareFastSlow(t, base, in)
	})
}

func checkCanonical(t *testing.T, in, c string) {
	t.Helper()
	again, err := Canonicalize(c)
	if err != nil || again != c {
		t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, c, again, err)
	}
	if len(c) > MaxLength {
		t.Fatalf("%q: output longer than MaxLength", in)
	}
	if !strings.HasPrefix(c, "http://") && !strings.HasPrefix(c, "https://") {
		t.Fatalf("%q -> %q: bad scheme", in, c)
	}
	if HostKey(c) == "" {
		t.Fatalf("%q -> %q: no host key", in, c)
	}
	if strings.ContainsAny(c, "# \t\n") {
		t.Fatalf("%q -> %q: fragment or white space left", in, c)
	}
}

func compareFastSlow(t *testing.T, r *Resolver, in string) {
	t.Helper()
	if len(in) > MaxInputLength {
		return
	}
	fast, ok, ferr := fastResolve(nil, r, in)
	if !ok && ferr == nil {
		return
	}
	slow, serr := slowResolve(nil, r, in)
	if (ferr == nil) != (serr == nil) || string(fast) != string(slow) ||
		(ferr == ErrNotHTTP) != (serr == ErrNotHTTP) {
		t.Fatalf("%q: fast path %q (%v), library path %q (%v)", in, fast, ferr, slow, serr)
	}
}
