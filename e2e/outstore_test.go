package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/internal/clustertest"
	"github.com/crawlnode/crawlnode/internal/s3test"
	"github.com/crawlnode/crawlnode/simweb"
)

// setStoreEnv gives the crawler processes the store's credentials.
func setStoreEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	t.Setenv("AWS_REGION", s3test.Region)
}

// storeWARCs reads every WARC object under prefix with the independent reader (digests
// verified) and returns the target URIs of their response and revisit records
// (canonicalized as simweb does), and the objects' bytes by file name.
func storeWARCs(t *testing.T, srv *s3test.Server, bucket, prefix string) (map[string]int, map[string][]byte) {
	t.Helper()
	uris := map[string]int{}
	files := map[string][]byte{}
	for key := range srv.Objects(t, bucket, prefix) {
		if !strings.HasSuffix(key, ".warc.gz") && !strings.HasSuffix(key, ".cdxj") {
			continue
		}
		b := srv.Get(t, bucket, key)
		files[filepath.Base(key)] = b
		if !strings.HasSuffix(key, ".warc.gz") {
			continue
		}
		err := readWARC(bytes.NewReader(b), key, true, func(r *warcRec) error {
			if r.Type() == "response" || r.Type() == "revisit" {
				uris[canon(r.Get("WARC-Target-URI"))]++
			}
			return nil
		})
		if err != nil {
			t.Fatalf("object %s: %v", key, err)
		}
	}
	return uris, files
}

// TestOutputStoreOutage crawls a small simulated web with an output store (a real
// SeaweedFS) that is stopped for 60 s mid-crawl. Judged by the server and the bucket: the
// server keeps seeing requests during the outage (the crawl goes on), every must-reach page
// has its WARC response record in the store at the end, every local WARC file and index is
// in the store byte for byte (uploads caught up), no politeness or robots violation; and
// export --from gives the same corpus and URL list as export --data.
func TestOutputStoreOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl with a 60 s store outage")
	}
	srv := s3test.Start(t, "crawl")
	setStoreEnv(t)
	// 1,918 requests (506 must-reach pages, the rest robots.txt, redirects and trap budgets)
	// on 8 hosts at 0.3 s a host: a crawl of at least 72 s, so the outage (from the first
	// upload, a few seconds in) falls inside it. Upload retries wait at most 5 s, so the
	// uploads catch up within seconds of the store's return.
	w, addr := web(t, func(c *simweb.Config) { c.Hosts = 8; c.Seed = 7 })
	data := filepath.Join(t.TempDir(), "data")
	args := crawlArgs(data, addr, w, t, "--delay", "300ms", "--output-store", "s3://crawl/run1",
		"--s3-endpoint", srv.Endpoint(), "--rotate-every", "2s", "--output-store-retry-max", "5s")
	c := startCrawler(t, args...)
	clustertest.Eventually(t, 60*time.Second, "first upload", func() bool {
		return len(srv.Objects(t, "crawl", "run1/nodes/")) >= 3 // a WARC file, its index, the manifest
	})
	before := len(w.Log())
	srv.Stop()
	outageStart := time.Now()
	time.Sleep(60 * time.Second) // the outage itself: the length is the test's subject
	during := len(w.Log()) - before
	srv.Restart()
	t.Logf("store down %s: the server saw %d requests meanwhile", time.Since(outageStart).Round(time.Second), during)
	if during < 100 {
		t.Errorf("only %d requests while the store was down: the crawl did not go on", during)
	}
	if code := c.wait(t, 6*time.Minute); code != 0 {
		t.Fatalf("crawlnode exited %d:\n%s", code, tail(c.stderr.String(), 3000))
	}
	rep := w.Report(reportOptions(300 * time.Millisecond))
	checkClean(t, rep, 0)
	if !strings.Contains(c.stderr.String(), "upload to the output store failed") {
		t.Errorf("no upload failed during the outage: was the store really down?")
	}

	uris, objects := storeWARCs(t, srv, "crawl", "run1/nodes/")
	var missing []string
	for _, u := range w.MustReach(reportOptions(0)) {
		if uris[canon(u)] == 0 {
			missing = append(missing, u)
		}
	}
	t.Logf("store: %d WARC files and indexes, responses for %d URLs; must-reach %d, missing %d", len(objects), len(uris), rep.MustReach, len(missing))
	if len(missing) > 0 {
		t.Errorf("%d must-reach pages have no WARC record in the store, e.g. %v", len(missing), first(missing, 10))
	}
	locals, _ := filepath.Glob(filepath.Join(data, "warc", "*"))
	for _, p := range locals {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(objects[filepath.Base(p)], b) {
			t.Errorf("%s: not in the store as on disk (%d bytes there, %d here)", filepath.Base(p), len(objects[filepath.Base(p)]), len(b))
		}
	}
	if len(objects) != len(locals) {
		t.Errorf("%d WARC objects in the store, %d files on disk", len(objects), len(locals))
	}
	compareExports(t, srv, data)
}

// compareExports runs export --data and export --from in the jsonl and urls formats and
// wants the same bytes.
func compareExports(t *testing.T, srv *s3test.Server, data string) {
	t.Helper()
	dir := t.TempDir()
	for _, format := range []string{"jsonl", "urls"} {
		local, remote := filepath.Join(dir, "local."+format), filepath.Join(dir, "remote."+format)
		if out, err := exec.Command(crawlnodeBin, "export", "--data", data, "--format", format, "--out", local).CombinedOutput(); err != nil {
			t.Fatalf("export --data: %v\n%s", err, out)
		}
		out, err := exec.Command(crawlnodeBin, "export", "--from", "s3://crawl/run1", "--s3-endpoint", srv.Endpoint(),
			"--format", format, "--out", remote, "--tmp", dir).CombinedOutput()
		if err != nil {
			t.Fatalf("export --from: %v\n%s", err, out)
		}
		a, _ := os.ReadFile(local)
		b, _ := os.ReadFile(remote)
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: export --from wrote %d bytes, export --data %d, not the same", format, len(b), len(a))
		}
		t.Logf("export --from %s: %s", format, strings.TrimSpace(string(out)))
	}
}

