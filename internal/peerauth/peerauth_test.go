package peerauth

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// pki makes a CA in dir and certificates for names; it returns the CA path and the
// credentials by name.
func pki(t *testing.T, dir string, names ...string) (string, map[string]*Creds) {
	t.Helper()
	now := time.Now()
	caCert, caKey, err := NewCA(dir, 30, now)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := LoadCA(caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Creds{}
	for _, n := range names {
		cp, kp, err := ca.NewNodeCert(dir, NodeCertOptions{Name: n, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}, now)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Load(caCert, cp, kp)
		if err != nil {
			t.Fatal(err)
		}
		if c.Name() != n {
			t.Fatalf("name %q, want %q", c.Name(), n)
		}
		out[n] = c
	}
	return caCert, out
}

func TestFilesAndModes(t *testing.T) {
	dir := t.TempDir()
	pki(t, dir, "node-a")
	for f, mode := range map[string]os.FileMode{"crawlnode-ca-key.pem": 0o600, "node-a-key.pem": 0o600, "crawlnode-ca.pem": 0o644, "node-a-cert.pem": 0o644} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", f, st.Mode().Perm(), mode)
		}
	}
	if _, _, err := NewCA(dir, 30, time.Now()); !errors.Is(err, ErrCredentials) {
		t.Errorf("second CA in the same dir: %v, want ErrCredentials (no overwrite)", err)
	}
}

func TestLoadRefusesCertFromAnotherCA(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	caA, _ := pki(t, a)
	pki(t, b, "n1")
	if _, err := Load(caA, filepath.Join(b, "n1-cert.pem"), filepath.Join(b, "n1-key.pem")); !errors.Is(err, ErrCredentials) {
		t.Fatalf("Load with a foreign CA: %v, want ErrCredentials", err)
	}
}

// TestMiddleware: a request reaches the handler only from a certificate of the cluster's
// CA that names the member the request speaks for.
func TestMiddleware(t *testing.T) {
	dir := t.TempDir()
	_, creds := pki(t, dir, "server", "alice", "bob")
	_, other := pki(t, t.TempDir(), "alice")

	var got Peer
	h := Middleware(true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = FromRequest(r)
		io.WriteString(w, "ok")
	}))
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = creds["server"].ServerTLS(false)
	srv.StartTLS()
	defer srv.Close()

	do := func(c *Creds, claim string) (int, error) {
		tr := c.Transport()
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/internal/x", nil)
		if claim != "" {
			SetMember(req, claim)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	got = Peer{}
	if code, err := do(creds["alice"], "alice"); err != nil || code != 200 || got != (Peer{Name: "alice", Verified: true}) {
		t.Fatalf("alice as alice: %d %v peer %+v", code, err, got)
	}
	got = Peer{}
	if code, err := do(creds["alice"], "bob"); err != nil || code != http.StatusForbidden || got != (Peer{}) {
		t.Fatalf("alice speaking for bob: %d %v peer %+v, want 403", code, err, got)
	}
	if code, err := do(creds["alice"], ""); err != nil || code != http.StatusForbidden {
		t.Fatalf("alice without a name: %d %v, want 403", code, err)
	}
	// A certificate from another CA: the client refuses the server (unknown CA) and the
	// server would refuse the client; either way nothing reaches the handler.
	got = Peer{}
	if code, err := do(other["alice"], "alice"); err == nil || got != (Peer{}) {
		t.Fatalf("alice of another CA: %d %v peer %+v, want a failed handshake", code, err, got)
	}
	// No client certificate at all (a plain TLS client trusting the server).
	plain := srv.Client()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/internal/x", nil)
	SetMember(req, "alice")
	plainTr := &http.Transport{TLSClientConfig: creds["server"].ClientTLS().Clone()}
	plainTr.TLSClientConfig.Certificates = nil
	plain.Transport = plainTr
	resp, err := plain.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	plainTr.CloseIdleConnections()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("no client certificate: %d, want 403", resp.StatusCode)
	}
}

// TestForeignClientRefusedByServer: a client presenting a certificate of another CA while
// trusting the server is refused in the handshake (RequireAndVerifyClientCert).
func TestForeignClientRefusedByServer(t *testing.T) {
	_, creds := pki(t, t.TempDir(), "server")
	_, other := pki(t, t.TempDir(), "mallory")
	reached := false
	srv := httptest.NewUnstartedServer(Middleware(true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true })))
	srv.TLS = creds["server"].ServerTLS(true)
	srv.StartTLS()
	defer srv.Close()
	cfg := other["mallory"].ClientTLS()
	cfg.VerifyConnection = nil // mallory trusts anything; the server must still refuse her
	tr := &http.Transport{TLSClientConfig: cfg}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/internal/x", nil)
	SetMember(req, "mallory")
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err == nil {
		resp.Body.Close()
	}
	if err == nil || reached {
		t.Fatalf("foreign client: err %v reached %v, want a refused handshake", err, reached)
	}
}

func TestInsecureMiddlewareTakesTheClaim(t *testing.T) {
	var got Peer
	h := Middleware(false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got, _ = FromRequest(r) }))
	req := httptest.NewRequest(http.MethodPost, "/internal/v1/links", nil)
	SetMember(req, "n1")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if got != (Peer{Name: "n1"}) {
		t.Fatalf("peer %+v", got)
	}
	if !SpeaksFor(req.WithContext(WithPeer(req.Context(), got)), "n1") || SpeaksFor(req, "n1") {
		t.Fatal("SpeaksFor")
	}
}
