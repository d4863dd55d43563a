package archive

import (
	"github.com/crawlnode/crawlnode/internal/clustertest"

	"bufio"
	"bytes"
	stdgzip "compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSURT holds the transform to the Python surt package's own test expectations
// (internetarchive/surt tests/test_surt.py, from IA's Java tests), which pywb's keys follow,
// plus cases of our own.
func TestSURT(t *testing.T) {
	const sess = "0123456789abcdefghijklemopqrstuv" // 32 characters
	cases := []struct{ in, want string }{
		{"http://www.archive.org/index.html", "org,archive)/index.html"},
		{"http://www.archive.org/", "org,archive)/"},
		{"http://archive.org", "org,archive)/"},
		{"http://archive.org/goo/", "org,archive)/goo"},
		{"http://archive.org/goo/?", "org,archive)/goo"},
		{"http://archive.org/goo/?b&a", "org,archive)/goo?a&b"},
		{"http://archive.org/goo/?a=2&b&a=1", "org,archive)/goo?a=1&a=2&b"},
		{"http://archive.org/index.php?PHPSESSID=" + sess + "&action=profile;u=4221", "org,archive)/index.php?action=profile;u=4221"},
		{"whois://whois.isoc.org.il/shaveh.co.il", "il,org,isoc,whois)/shaveh.co.il"},
		{"http://visit.webhosting.yahoo.com/visit.gif?&r=http%3A//web.archive.org/web/20090517140029/http%3A//anthonystewarthead.electric-chi.com/&b=Netscape%205.0%20%28Windows%3B%20en-US%29&s=1366x768&o=Win32&c=24&j=true&v=1.2",
			"com,yahoo,webhosting,visit)/visit.gif?&b=netscape%205.0%20(windows;%20en-us)&c=24&j=true&o=win32&r=http://web.archive.org/web/20090517140029/http://anthonystewarthead.electric-chi.com/&s=1366x768&v=1.2"},
		// Ports: the scheme's default is dropped, another kept.
		{"http://www.archive.org:80/", "org,archive)/"},
		{"https://www.archive.org:80/", "org,archive:80)/"},
		{"http://www.archive.org:443/", "org,archive:443)/"},
		{"https://www.archive.org:443/", "org,archive)/"},
		{"http://archive.org:8080/", "org,archive:8080)/"},
		// Host massage and host forms.
		{"http://www34.archive.org/index.html?b=a&b=b&a=b", "org,archive)/index.html?a=b&b=a&b=b"},
		{"http://www2.www2foo.com/", "com,www2foo)/"},
		{"http://wwwexample.com/", "com,wwwexample)/"},
		{"http://www.GOOgle.com/", "com,google)/"},
		{"http://www.google.com.../", "com,google)/"},
		{"http://bücher.ch:8080?#foo", "ch,xn--bcher-kva:8080)/"},
		{"http://www.bücher.de/Straße", "de,xn--bcher-kva)/stra%c3%9fe"},
		{"http://192.168.1.254/info/", "254,1,168,192)/info"},
		{"http://3279880203/blah", "11,0,127,195)/blah"},
		{"http://017.0.0.1/", "1,0,0,15)/"},
		{"http://[::1]:8080/x", "::1:8080)/x"},
		{"http://user:pass@example.com/", "com,example)/"},
		{"http:////////////////www.vikings.com", "com,vikings)/"},
		{"http://https://order.1and1.com", "com,1and1,order)/"},
		{"http://mineral.galleries.com:/minerals/silicate/", "com,galleries,mineral)/minerals/silicate"},
		{"example.com/x", "com,example)/x"},
		// Path: decoding, dot segments, slashes, escaping, case, session ids.
		{"http://host/%25%32%35", "host)/%25"},
		{"http://host/%%%25%32%35asd%%", "host)/%25%25%25asd%25%25"},
		{"http://host.com/ab%23cd", "com,host)/ab%23cd"},
		{"http://host.com//twoslashes?more//slashes", "com,host)/twoslashes?more//slashes"},
		{"http://www.google.com/blah/..", "com,google)/"},
		{"http://example.com/a/./b/../c#frag", "com,example)/a/c"},
		{"http://example.com/../a", "com,example)/../a"},
		{"http://www.google.com/foo\tbar\rbaz\n2", "com,google)/foobarbaz2"},
		{"http://Example.COM/Foo/Bar", "com,example)/foo/bar"},
		{"http://example.com/%7Efoo", "com,example)/~foo"},
		{"http://example.com/a%20b", "com,example)/a%20b"},
		{"http://example.com/(S(4hqa0555fwsecu455xqckv45))/mileg.aspx", "com,example)/mileg.aspx"},
		{"http://example.com/(4hqa0555fwsecu455xqckv45)/mileg.aspx", "com,example)/mileg.aspx"},
		// Query: session ids, case, order by (name, value), empty arguments kept.
		{"http://example.com/x?jsessionid=" + sess, "com,example)/x"},
		{"http://example.com/x?jsessionid=" + sess + "0", "com,example)/x?jsessionid=" + sess + "0"},
		{"http://example.com/x?one=two&jsessionid=" + sess + "&x=y", "com,example)/x?one=two&x=y"},
		{"http://example.com/x?one=two&jsessionid=" + sess, "com,example)/x?&one=two"},
		{"http://example.com/x?aspsessionidABCDEFGH=ABCDEFGHIJKLMNOPQRSTUVWX&x=y", "com,example)/x?x=y"},
		{"http://example.com/x?sid=9682993c8daa2c5497996114facdc805&x=y", "com,example)/x?x=y"},
		{"http://example.com/x?CFID=1169580&CFTOKEN=48630702&dtstamp=22%2F08%2F2006%7C06%3A58%3A11", "com,example)/x?dtstamp=22/08/2006|06:58:11"},
		{"HTTP://EXAMPLE.COM/Q?B=1&A=2", "com,example)/q?a=2&b=1"},
		{"http://example.com/x?a=1&&b=2", "com,example)/x?&a=1&b=2"},
		{"http://example.com/x?a-b=1&a=2", "com,example)/x?a=2&a-b=1"},
		{"http://example.com/x?b&a=&a", "com,example)/x?a&a=&b"},
		{"http://evil.com/foo?bar;", "com,evil)/foo?bar;"},
	}
	for _, c := range cases {
		if got := SURT(c.in); got != c.want {
			t.Errorf("SURT(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// specRecord is a WARC record as read by hand from the gzip member at an offset: written from
// ISO 28500 and RFC 1952 with the standard library's gzip, not with this package's reader.
type specRecord struct {
	typ, uri, date, payloadDigest string
	status                        int
	contentType                   string
	payload                       []byte
}

func readSpecRecord(t *testing.T, path string, off, length int64) specRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw := make([]byte, length)
	if _, err := f.ReadAt(raw, off); err != nil {
		t.Fatalf("%s: read %d bytes at %d: %v", path, length, off, err)
	}
	zr, err := stdgzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s@%d: not a gzip member: %v", path, off, err)
	}
	zr.Multistream(false)
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s@%d: gunzip: %v", path, off, err)
	}
	// The member must be exactly length bytes: nothing after the gzip trailer.
	if rest, _ := io.ReadAll(zr); len(rest) != 0 {
		t.Fatalf("%s@%d: more than one member in %d bytes", path, off, length)
	}
	head, block, ok := bytes.Cut(data, []byte("\r\n\r\n"))
	if !ok {
		t.Fatalf("%s@%d: no end of WARC header", path, off)
	}
	lines := strings.Split(string(head), "\r\n")
	if !strings.HasPrefix(lines[0], "WARC/1.") {
		t.Fatalf("%s@%d: version line %q", path, off, lines[0])
	}
	h := map[string]string{}
	for _, l := range lines[1:] {
		k, v, _ := strings.Cut(l, ":")
		h[strings.ToLower(k)] = strings.TrimSpace(v)
	}
	n, _ := strconv.Atoi(h["content-length"])
	if len(block) != n+4 || !bytes.HasSuffix(block, []byte("\r\n\r\n")) {
		t.Fatalf("%s@%d: block of %d bytes, Content-Length %d", path, off, len(block)-4, n)
	}
	block = block[:n]
	r := specRecord{typ: h["warc-type"], uri: h["warc-target-uri"], date: h["warc-date"], payloadDigest: h["warc-payload-digest"]}
	httpHead, body, _ := bytes.Cut(block, []byte("\r\n\r\n"))
	hl := strings.Split(string(httpHead), "\r\n")
	if f := strings.Fields(hl[0]); len(f) >= 2 && strings.HasPrefix(f[0], "HTTP/") {
		r.status, _ = strconv.Atoi(f[1])
	}
	for _, l := range hl[1:] {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "Content-Type") {
			r.contentType, _, _ = strings.Cut(strings.TrimSpace(v), ";")
		}
	}
	r.payload = body
	return r
}

func sha1B32(b []byte) string {
	s := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(s[:])
}

// checkIndexFile reads path's CDXJ file and checks every line against the WARC record found
// by hand at its offset; it returns the lines.
func checkIndexFile(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path + IndexSuffix)
	if err != nil {
		t.Fatalf("index of %s: %v", filepath.Base(path), err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if !slices.IsSorted(lines) {
		t.Fatalf("%s: lines not sorted", path+IndexSuffix)
	}
	for _, l := range lines {
		key, rest, _ := strings.Cut(l, " ")
		ts, js, _ := strings.Cut(rest, " ")
		var f map[string]string // pywb writes every field as a JSON string
		if err := json.Unmarshal([]byte(js), &f); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		off, _ := strconv.ParseInt(f["offset"], 10, 64)
		n, _ := strconv.ParseInt(f["length"], 10, 64)
		if f["filename"] != filepath.Base(path) {
			t.Fatalf("line %q names file %q", l, f["filename"])
		}
		r := readSpecRecord(t, path, off, n)
		if r.uri != f["url"] || SURT(r.uri) != key {
			t.Fatalf("line %q: record at %d has uri %q", l, off, r.uri)
		}
		if d, _ := time.Parse(time.RFC3339, r.date); d.UTC().Format("20060102150405") != ts {
			t.Fatalf("line %q: record date %s", l, r.date)
		}
		if strconv.Itoa(r.status) != f["status"] || r.payloadDigest != f["digest"] {
			t.Fatalf("line %q: record status %d digest %q", l, r.status, r.payloadDigest)
		}
		switch r.typ {
		case "response":
			if sha1B32(r.payload) != f["digest"] || r.contentType != f["mime"] {
				t.Fatalf("line %q: payload digest %s, content type %q", l, sha1B32(r.payload), r.contentType)
			}
		case "revisit":
			if f["mime"] != "warc/revisit" {
				t.Fatalf("revisit line %q: mime %q", l, f["mime"])
			}
		default:
			t.Fatalf("line %q points at a %s record", l, r.typ)
		}
	}
	return lines
}

var oddURLs = []string{
	"http://bücher.example/Straße?b=2&a=1",
	"http://Example.COM:8080/A/B?Z=1&y=2",
	"https://www.example.com:443/x/",
	"http://www.example.com/search?q=a%20b&lang=en#top",
	"http://192.0.2.7/ip",
	"http://example.com/",
}

// writeIndexedCrawl writes responses (odd URLs among them), a truncated response and revisits
// across several files; it returns the locations of the main records.
func writeIndexedCrawl(t *testing.T, w *Writer) []Location {
	t.Helper()
	var locs []Location
	for i := range 40 {
		ex := exchange(i, 900+i*37)
		if i < len(oddURLs) {
			ex.URL = oddURLs[i]
		}
		if i == 7 {
			ex.Truncated = "length"
		}
		if i%10 == 9 {
			ex.ResponseHeader = []byte("HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
		}
		loc, digest, err := w.WriteExchange(ex)
		if err != nil {
			t.Fatal(err)
		}
		locs = append(locs, loc)
		if i%5 == 0 {
			rv := exchange(100+i, 0)
			rv.ResponseHeader = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n")
			loc, err := w.WriteRevisit(rv, Revisit{Profile: ProfileIdenticalPayloadDigest, RefersToURI: ex.URL,
				RefersToDate: ex.Date, PayloadDigest: digest})
			if err != nil {
				t.Fatal(err)
			}
			locs = append(locs, loc)
		}
	}
	return locs
}

func TestCDXJWrittenAtCloseMatchesRecords(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.MaxFileSize = 16 << 10
	w := mustOpen(t, cfg)
	locs := writeIndexedCrawl(t, w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files := warcFiles(t, dir)
	if len(files) < 3 {
		t.Fatalf("want rotation into several files, got %d", len(files))
	}
	found := map[Location]bool{}
	total := 0
	for _, p := range files {
		for _, l := range checkIndexFile(t, p) {
			_, _, e, err := ParseIndexLine(l)
			if err != nil {
				t.Fatal(err)
			}
			found[Location{File: e.Filename, Offset: e.Offset, Length: e.Length}] = true
			total++
		}
		// A rebuilt index equals the one written at close, byte for byte.
		rebuilt, err := IndexLines(p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p + IndexSuffix)
		if got := strings.Join(rebuilt, "\n") + "\n"; got != string(b) {
			t.Fatalf("%s: rebuilt index differs:\n%s\nwritten:\n%s", filepath.Base(p), got, b)
		}
	}
	if total != len(locs) {
		t.Fatalf("%d index lines, %d records written", total, len(locs))
	}
	for _, l := range locs {
		if !found[l] {
			t.Fatalf("record at %+v has no index line", l)
		}
	}
}

// indexedCrawl writes writeIndexedCrawl's records into small rotating WARC files, closes
// the writer (so every file has its index) and returns the writer's config (cfg.Dir holds
// the files) and the files.
func indexedCrawl(t *testing.T) (cfg Config, files []string) {
	t.Helper()
	cfg = testConfig(t.TempDir())
	cfg.MaxFileSize = 16 << 10
	w := mustOpen(t, cfg)
	writeIndexedCrawl(t, w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg, warcFiles(t, cfg.Dir)
}

func TestCDXJRebuiltOnOpenAndAfterCrash(t *testing.T) {
	cfg, files := indexedCrawl(t)
	want := map[string][]byte{}
	for _, p := range files {
		want[p], _ = os.ReadFile(p + IndexSuffix)
	}
	// An old data dir: indexes missing. The newest file gets a torn tail, as a crash leaves.
	for _, p := range files {
		if err := os.Remove(p + IndexSuffix); err != nil {
			t.Fatal(err)
		}
	}
	last := files[len(files)-1]
	appendBytes(t, last, []byte{0x1f, 0x8b, 0x08, 0, 0, 0})
	w := mustOpen(t, cfg)
	// Closed files are re-indexed in the background; Close would stop that between files.
	clustertest.Eventually(t, 10*time.Second, "every closed file's index rebuilt", func() bool {
		for _, p := range files[:len(files)-1] {
			if _, err := os.Stat(p + IndexSuffix); err != nil {
				return false
			}
		}
		return true
	})
	ws := writeN(t, w, 500, 1, 300) // appended to the adopted newest file
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range files[:len(files)-1] {
		got, err := os.ReadFile(p + IndexSuffix)
		if err != nil || !bytes.Equal(got, want[p]) {
			t.Fatalf("%s: rebuilt index differs (err %v)", filepath.Base(p), err)
		}
	}
	lines := checkIndexFile(t, last)
	if ws[0].loc.File != filepath.Base(last) || len(lines) != bytes.Count(want[last], []byte("\n"))+1 {
		t.Fatalf("adopted file %s: %d lines, wrote to %s", filepath.Base(last), len(lines), ws[0].loc.File)
	}
}

func TestCDXJCorruptFileNamesFileAndOffset(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, testConfig(dir))
	ws := writeN(t, w, 0, 5, 2000)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ws[2].loc.File)
	b, _ := os.ReadFile(path)
	b[ws[2].loc.Offset+ws[2].loc.Length/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	lines, err := IndexLines(path)
	var d Damage
	if !errors.As(err, &d) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("want a Damage wrapping ErrCorrupt, got %v", err)
	}
	if d.File != path || d.Offset != ws[2].loc.Offset {
		t.Fatalf("damage at %s@%d, want %s@%d", d.File, d.Offset, path, ws[2].loc.Offset)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), strconv.FormatInt(d.Offset, 10)) {
		t.Fatalf("error %q does not name the file and the offset", err)
	}
	// The lines of the records before the damage come with the error.
	if len(lines) != 2 {
		t.Fatalf("%d lines before the damage, want 2", len(lines))
	}
	for _, l := range lines {
		_, _, e, _ := ParseIndexLine(l)
		if e.Offset != ws[0].loc.Offset && e.Offset != ws[1].loc.Offset {
			t.Fatalf("line %q is not one of the records before the damage", l)
		}
	}
	if err := RebuildIndex(path); err == nil {
		t.Fatal("rebuilding the index of a corrupt file succeeded")
	}
}

func TestMergeIndexes(t *testing.T) {
	cfg, files := indexedCrawl(t)
	dir := cfg.Dir
	var all []string
	for _, p := range files {
		all = append(all, checkIndexFile(t, p)...)
	}
	// One file without its index (built on the fly), one damaged file without an index.
	if err := os.Remove(files[1] + IndexSuffix); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad-20250304050607-00099-n1.warc.gz")
	if err := os.WriteFile(bad, []byte("not a warc file"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A copy of a file without an index, cut inside its last response or revisit: the
	// records before the cut are merged.
	orig := checkIndexFile(t, files[2])
	var lastOff int64
	for _, l := range orig {
		_, _, e, _ := ParseIndexLine(l)
		lastOff = max(lastOff, e.Offset)
	}
	b, _ := os.ReadFile(files[2])
	cutCopy := filepath.Join(dir, "cut-20250304050607-00098-n1.warc.gz")
	if err := os.WriteFile(cutCopy, b[:lastOff+10], 0o644); err != nil {
		t.Fatal(err)
	}
	partial, err := IndexLines(cutCopy)
	if len(partial) != len(orig)-1 || !errors.Is(err, ErrTruncated) {
		t.Fatalf("cut copy: %d lines of %d, err %v", len(partial), len(orig), err)
	}
	all = append(all, partial...)
	var out bytes.Buffer
	var skipped []string
	n, err := MergeIndexes(&out, append(files, bad, cutCopy), func(p string, err error) {
		skipped = append(skipped, fmt.Sprintf("%s: %v", p, err))
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 2 || !strings.Contains(skipped[0], bad) || !strings.Contains(skipped[0], "offset 0") ||
		!strings.Contains(skipped[1], cutCopy) || !strings.Contains(skipped[1], "offset "+strconv.FormatInt(lastOff, 10)) {
		t.Fatalf("skipped %q", skipped)
	}
	var got []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	slices.Sort(all)
	if int(n) != len(all) || !slices.Equal(got, all) {
		t.Fatalf("merged %d lines (%d returned), want %d sorted", len(got), n, len(all))
	}
}

func TestCDXJWriteFailureDoesNotFailClose(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	w := mustOpen(t, cfg)
	ws := writeN(t, w, 0, 3, 1000)
	path := filepath.Join(dir, ws[0].loc.File)
	// A directory where the temporary index goes: the index cannot be written.
	if err := os.Mkdir(path+IndexSuffix+".tmp", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close failed over the index: %v", err)
	}
	if _, err := os.Stat(path + IndexSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("index exists: %v", err)
	}
	if err := os.Remove(path + IndexSuffix + ".tmp"); err != nil {
		t.Fatal(err)
	}
	// The next Open adopts the file (it is the newest) and writes its index at Close.
	w = mustOpen(t, cfg)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if lines := checkIndexFile(t, path); len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
}
