package cluster

import (
	"errors"
	"strings"
	"testing"

	"github.com/crawlnode/crawlnode/internal/peerauth"
)

func TestCheckExposure(t *testing.T) {
	key := make([]byte, 32)
	creds := &peerauth.Creds{}
	for _, tc := range []struct {
		name     string
		cfg      Config
		internal string
		refused  bool
	}{
		{"loopback test cluster", Config{BindAddr: "127.0.0.1:7946", RaftAddr: "127.0.0.1:7947"}, "127.0.0.1:7070", false},
		{"localhost api", Config{BindAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0"}, "localhost:7070", false},
		{"gossip on all interfaces", Config{BindAddr: "0.0.0.0:7946", RaftAddr: "127.0.0.1:7947"}, "127.0.0.1:7070", true},
		{"raft on a LAN address", Config{BindAddr: "127.0.0.1:7946", RaftAddr: "10.0.0.5:7947"}, "", true},
		{"internal endpoints exposed", Config{BindAddr: "127.0.0.1:7946", RaftAddr: "127.0.0.1:7947"}, "0.0.0.0:8080", true},
		{"key only", Config{BindAddr: "0.0.0.0:7946", RaftAddr: "0.0.0.0:7947", ClusterKey: key}, "0.0.0.0:8081", true},
		{"TLS only", Config{BindAddr: "0.0.0.0:7946", RaftAddr: "0.0.0.0:7947", TLS: creds}, "0.0.0.0:8081", true},
		{"key and TLS", Config{BindAddr: "0.0.0.0:7946", RaftAddr: "0.0.0.0:7947", ClusterKey: key, TLS: creds}, "0.0.0.0:8081", false},
		{"insecure by choice", Config{BindAddr: "0.0.0.0:7946", RaftAddr: "0.0.0.0:7947", InsecureCluster: true}, "0.0.0.0:8080", false},
	} {
		err := tc.cfg.CheckExposure(tc.internal)
		if (err != nil) != tc.refused {
			t.Errorf("%s: %v, refused want %v", tc.name, err, tc.refused)
		}
		if err != nil {
			if !errors.Is(err, ErrInsecure) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "--insecure-cluster") {
				t.Errorf("%s: error %q: want one line wrapping ErrInsecure that names --insecure-cluster", tc.name, err)
			}
		}
	}
}

func TestParseKey(t *testing.T) {
	for _, s := range []string{"AAAAAAAAAAAAAAAAAAAAAA==", "AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"} {
		if _, err := ParseKey(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"", "not base64!", "AAAA"} {
		if _, err := ParseKey(s); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%q: %v, want ErrBadConfig", s, err)
		}
	}
}
