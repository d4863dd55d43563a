package outstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/internal/clustertest"
	"github.com/crawlnode/crawlnode/internal/s3test"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func conn(srv *s3test.Server) Conn {
	return Conn{Endpoint: srv.Endpoint(), AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Region: s3test.Region, Timeout: 5 * time.Second}
}

func dial(t *testing.T, srv *s3test.Server, url string) *Store {
	t.Helper()
	tg, err := ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Dial(context.Background(), tg, conn(srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close) // after the uploader's stop (cleanups run last first)
	return st
}

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in, bucket, prefix string
		ok                 bool
	}{
		{"s3://crawl-out", "crawl-out", "", true},
		{"s3://crawl-out/", "crawl-out", "", true},
		{"s3://crawl-out/run1/a", "crawl-out", "run1/a", true},
		{"s3://crawl-out/run1/", "crawl-out", "run1", true},
		{"http://crawl-out/x", "", "", false},
		{"s3:/crawl-out", "", "", false},
		{"s3://", "", "", false},
		{"s3://Crawl_Out/x", "", "", false},
		{"s3://ab", "", "", false},
		{"s3://crawl-out//x", "", "", false},
		{"s3://crawl-out/a/../b", "", "", false},
	} {
		tg, err := ParseURL(c.in)
		if (err == nil) != c.ok || (c.ok && (tg.Bucket != c.bucket || tg.Prefix != c.prefix)) {
			t.Errorf("%q: %+v, %v", c.in, tg, err)
		}
		if err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("%q: error %v does not wrap ErrConfig", c.in, err)
		}
	}
}

// TestDialRefusesBadInput: each bad setting is refused at start with an error that names
// it, and nothing lands in the store.
func TestDialRefusesBadInput(t *testing.T) {
	srv := s3test.Start(t, "out")
	tg := Target{Bucket: "out", Prefix: "p"}
	good := conn(srv)
	wrongSecret := good
	wrongSecret.SecretKey = "not-the-secret"
	wrongKey := good
	wrongKey.AccessKey = "nobody"
	noKeys := good
	noKeys.AccessKey, noKeys.SecretKey = "", ""
	badEndpoint := good
	badEndpoint.Endpoint = "ftp://" + srv.HostPort()
	down := good
	down.Endpoint = "http://127.0.0.1:1" // nothing listens on port 1
	for _, c := range []struct {
		name string
		tg   Target
		c    Conn
		want string
	}{
		{"wrong secret", tg, wrongSecret, "credentials refused"},
		{"unknown key", tg, wrongKey, "credentials refused"},
		{"no keys", tg, noKeys, "AWS_ACCESS_KEY_ID"},
		{"missing bucket", Target{Bucket: "no-such-bucket"}, good, `bucket "no-such-bucket" does not exist`},
		{"bad endpoint", tg, badEndpoint, "--s3-endpoint"},
		{"unreachable", tg, down, "unreachable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, err := Dial(context.Background(), c.tg, c.c)
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want ErrConfig with %q", err, c.want)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("took %s to fail", d)
			}
			t.Logf("%v", err)
		})
	}
	if objs := srv.Objects(t, "out", ""); len(objs) != 0 {
		t.Fatalf("objects written: %v", objs)
	}
	st, err := Dial(context.Background(), tg, good)
	if err != nil {
		t.Fatalf("good settings refused: %v", err)
	}
	st.Close()
}

