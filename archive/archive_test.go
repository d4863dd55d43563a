package archive

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"go.uber.org/goleak"

	"github.com/crawlnode/crawlnode/internal/clustertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

func testConfig(dir string) Config {
	return Config{Dir: dir, NodeName: "n1", Operator: "ops@example.org", Logger: quiet,
		Now: func() time.Time { return t0 }}
}

// body returns a deterministic page: HTML-like text for even seeds, random bytes for odd ones.
func body(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	if seed%2 == 1 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return b
	}
	words := []string{"<p>", "crawl", "the", "web", "politely", "</p>\n", "<a href=\"/x\">", "link</a>", "durable"}
	var buf bytes.Buffer
	for buf.Len() < n {
		buf.WriteString(words[r.IntN(len(words))])
		buf.WriteByte(' ')
	}
	return buf.Bytes()[:n]
}

func exchange(i int, n int) Exchange {
	u := fmt.Sprintf("http://example.test/page/%d?q=a%%20b", i)
	return Exchange{
		URL:            u,
		Date:           t0.Add(time.Duration(i) * time.Second),
		IP:             "127.0.0.1",
		Request:        []byte(fmt.Sprintf("GET /page/%d?q=a%%20b HTTP/1.1\r\nHost: example.test\r\nUser-Agent: crawlnode\r\n\r\n", i)),
		ResponseHeader: []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\nX-Page: %d", n, i)),
		ResponseBody:   body(uint64(i), n),
	}
}

type written struct {
	ex     Exchange
	loc    Location
	digest string
}

