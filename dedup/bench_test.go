package dedup

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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

// payloadWorkload is n pages' payload digests: every 4th page repeats an earlier page's
// payload (a revisit record), the others are new.
func payloadWorkload(n int) []string {
	r := rand.New(rand.NewPCG(4, 4))
	out := make([]string, n)
	for i := range out {
		if i > 4 && i%4 == 0 {
			out[i] = out[r.IntN(i)]
			continue
		}
		out[i] = fmt.Sprintf("sha1:%032X", r.Uint64())
	}
	return out
}

// payloadPage is what the fetch path does for one 200 response: ask for the payload's
// original; a page with none (or whose owner did not answer in time: a fallback, counted
// in the stats) is archived in full and handed to the committer (regs), which registers
// its batch in one call.
func payloadPage(p *Payloads, regs chan<- PayloadRecord, digest string, i int) {
	if _, found, _ := p.Lookup(context.Background(), digest); !found {
		regs <- PayloadRecord{Digest: digest, Original: Original{URL: fmt.Sprintf("http://h%d.sim.test/p", i), Date: time.Unix(int64(i), 0), Node: "n0", File: "crawl-n0-00001.warc.gz", Offset: int64(i) * 4096, Length: 4000}}
	}
}

// committer registers what arrives on regs in batches (as the node's group commit does)
// until regs is closed; done is closed then.
func committer(p *Payloads, regs <-chan PayloadRecord, done chan<- struct{}) {
	defer close(done)
	var batch []PayloadRecord
	for r := range regs {
		batch = append(batch[:0], r)
	fill:
		for len(batch) < 512 {
			select {
			case r, ok := <-regs:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		p.Register(batch)
	}
}

// BenchmarkPayloads is the cluster's identical-payload decision per page (b.N pages from
// 64 fetch slots at once, after 100k pages registered): on one node (in process) and on
// three (two thirds of the digests on the two others, over loopback HTTP, batched per
// owner). wire-bytes/page counts request and answer bodies of lookups and registrations;
// cpu-us/page the whole process (owners included).
func BenchmarkPayloads(b *testing.B) {
	for _, k := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes-%d", k), func(b *testing.B) {
			const warm, slots = 100_000, 64
			_, ns := newCluster(b, k)
			p, err := NewPayloads(PayloadConfig{Store: ns[0].store, Cluster: ns[0], Bound: 10 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			digests := payloadWorkload(warm + b.N)
			for i := 0; i < warm; i += 1000 {
				var recs []PayloadRecord
				for j := i; j < i+1000; j++ {
					recs = append(recs, PayloadRecord{Digest: digests[j], Original: Original{URL: fmt.Sprintf("http://w%d.sim.test/", j), Node: "n0", File: "f"}})
				}
				p.Register(recs)
			}
			p.Drain(time.Minute)
			st := p.Stats()
			bytes0 := st.BytesSent.Load() + st.BytesRecv.Load()
			cpu0 := cpuTime()
			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			regs, committed := make(chan PayloadRecord, 1024), make(chan struct{})
			go committer(p, regs, committed)
			for range slots {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1)) - 1
						if i >= b.N {
							return
						}
						payloadPage(p, regs, digests[warm+i], warm+i)
					}
				}()
			}
			wg.Wait()
			close(regs)
			<-committed
			p.Drain(time.Minute)
			b.StopTimer()
			b.ReportMetric(float64(st.BytesSent.Load()+st.BytesRecv.Load()-bytes0)/float64(b.N), "wire-bytes/page")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e3, "cpu-us/page")
			b.ReportMetric(float64(st.Requests.Load())/float64(b.N+warm/1000), "requests/page")
			b.ReportMetric(float64(st.FallbackTimeout.Load()+st.FallbackError.Load())/float64(b.N), "fallbacks/page")
		})
	}
}

// BenchmarkPayloadFetchStage is the fetch stage's throughput with and without the payload
// decisions, from one run: 64 slots, each page a simulated 20 ms fetch (a fast LAN host)
// followed, when on, by the three-node decision of BenchmarkPayloads. pages/s of both and
// their ratio are reported.
func BenchmarkPayloadFetchStage(b *testing.B) {
	const slots, fetch, pages = 64, 20 * time.Millisecond, 6400
	_, ns := newCluster(b, 3)
	p, err := NewPayloads(PayloadConfig{Store: ns[0].store, Cluster: ns[0]})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	run := func(on bool, digests []string) float64 {
		var next atomic.Int64
		var wg sync.WaitGroup
		regs, committed := make(chan PayloadRecord, 1024), make(chan struct{})
		go committer(p, regs, committed)
		start := time.Now()
		for range slots {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= len(digests) {
						return
					}
					time.Sleep(fetch)
					if on {
						payloadPage(p, regs, digests[i], i)
					}
				}
			}()
		}
		wg.Wait()
		close(regs)
		<-committed
		return float64(len(digests)) / time.Since(start).Seconds()
	}
	var off, on float64
	for n := 0; n < b.N; n++ {
		digests := payloadWorkload(pages)
		for i := range digests {
			digests[i] += fmt.Sprint(n) // a fresh workload each round
		}
		off += run(false, digests)
		on += run(true, digests)
	}
	b.ReportMetric(off/float64(b.N), "pages/s-off")
	b.ReportMetric(on/float64(b.N), "pages/s-on")
	b.ReportMetric(on/off, "on/off")
	st := p.Stats()
	b.ReportMetric(float64(st.FallbackTimeout.Load()+st.FallbackError.Load())/float64(b.N*pages), "fallbacks/page")
}
