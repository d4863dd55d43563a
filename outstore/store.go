package outstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// ErrConfig marks a bad --output-store / --s3-endpoint / credentials setting or a store
// that refused us at start; the message says which.
var ErrConfig = errors.New("output store")

// Target is where outputs go: a bucket and a key prefix ("" for the bucket's root).
type Target struct {
	Bucket, Prefix string
}

// String is the target as an s3:// URL.
func (t Target) String() string {
	if t.Prefix == "" {
		return "s3://" + t.Bucket
	}
	return "s3://" + t.Bucket + "/" + t.Prefix
}

var bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// ParseURL parses s3://BUCKET[/PREFIX]. The bucket follows S3's naming rules; the prefix
// has no empty, "." or ".." segment and no trailing slash is needed.
func ParseURL(s string) (Target, error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return Target{}, fmt.Errorf("%w: %q is not an s3://BUCKET/PREFIX URL", ErrConfig, s)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if !bucketRE.MatchString(bucket) || strings.Contains(bucket, "..") {
		return Target{}, fmt.Errorf("%w: %q: bucket name %q is not valid (3-63 of a-z 0-9 . -)", ErrConfig, s, bucket)
	}
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix != "" {
		for _, seg := range strings.Split(prefix, "/") {
			if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "\\\x00\r\n") {
				return Target{}, fmt.Errorf("%w: %q: prefix segment %q is not valid", ErrConfig, s, seg)
			}
		}
	}
	return Target{Bucket: bucket, Prefix: prefix}, nil
}

// Conn says how to reach the store.
type Conn struct {
	// Endpoint is the S3 endpoint URL, http:// or https:// with host and optional port.
	// Default https://s3.amazonaws.com.
	Endpoint string
	// AccessKey, SecretKey and Region (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
	// AWS_REGION). Keys are required; Region defaults to us-east-1.
	AccessKey, SecretKey, Region string
	// Timeout bounds each request's connect and response header wait. Default 30s.
	Timeout time.Duration
}

// Store is a connected target: a minio-go client, the bucket and the prefix.
type Store struct {
	client *minio.Client
	target Target
	conn   Conn
	tr     *http.Transport
}

// Close drops the idle connections to the store. The Store stays usable (a later call
// connects again).
func (s *Store) Close() { s.tr.CloseIdleConnections() }

// DefaultEndpoint is used when Conn.Endpoint is empty.
const DefaultEndpoint = "https://s3.amazonaws.com"

// Dial checks the settings and the store: the endpoint answers, the credentials are
// accepted and the bucket exists. Each failure is one error saying which; nothing is
// written to the store.
func Dial(ctx context.Context, t Target, c Conn) (*Store, error) {
	if c.Endpoint == "" {
		c.Endpoint = DefaultEndpoint
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("%w: --s3-endpoint %q must be http(s)://HOST[:PORT]", ErrConfig, c.Endpoint)
	}
	if c.AccessKey == "" || c.SecretKey == "" {
		return nil, fmt.Errorf("%w: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must both be set for %s", ErrConfig, t)
	}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: min(c.Timeout, 10*time.Second)}).DialContext,
		ResponseHeaderTimeout: c.Timeout,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
	}
	cl, err := minio.New(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(c.AccessKey, c.SecretKey, ""),
		Secure: u.Scheme == "https", Region: c.Region, Transport: tr,
		// One try per call: the uploader has its own bounded, jittered backoff, and a
		// start-time check must fail fast on an unreachable store.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	s := &Store{client: cl, target: t, conn: c, tr: tr}
	cctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	ok, err := cl.BucketExists(cctx, t.Bucket)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: %s at %s: %s", ErrConfig, t, c.Endpoint, describe(err))
	}
	if !ok {
		s.Close()
		return nil, fmt.Errorf("%w: bucket %q does not exist at %s", ErrConfig, t.Bucket, c.Endpoint)
	}
	return s, nil
}

// describe turns a client error into what an operator should check.
func describe(err error) string {
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken":
		return fmt.Sprintf("credentials refused (%s): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", resp.Code)
	case "NoSuchBucket":
		return "bucket does not exist"
	case "":
		var ne net.Error
		if errors.As(err, &ne) || strings.Contains(err.Error(), "connection refused") {
			return "store unreachable: " + err.Error()
		}
		return err.Error()
	}
	return fmt.Sprintf("%s (%s)", resp.Message, resp.Code)
}

// Target is the store's bucket and prefix.
func (s *Store) Target() Target { return s.target }

// Key joins the prefix and parts into an object key.
func (s *Store) Key(parts ...string) string {
	if s.target.Prefix != "" {
		parts = append([]string{s.target.Prefix}, parts...)
	}
	return path.Join(parts...)
}

// Client is the underlying minio-go client.
func (s *Store) Client() *minio.Client { return s.client }

// Entry is one line of a node's manifest: one object in the store.
type Entry struct {
	Key      string    `json:"key"`               // object key, prefix included
	Name     string    `json:"name"`              // the local file's name
	Kind     string    `json:"kind"`              // KindWARC, KindCDXJ or KindCorpus
	Size     int64     `json:"size"`              // bytes
	SHA256   string    `json:"sha256"`            // hex, of the whole object
	ETag     string    `json:"etag"`              // as the store returned it (verified)
	Records  int64     `json:"records,omitempty"` // WARC: responses and revisits (CDXJ lines); corpus: records; -1 unknown
	Uploaded time.Time `json:"uploaded"`
}