func mustOpen(t testing.TB, cfg Config) *Writer {
	t.Helper()
	w, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func writeN(t testing.TB, w *Writer, from, n, size int) []written {
	t.Helper()
	var out []written
	for i := from; i < from+n; i++ {
		ex := exchange(i, size+i%7)
		loc, d, err := w.WriteExchange(ex)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		out = append(out, written{ex, loc, d})
	}
	return out
}

func checkReadBack(t *testing.T, dir string, ws []written) {
	t.Helper()
	for _, x := range ws {
		r, err := ReadResponse(dir, x.loc)
		if err != nil {
			t.Fatalf("read %+v: %v", x.loc, err)
		}
		if r.Type != "response" || r.TargetURI != x.ex.URL || !bytes.Equal(r.Payload, x.ex.ResponseBody) {
			t.Fatalf("read back %s: type %s uri %s payload %d bytes, want %d", x.ex.URL, r.Type, r.TargetURI, len(r.Payload), len(x.ex.ResponseBody))
		}
		if r.HTTPStatus != 200 || r.HTTPHeader.Get("Content-Type") != "text/html" || !r.Date.Equal(x.ex.Date) {
			t.Fatalf("read back %s: status %d header %v date %v", x.ex.URL, r.HTTPStatus, r.HTTPHeader, r.Date)
		}
		if x.digest != tSHA1(x.ex.ResponseBody) || r.Headers["WARC-Payload-Digest"] != x.digest {
			t.Fatalf("payload digest %s, header %s, want %s", x.digest, r.Headers["WARC-Payload-Digest"], tSHA1(x.ex.ResponseBody))
		}
	}
}

func warcFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

// checkFiles runs the independent reader over every file in dir: warcinfo first, every digest
// verifies, every record names its file's warcinfo, request/response pairs point at each
// other, record ids are unique. It returns the records by file base name.
func checkFiles(t *testing.T, dir string) map[string][]tRecord {
	t.Helper()
	return checkFilesUnpaired(t, dir, 0)
}

// checkFilesUnpaired is checkFiles allowing up to maxUnpaired response records whose request
// record is missing (cut off by damage).
func checkFilesUnpaired(t *testing.T, dir string, maxUnpaired int) map[string][]tRecord {
	t.Helper()
	all := map[string][]tRecord{}
	ids := map[string]bool{}
	for _, p := range warcFiles(t, dir) {
		recs, err := tReadWARC(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(recs) == 0 || recs[0].val("WARC-Type") != "warcinfo" {
			t.Fatalf("%s: first record is not warcinfo", p)
		}
		info := recs[0]
		if info.val("WARC-Filename") != filepath.Base(p) || info.val("Content-Type") != "application/warc-fields" ||
			!bytes.Contains(info.block, []byte("operator: ops@example.org\r\n")) {
			t.Fatalf("%s: warcinfo %+v", p, info)
		}
		byID := map[string]*tRecord{}
		for i := range recs {
			r := &recs[i]
			id := r.val("WARC-Record-ID")
			if ids[id] || !strings.HasPrefix(id, "<urn:uuid:") {
				t.Fatalf("%s: duplicate or malformed id %s", p, id)
			}
			ids[id] = true
			byID[id] = r
			if err := tVerifyDigests(r); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if i > 0 {
				if r.val("WARC-Type") == "warcinfo" {
					t.Fatalf("%s: second warcinfo", p)
				}
				if r.val("WARC-Warcinfo-ID") != info.val("WARC-Record-ID") {
					t.Fatalf("%s: record %s names warcinfo %s", p, id, r.val("WARC-Warcinfo-ID"))
				}
				if _, err := time.Parse(time.RFC3339, r.val("WARC-Date")); err != nil || r.val("WARC-Target-URI") == "" {
					t.Fatalf("%s: record %s date/uri", p, id)
				}
				if r.val("WARC-IP-Address") != "127.0.0.1" {
					t.Fatalf("%s: ip %q", p, r.val("WARC-IP-Address"))
				}
			}
		}
		for _, r := range recs[1:] {
			ct, has := r.get("WARC-Concurrent-To")
			if !has && r.val("WARC-Type") == "request" {
				t.Fatalf("%s: request %s without WARC-Concurrent-To", p, r.val("WARC-Record-ID"))
			}
			if !has {
				continue // a revisit written without its request
			}
			other, ok := byID[ct]
			if !ok && maxUnpaired > 0 && r.val("WARC-Type") == "response" {
				maxUnpaired--
				continue
			}
			if !ok {
				t.Fatalf("%s: %s %s has no concurrent record in the file", p, r.val("WARC-Type"), r.val("WARC-Record-ID"))
			}
			if other.val("WARC-Concurrent-To") != r.val("WARC-Record-ID") || other.val("WARC-Target-URI") != r.val("WARC-Target-URI") ||
				(r.val("WARC-Type") == "request") == (other.val("WARC-Type") == "request") {
				t.Fatalf("%s: bad pair %s <-> %s", p, r.val("WARC-Record-ID"), other.val("WARC-Record-ID"))
			}
		}
		all[filepath.Base(p)] = recs
	}
	return all
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, testConfig(dir))
	ws := writeN(t, w, 0, 40, 3000)
	// Edge cases: empty body, big body (over gowarc's 1 MiB memory buffer), header already
	// terminated, no request.
	for i, ex := range []Exchange{
		{URL: "http://example.test/empty", IP: "127.0.0.1", Request: []byte("GET /empty HTTP/1.1\r\n\r\n"), ResponseHeader: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n")},
		{URL: "http://example.test/big", IP: "127.0.0.1", Request: []byte("GET /big HTTP/1.1\r\n\r\n"), ResponseHeader: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"), ResponseBody: body(3, 3<<20), Truncated: "length"},
	} {
		ex.Date = t0
		loc, d, err := w.WriteExchange(ex)
		if err != nil {
			t.Fatal(i, err)
		}
		ws = append(ws, written{ex, loc, d})
	}
	checkReadBack(t, dir, ws)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkReadBack(t, dir, ws) // after close too
	files := checkFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("%d files, want 1", len(files))
	}
	// Locations point exactly at the response members the independent reader found.
	for _, recs := range files {
		byOff := map[int64]tRecord{}
		for _, r := range recs {
			byOff[r.off] = r
		}
		for _, x := range ws {
			r, ok := byOff[x.loc.Offset]
			if !ok || r.length != x.loc.Length || r.val("WARC-Type") != "response" || r.val("WARC-Target-URI") != x.ex.URL {
				t.Fatalf("location %+v does not match a response member", x.loc)
			}
			if x.ex.Truncated != r.val("WARC-Truncated") {
				t.Fatalf("WARC-Truncated %q", r.val("WARC-Truncated"))
			}
		}
		if got, want := len(recs), 1+2*len(ws); got != want {
			t.Fatalf("%d records, want %d", got, want)
		}
	}
	st := w.Stats()
	if st.Files != 1 || st.Records != int64(1+2*len(ws)) {
		t.Fatalf("stats %+v", st)
	}
	if _, _, err := w.WriteExchange(exchange(1, 10)); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
}

func TestConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.MaxFileSize = 256 << 10 // force rotations while writers race
	w := mustOpen(t, cfg)
	const g, per = 6, 40
	var mu sync.Mutex
	var ws []written
	var wg sync.WaitGroup
	for k := 0; k < g; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k * per; i < (k+1)*per; i++ {
				ex := exchange(i, 2000+i*13%5000)
				loc, d, err := w.WriteExchange(ex)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ws = append(ws, written{ex, loc, d})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkReadBack(t, dir, ws)
	files := checkFiles(t, dir)
	n := 0
	for _, recs := range files {
		n += len(recs) - 1
	}
	if n != 2*g*per || len(files) < 2 {
		t.Fatalf("%d records in %d files, want %d in several", n, len(files), 2*g*per)
	}
}

func TestRotationBySize(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.MaxFileSize = 64 << 10
	w := mustOpen(t, cfg)
	ws := writeN(t, w, 0, 60, 9000) // odd pages are incompressible: ~300 KiB in all
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files := checkFiles(t, dir)
	if len(files) < 4 {
		t.Fatalf("%d files, want rotation", len(files))
	}
	if st := w.Stats(); st.Files != int64(len(files)) {
		t.Fatalf("stats files %d, %d on disk", st.Files, len(files))
	}
	prevSeq := -1
	for _, p := range warcFiles(t, dir) {
		pn, ok := parseFileName(filepath.Base(p))
		if !ok || pn.prefix != "crawlnode" || pn.node != "n1" || !strings.Contains(p, "-20250304050607-") {
			t.Fatalf("file name %s", p)
		}
		if pn.seq <= prevSeq {
			t.Fatalf("sequence not increasing at %s", p)
		}
		prevSeq = pn.seq
		fi, _ := os.Stat(p)
		recs := files[filepath.Base(p)]
		last := recs[len(recs)-2].length + recs[len(recs)-1].length // the final exchange
		if fi.Size()-last >= cfg.MaxFileSize {
			t.Fatalf("%s: %d bytes before its last exchange, limit %d", p, fi.Size()-last, cfg.MaxFileSize)
		}
	}
	checkReadBack(t, dir, ws)
	// A new writer continues the sequence and appends to the newest (not yet full) file or a new one.
	w2 := mustOpen(t, cfg)
	more := writeN(t, w2, 100, 3, 100)
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	checkReadBack(t, dir, append(ws, more...))
	checkFiles(t, dir)
}

// TestRotationByAge: a file older than MaxFileAge is closed (with its CDXJ index) by the
// background loop without another write, and the next write starts a new file.
func TestRotationByAge(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	var now atomic.Int64
	now.Store(t0.UnixNano())
	cfg.Now = func() time.Time { return time.Unix(0, now.Load()).UTC() }
	cfg.MaxFileAge = time.Minute
	cfg.SyncInterval = 10 * time.Millisecond
	w := mustOpen(t, cfg)
	defer w.Close()
	ws := writeN(t, w, 0, 3, 500)
	first := warcFiles(t, dir)
	if len(first) != 1 {
		t.Fatalf("%d files, want 1", len(first))
	}
	time.Sleep(50 * time.Millisecond) // several loop ticks: young files stay open
	if _, err := os.Stat(first[0] + IndexSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("index of a young open file: %v", err)
	}
	now.Add(int64(time.Minute))
	clustertest.Eventually(t, 5*time.Second, "old file closed with its index", func() bool {
		_, err := os.Stat(first[0] + IndexSuffix)
		return err == nil
	})
	ws = append(ws, writeN(t, w, 10, 2, 500)...)
	if got := warcFiles(t, dir); len(got) != 2 {
		t.Fatalf("%d files after the age rotation, want 2", len(got))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, dir)
	checkReadBack(t, dir, ws)
}

func TestRevisit(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, testConfig(dir))
	orig := exchange(1, 5000)
	_, digest, err := w.WriteExchange(orig)
	if err != nil {
		t.Fatal(err)
	}
	dup := exchange(2, 5000)
	dup.ResponseBody = orig.ResponseBody
	locDup, err := w.WriteRevisit(dup, Revisit{Profile: ProfileIdenticalPayloadDigest, RefersToURI: orig.URL,
		RefersToDate: orig.Date, PayloadDigest: digest})
	if err != nil {
		t.Fatal(err)
	}
	nm := exchange(3, 0)
	nm.ResponseHeader = []byte("HTTP/1.1 304 Not Modified\r\nETag: \"abc\"\r\n\r\n")
	nm.Request = nil
	locNM, err := w.WriteRevisit(nm, Revisit{Profile: ProfileServerNotModified, RefersToURI: orig.URL, RefersToDate: orig.Date,
		RefersToID: "<urn:uuid:11111111-2222-4333-8444-555555555555>"})
	if err != nil {
		t.Fatal(err)
	}
	// Invalid revisits are refused before anything is written.
	if _, err := w.WriteRevisit(dup, Revisit{Profile: ProfileIdenticalPayloadDigest, RefersToURI: orig.URL}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("revisit without digest: %v", err)
	}
	if _, err := w.WriteRevisit(dup, Revisit{Profile: "x", RefersToURI: orig.URL}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("revisit with bad profile: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := ReadResponse(dir, locDup)
	if err != nil {
		t.Fatal(err)
	}
	if r.Type != "revisit" || len(r.Payload) != 0 || r.HTTPStatus != 200 || r.TargetURI != dup.URL {
		t.Fatalf("revisit read back: %+v", r)
	}
	r, err = ReadResponse(dir, locNM)
	if err != nil {
		t.Fatal(err)
	}
	if r.Type != "revisit" || r.HTTPStatus != 304 || r.HTTPHeader.Get("Etag") != "\"abc\"" {
		t.Fatalf("304 revisit read back: %+v", r)
	}

	files := checkFiles(t, dir)
	var revisits []tRecord
	for _, recs := range files {
		for _, rec := range recs {
			if rec.val("WARC-Type") == "revisit" {
				revisits = append(revisits, rec)
			}
		}
	}
	if len(revisits) != 2 {
		t.Fatalf("%d revisit records", len(revisits))
	}
	d := revisits[0]
	if d.val("WARC-Profile") != ProfileIdenticalPayloadDigest || d.val("WARC-Payload-Digest") != tSHA1(orig.ResponseBody) ||
		d.val("WARC-Refers-To-Target-URI") != orig.URL || d.val("WARC-Refers-To-Date") != "2025-03-04T05:06:08Z" ||
		!bytes.Equal(d.block, withHeaderEnd(dup.ResponseHeader)) || d.val("Content-Type") != "application/http; msgtype=response" {
		t.Fatalf("identical-payload revisit fields %+v", d.fields)
	}
	n := revisits[1]
	if n.val("WARC-Profile") != ProfileServerNotModified || n.val("WARC-Refers-To") != "<urn:uuid:11111111-2222-4333-8444-555555555555>" {
		t.Fatalf("not-modified revisit fields %+v", n.fields)
	}
	if _, ok := n.get("WARC-Concurrent-To"); ok {
		t.Fatal("revisit without request must not claim a concurrent record")
	}
}

// cut truncates path to size.
func cut(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func scanAll(path string) (offs []int64, err error) {
	err = Scan(path, func(off int64, r *Record) error {
		offs = append(offs, off)
		return nil
	})
	return offs, err
}

// damageAndRepair writes records, damages the single file with damage(), checks that Scan
// delivers the good records and then fails with want, and that Open repairs the file and
// appends after the last good record with nothing lost before the damage.
func damageAndRepair(t *testing.T, damage func(path string, recs []tRecord) (goodRecords int), want error) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	w := mustOpen(t, cfg)
	ws := writeN(t, w, 0, 10, 4000)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := warcFiles(t, dir)[0]
	recs, err := tReadWARC(path)
	if err != nil {
		t.Fatal(err)
	}
	good := damage(path, recs)
	offs, err := scanAll(path)
	if !errors.Is(err, want) || !strings.Contains(err.Error(), filepath.Base(path)) {
		t.Fatalf("scan error %v, want %v naming the file", err, want)
	}
	if len(offs) != good {
		t.Fatalf("scan delivered %d records before the damage, want %d", len(offs), good)
	}
	for i, off := range offs {
		if off != recs[i].off {
			t.Fatalf("record %d at %d, want %d", i, off, recs[i].off)
		}
	}

	w2 := mustOpen(t, cfg)
	more := writeN(t, w2, 100, 5, 1000)
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	if files := warcFiles(t, dir); len(files) != 1 {
		t.Fatalf("repair should continue the same file, got %v", files)
	}
	if more[0].loc.File != filepath.Base(path) {
		t.Fatalf("appended to %s", more[0].loc.File)
	}
	if _, err := scanAll(path); err != nil {
		t.Fatalf("after repair: %v", err)
	}
	var intact []written
	for _, x := range ws {
		if x.loc.Offset+x.loc.Length <= recs[good-1].off+recs[good-1].length {
			intact = append(intact, x)
		}
	}
	if len(intact) < len(ws)-1 {
		t.Fatalf("only %d of %d responses before the damage", len(intact), len(ws))
	}
	checkReadBack(t, dir, append(intact, more...))
	all := checkFilesUnpaired(t, dir, 1)
	if n := len(all[filepath.Base(path)]); n != good+10 {
		t.Fatalf("%d records after repair, want %d", n, good+10)
	}
}

func TestTruncatedLastRecord(t *testing.T) {
	damageAndRepair(t, func(path string, recs []tRecord) int {
		last := recs[len(recs)-1]
		cut(t, path, last.off+last.length/2)
		return len(recs) - 1
	}, ErrTruncated)
}

func TestTruncatedInsideGzipHeader(t *testing.T) {
	damageAndRepair(t, func(path string, recs []tRecord) int {
		last := recs[len(recs)-1]
		cut(t, path, last.off+5)
		return len(recs) - 1
	}, ErrTruncated)
}

func TestGarbageAppended(t *testing.T) {
	damageAndRepair(t, func(path string, recs []tRecord) int {
		appendBytes(t, path, []byte("this is not gzip \x00\x01\x02 garbage from a torn write"))
		return len(recs)
	}, ErrCorrupt)
}

func TestZeroFilledTail(t *testing.T) {
	// What a file system may leave after a power loss: the size grew but the data never landed.
	damageAndRepair(t, func(path string, recs []tRecord) int {
		appendBytes(t, path, make([]byte, 4096))
		return len(recs)
	}, ErrCorrupt)
}

func TestCorruptLastRecord(t *testing.T) {
	damageAndRepair(t, func(path string, recs []tRecord) int {
		last := recs[len(recs)-1]
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("XXXXXXXX"), last.off+last.length/2); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return len(recs) - 1
	}, ErrCorrupt)
}

func TestMidFileDamageStartsNewFile(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	w := mustOpen(t, cfg)
	ws := writeN(t, w, 0, 10, 4000)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := warcFiles(t, dir)[0]
	recs, _ := tReadWARC(path)
	mid := recs[5]
	f, _ := os.OpenFile(path, os.O_WRONLY, 0)
	if _, err := f.WriteAt([]byte("XXXXXXXX"), mid.off+mid.length/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before, _ := os.ReadFile(path)

	w2 := mustOpen(t, cfg)
	more := writeN(t, w2, 100, 2, 1000)
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("damaged file was modified")
	}
	if more[0].loc.File == filepath.Base(path) || len(warcFiles(t, dir)) != 2 {
		t.Fatalf("expected a new file, wrote to %s", more[0].loc.File)
	}
	checkReadBack(t, dir, more)
	// Records after the damage are still readable by location.
	checkReadBack(t, dir, ws[4:])
	if _, err := ReadResponse(dir, Location{File: filepath.Base(path), Offset: mid.off, Length: mid.length}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("reading the damaged record: %v", err)
	}
}

func TestOnlyPartialWarcinfo(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	w := mustOpen(t, cfg)
	writeN(t, w, 0, 1, 100)
	w.Close()
	path := warcFiles(t, dir)[0]
	recs, _ := tReadWARC(path)
	cut(t, path, recs[0].length-3)
	w2 := mustOpen(t, cfg)
	ws := writeN(t, w2, 5, 2, 100)
	w2.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file without a complete record should be removed: %v", err)
	}
	checkReadBack(t, dir, ws)
	checkFiles(t, dir)
}

// faultyFile fails writes with ENOSPC once its byte budget is spent, after writing what fits
// (a short write, as the kernel does).
type faultyFile struct {
	*os.File
	budget    *atomic.Int64 // < 0: unlimited
	failTrunc *atomic.Bool
	syncs     *atomic.Int64
}

func (f faultyFile) WriteAt(p []byte, off int64) (int, error) {
	b := f.budget.Load()
	if b < 0 || int64(len(p)) <= b {
		if b >= 0 {
			f.budget.Add(-int64(len(p)))
		}
		return f.File.WriteAt(p, off)
	}
	f.budget.Store(0)
	n, _ := f.File.WriteAt(p[:b], off)
	return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
}

func (f faultyFile) Truncate(n int64) error {
	if f.failTrunc.Load() {
		return &os.PathError{Op: "truncate", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.Truncate(n)
}

func (f faultyFile) Sync() error { f.syncs.Add(1); return f.File.Sync() }

type faults struct {
	budget    atomic.Int64
	failTrunc atomic.Bool
	syncs     atomic.Int64
}

func (fs *faults) open(path string, flag int) (file, error) {
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, err
	}
	return faultyFile{f, &fs.budget, &fs.failTrunc, &fs.syncs}, nil
}

func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	var fs faults
	fs.budget.Store(-1)
	w, err := open(testConfig(dir), fs.open)
	if err != nil {
		t.Fatal(err)
	}
	ws := writeN(t, w, 0, 5, 3000)
	fs.budget.Store(2500) // the next exchange (incompressible body) does not fit
	_, _, err = w.WriteExchange(exchange(51, 3000))
	if !errors.Is(err, ErrDiskFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("want ErrDiskFull wrapping ENOSPC, got %v", err)
	}
	path := warcFiles(t, dir)[0]
	if _, err := scanAll(path); err != nil {
		t.Fatalf("half record left after disk full: %v", err)
	}
	// Still full: still a clean error.
	if _, _, err := w.WriteExchange(exchange(53, 3000)); !errors.Is(err, ErrDiskFull) {
		t.Fatal(err)
	}
	fs.budget.Store(-1) // space freed
	ws = append(ws, writeN(t, w, 60, 3, 3000)...)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkReadBack(t, dir, ws)
	files := checkFiles(t, dir)
	if n := len(files[filepath.Base(path)]); n != 1+2*8 {
		t.Fatalf("%d records, want %d", n, 1+2*8)
	}
}

func TestDiskFullTruncateFailsRotates(t *testing.T) {
	dir := t.TempDir()
	var fs faults
	fs.budget.Store(-1)
	w, err := open(testConfig(dir), fs.open)
	if err != nil {
		t.Fatal(err)
	}
	ws := writeN(t, w, 0, 3, 3000)
	fs.budget.Store(100)
	fs.failTrunc.Store(true)
	if _, _, err := w.WriteExchange(exchange(50, 3000)); !errors.Is(err, ErrDiskFull) {
		t.Fatal(err)
	}
	fs.budget.Store(-1)
	fs.failTrunc.Store(false)
	more := writeN(t, w, 60, 2, 3000)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if more[0].loc.File == ws[0].loc.File {
		t.Fatal("wrote after a half record instead of starting a new file")
	}
	offs, err := scanAll(filepath.Join(dir, ws[0].loc.File))
	if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) || len(offs) != 7 {
		t.Fatalf("abandoned file: %d good records then %v", len(offs), err)
	}
	checkReadBack(t, dir, append(ws, more...))
}

