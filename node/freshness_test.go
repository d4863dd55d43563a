package node

import (
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/frontier"
)

func TestChangeHint(t *testing.T) {
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	cases := []struct {
		freq    string
		lastmod time.Time
		want    time.Duration
	}{
		{"always", time.Time{}, time.Minute},
		{" Hourly ", time.Time{}, time.Hour},
		{"daily", now.Add(-400 * day), day}, // changefreq wins over lastmod
		{"weekly", time.Time{}, 7 * day},
		{"monthly", time.Time{}, 30 * day},
		{"yearly", time.Time{}, 365 * day},
		{"never", time.Time{}, 365 * day},
		{"", now.Add(-3 * day), 3 * day},
		{"", now.Add(-time.Second), time.Minute},
		{"", now.Add(time.Hour), 0}, // a lastmod in the future says nothing
		{"", time.Time{}, 0},
		{"sometimes", time.Time{}, 0},
	}
	for _, c := range cases {
		if got := changeHint(c.freq, c.lastmod, now); got != c.want {
			t.Errorf("changeHint(%q, %v) = %v, want %v", c.freq, c.lastmod, got, c.want)
		}
	}
}

func TestSplitCash(t *testing.T) {
	cs := make([]frontier.Candidate, 4)
	splitCash(cs, 2)
	for _, c := range cs {
		if c.Cash != 0.5 {
			t.Fatalf("cash %v", c.Cash)
		}
	}
	splitCash(cs[:0], 1) // no links: nothing to do
	if bodyHash(nil) == 0 || bodyHash([]byte("a")) == bodyHash([]byte("b")) {
		t.Fatal("body hash")
	}
}
