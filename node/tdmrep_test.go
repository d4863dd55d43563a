package node

import (
	"testing"
	"time"
)

func TestTDMRepMatching(t *testing.T) {
	p := parseTDMRep([]byte(`[
		{"location": "/", "tdm-reservation": 0},
		{"location": "/articles/*", "tdm-reservation": 1, "tdm-policy": "https://example.org/policy.json"},
		{"location": "/articles/free/*", "tdm-reservation": 0},
		{"location": "/*.pdf$", "tdm-reservation": 1},
		{"location": "no-slash", "tdm-reservation": 1}
	]`), time.Unix(0, 0))
	cases := []struct {
		path     string
		reserved bool
	}{
		{"/", false},
		{"/about.html", false},
		{"/articles/x.html", true},
		{"/articles/free/y.html", false},
		{"/docs/a.pdf", true},
		{"/docs/a.pdf?x=1", false},
		{"/no-slash", false},
	}
	for _, c := range cases {
		if got, _ := p.reserved(c.path); got != c.reserved {
			t.Errorf("reserved(%q) = %v, want %v", c.path, got, c.reserved)
		}
	}
	if _, pol := p.reserved("/articles/z"); pol != "https://example.org/policy.json" {
		t.Errorf("policy = %q", pol)
	}
	if bad := parseTDMRep([]byte(`{not json`), time.Unix(0, 0)); len(bad.Rules) != 0 {
		t.Errorf("bad JSON gave rules %v", bad.Rules)
	}
	for in, want := range map[string]string{
		"http://h.test":         "/",
		"http://h.test/a/b?c=d": "/a/b?c=d",
		"http://h.test?q=1":     "/?q=1",
	} {
		if got := pathOf(in); got != want {
			t.Errorf("pathOf(%q) = %q, want %q", in, got, want)
		}
	}
}
