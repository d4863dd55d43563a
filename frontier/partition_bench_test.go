package frontier

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/snapshot"
	"github.com/dgraph-io/badger/v4"
)

// BenchmarkHandoff moves one partition holding 100k queued and 300k seen records (the
// queued ones included) over 1000 hosts from one in-memory Badger to another: export,
// snapshot stream through a pipe, verify, import with merge. Each iteration imports into
// a fresh frontier.
func BenchmarkHandoff(b *testing.B) {
	const (
		part    = 7
		hosts   = 1000
		queued  = 100_000
		fetched = 200_000
	)
	clk := newFakeClock()
	cfg := func(db *badger.DB) Config {
		c := partCfg(db, clk)
		c.PartitionOf = func(string) uint16 { return part }
		c.ExpectedURLs = 1 << 20
		return c
	}
	src := openDB(b, "")
	// Write the source state directly (Add and Done for 300k URLs would dominate setup).
	wb := src.NewWriteBatch()
	now := clk.Now()
	for i := range queued + fetched {
		h := fmt.Sprintf("host%04d.example.org", i%hosts)
		url := fmt.Sprintf("https://%s/section/%d/article-%d.html", h, i/hosts%50, i)
		hash := URLHash(url)
		sr := SeenRecord{URL: url, State: StateQueued, At: now}
		if i >= queued {
			sr = SeenRecord{URL: url, State: StateFetched, Status: 200, At: now, Meta: []byte("warc-00012.warc.gz:123456789")}
		} else {
			r := qrec{URL: url, From: fmt.Sprintf("https://%s/", h), Depth: 2}
			if err := wb.Set(qKey(part, h, 0, 2, uint64(i+1)), r.encode()); err != nil {
				b.Fatal(err)
			}
		}
		if err := wb.Set(hashKey(famSeen, part, hash), sr.encode()); err != nil {
			b.Fatal(err)
		}
		if i < hosts {
			hr := hostRec{DelaySet: true, Delay: time.Second, Admitted: (queued + fetched) / hosts}
			if err := wb.Set(hKey(part, h), hr.encode()); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := wb.Flush(); err != nil {
		b.Fatal(err)
	}
	a := openF(b, cfg(src))
	records := queued + queued + fetched + hosts

	b.ResetTimer()
	var wire int64
	for range b.N {
		b.StopTimer()
		dst := openDB(b, "")
		f := openF(b, cfg(dst))
		b.StartTimer()
		pr, pw := io.Pipe()
		errc := make(chan error, 1)
		go func() {
			st, err := snapshot.Write(pw, snapshot.Header{Partition: part, Epoch: 2, From: "a", To: "b"}, func(fn func(byte, []byte, []byte) error) error {
				return a.ExportPartition(part, fn)
			})
			wire = st.Bytes
			pw.CloseWithError(err)
			errc <- err
		}()
		rd, err := snapshot.Read(pr, nil)
		if err != nil {
			b.Fatal(err)
		}
		ist, err := f.ImportPartition(part, rd.Next)
		rd.Close()
		if err != nil {
			b.Fatal(err)
		}
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
		if ist.Records != records || ist.Queued != queued {
			b.Fatalf("import %+v", ist)
		}
		b.StopTimer()
		_ = f.Close()
		_ = dst.Close()
		b.StartTimer()
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(wire)/1e6/sec, "MB/s")
	b.ReportMetric(float64(records)/sec, "records/s")
	b.ReportMetric(float64(wire)/float64(records), "wire-B/record")
}
