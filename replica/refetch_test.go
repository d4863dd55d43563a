package replica

import (
	"testing"

	"github.com/crawlnode/crawlnode/archive"
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