// writeWARCs writes n exchanges with bodies of size bytes (incompressible for odd i) through
// an archive writer that rotates at maxFile, and leaves the last file open unless closeAll.
func writeWARCs(t *testing.T, dir string, from, n, size int, maxFile int64, closeAll bool) *archive.Writer {
	t.Helper()
	w, err := archive.Open(archive.Config{Dir: dir, NodeName: "n1", MaxFileSize: maxFile, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(uint64(from), 1))
	for i := from; i < from+n; i++ {
		b := make([]byte, size)
		for k := range b {
			if i%2 == 1 {
				b[k] = byte(r.UintN(256))
			} else {
				b[k] = "abcdefgh "[r.IntN(9)]
			}
		}
		_, _, err := w.WriteExchange(archive.Exchange{
			URL: fmt.Sprintf("http://h.test/p%d", i), IP: "127.0.0.1",
			ResponseHeader: []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d", size)),
			ResponseBody:   b,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if closeAll {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return nil
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// writeShard writes a finished corpus shard of n JSON lines.
func writeShard(t *testing.T, dir, name string, n int) {
	t.Helper()
	var buf bytes.Buffer
	enc, _ := zstd.NewWriter(&buf)
	for i := 0; i < n; i++ {
		fmt.Fprintf(enc, "{\"url\":\"http://h.test/%d\",\"text\":\"t\"}\n", i)
	}
	enc.Close()
	if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

type dirs struct{ warc, corpus, state string }

func newDirs(t *testing.T) dirs {
	d := t.TempDir()
	ds := dirs{filepath.Join(d, "warc"), filepath.Join(d, "corpus"), filepath.Join(d, "outstore.json")}
	os.MkdirAll(ds.warc, 0o755)
	os.MkdirAll(ds.corpus, 0o755)
	return ds
}

func startUploader(t *testing.T, cfg Config) (*Uploader, func()) {
	t.Helper()
	cfg.Logger = quiet
	if cfg.ScanInterval == 0 {
		cfg.ScanInterval = 50 * time.Millisecond
	}
	if cfg.RetryBase == 0 {
		cfg.RetryBase, cfg.RetryMax = 20*time.Millisecond, 200*time.Millisecond
	}
	u, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); u.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return u, stop
}

// closedFiles lists the closed output files of ds: WARC files with an index, their
// indexes, finished shards.
func closedFiles(t *testing.T, ds dirs) map[string]string {
	t.Helper()
	out := map[string]string{} // name -> path
	for _, dir := range []string{ds.warc, ds.corpus} {
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			n := e.Name()
			p := filepath.Join(dir, n)
			switch {
			case strings.HasSuffix(n, ".warc.gz"):
				if _, err := os.Stat(p + ".cdxj"); err == nil {
					out[n] = p
				}
			case strings.HasSuffix(n, ".cdxj"), strings.HasSuffix(n, ".jsonl.zst"):
				out[n] = p
			}
		}
	}
	return out
}

// checkStore compares every closed local file with its object, byte for byte, and with
// its manifest entry (read from the store, not from the uploader).
func checkStore(t *testing.T, srv *s3test.Server, st *Store, ds dirs, want map[string]string) []Entry {
	t.Helper()
	es, err := st.ReadManifest(context.Background(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Entry{}
	for _, e := range es {
		byName[e.Name] = e
	}
	objs := srv.Objects(t, st.Target().Bucket, st.Key("nodes", "n1")+"/")
	for name, p := range want {
		local, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := byName[name]
		if !ok {
			t.Fatalf("%s not in the manifest", name)
		}
		sum := sha256.Sum256(local)
		if e.Size != int64(len(local)) || e.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: manifest %d bytes %s, local %d bytes %x", name, e.Size, e.SHA256, len(local), sum)
		}
		if objs[e.Key] != int64(len(local)) {
			t.Errorf("%s: object %s has %d bytes, local %d", name, e.Key, objs[e.Key], len(local))
		}
		if got := srv.Get(t, st.Target().Bucket, e.Key); !bytes.Equal(got, local) {
			t.Errorf("%s: object differs from the local file", name)
		}
		if e.Kind == KindCDXJ && e.Records != int64(bytes.Count(local, []byte("\n"))) {
			t.Errorf("%s: %d records listed, %d index lines", name, e.Records, bytes.Count(local, []byte("\n")))
		}
	}
	if len(es) != len(want) {
		t.Errorf("manifest has %d entries, %d closed files", len(es), len(want))
	}
	return es
}

// TestUploadClosedFiles: every closed WARC file, index and shard lands in the bucket
// byte for byte, large ones in parts, listed in the manifest; the open WARC file and the
// open shard are not shipped but counted as unshipped.
func TestUploadClosedFiles(t *testing.T) {
	srv := s3test.Start(t, "out")
	st := dial(t, srv, "s3://out/crawl/run1")
	ds := newDirs(t)
	// ~13 MiB of incompressible pages in one file (multipart at 5 MiB parts), then small files.
	writeWARCs(t, ds.warc, 0, 14, 1<<20, 12<<20, true)
	w := writeWARCs(t, ds.warc, 100, 40, 2000, 16<<10, false)
	writeShard(t, ds.corpus, "corpus-n1-000000.jsonl.zst", 300)
	writeShard(t, ds.corpus, "corpus-n1-000001.jsonl.zst", 20)
	os.WriteFile(filepath.Join(ds.corpus, "corpus-n1-000002.jsonl.zst.partial"), []byte("open"), 0o644)
	want := closedFiles(t, ds)
	u, _ := startUploader(t, Config{Store: st, Node: "n1", WARCDir: ds.warc, CorpusDir: ds.corpus, StateFile: ds.state, PartSize: MinPartSize})
	clustertest.Eventually(t, 2*time.Minute, "closed files shipped", func() bool { return u.Stats().Shipped == len(want) })
	es := checkStore(t, srv, st, ds, want)
	multipart := false
	for _, e := range es {
		multipart = multipart || strings.Contains(e.ETag, "-")
		if e.Kind == KindCorpus && e.Name == "corpus-n1-000000.jsonl.zst" && e.Records != 300 {
			t.Errorf("shard records %d, want 300", e.Records)
		}
	}
	if !multipart {
		t.Error("no file went up in parts")
	}
	s := u.Stats()
	if s.UnshippedBytes <= 0 || s.UnshippedFiles != 0 || s.Failures != 0 {
		t.Errorf("stats %+v: want the open files unshipped, nothing failed", s)
	}
	// Closing the open file ships it too.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want = closedFiles(t, ds)
	u.Wake()
	clustertest.Eventually(t, time.Minute, "last file shipped", func() bool { return u.Stats().Shipped == len(want) })
	checkStore(t, srv, st, ds, want)
	if local, err := ReadState(ds.state); err != nil || local == nil || len(local.Entries) != len(want) || local.Target != "s3://out/crawl/run1" {
		t.Fatalf("local state %+v, %v", local, err)
	}
}

// TestCorruptUploadCaught: an upload whose bytes change on the way is refused by the ETag
// check, counted as a failure and retried; the store ends with the right bytes.
func TestCorruptUploadCaught(t *testing.T) {
	srv := s3test.Start(t, "out")
	st := dial(t, srv, "s3://out")
	ds := newDirs(t)
	writeShard(t, ds.corpus, "corpus-n1-000000.jsonl.zst", 50)
	writeShard(t, ds.corpus, "corpus-n1-000001.jsonl.zst", 50) // big enough for one part only
	var corrupted atomic.Int32
	cfg := Config{Store: st, Node: "n1", WARCDir: ds.warc, CorpusDir: ds.corpus, PartSize: MinPartSize}
	cfg.corrupt = func(name string, r io.Reader) io.Reader {
		if corrupted.Add(1) > 2 {
			return r
		}
		return &flipReader{r: r}
	}
	u, _ := startUploader(t, cfg)
	clustertest.Eventually(t, time.Minute, "shards shipped", func() bool { return u.Stats().Shipped == 2 })
	if f := u.Stats().Failures; f < 1 {
		t.Fatalf("%d failures: the damaged upload was not caught", f)
	}
	checkStore(t, srv, st, ds, closedFiles(t, ds))
}

// flipReader flips one bit of the first byte it passes.
type flipReader struct {
	r    io.Reader
	done bool
}

func (f *flipReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 && !f.done {
		p[0] ^= 1
		f.done = true
	}
	return n, err
}

// TestStoreOutage: while the store is stopped, closed files wait (unshipped bytes grow,
// state "retrying", failures counted); after the restart they are shipped, none lost.
func TestStoreOutage(t *testing.T) {
	srv := s3test.Start(t, "out")
	st := dial(t, srv, "s3://out/o")
	ds := newDirs(t)
	writeShard(t, ds.corpus, "corpus-n1-000000.jsonl.zst", 10)
	u, _ := startUploader(t, Config{Store: st, Node: "n1", WARCDir: ds.warc, CorpusDir: ds.corpus, RetryBase: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond})
	clustertest.Eventually(t, time.Minute, "first shard shipped", func() bool { return u.Stats().Shipped == 1 })
	srv.Stop()
	writeWARCs(t, ds.warc, 0, 30, 3000, 16<<10, true)
	writeShard(t, ds.corpus, "corpus-n1-000001.jsonl.zst", 10)
	u.Wake()
	clustertest.Eventually(t, time.Minute, "retrying while the store is down", func() bool {
		s := u.Stats()
		return s.State == "retrying" && s.Failures >= 2 && s.UnshippedFiles > 0 && s.UnshippedBytes > 0
	})
	srv.Restart()
	want := closedFiles(t, ds)
	clustertest.Eventually(t, 2*time.Minute, "caught up", func() bool {
		s := u.Stats()
		return s.Shipped == len(want) && s.UnshippedBytes == 0
	})
	checkStore(t, srv, st, ds, want)
}

// TestRestartShipsWhatWaited: files closed while no uploader ran (a crash, or the store
// down at the end of the last run) are found by the scan of the next one, which ships only
// those; a file that grew since its upload is shipped again.
func TestRestartShipsWhatWaited(t *testing.T) {
	srv := s3test.Start(t, "out")
	st := dial(t, srv, "s3://out")
	ds := newDirs(t)
	writeShard(t, ds.corpus, "corpus-n1-000000.jsonl.zst", 10)
	u1, stop1 := startUploader(t, Config{Store: st, Node: "n1", WARCDir: ds.warc, CorpusDir: ds.corpus})
	clustertest.Eventually(t, time.Minute, "first shipped", func() bool { return u1.Stats().Shipped == 1 })
	stop1()
	writeWARCs(t, ds.warc, 0, 10, 2000, 1<<20, true)
	writeShard(t, ds.corpus, "corpus-n1-000001.jsonl.zst", 10)
	want := closedFiles(t, ds)
	u2, stop2 := startUploader(t, Config{Store: st, Node: "n1", WARCDir: ds.warc, CorpusDir: ds.corpus})
	clustertest.Eventually(t, time.Minute, "waiting files shipped", func() bool { return u2.Stats().Shipped == len(want) })
	if up := u2.Stats().Uploads; up != int64(len(want)-1) {
		t.Errorf("%d uploads, want %d (the shipped shard not again)", up, len(want)-1)
	}
	stop2()
	// The archive writer adopts the newest file and appends to it: shipped again, entry replaced.
	writeWARCs(t, ds.warc, 50, 3, 2000, 1<<20, true)
	want = closedFiles(t, ds)
	u3, _ := startUploader(t, Config{Store: st, Node: "n1", WARCDir: ds.warc, CorpusDir: ds.corpus})
	clustertest.Eventually(t, time.Minute, "grown file shipped", func() bool { return u3.Stats().Uploads == 2 })
	checkStore(t, srv, st, ds, want)
}

// TestDeleteAfterUpload: verified files are removed locally, except the newest of each kind
// and those CanDelete holds back; the local state still lists them all.
func TestDeleteAfterUpload(t *testing.T) {
	srv := s3test.Start(t, "out")
	st := dial(t, srv, "s3://out")
	ds := newDirs(t)
	writeWARCs(t, ds.warc, 0, 40, 2000, 16<<10, true)
	writeShard(t, ds.corpus, "corpus-n1-000000.jsonl.zst", 10)
	writeShard(t, ds.corpus, "corpus-n1-000001.jsonl.zst", 10)
	want := closedFiles(t, ds)
	var allow atomic.Bool
	u, _ := startUploader(t, Config{Store: st, Node: "n1", WARCDir: ds.warc, CorpusDir: ds.corpus, StateFile: ds.state,
		DeleteAfterUpload: true, CanDelete: func(kind, p string) bool { return kind == KindCorpus || allow.Load() }})
	clustertest.Eventually(t, time.Minute, "shipped", func() bool { return u.Stats().Shipped == len(want) })
	checkStoreFrom(t, srv, st, want)
	clustertest.Eventually(t, 10*time.Second, "shard removed", func() bool { return !exists(filepath.Join(ds.corpus, "corpus-n1-000000.jsonl.zst")) })
	if n := countFiles(t, ds.warc, ".warc.gz"); n < 3 {
		t.Fatalf("%d WARC files left while CanDelete refuses", n)
	}
	allow.Store(true)
	clustertest.Eventually(t, 10*time.Second, "warc files removed but the newest", func() bool { return countFiles(t, ds.warc, ".warc.gz") == 1 })
	if !exists(filepath.Join(ds.corpus, "corpus-n1-000001.jsonl.zst")) {
		t.Fatal("newest shard removed")
	}
	local, err := ReadState(ds.state)
	if err != nil || len(local.Entries) != len(want) {
		t.Fatalf("local state %v entries, %v", local, err)
	}
}

// checkStoreFrom compares the objects with the copies read before deletion could begin.
func checkStoreFrom(t *testing.T, srv *s3test.Server, st *Store, want map[string]string) {
	t.Helper()
	es, err := st.ReadManifest(context.Background(), "n1")
	if err != nil || len(es) != len(want) {
		t.Fatalf("manifest %d entries for %d files, %v", len(es), len(want), err)
	}
	for _, e := range es {
		var buf bytes.Buffer
		if err := st.Download(context.Background(), e, &buf); err != nil {
			t.Fatal(err)
		}
	}
}

func exists(p string) bool { _, err := os.Stat(p); return !errors.Is(err, fs.ErrNotExist) }

func countFiles(t *testing.T, dir, suffix string) int {
	es, _ := os.ReadDir(dir)
	n := 0
	for _, e := range es {
		if strings.HasSuffix(e.Name(), suffix) {
			n++
		}
	}
	return n
}

// TestCredentialsRevoked: credentials refused mid-run (the same path as a full store or any
// refused PUT) make uploads fail and retry with the reason in the state, files wait; once
// the credentials are accepted again everything is shipped.
func TestCredentialsRevoked(t *testing.T) {
	srv := s3test.Start(t, "out")
	st := dial(t, srv, "s3://out/r")
	ds := newDirs(t)
	writeShard(t, ds.corpus, "corpus-n1-000000.jsonl.zst", 10)
	u, _ := startUploader(t, Config{Store: st, Node: "n1", WARCDir: ds.warc, CorpusDir: ds.corpus, RetryBase: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond})
	clustertest.Eventually(t, time.Minute, "first shard shipped", func() bool { return u.Stats().Shipped == 1 })
	srv.RestartWithSecret("a-different-secret-now")
	writeShard(t, ds.corpus, "corpus-n1-000001.jsonl.zst", 10)
	u.Wake()
	clustertest.Eventually(t, time.Minute, "uploads refused", func() bool {
		s := u.Stats()
		return s.State == "retrying" && strings.Contains(s.LastError, "credentials refused") && s.UnshippedFiles == 1
	})
	srv.RestartWithSecret(s3test.SecretKey)
	clustertest.Eventually(t, time.Minute, "shipped after the grant", func() bool { return u.Stats().Shipped == 2 })
	checkStore(t, srv, st, ds, closedFiles(t, ds))
}
