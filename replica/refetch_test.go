package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/frontier"
)

// TestCaptureLost: a lost node's capture is lost when its WARC file is not in the store
// or the store holds the file only up to before the record (the file was adopted and
// appended to after its upload); another node's capture, or a record without a WARC
// location, is never this promotion's to refetch.
func TestCaptureLost(t *testing.T) {
	loc := func(file string, off, n int64) []byte {
		b, err := archive.Location{File: file, Offset: off, Length: n}.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const shipped = "crawlnode-20261203150000-00001-n2.warc.gz"
	const open = "crawlnode-20261203150500-00002-n2.warc.gz"
	const other = "crawlnode-20261203150000-00001-n1.warc.gz"
	files := map[string]int64{shipped: 10_000}
	cases := []struct {
		name string
		meta []byte
		want bool
	}{
		{"in a shipped file", loc(shipped, 9_000, 1_000), false},
		{"past the shipped size", loc(shipped, 9_500, 1_000), true},
		{"in a file never shipped", loc(open, 0, 500), true},
		{"another node's file", loc(other, 0, 500), false},
		{"no location", nil, false},
		{"not a location", []byte("x"), false},
		{"not our file name", loc("other.warc.gz", 0, 500), false},
	}
	for _, c := range cases {
		if got := captureLost("n2", files, c.meta); got != c.want {
			t.Errorf("%s: lost %v, want %v", c.name, got, c.want)
		}
	}
}

// TestPromotionRefetchesUnshippedCaptures: the lost node n3 fetched four pages of a
// partition and its copy reached the backup. At promotion the backup reads what n3 shipped
// (a fake store): the two pages whose WARC records are not there are queued again, marked
// refetches, the two in the store stay fetched, and the copy's queued URL is marked too.
// While the store does not answer, nothing is imported.
func TestPromotionRefetchesUnshippedCaptures(t *testing.T) {
	const p = redirPA
	lost, lostDB := openMemFrontier(t, redirPartOf)
	const shippedFile, openFile = "crawlnode-20261203150000-00001-n3.warc.gz", "crawlnode-20261203150500-00002-n3.warc.gz"
	locs := map[string]archive.Location{
		"http://a.test/1": {File: shippedFile, Offset: 0, Length: 100},
		"http://a.test/2": {File: shippedFile, Offset: 100, Length: 100},
		"http://a.test/3": {File: shippedFile, Offset: 200, Length: 100}, // past the shipped size
		"http://a.test/4": {File: openFile, Offset: 0, Length: 100},
	}
	var cands []frontier.Candidate
	for _, u := range []string{"http://a.test/1", "http://a.test/2", "http://a.test/3", "http://a.test/4", "http://a.test/5"} {
		cands = append(cands, frontier.Candidate{URL: u, Host: "a.test"})
	}
	if _, err := lost.Add(cands); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := lost.Next(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := locs[l.URL].MarshalBinary()
		if err := lost.Done(l, frontier.Outcome{Kind: frontier.Fetched, Status: 200, Meta: meta}); err != nil {
			t.Fatal(err)
		}
	}
	snd := testReplicator(t, "n3", nil)
	snd.db = lostDB
	snd.export = snd.exportView
	bak := testReplicator(t, "n1", nil)
	snd.parts[p] = &replOut{backup: "n1"}
	round(t, snd, bak, p)

	storeDown := errors.New("store unreachable")
	bak.shipped = func(context.Context, string) (map[string]int64, error) { return nil, storeDown }
	if _, err := bak.importOptions(context.Background(), p, "n3", shippedCache{}); !errors.Is(err, storeDown) {
		t.Fatalf("store down: %v, want its error (the promotion waits)", err)
	}
	reads := 0
	bak.shipped = func(_ context.Context, node string) (map[string]int64, error) {
		reads++
		if node != "n3" {
			t.Errorf("manifest of %s read", node)
		}
		return map[string]int64{shippedFile: 200}, nil
	}
	cache := shippedCache{}
	opts, err := bak.importOptions(context.Background(), p, "n3", cache)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bak.importOptions(context.Background(), p, "n3", cache); err != nil || reads != 1 {
		t.Fatalf("second partition of a pass: %v, %d manifest reads (want 1)", err, reads)
	}
	survivor, _ := openMemFrontier(t, redirPartOf)
	st, err := bak.importWith(survivor, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st.Refetch != 2 {
		t.Errorf("import stats %+v: want 2 refetches", st)
	}
	leased := map[string]bool{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		l, err := survivor.Next(ctx)
		cancel()
		if err != nil {
			break
		}
		if !l.Refetch || l.Revisit {
			t.Errorf("%s: refetch %v revisit %v", l.URL, l.Refetch, l.Revisit)
		}
		leased[l.URL] = true
		if err := survivor.Done(l, frontier.Outcome{Kind: frontier.Fetched, Status: 200}); err != nil {
			t.Fatal(err)
		}
	}
	if len(leased) != 3 || !leased["http://a.test/3"] || !leased["http://a.test/4"] || !leased["http://a.test/5"] {
		t.Errorf("fetched again %v, want a.test/3, /4 (captures lost) and /5 (queued)", leased)
	}
}
