package dedup

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/corpus"
)

// workload is corpus's BenchmarkDedup workload: distinct pages, every 10th an exact copy
// and every 10th (offset 5) a near copy (2 bits) of an earlier page.
func workload(n int) []corpus.DedupPage {
	r := rand.New(rand.NewPCG(9, 9))
	var out []corpus.DedupPage
	for i := 0; i < n; i++ {
		h := make([]byte, 32)
		for j := range h {
			h[j] = byte(r.Uint32())
		}
		fp := r.Uint64()
		switch {
		case i > 10 && i%10 == 0:
			k := r.IntN(i)
			h, fp = out[k].Hash, out[k].SimHash
		case i > 10 && i%10 == 5:
			fp = out[r.IntN(i)].SimHash
			for range 2 {
				fp ^= 1 << uint(r.IntN(64))
			}
		}
		out = append(out, corpus.DedupPage{Ref: fmt.Sprintf("http://h%d.sim.test/p\t%d", i, i), Hash: h, SimHash: fp})
	}
	return out
}

// BenchmarkDecide is the cluster's duplicate decision per page (b.N pages, in batches of
// 64 as the stage asks), after a 100k-page index: on one node (every key here, no network
// hop) and on three (two thirds of the keys on the two others, over loopback HTTP).
// wire-bytes/page counts request and answer bodies.
func BenchmarkDecide(b *testing.B) {
	for _, k := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes-%d", k), func(b *testing.B) {
			const warm, batch = 100_000, 64
			_, ns := newCluster(b, k)
			pages := workload(warm + 200_000)
			d := ns[0].dec
			ctx := context.Background()
			for i := 0; i < warm; i += 1000 {
				if _, err := d.Decide(ctx, pages[i:i+1000]); err != nil {
					b.Fatal(err)
				}
			}
			st := d.Stats()
			bytes0 := st.BytesSent.Load() + st.BytesReceived.Load()
			i := warm
			cpu0 := cpuTime()
			b.ResetTimer()
			for n := 0; n < b.N; n += batch {
				m := min(batch, b.N-n)
				if _, err := d.Decide(ctx, pages[i:i+m]); err != nil {
					b.Fatal(err)
				}
				i += m
			}
			b.ReportMetric(float64(st.BytesSent.Load()+st.BytesReceived.Load()-bytes0)/float64(b.N), "wire-bytes/page")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e3, "cpu-us/page")
		})
	}
}

// cpuTime is the process's user and system CPU time so far (every node of a test cluster
// runs in this process, so it counts the owners' work too).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
