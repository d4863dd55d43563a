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
