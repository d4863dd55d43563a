package node

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/corpus"
)

var memberT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// memberCopy makes one member's copy: a WARC file with a response for each URL (fetched
// at the given second after memberT0) and a corpus shard with a record for each.
func memberCopy(t *testing.T, node string, urls map[string]int, dup map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), node)
	d := &DataDir{Path: dir}
	w, err := archive.Open(archive.Config{Dir: d.WARCDir(), NodeName: node, Now: func() time.Time { return memberT0 }})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(d.CorpusDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(d.CorpusDir(), corpus.ShardName(node, 0)))
	if err != nil {
		t.Fatal(err)
	}
	zw, _ := zstd.NewWriter(f)
	for u, sec := range urls {
		at := memberT0.Add(time.Duration(sec) * time.Second)
		body := "<p>" + u + " from " + node + "</p>"
		if _, _, err := w.WriteExchange(archive.Exchange{URL: u, Date: at,
			ResponseHeader: []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n", len(body))),
			ResponseBody:   []byte(body)}); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(corpus.Record{URL: u, Status: 200, FetchTime: at, Title: node, Text: "text of " + u, DuplicateOf: dup[u]})
		zw.Write(append(b, '\n'))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Two members hold the same URL (a refetch after a handoff): every text format has it once,
// from the earlier fetch; the raw formats keep both captures.
func TestExportMembers(t *testing.T) {
	a := memberCopy(t, "n1", map[string]int{"http://a.test/": 1, "http://both.test/": 5, "http://copy.test/": 2},
		map[string]string{"http://copy.test/": "http://a.test/"})
	b := memberCopy(t, "n2", map[string]int{"http://b.test/": 3, "http://both.test/": 9}, nil)
	dirs := []string{a, b}
	run := func(o ExportOptions) (ExportStats, string) {
		t.Helper()
		var out bytes.Buffer
		var st ExportStats
		err := ExportMembers(dirs, o, &out, &st)
		if err != nil {
			t.Fatalf("%s: %v", o.Format, err)
		}
		return st, out.String()
	}

	st, out := run(ExportOptions{Format: ExportJSONL, Out: "-"})
	byURL := map[string]corpus.Record{}
	for line := range strings.Lines(out) {
		var r corpus.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if _, twice := byURL[r.URL]; twice {
			t.Errorf("jsonl: %s twice", r.URL)
		}
		byURL[r.URL] = r
	}
	if len(byURL) != 3 || st.Records != 3 || st.Skipped != 1 {
		t.Fatalf("jsonl: %d URLs, stats %+v:\n%s", len(byURL), st, out)
	}
	if r := byURL["http://both.test/"]; r.Title != "n1" || !r.FetchTime.Equal(memberT0.Add(5*time.Second)) {
		t.Errorf("jsonl: the URL on both members came from %s at %v, want the earlier fetch (n1)", r.Title, r.FetchTime)
	}
	if _, ok := byURL["http://copy.test/"]; ok {
		t.Error("jsonl: a record marked duplicate_of was exported")
	}
	if st, _ = run(ExportOptions{Format: ExportJSONL, Out: "-", IncludeDuplicates: true}); st.Records != 4 {
		t.Errorf("jsonl --include-duplicates: %+v, want 4 records", st)
	}

	_, out = run(ExportOptions{Format: ExportURLs, Out: "-"})
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	urls := map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Split(l, "\t")
		if _, twice := urls[f[0]]; twice {
			t.Errorf("urls: %s twice", f[0])
		}
		urls[f[0]] = f[4]
	}
	if len(urls) != 4 || !strings.HasSuffix(urls["http://both.test/"], "-n1.warc.gz") {
		t.Errorf("urls: %v, want 4 URLs, the shared one from n1's file", urls)
	}

	st, out = run(ExportOptions{Format: ExportCDXJ, Out: "-"})
	cdx := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if st.Records != 5 || len(cdx) != 5 {
		t.Errorf("cdxj: %d lines (%+v), want every capture (5)", len(cdx), st)
	}
	for i := 1; i < len(cdx); i++ {
		if cdx[i-1] > cdx[i] {
			t.Errorf("cdxj not sorted at line %d", i)
		}
	}

	_, out = run(ExportOptions{Format: ExportWARC, Out: "-"})
	warc := filepath.Join(t.TempDir(), "all.warc.gz")
	os.WriteFile(warc, []byte(out), 0o644)
	responses := 0
	if err := archive.Scan(warc, func(_ int64, r *archive.Record) error {
		if r.Type == "response" {
			responses++
		}
		return nil
	}); err != nil || responses != 5 {
		t.Errorf("warc: %d responses (%v), want every member's 5", responses, err)
	}

	md := filepath.Join(t.TempDir(), "md")
	if st, _ = run(ExportOptions{Format: ExportMarkdown, Out: md}); st.Records != 3 {
		t.Errorf("markdown: %+v, want 3 pages", st)
	}
}

// A member copied only the index of a closed file and the open file whole: the merged
// index and URL list cover both.
func TestExportMembersIndexOnly(t *testing.T) {
	a := memberCopy(t, "n1", map[string]int{"http://a.test/": 1, "http://a.test/2": 2}, nil)
	files, _ := filepath.Glob(filepath.Join(a, "warc", "*.warc.gz"))
	if len(files) != 1 {
		t.Fatal(files)
	}
	if err := os.Remove(files[0]); err != nil { // keep only its index
		t.Fatal(err)
	}
	b := memberCopy(t, "n2", map[string]int{"http://b.test/": 3}, nil)
	idx, _ := filepath.Glob(filepath.Join(b, "warc", "*.cdxj"))
	for _, p := range idx {
		os.Remove(p) // the open file: no index yet
	}
	var out bytes.Buffer
	var st ExportStats
	err := ExportMembers([]string{a, b}, ExportOptions{Format: ExportURLs, Out: "-"}, &out, &st)
	if err != nil || st.Records != 3 {
		t.Fatalf("urls: %+v %v\n%s", st, err, out.String())
	}
	sc := bufio.NewScanner(&out)
	n := 0
	for sc.Scan() {
		n++
	}
	if n != 4 {
		t.Fatalf("urls: %d lines, want header + 3", n)
	}
}
