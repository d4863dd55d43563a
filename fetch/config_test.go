package fetch

import (
	"errors"
	"testing"
	"time"
)

func TestParseResolve(t *testing.T) {
	cases := []struct {
		in      string
		want    ResolveRule
		wantErr bool
	}{
		{"*.sim.test=127.0.0.1:8081", ResolveRule{"*.sim.test", "127.0.0.1:8081"}, false},
		{"A.Example.=10.0.0.1", ResolveRule{"a.example", "10.0.0.1"}, false},
		{"v6.test=[::1]:80", ResolveRule{"v6.test", "[::1]:80"}, false},
		{"v6.test=::1", ResolveRule{"v6.test", "::1"}, false},
		{"noequals", ResolveRule{}, true},
		{"=127.0.0.1", ResolveRule{}, true},
		{"*.=127.0.0.1", ResolveRule{}, true},
		{"a.*.b=127.0.0.1", ResolveRule{}, true},
		{"host=not-an-ip", ResolveRule{}, true},
		{"host=example.com:80", ResolveRule{}, true},
		{"host=127.0.0.1:0", ResolveRule{}, true},
		{"host=127.0.0.1:99999", ResolveRule{}, true},
		{"host:80=127.0.0.1", ResolveRule{}, true},
	}
	for _, c := range cases {
		got, err := ParseResolve(c.in)
		if (err != nil) != c.wantErr {
			t.Errorf("ParseResolve(%q) err = %v, wantErr %v", c.in, err, c.wantErr)
			continue
		}
		if err != nil && !errors.Is(err, ErrBadResolve) {
			t.Errorf("ParseResolve(%q) err %v does not wrap ErrBadResolve", c.in, err)
		}
		if got != c.want {
			t.Errorf("ParseResolve(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestResolveTable(t *testing.T) {
	tab := newResolveTable([]ResolveRule{
		{"*.sim.test", "127.0.0.1:8081"},
		{"*.deep.sim.test", "127.0.0.2"},
		{"exact.sim.test", "127.0.0.3:9000"},
		{"plain.test", "127.0.0.4"},
	})
	cases := []struct {
		host, port, want string
		ok               bool
	}{
		{"a.sim.test", "80", "127.0.0.1:8081", true},
		{"x.y.sim.test", "443", "127.0.0.1:8081", true},
		{"a.deep.sim.test", "8080", "127.0.0.2:8080", true}, // longest suffix; keeps URL port
		{"exact.sim.test", "80", "127.0.0.3:9000", true},    // exact beats wildcard
		{"sim.test", "80", "", false},                       // wildcard needs a label
		{"plain.test", "81", "127.0.0.4:81", true},
		{"other.test", "80", "", false},
		{"xsim.test", "80", "", false},
	}
	for _, c := range cases {
		got, ok := tab.lookup(c.host, c.port)
		if got != c.want || ok != c.ok {
			t.Errorf("lookup(%q,%q) = %q,%v want %q,%v", c.host, c.port, got, ok, c.want, c.ok)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []Config{
		{UserAgent: "x\r\ny"},
		{Timeout: -1},
		{MaxHeaderSize: 10},
		{Resolve: []ResolveRule{{"a", "nope"}}},
	}
	for i, c := range bad {
		if _, err := New(c); err == nil {
			t.Errorf("case %d: New accepted %+v", i, c)
		}
	}
	c := DefaultConfig()
	if c.MaxBodySize != 10<<20 || c.MaxHeaderSize != 64<<10 || c.UserAgent != DefaultUserAgent || c.MaxConnsPerHost != 4 {
		t.Errorf("defaults wrong: %+v", c)
	}
}

func TestFastTestConfigValid(t *testing.T) {
	c := FastTestConfig()
	if err := c.Validate(); err != nil || c.MaxIdleConnDuration > 100*time.Millisecond {
		t.Fatalf("%v %+v", err, c)
	}
}
