package e2e

import (
	"encoding/base64"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/simweb"
)

// TestClusterAPITokens: three members with an operator token, a read token and a
// cluster key crawl a small web to completion (with --api-token alone, the links sender
// used to send no credentials: every forwarded batch got 401 for ever and two of three
// members fetched nothing). Along the way, the crawl's data is refused without a read
// credential and served with the read token, the read token does not open a write, and
// `crawlnode status` passes its token.
func TestClusterAPITokens(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster crawl")
	}
	w, addr := web(t, func(c *simweb.Config) {
		plainWeb(c)
		c.Hosts, c.Seed, c.MeanPages = 24, 38, 25
	})
	keyFile := filepath.Join(t.TempDir(), "cluster.key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const op, reader = "op-s3cret", "read-s3cret"
	base := append(clusterArgs(addr, 20*time.Millisecond, 30*time.Second),
		"--api-token", op, "--api-read-token", reader, "--cluster-key-file", keyFile)
	// Keep the members up after the crawl for the read checks: they are stopped below.
	base = slices.DeleteFunc(base, func(a string) bool { return a == "--exit-when-done" })
	cr := newClusterRun(t, base)
	start := time.Now()
	n1 := cr.addThree(seedsFile(t, w))
	rep := w.Report(reportOptions(20 * time.Millisecond))
	deadline := time.Now().Add(75 * time.Second)
	for {
		rep = w.Report(reportOptions(20 * time.Millisecond))
		if rep.Coverage >= 1 {
			break
		}
		if time.Now().After(deadline) {
			cr.dump()
			t.Fatalf("coverage %.4f (%d of %d) after 75 s", rep.Coverage, rep.Reached, rep.MustReach)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("full coverage of %d pages in %s", rep.MustReach, time.Since(start).Round(time.Millisecond))
	// Every member fetched: the forwarded links reached their owners.
	by := map[string]int{}
	for _, e := range w.Log() {
		for _, n := range []string{"n1", "n2", "n3"} {
			if strings.Contains(e.UserAgent, "; "+n+")") {
				by[n]++
			}
		}
	}
	if len(by) != 3 {
		t.Errorf("requests by member %v: not every member fetched", by)
	}

	api := n1.api(t)
	page := api + "/v1/pages?url=" + w.Seeds()[0]
	for _, tc := range []struct {
		name, method, url, token string
		want                     int
	}{
		{"page without a token", "GET", page, "", http.StatusUnauthorized},
		{"page with the read token", "GET", page, reader, http.StatusOK},
		{"page with the operator token", "GET", page, op, http.StatusOK},
		{"export listing without a token", "GET", api + "/v1/export/files", "", http.StatusUnauthorized},
		{"status stays open", "GET", api + "/v1/crawl/status", "", http.StatusOK},
		{"metrics stay open", "GET", api + "/metrics", "", http.StatusOK},
		{"pause with the read token", "POST", api + "/v1/crawl/pause", reader, http.StatusUnauthorized},
		{"internal route with the operator token", "GET", api + "/internal/v1/idle", op, http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(tc.method, tc.url, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	out, err := exec.Command(crawlnodeBin, "status", "--api", api, "--api-read-token", reader).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "pages_crawled") {
		t.Errorf("crawlnode status --api-read-token: %v\n%s", err, out)
	}
	checkClean(t, w.Report(reportOptions(20*time.Millisecond)), 0)
}
