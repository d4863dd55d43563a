package main

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Precedence: flags > environment > config file > defaults; lists on the command line
// replace the file's.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	os.WriteFile(file, []byte("delay: 3s\nconcurrency: 7\nmax-pages: 11\nseed: [http://a.test/, http://b.test/]\nresolve: ['*.test=127.0.0.1:1']\n"), 0o644)
	t.Setenv("CRAWLNODE_CONCURRENCY", "9")
	t.Setenv("CRAWLNODE_PER_HOST", "2")

	f := newCrawlFlags("crawl")
	if err := f.parse([]string{"--config", file, "--max-pages", "13", "--seed", "http://c.test/"}); err != nil {
		t.Fatal(err)
	}
	c := f.cfg
	if c.Delay != 3*time.Second {
		t.Errorf("delay %v, want the file's 3s", c.Delay)
	}
	if c.Concurrency != 9 || c.PerHost != 2 {
		t.Errorf("concurrency %d per-host %d, want the environment's 9 and 2", c.Concurrency, c.PerHost)
	}
	if c.MaxPages != 13 {
		t.Errorf("max-pages %d, want the flag's 13", c.MaxPages)
	}
	if strings.Join(c.Seeds, " ") != "http://c.test/" {
		t.Errorf("seeds %v, want the command line's list only", c.Seeds)
	}
	if len(c.Resolve) != 1 || c.Resolve[0].Pattern != "*.test" {
		t.Errorf("resolve %+v, want the file's rule", c.Resolve)
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	unknown := filepath.Join(dir, "u.yaml")
	os.WriteFile(unknown, []byte("delay: 1s\nbogus: 3\n"), 0o644)
	badValue := filepath.Join(dir, "b.yaml")
	os.WriteFile(badValue, []byte("delay: soon\n"), 0o644)
	broken := filepath.Join(dir, "x.yaml")
	os.WriteFile(broken, []byte("delay: [\n"), 0o644)
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--config", unknown}, "", `unknown setting "bogus"`},
		{[]string{"--config", badValue}, "", "delay"},
		{[]string{"--config", broken}, "", "config file"},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, "", "config file"},
		{nil, "lots", "CRAWLNODE_CONCURRENCY"},
	} {
		if tc.env != "" {
			t.Setenv("CRAWLNODE_CONCURRENCY", tc.env)
		}
		err := newCrawlFlags("crawl").parse(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one naming %q", tc.args, err, tc.want)
		}
	}
}

// The sample config in the repository is valid and means the defaults it documents.
func TestSampleConfig(t *testing.T) {
	seeds := filepath.Join(t.TempDir(), "seeds.txt")
	os.WriteFile(seeds, []byte("http://a.test/\n"), 0o644)
	f := newCrawlFlags("crawl")
	if err := f.parse([]string{"--config", "../../crawlnode.example.yaml", "--seeds", seeds}); err != nil {
		t.Fatalf("sample config: %v", err)
	}
	d := newCrawlFlags("crawl")
	if err := d.parse([]string{"--seeds", seeds}); err != nil {
		t.Fatal(err)
	}
	a, b := f.cfg, d.cfg
	a.Logger, b.Logger = nil, nil
	if a.Delay != b.Delay || a.Concurrency != b.Concurrency || a.MaxDepth != b.MaxDepth || a.HTTPAddr != b.HTTPAddr ||
		a.MinFreeDisk != b.MinFreeDisk || a.Filters.MinTextLength != b.Filters.MinTextLength || a.UserAgent != b.UserAgent {
		t.Errorf("the sample config differs from the defaults:\n%+v\n%+v", a, b)
	}
}

