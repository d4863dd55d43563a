package ring

import (
	"fmt"
	"testing"
)

func TestPartitionOfStableAndInRange(t *testing.T) {
	cases := map[string]uint16{}
	for i := 0; i < 1000; i++ {
		h := fmt.Sprintf("h%d.sim.test", i)
		p := PartitionOf(h)
		if p >= PartitionCount {
			t.Fatalf("partition %d out of range for %s", p, h)
		}
		cases[h] = p
	}
	for h, p := range cases {
		if PartitionOf(h) != p {
			t.Fatalf("partition of %s changed", h)
		}
	}
}

func TestPartitionOfSpreadsHosts(t *testing.T) {
	counts := make([]int, PartitionCount)
	const n = 271 * 200
	for i := 0; i < n; i++ {
		counts[PartitionOf(fmt.Sprintf("h%d.sim.test", i))]++
	}
	maxc := 0
	for _, c := range counts {
		if c == 0 {
			t.Fatal("a partition got no host")
		}
		maxc = max(maxc, c)
	}
	// mean is 200; a good hash keeps the fullest partition well under 1.5x the mean.
	if maxc > 300 {
		t.Fatalf("fullest partition holds %d hosts, mean 200", maxc)
	}
	t.Logf("hosts per partition: max %d, mean %d", maxc, n/PartitionCount)
}

func TestSiteKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"example.org", "example.org"},
		{"www.example.org", "www.example.org"},
		{"a.www.example.org", "www.example.org"},
		{"x.y.z.example.org:8080", "z.example.org:8080"},
		{"h7.sim.test", "h7.sim.test"},
		{"s123.h7.sim.test", "h7.sim.test"},
		{"s1.s2.h7.sim.test:8081", "h7.sim.test:8081"},
		{"localhost", "localhost"},
		{"localhost:8080", "localhost:8080"},
		{"10.1.2.3", "10.1.2.3"},
		{"10.1.2.3:8080", "10.1.2.3:8080"},
		{"[::1]:8080", "[::1]:8080"},
		{"", ""},
	} {
		if got := SiteKey(c.in); got != c.want {
			t.Errorf("SiteKey(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// A host's invented subdomains share its partition; its siblings need not.
	if PartitionOf("trap1.h7.sim.test") != PartitionOf("h7.sim.test") || PartitionOf("a.b.h7.sim.test") != PartitionOf("h7.sim.test") {
		t.Error("subdomains of h7.sim.test left its partition")
	}
}
