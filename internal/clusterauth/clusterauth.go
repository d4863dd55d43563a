// Package clusterauth authenticates node-to-node HTTP requests (the routes under
// /internal/): who is calling, as a member name this node can check against its member
// registry and lease table.
//
// Duties:
//   - Sign outgoing requests (Signer.Sign): the sending node's name and an HMAC-SHA256
//     over the method, the request URI, the name and the time, keyed by a secret derived
//     from the cluster key with HKDF-SHA256 (DeriveSecret). The key itself never leaves
//     the node; a signature is good for one method and URI, for MaxSkew either side of
//     its time.
//   - Verify incoming requests (Verifier.Peer, Verifier.Require): the caller's name comes,
//     in this order, from the verified client certificate when mutual TLS is on
//     (Verifier.TLSPeer, pointed at the TLS layer's peer-name helper), else from a valid
//     signature under one of the cluster keys (all of a keyring's keys are accepted, the
//     first signs, so a key can be rotated in while the cluster runs), else, with no
//     cluster key at all, from the unauthenticated X-Crawlnode-Member header of a loopback
//     caller only (the one-machine development mode), or of any caller when the operator
//     said Insecure (--insecure-cluster: a network the operator trusts).
//   - The operator's API token is never a cluster credential: Require ignores
//     Authorization entirely.
//
// Decisions where the design is silent:
//   - Bodies are not covered by the signature: partition and replica streams are long
//     and streamed; what a body may change is checked against the lease table by each
//     route (the named peer must hold the partition at the epoch it claims). Without TLS
//     the traffic is plain: a listener on the path can read it and replay a captured
//     request to the same URI within MaxSkew (every internal write is idempotent or
//     version-checked, so a replay repeats, never invents). Mutual TLS is the answer to
//     a hostile network; the signature is the answer to a stranger who can reach the port.
//   - Refusals are 401 "unauthenticated" with a reason that names no secret.
package clusterauth

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crawlnode/crawlnode/internal/httpjson"
)

// Header names carried by a signed request.
const (
	HeaderPeer = "X-Crawlnode-Member" // the sending node's name (the same header as the TLS layer's peerauth.MemberHeader)
	HeaderAuth = "X-Crawlnode-Auth"   // "v1 t=<unix seconds> s=<hex HMAC>"
)

// MaxSkew is how far a signature's time may be from the receiver's clock, either way.
const MaxSkew = 2 * time.Minute

// secretInfo is HKDF's info: it binds the derived secret to this one use.
const secretInfo = "crawlnode internal http v1"

// Sentinel errors of Peer.
var (
	ErrNoCredentials = errors.New("clusterauth: no cluster credentials")
	ErrBadSignature  = errors.New("clusterauth: bad signature")
	ErrStale         = errors.New("clusterauth: signature time out of range")
	ErrNotLoopback   = errors.New("clusterauth: no cluster key, and the caller is not on loopback")
)

// DeriveSecret derives the request-signing secret from a cluster key.
func DeriveSecret(clusterKey []byte) ([]byte, error) {
	if len(clusterKey) == 0 {
		return nil, errors.New("clusterauth: empty cluster key")
	}
	return hkdf.Key(sha256.New, clusterKey, nil, secretInfo, 32)
}

// Signer signs a node's outgoing internal requests.
type Signer struct {
	self   string
	now    func() time.Time
	mu     sync.RWMutex
	secret []byte // nil: no cluster key (only the name is sent)
}

// NewSigner returns the signer of node self with the cluster key clusterKey (nil: none:
// requests carry the name only, for the loopback or insecure mode). now: time.Now if nil.
func NewSigner(self string, clusterKey []byte, now func() time.Time) (*Signer, error) {
	s := &Signer{self: self, now: now}
	if s.now == nil {
		s.now = time.Now
	}
	if len(clusterKey) > 0 {
		sec, err := DeriveSecret(clusterKey)
		if err != nil {
			return nil, err
		}
		s.secret = sec
	}
	return s, nil
}

