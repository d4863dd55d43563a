package clusterauth

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	k1, k2, other := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{3}, 32)
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	v, err := NewVerifier([][]byte{k1, k2}) // k2 being rotated out (or in)
	if err != nil {
		t.Fatal(err)
	}
	v.Now = clock
	signed := func(name string, key []byte, at time.Time, method, target string) *http.Request {
		s, err := NewSigner(name, key, func() time.Time { return at })
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(method, target, nil)
		r.RemoteAddr = "10.0.0.9:4000"
		s.Sign(r)
		return r
	}
	for _, tc := range []struct {
		name string
		r    *http.Request
		want error // nil: accepted as n2
	}{
		{"primary key", signed("n2", k1, now, "POST", "/internal/v1/links"), nil},
		{"second key of the ring", signed("n2", k2, now, "POST", "/internal/v1/links"), nil},
		{"within the skew", signed("n2", k1, now.Add(-MaxSkew+time.Second), "POST", "/internal/v1/links"), nil},
		{"another key", signed("n2", other, now, "POST", "/internal/v1/links"), ErrBadSignature},
		{"too old", signed("n2", k1, now.Add(-MaxSkew-time.Second), "POST", "/internal/v1/links"), ErrStale},
		{"from the future", signed("n2", k1, now.Add(MaxSkew+time.Second), "POST", "/internal/v1/links"), ErrStale},
		{"no credentials", httptest.NewRequest("POST", "/internal/v1/links", nil), ErrNoCredentials},
	} {
		name, err := v.Peer(tc.r)
		switch {
		case tc.want == nil && (err != nil || name != "n2"):
			t.Errorf("%s: %q %v, want n2", tc.name, name, err)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: %q %v, want %v", tc.name, name, err, tc.want)
		}
	}
	// A signature is good for its method, URI and name only.
	for _, tamper := range []func(r *http.Request){
		func(r *http.Request) { r.Method = "GET" },
		func(r *http.Request) { r.URL.Path = "/internal/v1/raft/apply" },
		func(r *http.Request) { r.URL.RawQuery = "x=1" },
		func(r *http.Request) { r.Header.Set(HeaderPeer, "n1") },
	} {
		r := signed("n2", k1, now, "POST", "/internal/v1/links")
		tamper(r)
		if _, err := v.Peer(r); !errors.Is(err, ErrBadSignature) {
			t.Errorf("tampered %s %s as %s: %v, want a bad signature", r.Method, r.URL, r.Header.Get(HeaderPeer), err)
		}
	}
	// The operator's bearer token is no cluster credential.
	r := httptest.NewRequest("POST", "/internal/v1/links", nil)
	r.Header.Set("Authorization", "Bearer anything")
	r.Header.Set(HeaderPeer, "n2")
	if _, err := v.Peer(r); err == nil {
		t.Error("a bearer token and a name passed")
	}
}

// Without a cluster key, a caller's name is believed from loopback only, unless the
// operator said the network is trusted (Insecure).
func TestKeylessModes(t *testing.T) {
	v, _ := NewVerifier(nil)
	s, _ := NewSigner("n2", nil, nil)
	req := func(remote string) *http.Request {
		r := httptest.NewRequest("POST", "/internal/v1/links", nil)
		r.RemoteAddr = remote
		s.Sign(r)
		return r
	}
	if name, err := v.Peer(req("127.0.0.1:5000")); err != nil || name != "n2" {
		t.Errorf("loopback: %q %v", name, err)
	}
	if name, err := v.Peer(req("[::1]:5000")); err != nil || name != "n2" {
		t.Errorf("loopback v6: %q %v", name, err)
	}
	if _, err := v.Peer(req("192.168.1.5:5000")); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("private address: %v, want refused", err)
	}
	if v.Mode() != "loopback" {
		t.Errorf("mode %s", v.Mode())
	}
	v.Insecure = true
	if name, err := v.Peer(req("192.168.1.5:5000")); err != nil || name != "n2" {
		t.Errorf("insecure: %q %v", name, err)
	}
	r := httptest.NewRequest("POST", "/internal/v1/links", nil)
	if _, err := v.Peer(r); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("no name: %v", err)
	}
}

// Require answers 401 to strangers and 403 to authenticated non-members, and hands the
// caller's name to the route.
func TestRequire(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 32)
	v, _ := NewVerifier([][]byte{key})
	var got string
	h := v.Require(func(n string) bool { return n == "n2" }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = PeerFrom(r.Context())
	}))
	for _, tc := range []struct {
		name string
		want int
	}{{"n2", 200}, {"n9", 403}, {"", 401}} {
		r := httptest.NewRequest("GET", "/internal/v1/idle", nil)
		if tc.name != "" {
			s, _ := NewSigner(tc.name, key, nil)
			s.Sign(r)
		}
		rec := httptest.NewRecorder()
		got = ""
		h.ServeHTTP(rec, r)
		if rec.Code != tc.want || (tc.want == 200 && got != tc.name) || (tc.want != 200 && got != "") {
			t.Errorf("%q: %d, route saw %q; want %d", tc.name, rec.Code, got, tc.want)
		}
	}
}

// TestRotation: a rotation moves the signer's key (SetKey: the new primary) and the
// verifier's ring (SetKeys) while requests go on: during the rotation both keys verify,
// after it only the new one, and a bad key leaves the old ring in place.
func TestRotation(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	s, err := NewSigner("n1", oldKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier([][]byte{oldKey})
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string, want error) {
		t.Helper()
		r := httptest.NewRequest("POST", "/internal/v1/links", nil)
		r.RemoteAddr = "10.0.0.9:4000"
		s.Sign(r)
		name, err := v.Peer(r)
		if !errors.Is(err, want) || (want == nil && name != "n1") {
			t.Errorf("%s: %q %v, want %v", step, name, err, want)
		}
	}
	check("before", nil)
	if err := v.SetKeys([][]byte{oldKey, newKey}); err != nil { // install
		t.Fatal(err)
	}
	check("installed", nil)
	if err := s.SetKey(newKey); err != nil { // use
		t.Fatal(err)
	}
	check("new primary", nil)
	if err := v.SetKeys([][]byte{newKey}); err != nil { // remove the old one
		t.Fatal(err)
	}
	check("old removed", nil)
	if err := s.SetKey(oldKey); err != nil {
		t.Fatal(err)
	}
	check("signed with the removed key", ErrBadSignature)
	if err := v.SetKeys([][]byte{newKey, {}}); err == nil {
		t.Error("SetKeys took an empty key")
	}
	if !v.Keyed() {
		t.Error("a refused SetKeys dropped the ring")
	}
}
