package node

import "testing"

func TestScope(t *testing.T) {
	for in, want := range map[string]string{
		"www.example.co.uk":     "example.co.uk",
		"a.b.example.org:8080":  "example.org",
		"example.org":           "example.org",
		"127.0.0.1:8080":        "127.0.0.1",
		"h3.sim.test":           "sim.test",
		"localhost":             "localhost",
		"xn--bcher-kva.example": "xn--bcher-kva.example",
	} {
		if got := registrableDomain(in); got != want {
			t.Errorf("registrableDomain(%q) = %q, want %q", in, got, want)
		}
	}
	n := &Node{}
	n.scope.hosts, n.scope.domains = map[string]bool{}, map[string]bool{}
	n.scope.hosts["www.example.org"] = true
	n.scope.domains["example.org"] = true
	cases := []struct {
		mode     Scope
		inc, exc []string
		url      string
		host     string
		want     bool
	}{
		{ScopeAll, nil, nil, "http://other.test/", "other.test", true},
		{ScopeSeedHosts, nil, nil, "http://www.example.org/a", "www.example.org", true},
		{ScopeSeedHosts, nil, nil, "http://blog.example.org/a", "blog.example.org", false},
		{ScopeSeedDomains, nil, nil, "http://blog.example.org/a", "blog.example.org", true},
		{ScopeSeedDomains, nil, nil, "http://example.com/", "example.com", false},
		{ScopeAll, nil, []string{`/private/`}, "http://x.test/private/a", "x.test", false},
		{ScopeAll, []string{`\.html$`}, nil, "http://x.test/a.html", "x.test", true},
		{ScopeAll, []string{`\.html$`}, nil, "http://x.test/a.pdf", "x.test", false},
		{ScopeAll, []string{`\.html$`}, []string{`/b\.`}, "http://x.test/b.html", "x.test", false},
	}
	for _, c := range cases {
		r := &scopeRules{mode: c.mode}
		r.include, _ = compilePatterns(c.inc)
		r.exclude, _ = compilePatterns(c.exc)
		n.scope.rules.Store(r)
		if got := n.inScope(c.url, c.host); got != c.want {
			t.Errorf("%s inc=%v exc=%v %s: %v, want %v", c.mode, c.inc, c.exc, c.url, got, c.want)
		}
	}
	if _, err := ParseScope("everything"); err == nil {
		t.Error("bad scope accepted")
	}
	if _, err := compilePatterns([]string{"("}); err == nil {
		t.Error("bad pattern accepted")
	}
}
