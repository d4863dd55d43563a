package s3test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Version is the SeaweedFS module version .ci/build-seaweedfs builds.
const Version = "v0.0.0-20261109003541-7506e5f91cd6"

// Credentials of the test identity, allowed everything.
const (
	AccessKey = "crawlnode-test"
	SecretKey = "crawlnode-test-secret-0123456789"
	Region    = "us-east-1"
)

// BinaryPath is where the weed binary is expected: $CRAWLNODE_WEED, else the cache path
// .ci/build-seaweedfs installs to.
func BinaryPath() string {
	if p := os.Getenv("CRAWLNODE_WEED"); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "crawlnode", "weed-"+Version)
}

// BuildWait bounds how long Binary waits for a build of the binary in progress.
const BuildWait = 40 * time.Minute

// Binary returns the weed binary's path, or skips t with how to build it. While
// .ci/build-seaweedfs is building it (its marker file BinaryPath()+".building" names a
// live process), Binary waits for the build, at most BuildWait, so the tests can start
// before the build ends.
func Binary(t testing.TB) string {
	t.Helper()
	p := BinaryPath()
	if pid, ok := buildInProgress(p); ok && !exists(p) {
		t.Logf("waiting for the SeaweedFS build in progress (pid %d, .ci/build-seaweedfs)", pid)
		deadline := time.Now().Add(BuildWait)
		for !exists(p) && time.Now().Before(deadline) {
			if _, ok := buildInProgress(p); !ok {
				break
			}
			time.Sleep(2 * time.Second)
		}
	}
	if !exists(p) {
		t.Skipf("SeaweedFS binary missing at %s: build it with .ci/build-seaweedfs (about 16 min)", p)
	}
	return p
}

func exists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// buildInProgress reports the pid in bin's build marker when that process is alive.
func buildInProgress(bin string) (int, bool) {
	b, err := os.ReadFile(bin + ".building")
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	// Signal 0 checks that the process exists; a marker left by a killed build is ignored.
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0, false
	}
	return pid, true
}

// Server is one weed server process with its S3 gateway on loopback.
type Server struct {
	t       testing.TB
	bin     string
	dir     string // data
	sockDir string // Unix sockets (short path)
	config  string // S3 identities
	ports   ports
	log     *bytes.Buffer

	mu     sync.Mutex
	secret string // the identity's secret now ("" = SecretKey): start's readiness probe signs with it
	cmd    *exec.Cmd
	exit   chan struct{}
}

type ports struct{ master, masterGRPC, volume, volumeGRPC, filer, filerGRPC, s3, s3GRPC int }

// Start runs weed server -s3 in a temp dir of t, waits until S3 answers and creates
// bucket (none when bucket is ""). It is stopped when t ends.
func Start(t testing.TB, bucket string) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), dir: t.TempDir(), log: &bytes.Buffer{}}
	sock, err := os.MkdirTemp("", "weed")
	if err != nil {
		t.Fatal(err)
	}
	s.sockDir = sock
	s.config = filepath.Join(s.dir, "s3.json")
	if err := writeIdentities(s.config, SecretKey); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		os.RemoveAll(s.sockDir)
	})
	var startErr error
	for try := 0; try < 3; try++ {
		if s.ports, startErr = freePorts(); startErr != nil {
			continue
		}
		if startErr = s.start(); startErr == nil {
			break
		}
		s.Stop()
	}
	if startErr != nil {
		t.Fatalf("start seaweedfs: %v\n%s", startErr, s.Log())
	}
	if bucket != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Client(t).MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: Region}); err != nil {
			t.Fatalf("create bucket %s: %v", bucket, err)
		}
	}
	return s
}