func TestDiskFullCreatingFile(t *testing.T) {
	dir := t.TempDir()
	var fs faults
	fs.budget.Store(10)
	w, err := open(testConfig(dir), fs.open)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, _, err := w.WriteExchange(exchange(1, 100)); !errors.Is(err, ErrDiskFull) {
		t.Fatal(err)
	}
	if files := warcFiles(t, dir); len(files) != 0 {
		t.Fatalf("left %v", files)
	}
	fs.budget.Store(-1)
	ws := writeN(t, w, 2, 1, 100)
	checkReadBack(t, dir, ws)
}

func TestPeriodicSync(t *testing.T) {
	dir := t.TempDir()
	var fs faults
	fs.budget.Store(-1)
	cfg := testConfig(dir)
	cfg.SyncInterval = 5 * time.Millisecond
	w, err := open(cfg, fs.open)
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 0, 1, 100)
	deadline := time.Now().Add(5 * time.Second)
	for fs.syncs.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no fsync within the interval")
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let a tick that raced with the write flush
	n := fs.syncs.Load()
	time.Sleep(30 * time.Millisecond) // idle: nothing dirty, no more fsyncs
	if fs.syncs.Load() != n {
		t.Fatalf("fsync while idle: %d -> %d", n, fs.syncs.Load())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReadResponseDigestMismatch(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, testConfig(dir))
	ex := exchange(2, 2000)
	loc, _, err := w.WriteExchange(ex)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	// Rewrite the response member with one payload byte changed and a valid gzip framing.
	path := filepath.Join(dir, loc.File)
	recs, _ := tReadWARC(path)
	var resp tRecord
	for _, r := range recs {
		if r.off == loc.Offset {
			resp = r
		}
	}
	var raw bytes.Buffer
	raw.WriteString("WARC/1.1\r\n")
	for _, f := range resp.fields {
		raw.WriteString(f.name + ": " + f.value + "\r\n")
	}
	raw.WriteString("\r\n")
	blk := bytes.Clone(resp.block)
	blk[len(blk)-1] ^= 1
	raw.Write(blk)
	raw.WriteString("\r\n\r\n")
	bad := filepath.Join(dir, "bad.warc.gz")
	os.WriteFile(bad, gz(t, raw.Bytes()), 0o644)
	_, err = ReadResponse(dir, Location{File: "bad.warc.gz", Offset: 0, Length: int64(len(gz(t, raw.Bytes())))})
	if !errors.Is(err, ErrDigest) {
		t.Fatalf("want ErrDigest, got %v", err)
	}
	if err := Scan(bad, func(int64, *Record) error { return nil }); !errors.Is(err, ErrDigest) {
		t.Fatalf("scan: want ErrDigest, got %v", err)
	}
	for _, l := range []Location{{File: "../x", Length: 1}, {File: "nope.warc.gz", Length: 10}, {File: loc.File, Offset: loc.Offset, Length: 0}} {
		if _, err := ReadResponse(dir, l); err == nil {
			t.Fatalf("%+v read without error", l)
		}
	}
	if _, err := ReadResponse(dir, Location{File: "nope.warc.gz", Length: 10}); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := ReadResponse(dir, Location{File: loc.File, Offset: loc.Offset + 1, Length: loc.Length}); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
		t.Fatalf("misaligned location: %v", err)
	}
}

