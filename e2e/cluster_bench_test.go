package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/ring"
	"github.com/crawlnode/crawlnode/simweb"
)

// BenchmarkCluster measures the cluster on one machine, in one run, on one simweb config
// (the default 200-host web), judged by simweb's report:
//
//   - one node against three nodes (processes on loopback), each node with the same
//     --concurrency: pages/s by the server's log, wall time, CPU seconds of all nodes;
//
//   - forwarded links/s and wire bytes per forwarded link (the three-node run);
//
//   - handoff: two nodes, a third joins at ~30% of the requests: partitions moved, bytes,
//     MB/s and the mean time to move one partition;
//
//   - recovery: three nodes with --grace 5s, a non-leader killed with SIGKILL for good:
//     time from the kill to the first request for a host of its partitions.
//
//     go test -run '^$' -bench BenchmarkCluster -benchtime 1x -timeout 60m ./e2e
func BenchmarkCluster(b *testing.B) {
	if testing.Short() {
		b.Skip("cluster benchmark")
	}
	for i := 0; i < b.N; i++ {
		var rows []string
		row := func(format string, a ...any) {
			rows = append(rows, fmt.Sprintf(format, a...))
		}
		one := benchCrawl(b, 1, nil)
		three := benchCrawl(b, 3, nil)
		row("| 1 node | %d | %s | %.0f | %.1f | %.3f |", one.requests, one.wall.Round(time.Millisecond), one.pagesPerSec, one.cpu, 1000*one.cpu/float64(one.requests))
		row("| 3 nodes | %d | %s | %.0f | %.1f | %.3f |", three.requests, three.wall.Round(time.Millisecond), three.pagesPerSec, three.cpu, 1000*three.cpu/float64(three.requests))
		row("")
		row("forwarded (3 nodes): %d links, %.0f links/s over the crawl, %.1f wire bytes per link", three.fwdLinks, float64(three.fwdLinks)/three.wall.Seconds(), float64(three.fwdBytes)/float64(max(1, three.fwdLinks)))
		b.ReportMetric(three.pagesPerSec/one.pagesPerSec, "3node/1node-pages/s")
		b.ReportMetric(float64(three.fwdBytes)/float64(max(1, three.fwdLinks)), "bytes/forwarded-link")

		ho := benchCrawl(b, 2, func(cr *clusterRun, w *simweb.Web) {
			waitLogged(b, w, 8000, 5*time.Minute)
			cr.add("n3", "--join", cr.nodes[0].bind)
		})
		mbps := float64(ho.handoffBytes) / 1e6 / max(ho.handoffSeconds, 1e-9)
		row("handoff (2 nodes, a 3rd joins at ~30%%): %d partitions moved, %.2f MB streamed, %.2f MB/s, %.0f ms per partition (pause to drop), coverage %.4f",
			ho.handoffs, float64(ho.handoffBytes)/1e6, mbps, 1000*ho.handoffSeconds/float64(max(1, ho.handoffs)), ho.coverage)
		b.ReportMetric(1000*ho.handoffSeconds/float64(max(1, ho.handoffs)), "ms/partition-handoff")

		var recovery time.Duration
		rec := benchCrawl(b, 3, func(cr *clusterRun, w *simweb.Web) {
			waitLogged(b, w, 8000, 5*time.Minute)
			v, err := cr.nodes[0].view(b)
			if err != nil {
				b.Fatal(err)
			}
			var victim *cnode
			for _, n := range cr.nodes {
				if n.name != v.Leader {
					victim = n
				}
			}
			held := map[uint16]bool{}
			for _, l := range v.Leases {
				if l.Owner == victim.name {
					held[uint16(l.Partition)] = true
				}
			}
			killed := time.Now()
			victim.c.cmd.Process.Signal(syscall.SIGKILL)
			victim.waitExit(b, 10*time.Second)
			for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && recovery == 0; time.Sleep(50 * time.Millisecond) {
				for _, r := range w.Log() {
					if r.Arrival.After(killed) && held[ring.PartitionOf(strings.ToLower(r.Host))] {
						recovery = r.Arrival.Sub(killed)
						break
					}
				}
			}
		})
		row("recovery (3 nodes, --grace 5s, a non-leader killed for good): first request for its partitions %s after the kill; coverage %.4f (its queued URLs are lost without replicas), politeness violations %d",
			recovery.Round(time.Millisecond), rec.coverage, rec.politeness)
		b.ReportMetric(recovery.Seconds(), "s-to-recover")
		b.Logf("\n| cluster | requests | wall | pages/s (server) | CPU s (all nodes) | CPU s / 1,000 pages |\n|---|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
	}
}

type benchResult struct {
	requests                   int
	wall                       time.Duration
	pagesPerSec, cpu, coverage float64
	fwdLinks, fwdBytes         int64
	handoffs, handoffBytes     int64
	handoffSeconds             float64
	politeness                 int
	replBytes, replRecords     int64
	replLagMax                 float64 // the largest copy age any node reported
}

// BenchmarkReplication: three nodes crawl the default web with partition replicas off
// (--replica-interval -1) and on (the default, 1s), one after the other in one run:
// pages/s and CPU of both, the replication's wire bytes and records, and the oldest a
// copy got (the work a lost node would undo).
//
//	go test -run '^$' -bench BenchmarkReplication -benchtime 1x -timeout 60m ./e2e
func BenchmarkReplication(b *testing.B) {
	if testing.Short() {
		b.Skip("cluster benchmark")
	}
	for i := 0; i < b.N; i++ {
		off := benchCrawl(b, 3, nil, "--replica-interval", "-1s")
		on := benchCrawl(b, 3, nil)
		var rows []string
		for _, r := range []struct {
			name string
			res  benchResult
		}{{"replicas off", off}, {"replicas on (1 s)", on}} {
			rows = append(rows, fmt.Sprintf("| %s | %d | %s | %.0f | %.1f | %.3f | %.1f | %d | %.2f s |", r.name, r.res.requests, r.res.wall.Round(time.Millisecond),
				r.res.pagesPerSec, r.res.cpu, 1000*r.res.cpu/float64(max(1, r.res.requests)), float64(r.res.replBytes)/1e6, r.res.replRecords, r.res.replLagMax))
		}
		b.ReportMetric(on.pagesPerSec/off.pagesPerSec, "on/off-pages/s")
		b.ReportMetric(on.cpu/off.cpu, "on/off-cpu")
		b.ReportMetric(on.replLagMax, "max-lag-s")
		b.Logf("\n| 3 nodes | requests | wall | pages/s (server) | CPU s (all nodes) | CPU s / 1,000 pages | replica MB sent | replica records | largest copy age |\n|---|---|---|---|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
	}
}

// benchCrawl crawls the default web with k nodes to completion (during runs the
// disruption, if any) and sums the nodes' final transfer figures.
func benchCrawl(b *testing.B, k int, during func(*clusterRun, *simweb.Web), extra ...string) benchResult {
	w, addr := web(b, func(c *simweb.Config) { c.Hosts, c.Seed = 200, 1 })
	seeds := seedsFile(b, w)
	grace := 30 * time.Second
	if during != nil && k == 3 {
		grace = 5 * time.Second
	}
	base := clusterArgs(addr, 0, grace)
	for i, a := range base {
		if a == "warn" {
			base[i] = "info" // the final "crawl stopped" line carries the transfer counters
		}
	}
	cr := newClusterRun(b, append(base, extra...))
	start := time.Now()
	n1 := cr.add("n1", "--bootstrap-expect", strconv.Itoa(k), "--seeds", seeds)
	for j := 2; j <= k; j++ {
		cr.add(fmt.Sprintf("n%d", j), "--bootstrap-expect", strconv.Itoa(k), "--join", n1.bind)
	}
	if during != nil {
		during(cr, w)
	}
	cr.waitAll(20 * time.Minute)
	res := benchResult{wall: time.Since(start)}
	rep := w.Report(reportOptions(0))
	res.requests, res.coverage, res.politeness = rep.Requests, rep.Coverage, rep.PolitenessViolations
	if during == nil || k != 3 {
		if rep.Coverage < 1 || rep.PolitenessViolations > 0 {
			b.Errorf("%d nodes: coverage %.4f, politeness violations %d", k, rep.Coverage, rep.PolitenessViolations)
		}
	}
	first, last := fetchSpan(w.Log())
	res.pagesPerSec = float64(rep.Requests) / last.Sub(first).Seconds()
	for _, n := range cr.nodes {
		if n.c.cmd.ProcessState != nil {
			res.cpu += n.c.cpuSeconds()
		}
		sc := bufio.NewScanner(strings.NewReader(n.c.stderr.String()))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l struct {
				Msg            string `json:"msg"`
				ForwardedLinks int64  `json:"forwarded_links"`
				ForwardedBytes int64  `json:"forwarded_bytes"`
				Handoffs       int64  `json:"handoffs"`
				HandoffBytes   int64  `json:"handoff_bytes"`
				HandoffSeconds string `json:"handoff_seconds"`
				ReplicaBytes   int64  `json:"replica_bytes"`
				ReplicaRecords int64  `json:"replica_records"`
				ReplicaLagMax  string `json:"replica_lag_max_seconds"`
			}
			if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "crawl stopped" {
				continue
			}
			res.fwdLinks += l.ForwardedLinks
			res.fwdBytes += l.ForwardedBytes
			res.handoffs += l.Handoffs
			res.handoffBytes += l.HandoffBytes
			s, _ := strconv.ParseFloat(l.HandoffSeconds, 64)
			res.handoffSeconds += s
			res.replBytes += l.ReplicaBytes
			res.replRecords += l.ReplicaRecords
			lag, _ := strconv.ParseFloat(l.ReplicaLagMax, 64)
			res.replLagMax = max(res.replLagMax, lag)
		}
	}
	return res
}
