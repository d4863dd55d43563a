package peerauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/crawlnode/crawlnode/internal/httpjson"
)

// Sentinel errors. Every error this package returns wraps one of them.
var (
	// ErrCredentials: a CA, certificate or key file is missing, unreadable or does not fit.
	ErrCredentials = errors.New("peerauth: bad credentials")
	// ErrNoName: a certificate names no node.
	ErrNoName = errors.New("peerauth: certificate names no node")
	// ErrMismatch: a peer speaks for a name its certificate does not carry.
	ErrMismatch = errors.New("peerauth: peer speaks for another name")
	// ErrUnverified: no verified client certificate where one is required.
	ErrUnverified = errors.New("peerauth: peer not verified")
)

// MemberHeader carries the sending member's name on every node-to-node HTTP request.
const MemberHeader = "X-Crawlnode-Member"

// URIScheme and uriHost make a node's URI SAN: crawlnode://node/<name>.
const (
	URIScheme = "crawlnode"
	uriHost   = "node"
)

// NodeURI is the URI SAN that names node name in its certificate.
func NodeURI(name string) *url.URL {
	return &url.URL{Scheme: URIScheme, Host: uriHost, Path: "/" + name}
}

// CertName is the node name cert carries: its crawlnode://node/<name> URI SAN, else its
// Common Name. ErrNoName when it has neither.
func CertName(cert *x509.Certificate) (string, error) {
	if cert == nil {
		return "", ErrNoName
	}
	for _, u := range cert.URIs {
		if u.Scheme == URIScheme && u.Host == uriHost {
			if name := strings.TrimPrefix(u.Path, "/"); name != "" {
				return name, nil
			}
		}
	}
	if cert.Subject.CommonName != "" {
		return cert.Subject.CommonName, nil
	}
	return "", ErrNoName
}

// PeerName is the node name of the verified peer certificate of a TLS connection.
// ErrUnverified when the connection has no verified chain.
func PeerName(cs *tls.ConnectionState) (string, error) {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return "", ErrUnverified
	}
	return CertName(cs.VerifiedChains[0][0])
}

// Creds are one node's mutual TLS credentials: the cluster's CA and the node's own
// certificate and key.
type Creds struct {
	pool *x509.CertPool
	cert tls.Certificate
	name string
}

// Load reads PEM files: the cluster's CA certificate(s), this node's certificate (chain)
// and its private key. The certificate must chain to the CA and name a node.
func Load(caFile, certFile, keyFile string) (*Creds, error) {
	if caFile == "" || certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%w: TLS needs the CA, the certificate and the key (--tls-ca, --tls-cert, --tls-key)", ErrCredentials)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: CA: %w", ErrCredentials, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: CA %s holds no PEM certificate", ErrCredentials, caFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate %s / key %s: %w", ErrCredentials, certFile, keyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%w: certificate %s: %w", ErrCredentials, certFile, err)
		}
		cert.Leaf = leaf
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("%w: certificate %s is not valid under CA %s: %w", ErrCredentials, certFile, caFile, err)
	}
	name, err := CertName(leaf)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate %s: %w", ErrCredentials, certFile, err)
	}
	return &Creds{pool: pool, cert: cert, name: name}, nil
}

// Name is the node name this node's certificate carries.
func (c *Creds) Name() string { return c.name }

// NotAfter is when this node's certificate expires.
func (c *Creds) NotAfter() time.Time { return c.cert.Leaf.NotAfter }

// ServerTLS is the configuration of a listener for node-to-node traffic. With
// requireClient, a client certificate chained to the CA is required (a listener that
// serves only peers: Raft, the internal HTTP listener); without, one is verified when
// given and Middleware refuses internal requests that came without (a listener shared
// with the operators' API).
func (c *Creds) ServerTLS(requireClient bool) *tls.Config {
	auth := tls.VerifyClientCertIfGiven
	if requireClient {
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{c.cert},
		ClientAuth:   auth,
		ClientCAs:    c.pool,
	}
}

