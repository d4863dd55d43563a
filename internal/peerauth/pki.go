package peerauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// Validity defaults of the `crawlnode tls` command.
const (
	DefaultCADays   = 5 * 365
	DefaultCertDays = 365
)

// CA is a loaded certificate authority that signs node certificates.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA creates a self-signed ECDSA P-256 CA valid for days and writes it to
// dir/crawlnode-ca.pem and its key to dir/crawlnode-ca-key.pem (0600). It refuses to
// overwrite existing files. It returns the two paths.
func NewCA(dir string, days int, now time.Time) (certPath, keyPath string, err error) {
	if days <= 0 {
		return "", "", fmt.Errorf("%w: validity %d days", ErrCredentials, days)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := randSerial()
	if err != nil {
		return "", "", err
	}
	ski := keyID(&key.PublicKey)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Crawlnode CA " + serial.Text(16)[:8], Organization: []string{"Crawlnode"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.AddDate(0, 0, days),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          ski,
		AuthorityKeyId:        ski,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	certPath = filepath.Join(dir, "crawlnode-ca.pem")
	keyPath = filepath.Join(dir, "crawlnode-ca-key.pem")
	return certPath, keyPath, writePair(certPath, keyPath, der, key)
}

// LoadCA reads a CA certificate and key written by NewCA (or any ECDSA CA in PEM).
func LoadCA(certPath, keyPath string) (*CA, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("%w: CA: %w", ErrCredentials, err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("%w: CA key: %w", ErrCredentials, err)
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: CA %s: %w", ErrCredentials, certPath, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%w: %s is not a CA certificate", ErrCredentials, certPath)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: CA key %s: %w", ErrCredentials, keyPath, err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%w: key %s does not belong to CA %s", ErrCredentials, keyPath, certPath)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// NodeCertOptions are a node certificate's contents.
type NodeCertOptions struct {
	// Name is the node's name (its --name): the certificate's URI SAN and Common Name.
	Name string
	// IPs and DNS are extra SANs, for tools that check host names (curl against the API).
	IPs []net.IP
	DNS []string
	// Days of validity. Default DefaultCertDays.
	Days int
}

// NewNodeCert signs a certificate for node opts.Name, usable as server and client, and
// writes it to dir/<name>-cert.pem and its key to dir/<name>-key.pem (0600). It refuses
// to overwrite existing files and returns the two paths.
func (ca *CA) NewNodeCert(dir string, opts NodeCertOptions, now time.Time) (certPath, keyPath string, err error) {
	if opts.Name == "" {
		return "", "", fmt.Errorf("%w: a node certificate needs the node's name (--node)", ErrCredentials)
	}
	if opts.Days == 0 {
		opts.Days = DefaultCertDays
	}
	if opts.Days < 0 {
		return "", "", fmt.Errorf("%w: validity %d days", ErrCredentials, opts.Days)
	}
	if filepath.Base(opts.Name) != opts.Name || opts.Name == "." || opts.Name == ".." {
		return "", "", fmt.Errorf("%w: node name %q cannot name a file", ErrCredentials, opts.Name)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := randSerial()
	if err != nil {
		return "", "", err
	}
	notAfter := now.AddDate(0, 0, opts.Days)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:   serial,
		Subject:        pkix.Name{CommonName: opts.Name, Organization: []string{"Crawlnode"}},
		NotBefore:      now.Add(-time.Minute),
		NotAfter:       notAfter,
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:           []*url.URL{NodeURI(opts.Name)},
		IPAddresses:    opts.IPs,
		DNSNames:       opts.DNS,
		SubjectKeyId:   keyID(&key.PublicKey),
		AuthorityKeyId: ca.Cert.SubjectKeyId,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return "", "", err
	}
	certPath = filepath.Join(dir, opts.Name+"-cert.pem")
	keyPath = filepath.Join(dir, opts.Name+"-key.pem")
	return certPath, keyPath, writePair(certPath, keyPath, der, key)
}

// writePair writes a certificate (0644) and its key (0600), refusing to overwrite.
func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	for _, p := range []string{certPath, keyPath} {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%w: %s exists; remove it first or choose another directory", ErrCredentials, p)
		}
	}
	if err := writeNew(keyPath, pemBlock("EC PRIVATE KEY", keyDER), 0o600); err != nil {
		return err
	}
	if err := writeNew(certPath, pemBlock("CERTIFICATE", der), 0o644); err != nil {
		os.Remove(keyPath)
		return err
	}
	return nil
}

func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func randSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func keyID(pub *ecdsa.PublicKey) []byte {
	b, _ := x509.MarshalPKIXPublicKey(pub)
	s := sha256.Sum256(b)
	return s[:20]
}

func parseCert(b []byte) (*x509.Certificate, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no PEM certificate")
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
}

func parseKey(b []byte) (*ecdsa.PrivateKey, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no PEM private key")
		}
		switch blk.Type {
		case "EC PRIVATE KEY":
			return x509.ParseECPrivateKey(blk.Bytes)
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
			if err != nil {
				return nil, err
			}
			ek, ok := k.(*ecdsa.PrivateKey)
			if !ok {
				return nil, errors.New("the CA key is not ECDSA")
			}
			return ek, nil
		}
	}
}