func TestConfigDNS(t *testing.T) {
	f := newCrawlFlags("crawl")
	if err := f.parse([]string{"--seed", "http://a.test/", "--dns", "127.0.0.1:5353,127.0.0.2", "--dns", "::1", "--dns-cache-ttl", "90s"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.cfg.DNSServers, " "); got != "127.0.0.1:5353 127.0.0.2 ::1" || f.cfg.DNSCacheTTL != 90*time.Second {
		t.Errorf("dns servers %q ttl %v", got, f.cfg.DNSCacheTTL)
	}
	if err := newCrawlFlags("crawl").parse([]string{"--seed", "http://a.test/", "--dns", "dns.example:53"}); err == nil || !strings.Contains(err.Error(), "--dns") {
		t.Errorf("a DNS server by name: err %v, want a --dns usage error", err)
	}
}

// Duration flags take a bare number as seconds, except the recrawl bounds, which need a
// unit; a bad value says what is expected wherever it came from.
func TestDurationFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		get  func(*crawlFlags) time.Duration
		want time.Duration
	}{
		{[]string{"--delay", "0.5"}, func(f *crawlFlags) time.Duration { return f.cfg.Delay }, 500 * time.Millisecond},
		{[]string{"--delay", "2"}, func(f *crawlFlags) time.Duration { return f.cfg.Delay }, 2 * time.Second},
		{[]string{"--delay", "0"}, func(f *crawlFlags) time.Duration { return f.cfg.Delay }, 0},
		{[]string{"--delay", "250ms"}, func(f *crawlFlags) time.Duration { return f.cfg.Delay }, 250 * time.Millisecond},
		{[]string{"--delay=1.25"}, func(f *crawlFlags) time.Duration { return f.cfg.Delay }, 1250 * time.Millisecond},
		{[]string{"--timeout", "7.5"}, func(f *crawlFlags) time.Duration { return f.cfg.FetchTimeout }, 7500 * time.Millisecond},
		{[]string{"--robots-retry", "0.2"}, func(f *crawlFlags) time.Duration { return f.cfg.RobotsRetryBase }, 200 * time.Millisecond},
		{[]string{"--retry-base", "3"}, func(f *crawlFlags) time.Duration { return f.cfg.RetryBase }, 3 * time.Second},
		{[]string{"--dns-cache-ttl", "90"}, func(f *crawlFlags) time.Duration { return f.cfg.DNSCacheTTL }, 90 * time.Second},
		{[]string{"--grace", "45"}, func(f *crawlFlags) time.Duration { return f.cfg.Cluster.Grace }, 45 * time.Second},
		{[]string{"--replica-interval", "-1"}, func(f *crawlFlags) time.Duration { return f.cfg.Cluster.ReplicaInterval }, -time.Second},
		{[]string{"--recrawl-min", "6h", "--recrawl-max", "48h"}, func(f *crawlFlags) time.Duration { return f.cfg.RecrawlMax }, 48 * time.Hour},
	} {
		f := newCrawlFlags("crawl")
		if err := f.parse(append([]string{"--seed", "http://a.test/"}, tc.args...)); err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if got := tc.get(f); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.args, got, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--delay", "x"}, `--delay: want a duration such as 1s, 500ms or a number of seconds such as 0.5; got "x"`},
		{[]string{"--timeout", "NaN"}, `--timeout: want a duration such as 1s, 500ms or a number of seconds such as 0.5; got "NaN"`},
		{[]string{"--timeout", "inf"}, `--timeout: want a duration`},
		{[]string{"--delay", "0x1p-1"}, `--delay: want a duration`},
		{[]string{"--delay", "1e300"}, `--delay: want a duration`},
		{[]string{"--recrawl-min", "6"}, `--recrawl-min: want a duration with a unit such as 6h or 720h (a bare number is ambiguous here); got "6"`},
		{[]string{"--delay", "-0.5"}, `--delay must be >= 0`},
	} {
		err := newCrawlFlags("crawl").parse(append([]string{"--seed", "http://a.test/"}, tc.args...))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
	}
	t.Setenv("CRAWLNODE_DELAY", "soon")
	err := newCrawlFlags("crawl").parse([]string{"--seed", "http://a.test/"})
	if want := `CRAWLNODE_DELAY: want a duration such as 1s, 500ms or a number of seconds such as 0.5; got "soon"`; err == nil || err.Error() != want {
		t.Errorf("bad variable: err %v, want %q", err, want)
	}
	t.Setenv("CRAWLNODE_DELAY", "0.25")
	f := newCrawlFlags("crawl")
	if err := f.parse([]string{"--seed", "http://a.test/"}); err != nil || f.cfg.Delay != 250*time.Millisecond {
		t.Errorf("CRAWLNODE_DELAY=0.25: delay %v err %v, want 250ms", f.cfg.Delay, err)
	}
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, []byte("delay: 1.5\n"), 0o644)
	t.Setenv("CRAWLNODE_DELAY", "")
	f = newCrawlFlags("crawl")
	if err := f.parse([]string{"--seed", "http://a.test/", "--config", file}); err != nil || f.cfg.Delay != 1500*time.Millisecond {
		t.Errorf("config file delay: 1.5: delay %v err %v, want 1.5s", f.cfg.Delay, err)
	}
}

