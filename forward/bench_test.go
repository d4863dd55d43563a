package forward

import (
	"context"
	"testing"
)

func benchBatch(n int) Batch {
	links := simLinks(n, 50, 99)
	byPart := map[uint16][]Link{}
	var order []uint16
	for _, l := range links {
		p, _ := PartitionOfURL(l.URL)
		if byPart[p] == nil {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], l)
	}
	b := Batch{From: "node-1"}
	for _, p := range order {
		b.Partitions = append(b.Partitions, PartitionLinks{Partition: p, Epoch: 2, Links: byPart[p]})
	}
	return b
}

func BenchmarkEncode(b *testing.B) {
	batch := benchBatch(2000)
	var size int
	b.ReportAllocs()
	for b.Loop() {
		enc, err := Encode(batch)
		if err != nil {
			b.Fatal(err)
		}
		size = len(enc)
	}
	b.ReportMetric(float64(b.N)*2000/b.Elapsed().Seconds(), "links/s")
	b.ReportMetric(float64(size)/2000, "B/link")
}

func BenchmarkDecode(b *testing.B) {
	enc, err := Encode(benchBatch(2000))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*2000/b.Elapsed().Seconds(), "links/s")
}

// BenchmarkOutboxAdd: Add calls of 100 links (a page's off-node links) to an in-memory
// Badger; the recent cache is off so that every call writes.
func BenchmarkOutboxAdd(b *testing.B) {
	tab := &table{}
	o := newOutbox(b, Config{DB: memDB(b), OwnerOf: tab.OwnerOf, RecentCache: -1, MaxQueued: 1 << 40,
		Send: func(context.Context, string, Batch) error { return nil }})
	links := simLinks(20000, 200, 5)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if err := o.Add(links[i : i+100]); err != nil {
			b.Fatal(err)
		}
		i = (i + 100) % len(links)
	}
	b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "links/s")
}