// TestOutputStoreBadInput: a bad s3:// URL, refused credentials, a missing bucket and an
// unreachable store each give one clear line and an exit code, and no data directory.
func TestOutputStoreBadInput(t *testing.T) {
	srv := s3test.Start(t, "crawl")
	dir := t.TempDir()
	type tc struct {
		name, url, endpoint, key, want string
	}
	cases := []tc{
		{"bad url", "s3:/crawl", srv.Endpoint(), s3test.AccessKey, "not an s3://BUCKET/PREFIX URL"},
		{"bad bucket name", "s3://Crawl_1/x", srv.Endpoint(), s3test.AccessKey, "bucket name"},
		{"wrong credentials", "s3://crawl/x", srv.Endpoint(), "intruder", "credentials refused"},
		{"missing bucket", "s3://no-such-bucket/x", srv.Endpoint(), s3test.AccessKey, `bucket "no-such-bucket" does not exist`},
		{"unreachable store", "s3://crawl/x", "http://127.0.0.1:1", s3test.AccessKey, "store unreachable"},
		{"bad endpoint", "s3://crawl/x", "127.0.0.1:9000", s3test.AccessKey, "--s3-endpoint"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(dir, "d", strings.ReplaceAll(c.name, " ", "-"))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, crawlnodeBin, "--data", data, "--seed", "http://a.sim.test/",
				"--output-store", c.url, "--s3-endpoint", c.endpoint, "--http", "")
			cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+c.key, "AWS_SECRET_ACCESS_KEY="+s3test.SecretKey, "AWS_REGION="+s3test.Region)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("exit 0, want an error; output: %s", out)
			}
			msg := strings.TrimSpace(string(out))
			if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
				t.Errorf("case %d: want one line naming %q, got:\n%s", i, c.want, msg)
			}
			if _, err := os.Stat(data); err == nil {
				t.Errorf("%s was created", data)
			}
		})
	}
	if objs := srv.Objects(t, "crawl", ""); len(objs) != 0 {
		t.Errorf("the store holds %d objects after refused starts", len(objs))
	}
	// Missing credentials are refused before the store is asked.
	cmd := exec.Command(crawlnodeBin, "--data", filepath.Join(dir, "nokeys"), "--seed", "http://a.sim.test/",
		"--output-store", "s3://crawl/x", "--s3-endpoint", srv.Endpoint(), "--http", "")
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "AWS_ACCESS_KEY_ID") {
		t.Errorf("missing credentials: %v %s", err, out)
	}
}

// TestOutputStorePausesAtBound: with a small --output-store-max-unshipped and the store
// stopped, fetching stops once the unshipped bytes pass the bound (the server sees no new
// requests; status says paused), and resumes by itself when the store is back; the crawl
// then completes with every must-reach page in the store.
func TestOutputStorePausesAtBound(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl with a store outage")
	}
	srv := s3test.Start(t, "crawl")
	setStoreEnv(t)
	w, addr := web(t, func(c *simweb.Config) { c.Hosts = 4; c.Seed = 3 })
	data := filepath.Join(t.TempDir(), "data")
	c := startCrawler(t, crawlArgs(data, addr, w, t, "--delay", "200ms", "--output-store", "s3://crawl/run1",
		"--s3-endpoint", srv.Endpoint(), "--rotate-every", "1s", "--output-store-max-unshipped", "300000",
		"--output-store-retry-max", "3s")...)
	base := apiAddr(t, data)
	clustertest.Eventually(t, 60*time.Second, "first upload", func() bool {
		return len(srv.Objects(t, "crawl", "run1/nodes/")) >= 3
	})
	srv.Stop()
	paused := func() bool {
		var st struct {
			OutputStore *struct {
				Paused         bool  `json:"paused"`
				UnshippedBytes int64 `json:"unshipped_bytes"`
			} `json:"output_store"`
		}
		getJSON(t, base+"/v1/crawl/status?local=1", &st)
		return st.OutputStore != nil && st.OutputStore.Paused && st.OutputStore.UnshippedBytes > 300000
	}
	clustertest.Eventually(t, 90*time.Second, "fetching paused at the bound", paused)
	time.Sleep(2 * time.Second) // fetches in flight at the pause end
	n1 := len(w.Log())
	time.Sleep(5 * time.Second) // the server must see nothing new meanwhile
	n2 := len(w.Log())
	t.Logf("paused: %d requests before, %d new in 5 s", n1, n2-n1)
	if n2 != n1 {
		t.Errorf("%d requests while paused at the bound", n2-n1)
	}
	if !paused() {
		t.Error("no longer paused while the store is down")
	}
	srv.Restart()
	if code := c.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("crawlnode exited %d:\n%s", code, tail(c.stderr.String(), 3000))
	}
	if !strings.Contains(c.stderr.String(), "fetching paused: too much output not yet in the output store") {
		t.Error("the pause was not logged")
	}
	rep := w.Report(reportOptions(200 * time.Millisecond))
	checkClean(t, rep, 0)
	uris, _ := storeWARCs(t, srv, "crawl", "run1/nodes/")
	for _, u := range w.MustReach(reportOptions(0)) {
		if uris[canon(u)] == 0 {
			t.Errorf("must-reach %s has no WARC record in the store", u)
		}
	}
}
