package e2e

// Members only (issue 38, item 1): a cluster with a cluster key, mutual TLS made by
// `crawlnode tls`, and an API token crawls to completion; forged node-to-node requests
// from a certificate of another CA, or from a member speaking for another, are refused.

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/internal/peerauth"
	"github.com/crawlnode/crawlnode/simweb"
)

// makePKI runs `crawlnode tls` in dir: a CA and a certificate for each name.
func makePKI(t testing.TB, dir string, names ...string) {
	t.Helper()
	run := func(args ...string) {
		cmd := exec.Command(crawlnodeBin, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("crawlnode %v: %v\n%s", args, err, out)
		}
	}
	run("tls", "ca", "create")
	for _, n := range names {
		run("tls", "cert", "create", "--node", n, "--ip", "127.0.0.1")
	}
}

// secureArgs are the members-only flags of node name, with PKI and key in dir.
func secureArgs(dir, name string) []string {
	return []string{"--cluster-key-file", filepath.Join(dir, "cluster.key"), "--api-token", "s3cret",
		"--tls-ca", filepath.Join(dir, "crawlnode-ca.pem"), "--tls-cert", filepath.Join(dir, name+"-cert.pem"),
		"--tls-key", filepath.Join(dir, name+"-key.pem")}
}

func writeClusterKey(t testing.TB, dir string) {
	k := make([]byte, 32)
	rand.Read(k)
	if err := os.WriteFile(filepath.Join(dir, "cluster.key"), []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestClusterSecure(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster crawl")
	}
	w, addr := web(t, func(c *simweb.Config) { c.Hosts = 30; c.Seed = 38; c.CrawlDelayHosts = 0 })
	seeds := seedsFile(t, w)
	pki := t.TempDir()
	makePKI(t, pki, "n1", "n2", "n3")
	writeClusterKey(t, pki)
	other := t.TempDir()
	makePKI(t, other, "n1")

	cr := newClusterRun(t, clusterArgs(addr, 0, 30*time.Second))
	start := time.Now()
	n1 := cr.add("n1", append([]string{"--bootstrap-expect", "3", "--seeds", seeds}, secureArgs(pki, "n1")...)...)
	cr.add("n2", append([]string{"--bootstrap-expect", "3", "--join", n1.bind}, secureArgs(pki, "n2")...)...)
	cr.add("n3", append([]string{"--bootstrap-expect", "3", "--join", n1.bind}, secureArgs(pki, "n3")...)...)
	waitLogged(t, w, 200, 2*time.Minute)

	// Forged Raft commands at every member's internal (mutual TLS) listener: a Pause
	// would stop the crawl if any were applied.
	pause, err := control.Encode(control.Pause{})
	if err != nil {
		t.Fatal(err)
	}
	load := func(dir, name string) *peerauth.Creds {
		c, err := peerauth.Load(filepath.Join(dir, "crawlnode-ca.pem"), filepath.Join(dir, name+"-cert.pem"), filepath.Join(dir, name+"-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	forge := func(cr *peerauth.Creds, trustAny bool, target, claim string) (int, error) {
		cfg := cr.ClientTLS()
		if trustAny {
			cfg.VerifyConnection = nil
		}
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodPost, "https://"+target+"/internal/v1/raft/apply", bytes.NewReader(pause))
		req.Header.Set(peerauth.MemberHeader, claim)
		req.Header.Set("Authorization", "Bearer s3cret") // even with the operator's token
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	n2creds := load(pki, "n2")
	foreign := load(other, "n1")
	for _, n := range cr.nodes {
		b, err := os.ReadFile(filepath.Join(n.data, "internal.addr"))
		if err != nil {
			t.Fatalf("%s: internal.addr: %v", n.name, err)
		}
		target := strings.TrimSpace(string(b))
		if code, err := forge(foreign, true, target, "n1"); err == nil {
			t.Errorf("%s: a certificate of another CA got HTTP %d", n.name, code)
		}
		if n.name != "n2" {
			if code, err := forge(n2creds, false, target, n.name); err != nil || code != http.StatusForbidden {
				t.Errorf("%s: n2 speaking for %s: HTTP %d, %v; want 403", n.name, n.name, code, err)
			}
		}
		// Plain HTTP to the internal listener is no way round.
		if resp, err := http.Post("http://"+target+"/internal/v1/raft/apply", "application/octet-stream", bytes.NewReader(pause)); err == nil {
			if resp.StatusCode < 400 {
				t.Errorf("%s: plain HTTP to the internal listener: %d", n.name, resp.StatusCode)
			}
			resp.Body.Close()
		}
	}

	// Rotate the cluster key while the crawl runs (through n1's API, from loopback):
	// install, use, remove. The members keep gossiping (the crawl completes, which needs
	// every member alive in gossip) and each keeps only the new key, on disk too.
	oldKey, _ := os.ReadFile(filepath.Join(pki, "cluster.key"))
	newKeyFile := filepath.Join(pki, "new.key")
	k := make([]byte, 32)
	rand.Read(k)
	if err := os.WriteFile(newKeyFile, []byte(base64.StdEncoding.EncodeToString(k)), 0o600); err != nil {
		t.Fatal(err)
	}
	api := n1.api(t)
	for _, step := range [][]string{{"--install", "@" + newKeyFile}, {"--use", "@" + newKeyFile}, {"--remove", strings.TrimSpace(string(oldKey))}} {
		args := append([]string{"keyring", "--api", api, "--api-token", "s3cret"}, step...)
		if out, err := exec.Command(crawlnodeBin, args...).CombinedOutput(); err != nil {
			t.Fatalf("crawlnode keyring %s: %v\n%s", step[0], err, out)
		}
	}
	out, err := exec.Command(crawlnodeBin, "keyring", "--list", "--api", api).CombinedOutput()
	if err != nil {
		t.Fatalf("keyring --list: %v\n%s", err, out)
	}
	sum := sha256.Sum256(k)
	want := hex.EncodeToString(sum[:8])
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 {
		t.Errorf("keyring --list: %d members:\n%s", len(lines), out)
	}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) != 2 || f[1] != want {
			t.Errorf("after rotation %q, want the one key %s", l, want)
		}
	}
	for _, n := range cr.nodes {
		b, err := os.ReadFile(filepath.Join(n.data, "keyring.json"))
		if err != nil || !strings.Contains(string(b), base64.StdEncoding.EncodeToString(k)) || strings.Contains(string(b), strings.TrimSpace(string(oldKey))) {
			t.Errorf("%s: keyring.json after rotation: %s %v", n.name, b, err)
		}
	}

	cr.waitAll(3 * time.Minute)
	elapsed := time.Since(start)
	rep := w.Report(reportOptions(0))
	checkClean(t, rep, logDuplicates(t, w, rep))
	t.Logf("secure 3 nodes: %d requests in %s", rep.Requests, elapsed.Round(time.Millisecond))
}

// BenchmarkClusterSecure measures the fetch stage of a three-node cluster with the
// cluster key, mutual TLS and an API token against the same cluster without them, on
// the same 200-host web (the ratio of pages per second, server's first to last request).
//
//	go test -run '^$' -bench '^BenchmarkClusterSecure$' -benchtime 1x -timeout 30m ./e2e
func BenchmarkClusterSecure(b *testing.B) {
	pki := b.TempDir()
	makePKI(b, pki, "n1", "n2", "n3")
	writeClusterKey(b, pki)
	run := func(secure bool) (float64, time.Duration) {
		w, addr := web(b, func(c *simweb.Config) { c.Hosts, c.Seed = 200, 1 })
		seeds := seedsFile(b, w)
		extra := func(name string) []string {
			if secure {
				return secureArgs(pki, name)
			}
			return nil
		}
		cr := newClusterRun(b, clusterArgs(addr, 0, 30*time.Second))
		start := time.Now()
		n1 := cr.add("n1", append([]string{"--bootstrap-expect", "3", "--seeds", seeds}, extra("n1")...)...)
		for _, n := range []string{"n2", "n3"} {
			cr.add(n, append([]string{"--bootstrap-expect", "3", "--join", n1.bind}, extra(n)...)...)
		}
		cr.waitAll(20 * time.Minute)
		wall := time.Since(start)
		rep := w.Report(reportOptions(0))
		if rep.Coverage < 1 || rep.PolitenessViolations > 0 || rep.RobotsViolations > 0 {
			b.Errorf("secure=%v: coverage %.4f, politeness violations %d, robots violations %d", secure, rep.Coverage, rep.PolitenessViolations, rep.RobotsViolations)
		}
		first, last := fetchSpan(w.Log())
		return float64(rep.Requests) / last.Sub(first).Seconds(), wall
	}
	for range b.N {
		plain, pw := run(false)
		sec, sw := run(true)
		b.ReportMetric(plain, "insecure-pages/s")
		b.ReportMetric(sec, "secure-pages/s")
		b.ReportMetric(sec/plain, "ratio")
		b.Logf("insecure %.0f pages/s (wall %s), secure %.0f pages/s (wall %s), ratio %.3f", plain, pw.Round(time.Second), sec, sw.Round(time.Second), sec/plain)
	}
}

// TestClusterRefusesUnsafeStart: a node refuses, in one line, to serve gossip beyond
// loopback without a cluster key and TLS, and to run with a certificate that names
// another node; --insecure-cluster is the operator's way round the first.
func TestClusterRefusesUnsafeStart(t *testing.T) {
	pki := t.TempDir()
	makePKI(t, pki, "n1")
	writeClusterKey(t, pki)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"gossip on all interfaces", []string{"--name", "n1", "--bind", "0.0.0.0:0", "--http", "127.0.0.1:0"}, "--insecure-cluster"},
		{"TLS without key", append([]string{"--name", "n1", "--bind", "0.0.0.0:0", "--http", "127.0.0.1:0"}, secureArgs(pki, "n1")[2:]...), "cluster key"},
		{"certificate of another node", append([]string{"--name", "n2", "--http", "127.0.0.1:0"}, secureArgs(pki, "n1")...), `names node "n1"`},
	} {
		args := append([]string{"--data", filepath.Join(t.TempDir(), "d"), "--seed", "http://a.sim.test/"}, tc.args...)
		cmd := exec.Command(crawlnodeBin, args...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s: started", tc.name)
			continue
		}
		msg := strings.TrimSpace(string(out))
		if !strings.Contains(msg, tc.want) || strings.Count(msg, "\n") > 0 {
			t.Errorf("%s: %q, want one line naming %q", tc.name, msg, tc.want)
		}
	}
}