// SetKey makes clusterKey the key this signer signs with (a keyring rotation made it the
// primary). nil or empty: sign no more (name only).
func (s *Signer) SetKey(clusterKey []byte) error {
	var sec []byte
	if len(clusterKey) > 0 {
		var err error
		if sec, err = DeriveSecret(clusterKey); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.secret = sec
	s.mu.Unlock()
	return nil
}

// Sign sets the peer name and, with a cluster key, the signature on req. A nil Signer
// does nothing.
func (s *Signer) Sign(req *http.Request) {
	if s == nil {
		return
	}
	req.Header.Set(HeaderPeer, s.self)
	s.mu.RLock()
	secret := s.secret
	s.mu.RUnlock()
	if secret == nil {
		return
	}
	t := s.now().Unix()
	req.Header.Set(HeaderAuth, "v1 t="+strconv.FormatInt(t, 10)+" s="+hex.EncodeToString(mac(secret, req.Method, req.URL.RequestURI(), s.self, t)))
}

func mac(secret []byte, method, uri, peer string, t int64) []byte {
	h := hmac.New(sha256.New, secret)
	fmt.Fprintf(h, "v1\n%s\n%s\n%s\n%d", method, uri, peer, t)
	return h.Sum(nil)
}

// Verifier checks the caller of an internal request.
type Verifier struct {
	mu      sync.RWMutex
	secrets [][]byte
	// TLSPeer, when set, names the caller from its verified client certificate (mutual
	// TLS on): a request without one, or one it refuses, is refused.
	TLSPeer func(cs *tls.ConnectionState) (string, error)
	// Insecure accepts the claimed name of any caller when there is no cluster key and no
	// TLS (--insecure-cluster). Default false: loopback callers only.
	Insecure bool
	// Now is the clock signatures are checked against (time.Now if nil).
	Now func() time.Time
}

// NewVerifier returns a verifier accepting signatures made with any of keys (the
// keyring, primary first); no keys: the loopback (or Insecure) mode.
func NewVerifier(keys [][]byte) (*Verifier, error) {
	v := &Verifier{}
	if err := v.SetKeys(keys); err != nil {
		return nil, err
	}
	return v, nil
}

// SetKeys replaces the keys whose signatures the verifier accepts (the keyring after a
// rotation step: every key in it verifies). On error the old keys stay.
func (v *Verifier) SetKeys(keys [][]byte) error {
	secrets := make([][]byte, 0, len(keys))
	for _, k := range keys {
		sec, err := DeriveSecret(k)
		if err != nil {
			return err
		}
		secrets = append(secrets, sec)
	}
	v.mu.Lock()
	v.secrets = secrets
	v.mu.Unlock()
	return nil
}

func (v *Verifier) keys() [][]byte {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.secrets
}

// Keyed reports whether the verifier checks signatures (a cluster key is set).
func (v *Verifier) Keyed() bool { return len(v.keys()) > 0 }

// Mode names what authenticates callers: "tls", "key", "insecure" or "loopback".
func (v *Verifier) Mode() string {
	switch {
	case v.TLSPeer != nil:
		return "tls"
	case v.Keyed():
		return "key"
	case v.Insecure:
		return "insecure"
	}
	return "loopback"
}

// Peer returns the authenticated name of r's caller.
func (v *Verifier) Peer(r *http.Request) (string, error) {
	if v.TLSPeer != nil {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			return "", fmt.Errorf("%w: no client certificate", ErrNoCredentials)
		}
		return v.TLSPeer(r.TLS)
	}
	name := r.Header.Get(HeaderPeer)
	secrets := v.keys()
	if len(secrets) == 0 {
		if name == "" {
			return "", fmt.Errorf("%w: no %s header", ErrNoCredentials, HeaderPeer)
		}
		if !v.Insecure && !loopback(r.RemoteAddr) {
			return "", ErrNotLoopback
		}
		return name, nil
	}
	auth := r.Header.Get(HeaderAuth)
	if name == "" || auth == "" {
		return "", fmt.Errorf("%w: no %s signature", ErrNoCredentials, HeaderAuth)
	}
	t, sig, ok := parseAuth(auth)
	if !ok {
		return "", fmt.Errorf("%w: malformed %s", ErrBadSignature, HeaderAuth)
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	if d := now().Sub(time.Unix(t, 0)); d > MaxSkew || d < -MaxSkew {
		return "", fmt.Errorf("%w: %s off the clock here", ErrStale, d.Round(time.Second))
	}
	for _, sec := range secrets {
		if hmac.Equal(sig, mac(sec, r.Method, r.URL.RequestURI(), name, t)) {
			return name, nil
		}
	}
	return "", ErrBadSignature
}

func parseAuth(s string) (int64, []byte, bool) {
	f := strings.Fields(s)
	if len(f) != 3 || f[0] != "v1" || !strings.HasPrefix(f[1], "t=") || !strings.HasPrefix(f[2], "s=") {
		return 0, nil, false
	}
	t, err := strconv.ParseInt(f[1][2:], 10, 64)
	if err != nil {
		return 0, nil, false
	}
	sig, err := hex.DecodeString(f[2][2:])
	if err != nil || len(sig) != sha256.Size {
		return 0, nil, false
	}
	return t, sig, true
}

// loopback reports whether addr ("ip:port") is a loopback address.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type ctxKey struct{}

// WithPeer returns ctx carrying the authenticated caller's name.
func WithPeer(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, ctxKey{}, name)
}

// PeerFrom returns the authenticated caller's name Require put in ctx ("" and false when
// none: the request did not pass Require).
func PeerFrom(ctx context.Context) (string, bool) {
	s, ok := ctx.Value(ctxKey{}).(string)
	return s, ok && s != ""
}

// Require serves next only for authenticated callers, with the caller's name in the
// request's context (PeerFrom); others get 401 unauthenticated. member, if not nil, must
// also accept the name (a member of the cluster): else 403 not_member.
func (v *Verifier) Require(member func(name string) bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, err := v.Peer(r)
		if err != nil {
			httpjson.WriteError(w, http.StatusUnauthorized, "unauthenticated", "internal route: %v", err)
			return
		}
		if member != nil && !member(name) {
			httpjson.WriteError(w, http.StatusForbidden, "not_member", "internal route: %q is not a member of this cluster", name)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPeer(r.Context(), name)))
	})
}

// Transport signs every request it carries with Signer before Base (http.DefaultTransport
// if nil) sends it: a client built on it speaks as a member on every internal route.
type Transport struct {
	Base   http.RoundTripper
	Signer *Signer
}

// RoundTrip signs a copy of req and sends it.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if t.Signer == nil {
		return base.RoundTrip(req)
	}
	r2 := req.Clone(req.Context())
	t.Signer.Sign(r2)
	return base.RoundTrip(r2)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the base transport.
func (t *Transport) CloseIdleConnections() {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