// An empty CRAWLNODE_* variable counts as unset, for every flag: the file's value or the
// default stands.
func TestEmptyEnvIsUnset(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, []byte("delay: 3s\nhttp: 127.0.0.1:9999\n"), 0o644)
	var want crawlFlags
	d := newCrawlFlags("crawl")
	if err := d.parse([]string{"--seed", "http://a.test/", "--config", file}); err != nil {
		t.Fatal(err)
	}
	want = *d
	d.fs.VisitAll(func(fl *flag.Flag) {
		if fl.Name != "config" {
			t.Setenv(envName(fl.Name), "")
		}
	})
	f := newCrawlFlags("crawl")
	if err := f.parse([]string{"--seed", "http://a.test/", "--config", file}); err != nil {
		t.Fatalf("every CRAWLNODE_* variable empty: %v", err)
	}
	a, b := f.cfg, want.cfg
	a.Logger, b.Logger = nil, nil
	if !reflect.DeepEqual(a, b) {
		t.Errorf("empty variables changed the config:\n%+v\nwant\n%+v", a, b)
	}
	if a.Delay != 3*time.Second || a.HTTPAddr != "127.0.0.1:9999" {
		t.Errorf("delay %v http %q, want the file's 3s and 127.0.0.1:9999", a.Delay, a.HTTPAddr)
	}
}

// --max-depth 0 (the seeds only) passes from the flag, the environment and the file as an
// explicit 0, not as "use the default".
func TestMaxDepthZero(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, []byte("max-depth: 0\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		env  string
	}{
		{"flag", []string{"--max-depth", "0"}, ""},
		{"environment", nil, "0"},
		{"file", []string{"--config", file}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("CRAWLNODE_MAX_DEPTH", tc.env)
			}
			f := newCrawlFlags("crawl")
			if err := f.parse(append([]string{"--seed", "http://a.test/"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if f.cfg.MaxDepth != 0 || !f.cfg.MaxDepthSet {
				t.Errorf("max depth %d set %v, want an explicit 0", f.cfg.MaxDepth, f.cfg.MaxDepthSet)
			}
		})
	}
	f := newCrawlFlags("crawl")
	if err := f.parse([]string{"--seed", "http://a.test/"}); err != nil || f.cfg.MaxDepth != 16 {
		t.Errorf("default max depth %d (err %v), want 16", f.cfg.MaxDepth, err)
	}
	if err := newCrawlFlags("crawl").parse([]string{"--seed", "http://a.test/", "--max-depth", "-1"}); err == nil || !strings.Contains(err.Error(), "--max-depth must be >= 0") {
		t.Errorf("--max-depth -1: err %v", err)
	}
}

// --allow-ips comes from the file (a YAML list) and the environment (space-separated), or
// from the command line (repeatable, comma-separated), which replaces them, as other lists; a bad range is a
// usage error naming the value.
func TestConfigAllowIPs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	os.WriteFile(file, []byte("allow-ips: [10.0.0.0/8, 'fd00::/8']\n"), 0o644)
	got := func(args ...string) []string {
		t.Helper()
		f := newCrawlFlags("crawl")
		if err := f.parse(args); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range f.cfg.AllowIPs {
			out = append(out, p.String())
		}
		return out
	}
	if g := got(); len(g) != 0 {
		t.Errorf("default %v, want none (safe by default)", g)
	}
	if g := got("--config", file); !reflect.DeepEqual(g, []string{"10.0.0.0/8", "fd00::/8"}) {
		t.Errorf("file: %v", g)
	}
	t.Setenv("CRAWLNODE_ALLOW_IPS", "192.168.0.0/16 172.16.5.4")
	if g := got("--config", file); !reflect.DeepEqual(g, []string{"10.0.0.0/8", "fd00::/8", "192.168.0.0/16", "172.16.5.4/32"}) {
		t.Errorf("file and environment: %v", g)
	}
	if g := got("--allow-ips", "127.0.0.0/8,::1", "--allow-ips", "100.64.0.0/10"); !reflect.DeepEqual(g, []string{"127.0.0.0/8", "::1/128", "100.64.0.0/10"}) {
		t.Errorf("flags: %v", g)
	}
	f := newCrawlFlags("crawl")
	if err := f.parse([]string{"--allow-ips", "intranet.example"}); err == nil || !strings.Contains(err.Error(), "intranet.example") {
		t.Errorf("bad value: %v", err)
	}
}
