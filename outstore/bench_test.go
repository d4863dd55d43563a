package outstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/internal/s3test"
)

// BenchmarkUpload is the uploader's throughput to a real SeaweedFS on loopback: b.N rounds
// of four 64 MiB incompressible shards (multipart at the default 32 MiB parts), each
// uploaded, verified (local hash pass, PUT, HEAD) and listed in the manifest. It reports
// MB/s of files shipped.
//
//	go test -run '^$' -bench BenchmarkUpload -benchtime 2x ./outstore
func BenchmarkUpload(b *testing.B) {
	srv := s3test.Start(b, "bench")
	tg, _ := ParseURL("s3://bench/b")
	st, err := Dial(context.Background(), tg, Conn{Endpoint: srv.Endpoint(), AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	dir := b.TempDir()
	warc, corpusDir := filepath.Join(dir, "warc"), filepath.Join(dir, "corpus")
	os.MkdirAll(warc, 0o755)
	os.MkdirAll(corpusDir, 0o755)
	const files, size = 4, 64 << 20
	buf := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range buf {
		buf[i] = byte(r.UintN(256))
	}
	u, err := New(context.Background(), Config{Store: st, Node: "n1", WARCDir: warc, CorpusDir: corpusDir, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(files * size)
	b.ResetTimer()
	var spent time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for k := 0; k < files; k++ {
			buf[0] = byte(i*files + k) // every file differs
			if err := os.WriteFile(filepath.Join(corpusDir, fmt.Sprintf("corpus-n1-%06d.jsonl.zst", i*files+k)), buf, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		start := time.Now()
		if err := u.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		spent += time.Since(start)
	}
	b.ReportMetric(float64(b.N*files*size)/spent.Seconds()/1e6, "MB/s")
	if s := u.Stats(); s.Uploads != int64(b.N*files) || s.Failures != 0 {
		b.Fatalf("stats %+v", s)
	}
}