// ClientTLS is the configuration of this node's outgoing node-to-node connections: it
// presents the node's certificate and accepts a server whose certificate chains to the
// CA and names a node (any node: the client side does not check which one; the
// receiver's check of the sender's name is what binds names). Host names are not
// checked (see the package doc).
func (c *Creds) ClientTLS() *tls.Config {
	pool := c.pool
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		Certificates:       []tls.Certificate{c.cert},
		InsecureSkipVerify: true, // the chain is verified below, without a host name
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := verifyChain(pool, cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
			return err
		},
	}
}

// verifyChain checks certs (leaf first) against pool for usage and returns the leaf's name.
func verifyChain(pool *x509.CertPool, certs []*x509.Certificate, usage x509.ExtKeyUsage) (string, error) {
	if len(certs) == 0 {
		return "", fmt.Errorf("%w: no certificate", ErrUnverified)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnverified, err)
	}
	return CertName(certs[0])
}

// VerifyPeer checks a connection's peer certificates against the CA (as a client's, when
// client is true, else as a server's) and returns the node name they carry. For
// connections whose TLS configuration did not verify already (ClientTLS's do).
func (c *Creds) VerifyPeer(cs tls.ConnectionState, client bool) (string, error) {
	usage := x509.ExtKeyUsageServerAuth
	if client {
		usage = x509.ExtKeyUsageClientAuth
	}
	return verifyChain(c.pool, cs.PeerCertificates, usage)
}

// Transport is an HTTP transport for node-to-node calls over ClientTLS.
func (c *Creds) Transport() *http.Transport {
	return &http.Transport{
		TLSClientConfig:     c.ClientTLS(),
		ForceAttemptHTTP2:   false,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
}

// Peer is the sender of a node-to-node request, as Middleware established it.
type Peer struct {
	// Name is the member the request speaks for (MemberHeader).
	Name string
	// Verified: a client certificate chained to the cluster's CA names Name.
	Verified bool
}

type ctxKey struct{}

// WithPeer returns ctx carrying p (Middleware does it; tests of handlers may too).
func WithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext is the peer Middleware put in ctx.
func FromContext(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(ctxKey{}).(Peer)
	return p, ok
}

// FromRequest is FromContext(r.Context()).
func FromRequest(r *http.Request) (Peer, bool) { return FromContext(r.Context()) }

// SpeaksFor reports whether the request may speak for member name: true when it came
// from that member (verified or, in a cluster without TLS, claimed), false otherwise
// (another member, or no member at all). For bodies that name their sender.
func SpeaksFor(r *http.Request, name string) bool {
	p, ok := FromRequest(r)
	return ok && p.Name == name
}

// SetMember marks an outgoing node-to-node request as sent by member self.
func SetMember(req *http.Request, self string) { req.Header.Set(MemberHeader, self) }

// Middleware establishes the sender of node-to-node requests before next sees them.
// With tlsOn (the cluster runs mutual TLS), a request must come over a connection with a
// verified client certificate (else 403 peer_unverified) and carry MemberHeader equal to
// the certificate's name (else 403 peer_mismatch); without, the header's name is taken
// as an unverified claim. The peer goes into the request's context (FromRequest).
func Middleware(tlsOn bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := Check(r, tlsOn)
		if err != nil {
			code := "peer_unverified"
			if errors.Is(err, ErrMismatch) {
				code = "peer_mismatch"
			}
			httpjson.WriteError(w, http.StatusForbidden, code, "%v", err)
			return
		}
		if p.Name != "" {
			r = r.WithContext(WithPeer(r.Context(), p))
		}
		next.ServeHTTP(w, r)
	})
}

// Check is Middleware's decision for one request: the peer it speaks for, or why not.
func Check(r *http.Request, tlsOn bool) (Peer, error) {
	claimed := r.Header.Get(MemberHeader)
	if !tlsOn {
		return Peer{Name: claimed}, nil
	}
	name, err := PeerName(r.TLS)
	if err != nil {
		return Peer{}, fmt.Errorf("%w: node-to-node requests need a client certificate from the cluster's CA: %w", ErrUnverified, err)
	}
	if claimed != name {
		return Peer{}, fmt.Errorf("%w: certificate names %q, request speaks for %q", ErrMismatch, name, claimed)
	}
	return Peer{Name: name, Verified: true}, nil
}

// pemBlock encodes one PEM block.
func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
