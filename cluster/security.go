package cluster

// Members only: the cluster key (gossip's keyring, persisted in the data directory),
// mutual TLS for Raft and the node-to-node HTTP calls (package peerauth), and the refusal
// to expose any of them beyond loopback without both.

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crawlnode/crawlnode/internal/clusterauth"
	"github.com/crawlnode/crawlnode/internal/durablefile"
	"github.com/crawlnode/crawlnode/internal/peerauth"
)

// ErrInsecure: a node would expose gossip, Raft or its internal endpoints beyond
// loopback without a cluster key and TLS, and --insecure-cluster was not given.
var ErrInsecure = errors.New("insecure cluster")

// keyringFile is the gossip keyring in the data directory (0600): base64 keys, the
// primary first. Once it exists it is what the node starts with (a rotation changed it);
// the configured key only seeds it.
const keyringFile = "keyring.json"

// ParseKey decodes a cluster key: base64 (standard or URL alphabet, padded or not) of 16,
// 24 or 32 bytes (AES-128, -192, -256).
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	var k []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err = enc.DecodeString(s); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: cluster key is not base64: %v", ErrBadConfig, err)
	}
	if n := len(k); n != 16 && n != 24 && n != 32 {
		return nil, fmt.Errorf("%w: cluster key is %d bytes; want 16, 24 or 32 (e.g. head -c 32 /dev/urandom | base64)", ErrBadConfig, n)
	}
	return k, nil
}

// EncodeKey is a key's base64 form (as ParseKey reads it).
func EncodeKey(k []byte) string { return base64.StdEncoding.EncodeToString(k) }

// loadKeyring returns the gossip keys this node starts with: DIR/keyring.json when it
// exists, else the configured key (written to DIR/keyring.json), else none.
func (c *Cluster) loadKeyring() ([][]byte, error) {
	path := filepath.Join(c.deps.DataDir, keyringFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var enc []string
		if err := json.Unmarshal(b, &enc); err != nil || len(enc) == 0 {
			return nil, fmt.Errorf("%w: keyring %s: unreadable or empty (remove it to start from the configured key)", ErrBadConfig, path)
		}
		keys := make([][]byte, len(enc))
		for i, s := range enc {
			if keys[i], err = ParseKey(s); err != nil {
				return nil, fmt.Errorf("keyring %s: %w", path, err)
			}
		}
		if k := c.cfg.ClusterKey; k != nil && !slices.ContainsFunc(keys, func(x []byte) bool { return string(x) == string(k) }) {
			c.log.Warn("the configured cluster key is not in the keyring kept in the data directory (rotated since?); the keyring wins", "keyring", path)
		}
		return keys, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("keyring: %w", err)
	}
	if c.cfg.ClusterKey == nil {
		return nil, nil
	}
	keys := [][]byte{c.cfg.ClusterKey}
	return keys, c.saveKeyring(keys)
}

// saveKeyring writes keys (primary first) to DIR/keyring.json, atomically and durably,
// mode 0600.
func (c *Cluster) saveKeyring(keys [][]byte) error {
	enc := make([]string, len(keys))
	for i, k := range keys {
		enc[i] = EncodeKey(k)
	}
	b, _ := json.Marshal(enc)
	path := filepath.Join(c.deps.DataDir, keyringFile)
	// Written, fsynced, renamed, and the directory fsynced: a power cut leaves the old
	// keyring or the new one, never a torn file.
	if err := durablefile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	return nil
}

// TLSOn reports whether node-to-node traffic runs over mutual TLS.
func (c *Cluster) TLSOn() bool { return c.cfg.TLS != nil }

// Scheme is the URL scheme of node-to-node HTTP calls: https with TLS, else http.
func (c *Cluster) Scheme() string {
	if c.cfg.TLS != nil {
		return "https"
	}
	return "http"
}

// PeerURL is the base URL of a peer's internal endpoints at addr (host:port).
func (c *Cluster) PeerURL(addr string) string { return c.Scheme() + "://" + addr }

// newClient is the cluster's HTTP client: d.Transport, else mutual TLS when configured,
// else plain HTTP; every request marked as sent by self (peerauth.MemberHeader, which
// the TLS layer checks against the certificate's name) and signed by d.Signer
// (clusterauth). It never carries the operator's API token: the internal routes do not
// take it.
func newClient(cfg Config, d Deps) *http.Client {
	base := d.Transport
	if base == nil {
		if cfg.TLS != nil {
			base = cfg.TLS.Transport()
		} else {
			base = &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second}
		}
	}
	return &http.Client{Timeout: 60 * time.Second, Transport: &clusterauth.Transport{
		Base: memberTransport{base: base, self: d.Self}, Signer: d.Signer}}
}

// memberTransport sets peerauth.MemberHeader on every request it carries.
type memberTransport struct {
	base http.RoundTripper
	self string
}

func (t memberTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get(peerauth.MemberHeader) != t.self {
		req = req.Clone(req.Context())
		peerauth.SetMember(req, t.self)
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the transport.
func (t memberTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// authKeys points request signing and verification at the keyring keys (primary first):
// the primary signs, every key verifies. Called with the keyring the node starts with
// and after every keyring step, so a rotation never leaves the internal calls signed
// with a key the other members dropped.
func (c *Cluster) authKeys(keys [][]byte) error {
	var primary []byte
	if len(keys) > 0 {
		primary = keys[0]
	}
	if c.deps.Verifier != nil {
		if err := c.deps.Verifier.SetKeys(keys); err != nil {
			return fmt.Errorf("%w: cluster key: %v", ErrBadConfig, err)
		}
	}
	if c.deps.Signer != nil {
		if err := c.deps.Signer.SetKey(primary); err != nil {
			return fmt.Errorf("%w: cluster key: %v", ErrBadConfig, err)
		}
	}
	return nil
}

// CheckExposure refuses a configuration that would let gossip, Raft or the internal
// endpoints (internalAddr: where they are served) listen beyond loopback without the
// cluster key and TLS, unless InsecureCluster. It returns nil or one clear line.
func (c *Config) CheckExposure(internalAddr string) error {
	if c.InsecureCluster || (c.ClusterKey != nil && c.TLS != nil) {
		return nil
	}
	var exposed []string
	for _, a := range []struct{ what, addr string }{{"gossip (--bind)", c.BindAddr}, {"Raft (--raft)", c.RaftAddr}, {"internal endpoints (--http / --internal-http)", internalAddr}} {
		if a.addr != "" && !loopbackAddr(a.addr) {
			exposed = append(exposed, a.what+" on "+a.addr)
		}
	}
	if len(exposed) == 0 {
		return nil
	}
	var missing []string
	if c.ClusterKey == nil {
		missing = append(missing, "a cluster key (--cluster-key-file or CRAWLNODE_CLUSTER_KEY)")
	}
	if c.TLS == nil {
		missing = append(missing, "TLS (--tls-ca, --tls-cert, --tls-key; see crawlnode tls)")
	}
	return fmt.Errorf("%w: refusing to serve %s without %s; give them, or --insecure-cluster on a network you trust",
		ErrInsecure, strings.Join(exposed, ", "), strings.Join(missing, " and "))
}

// loopbackAddr: host:port whose host is a loopback IP or "localhost".
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