func writeIdentities(path, secret string) error {
	cfg := map[string]any{"identities": []map[string]any{{
		"name":        "crawlnode",
		"credentials": []map[string]string{{"accessKey": AccessKey, "secretKey": secret}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func freePorts() (ports, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ps [8]int
	for i := range ps {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ports{}, err
		}
		ls = append(ls, l)
		ps[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports{ps[0], ps[1], ps[2], ps[3], ps[4], ps[5], ps[6], ps[7]}, nil
}

func (s *Server) args() []string {
	p := s.ports
	i := strconv.Itoa
	// -logdir is a global flag (before the command): weed's log files go to the test's dir,
	// not the system's temp dir.
	return []string{"-logdir=" + s.dir, "server",
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + s.dir,
		"-master.port=" + i(p.master), "-master.port.grpc=" + i(p.masterGRPC),
		"-master.telemetry=false", "-master.volumeSizeLimitMB=64",
		"-volume.port=" + i(p.volume), "-volume.port.grpc=" + i(p.volumeGRPC), "-volume.max=32",
		"-filer.port=" + i(p.filer), "-filer.port.grpc=" + i(p.filerGRPC),
		"-filer.localSocket=" + filepath.Join(s.sockDir, "filer.sock"),
		"-s3", "-s3.port=" + i(p.s3), "-s3.port.grpc=" + i(p.s3GRPC),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config=" + s.config,
		"-s3.autoCreateBucket=false",
		"-s3.localSocket=" + filepath.Join(s.sockDir, "s3.sock"),
	}
}

// start launches the process and waits until S3 answers a signed request.
func (s *Server) start() error {
	s.mu.Lock()
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Dir = s.dir
	cmd.Stdout = lockedWriter{&s.mu, s.log}
	cmd.Stderr = lockedWriter{&s.mu, s.log}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return err
	}
	exit := make(chan struct{})
	s.cmd, s.exit = cmd, exit
	s.mu.Unlock()
	go func() { _ = cmd.Wait(); close(exit) }()
	deadline := time.Now().Add(90 * time.Second)
	s.mu.Lock()
	secret := s.secret
	s.mu.Unlock()
	if secret == "" {
		secret = SecretKey
	}
	c, err := minio.New(s.HostPort(), &minio.Options{Creds: credentials.NewStaticV4(AccessKey, secret, ""), Region: Region, Transport: noKeepAlive})
	if err != nil {
		return err
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := c.ListBuckets(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exit:
			return fmt.Errorf("weed exited while starting: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("S3 not ready after 90s: %v", err)
		}
	}
}

// Stop ends the process (SIGTERM, then SIGKILL after 3 s: weed often takes longer to
// stop, and a killed store is the harsher outage) and waits for it. Objects
// already acknowledged stay on disk for Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, exit := s.cmd, s.exit
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exit:
	case <-time.After(3 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exit
	}
}

// Restart starts the server again on the same directory and ports.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("restart seaweedfs: %v\n%s", err, s.Log())
	}
}

// RestartWithSecret stops the server and starts it again with the test identity's secret
// changed to secret: with anything but SecretKey, requests signed with SecretKey are refused
// (credentials revoked); RestartWithSecret(SecretKey) grants them again. Client, Get and
// Objects keep using SecretKey, so they fail while it is revoked.
func (s *Server) RestartWithSecret(secret string) {
	s.t.Helper()
	s.Stop()
	if err := writeIdentities(s.config, secret); err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	s.secret = secret
	s.mu.Unlock()
	if err := s.start(); err != nil {
		s.t.Fatalf("restart seaweedfs: %v\n%s", err, s.Log())
	}
}

// Endpoint is the S3 endpoint URL (http://127.0.0.1:PORT).
func (s *Server) Endpoint() string { return "http://" + s.HostPort() }

// HostPort is the S3 endpoint's host:port.
func (s *Server) HostPort() string { return "127.0.0.1:" + strconv.Itoa(s.ports.s3) }

// noKeepAlive is the helpers' transport: no idle connection outlives a call, so the tests'
// leak checks (goleak) see no net/http goroutines left behind.
var noKeepAlive = &http.Transport{DisableKeepAlives: true}

// Client is a minio-go client with the test identity.
func (s *Server) Client(t testing.TB) *minio.Client {
	c, err := minio.New(s.HostPort(), &minio.Options{
		Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Region: Region, Secure: false,
		Transport: noKeepAlive,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Log is what weed printed so far (for failure messages).
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.log.Bytes()
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}

// Objects lists every object under prefix as key -> size.
func (s *Server) Objects(t testing.TB, bucket, prefix string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for o := range s.Client(t).ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list %s/%s: %v", bucket, prefix, o.Err)
		}
		out[o.Key] = o.Size
	}
	return out
}

// Get reads one object whole.
func (s *Server) Get(t testing.TB, bucket, key string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o, err := s.Client(t).GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer o.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(o); err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return buf.Bytes()
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() > 1<<20 {
		w.b.Reset() // keep the tail only: weed logs a lot at start
	}
	return w.b.Write(p)
}
