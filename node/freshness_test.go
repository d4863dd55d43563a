package node

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/fetch"
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

// TestRevisitUnchangedBody: a server that ignores conditional requests answers every
// revisit with 200 and the same body. The node must write a WARC revisit record
// (identical-payload-digest, referring to the URL itself) for each such revisit, send the
// validators it got, and count the revisits as unchanged.
func TestRevisitUnchangedBody(t *testing.T) {
	var mu sync.Mutex
	var inm []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		if r.URL.Path == "/.well-known/tdmrep.json" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		inm = append(inm, r.Header.Get("If-None-Match"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("ETag", `"v1"`)
		io.WriteString(w, "the same body every time\n")
	}))
	defer srv.Close()
	rule, err := fetch.ParseResolve("page.test=" + strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	n, err := New(Config{
		DataDir: dir, Seeds: []string{"http://page.test/doc.txt"}, ExitWhenDone: true, MaxPages: 4,
		Delay: 10 * time.Millisecond, DelaySet: true, Concurrency: 2, ExtractWorkers: 1,
		Recrawl: true, RecrawlMin: 100 * time.Millisecond, RecrawlMax: 200 * time.Millisecond,
		Resolve: []fetch.ResolveRule{rule}, MinFreeDisk: -1, RobotsRetryBase: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.Run(ctx); err != nil {
		t.Fatal(err)
	}
	st := n.Status()
	mu.Lock()
	defer mu.Unlock()
	if len(inm) < 3 || inm[0] != "" || inm[1] != `"v1"` {
		t.Fatalf("If-None-Match sent: %q", inm)
	}
	if st.Revisits < 2 || st.Unchanged != st.Revisits || st.Changed != 0 {
		t.Fatalf("status %+v", st)
	}
	var responses, revisits int
	files, _ := filepath.Glob(filepath.Join(dir, "warc", "*.warc.gz"))
	for _, f := range files {
		err := archive.Scan(f, func(_ int64, r *archive.Record) error {
			if r.TargetURI != "http://page.test/doc.txt" {
				return nil
			}
			switch r.Type {
			case "response":
				responses++
			case "revisit":
				if r.Headers["WARC-Refers-To-Target-URI"] != r.TargetURI || !strings.HasSuffix(r.Headers["WARC-Profile"], "/identical-payload-digest") {
					t.Errorf("revisit record %v", r.Headers)
				}
				revisits++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if responses != 1 || int64(revisits) != st.Unchanged {
		t.Fatalf("WARC: %d response records, %d revisit records; %d unchanged revisits", responses, revisits, st.Unchanged)
	}
}