func TestIndexRebuild(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, testConfig(dir))
	ws := writeN(t, w, 0, 12, 1500)
	w.Close()
	got := map[string]Location{}
	if err := Index(warcFiles(t, dir)[0], func(uri string, r *Record, loc Location) error {
		got[uri] = loc
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ws) {
		t.Fatalf("%d index entries", len(got))
	}
	for _, x := range ws {
		if got[x.ex.URL] != x.loc {
			t.Fatalf("%s: index %+v, writer %+v", x.ex.URL, got[x.ex.URL], x.loc)
		}
	}
	stop := errors.New("stop")
	if err := Scan(warcFiles(t, dir)[0], func(int64, *Record) error { return stop }); err != stop {
		t.Fatalf("callback error not returned as is: %v", err)
	}
}

func TestWriteExchangeRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, testConfig(dir))
	defer w.Close()
	for name, mod := range map[string]func(*Exchange){
		"crlf in url":   func(e *Exchange) { e.URL = "http://x/\r\nWARC-Type: evil" },
		"empty url":     func(e *Exchange) { e.URL = "" },
		"bad ip":        func(e *Exchange) { e.IP = "not-an-ip" },
		"not http":      func(e *Exchange) { e.ResponseHeader = []byte("garbage") },
		"bad truncated": func(e *Exchange) { e.Truncated = "because" },
	} {
		ex := exchange(1, 10)
		mod(&ex)
		if _, _, err := w.WriteExchange(ex); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if st := w.Stats(); st.Records != 0 {
		t.Fatalf("rejected exchanges wrote records: %+v", st)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, c := range map[string]Config{
		"no dir":     {},
		"bad prefix": {Dir: "x", Prefix: "a/b"},
		"bad node":   {Dir: "x", NodeName: "n 1"},
		"tiny files": {Dir: "x", MaxFileSize: 10},
		"level":      {Dir: "x", CompressionLevel: 12},
		"operator":   {Dir: "x", Operator: "a\r\nb"},
	} {
		if err := c.WithDefaults().Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := (Config{Dir: "x"}).WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
}

// storedOnly reports whether the gzip member m holds nothing but stored deflate blocks (and
// the empty final block a flate writer closes with).
func storedOnly(t *testing.T, m []byte) bool {
	t.Helper()
	if len(m) < 18 || m[0] != 0x1f || m[1] != 0x8b || m[3] != 0 {
		t.Fatalf("not a plain gzip member: % x", m[:min(len(m), 10)])
	}
	p := 10
	for {
		if p+5 > len(m) {
			t.Fatalf("member ends inside a block header at %d", p)
		}
		h := m[p]
		if h == 0x03 && m[p+1] == 0x00 {
			return p+2+8 == len(m) // the empty final fixed block a flate writer closes with
		}
		if h&0x06 != 0 {
			return false // fixed or dynamic Huffman block
		}
		n := int(m[p+1]) | int(m[p+2])<<8
		if nn := int(m[p+3]) | int(m[p+4])<<8; n != ^nn&0xffff {
			t.Fatalf("stored block at %d: LEN %d NLEN %d", p, n, nn)
		}
		p += 5 + n
		if h&1 == 1 {
			return p+8 == len(m)
		}
	}
}

// TestCompressedPayloadStored: a response whose payload arrived compressed (Content-Encoding,
// or a compressed media type, as CompressedPayload judges them) is written as stored deflate
// blocks (deflating it again costs CPU for nothing) and reads back byte for byte; text still
// compresses.
func TestCompressedPayloadStored(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, testConfig(dir))
	text := body(2, 40000)
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(text)
	zw.Close()
	// encoding and media type as the fetcher parsed them from the header.
	cases := []struct {
		encoding, mediaType string
		body                []byte
		stored              bool
	}{
		{"gzip", "text/html", zb.Bytes(), true},
		{" br ", "text/html", body(3, 20000), true},
		{"", "image/jpeg", body(5, 20000), true},
		// The flag decides, not the bytes (a flate encoder stores incompressible bytes by
		// itself, after spending the CPU to find out): these would compress well.
		{"", "image/webp", text, true},
		{"zstd", "text/html", text, true},
		{"", "application/zip", text, true},
		{"", "text/html", text, false},
		{"", "image/svg+xml", text, false},
		{"", "image/bmp", text, false},
		{"identity", "text/html", text, false},
		{"gzip", "text/html", zb.Bytes()[:100], false}, // small: the headers weigh more
	}
	var ws []written
	for i, c := range cases {
		hdr := "HTTP/1.1 200 OK\r\nContent-Type: " + c.mediaType + "\r\n"
		if c.encoding != "" {
			hdr += "Content-Encoding: " + c.encoding + "\r\n"
		}
		ex := Exchange{URL: fmt.Sprintf("http://example.test/c%d", i), Date: t0, IP: "127.0.0.1",
			Request:        []byte("GET / HTTP/1.1\r\nHost: example.test\r\n\r\n"),
			ResponseHeader: []byte(hdr), ResponseBody: c.body,
			PayloadCompressed: CompressedPayload(c.encoding, c.mediaType)}
		loc, d, err := w.WriteExchange(ex)
		if err != nil {
			t.Fatal(i, err)
		}
		ws = append(ws, written{ex, loc, d})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files := warcFiles(t, dir)
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range ws {
		m := data[x.loc.Offset : x.loc.Offset+x.loc.Length]
		if got := storedOnly(t, m); got != cases[i].stored {
			t.Errorf("case %d (%q, %q): stored %v, want %v (member %d bytes for a %d-byte payload)", i, cases[i].encoding, cases[i].mediaType, got, cases[i].stored, len(m), len(x.ex.ResponseBody))
		}
		r, err := ReadResponse(dir, x.loc)
		if err != nil {
			t.Fatal(i, err)
		}
		if !bytes.Equal(r.Payload, x.ex.ResponseBody) || r.Headers["WARC-Payload-Digest"] != tSHA1(x.ex.ResponseBody) {
			t.Fatalf("case %d: payload %d bytes, digest %s", i, len(r.Payload), r.Headers["WARC-Payload-Digest"])
		}
	}
	checkFiles(t, dir) // the independent reader parses every member and checks its digests
}

// TestDurable: the open file's durable size moves only with an fsync, always ends on a
// record boundary, and the prefix it names reads back whole.
func TestDurable(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.SyncInterval = time.Hour // only explicit syncs
	w := mustOpen(t, cfg)
	defer w.Close()
	if name, size := w.Durable(); name != "" || size != 0 {
		t.Fatalf("before any write: %q %d", name, size)
	}
	ws := writeN(t, w, 0, 5, 500)
	name, size := w.Durable()
	if name != ws[0].loc.File || size != 0 {
		t.Fatalf("written, not synced: %q %d, want %q 0", name, size, ws[0].loc.File)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	_, size = w.Durable()
	last := ws[len(ws)-1].loc
	fi, err := os.Stat(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if size != fi.Size() || size <= last.Offset {
		t.Fatalf("synced: durable %d, file %d, last response at %d", size, fi.Size(), last.Offset)
	}
	writeN(t, w, 5, 3, 500) // not synced: the durable size stays
	if _, again := w.Durable(); again != size {
		t.Fatalf("unsynced writes moved the durable size: %d -> %d", size, again)
	}
	// The durable prefix, cut out on its own, is a WARC file of complete records.
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(cut, b[:size], 0o644); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := Scan(cut, func(_ int64, r *Record) error {
		if r.Type == "response" {
			n++
		}
		return nil
	}); err != nil {
		t.Fatalf("durable prefix: %v", err)
	}
	if n != 5 {
		t.Fatalf("durable prefix holds %d responses, want 5", n)
	}
}