// Kinds of uploaded files.
const (
	KindWARC   = "warc"
	KindCDXJ   = "cdxj"
	KindCorpus = "corpus"
)

// manifestKey is where node's manifest lives.
func (s *Store) manifestKey(node string) string { return s.Key("nodes", node, "manifest.jsonl") }

// objectKey is where a node's file of kind lives.
func (s *Store) objectKey(node, kind, name string) string {
	dir := KindWARC
	if kind == KindCorpus {
		dir = KindCorpus
	}
	return s.Key("nodes", node, dir, name)
}

// ReadManifest reads node's manifest; a node with none has an empty one.
func (s *Store) ReadManifest(ctx context.Context, node string) ([]Entry, error) {
	o, err := s.client.GetObject(ctx, s.target.Bucket, s.manifestKey(node), minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("read manifest of %s: %s", node, describe(err))
	}
	defer o.Close()
	b, err := io.ReadAll(io.LimitReader(o, 256<<20))
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, nil
		}
		return nil, fmt.Errorf("read manifest of %s: %s", node, describe(err))
	}
	return parseManifest(b)
}

func parseManifest(b []byte) ([]Entry, error) {
	var out []Entry
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("manifest line %d: %w", i+1, err)
		}
		out = append(out, e)
	}
	return out, nil
}

func encodeManifest(es []Entry) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range es {
		_ = enc.Encode(&es[i])
	}
	return buf.Bytes()
}

// writeManifest replaces node's manifest with es (one PUT: readers see the old or the new).
func (s *Store) writeManifest(ctx context.Context, node string, es []Entry) error {
	b := encodeManifest(es)
	_, err := s.client.PutObject(ctx, s.target.Bucket, s.manifestKey(node), bytes.NewReader(b), int64(len(b)),
		minio.PutObjectOptions{ContentType: "application/x-ndjson", DisableMultipart: true})
	if err != nil {
		return fmt.Errorf("write manifest: %s", describe(err))
	}
	return nil
}

// Nodes lists the nodes that have a manifest under the prefix, sorted.
func (s *Store) Nodes(ctx context.Context) ([]string, error) {
	root := s.Key("nodes") + "/"
	var nodes []string
	for o := range s.client.ListObjects(ctx, s.target.Bucket, minio.ListObjectsOptions{Prefix: root, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("list %s: %s", s.target, describe(o.Err))
		}
		rest := strings.TrimPrefix(o.Key, root)
		if node, file, ok := strings.Cut(rest, "/"); ok && file == "manifest.jsonl" {
			nodes = append(nodes, node)
		}
	}
	sort.Strings(nodes)
	return nodes, nil
}

// Download copies the object of e into w and checks its size and SHA-256 against e.
func (s *Store) Download(ctx context.Context, e Entry, w io.Writer) error {
	o, err := s.client.GetObject(ctx, s.target.Bucket, e.Key, minio.GetObjectOptions{})
	if err != nil {
		return fmt.Errorf("get %s: %s", e.Key, describe(err))
	}
	defer o.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), o)
	if err != nil {
		return fmt.Errorf("get %s: %s", e.Key, describe(err))
	}
	if n != e.Size || hex.EncodeToString(h.Sum(nil)) != e.SHA256 {
		return fmt.Errorf("get %s: %d bytes sha256 %x, manifest says %d bytes sha256 %s", e.Key, n, h.Sum(nil), e.Size, e.SHA256)
	}
	return nil
}

// DownloadFile downloads e into dir/e.Name (through a temp file, renamed when verified).
func (s *Store) DownloadFile(ctx context.Context, e Entry, dir string) error {
	if strings.ContainsAny(e.Name, "/\\") || e.Name == "" || e.Name == "." || e.Name == ".." {
		return fmt.Errorf("manifest entry %s: bad file name %q", e.Key, e.Name)
	}
	final := dir + string(os.PathSeparator) + e.Name
	f, err := os.CreateTemp(dir, e.Name+".*.download")
	if err != nil {
		return err
	}
	err = s.Download(ctx, e, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), final)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// fileSums is what one pass over a local file computes: SHA-256 of the whole and the
// S3 ETag the store must return for it with the given part size (MD5 of the object for a
// single PUT; MD5 of the parts' MD5s, "-N", for a multipart upload).
type fileSums struct {
	size   int64
	sha256 string
	etag   string
}

func sumFile(p string, partSize uint64) (fileSums, error) {
	f, err := os.Open(p)
	if err != nil {
		return fileSums{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fileSums{}, err
	}
	size := fi.Size()
	sh := sha256.New()
	if size <= int64(partSize) {
		mh := md5.New()
		if _, err := io.Copy(io.MultiWriter(sh, mh), f); err != nil {
			return fileSums{}, err
		}
		return fileSums{size, hex.EncodeToString(sh.Sum(nil)), hex.EncodeToString(mh.Sum(nil))}, nil
	}
	parts, psize, _, err := minio.OptimalPartInfo(size, partSize)
	if err != nil {
		return fileSums{}, err
	}
	var all []byte
	for i := 0; i < parts; i++ {
		var mh hash.Hash = md5.New()
		if _, err := io.CopyN(io.MultiWriter(sh, mh), f, min(psize, size-int64(i)*psize)); err != nil {
			return fileSums{}, err
		}
		all = mh.Sum(all)
	}
	top := md5.Sum(all)
	return fileSums{size, hex.EncodeToString(sh.Sum(nil)), fmt.Sprintf("%s-%d", hex.EncodeToString(top[:]), parts)}, nil
}
