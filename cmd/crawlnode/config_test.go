package main

import (
	"os"
	"path/filepath"
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
