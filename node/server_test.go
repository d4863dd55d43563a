package node

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/crawlnode/crawlnode/cluster"
	"github.com/crawlnode/crawlnode/internal/clusterauth"
)

// The node's public handler takes its token, profiling switch and metrics from Config
// (the checks themselves are package api's tests), and the node-to-node routes join it
// only when they have no listener of their own.
func TestAPIHandlerWiring(t *testing.T) {
	get := func(h http.Handler, path, auth string) int {
		req := httptest.NewRequest("GET", path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	handler := func(cfg Config, withInternal bool) http.Handler {
		v, _ := clusterauth.NewVerifier(nil)
		n := &Node{cfg: cfg, cluster: &cluster.Cluster{}, verifier: v}
		n.metrics = &metrics{reg: prometheus.NewRegistry()}
		return n.handler(withInternal)
	}
	for _, tc := range []struct {
		name         string
		cfg          Config
		withInternal bool
		path, auth   string
		want         int
	}{
		{"metrics", Config{}, false, "/metrics", "", http.StatusOK},
		{"no pprof", Config{}, false, "/debug/pprof/cmdline", "", http.StatusNotFound},
		{"pprof", Config{Pprof: true}, false, "/debug/pprof/cmdline", "", http.StatusOK},
		{"pprof, token missing", Config{Pprof: true, APIToken: "s3cret"}, false, "/debug/pprof/cmdline", "", http.StatusUnauthorized},
		{"pprof, token", Config{Pprof: true, APIToken: "s3cret"}, false, "/debug/pprof/cmdline", "Bearer s3cret", http.StatusOK},
		{"internal apart", Config{}, false, "/internal/v1/raft/index", "", http.StatusNotFound},
		{"internal joined, no cluster credentials", Config{}, true, "/internal/v1/raft/index", "", http.StatusUnauthorized},
		{"internal joined, the operator token opens nothing", Config{APIToken: "s3cret"}, true, "/internal/v1/raft/index", "Bearer s3cret", http.StatusUnauthorized},
	} {
		if got := get(handler(tc.cfg, tc.withInternal), tc.path, tc.auth); got != tc.want {
			t.Errorf("%s: GET %s: %d, want %d", tc.name, tc.path, got, tc.want)
		}
	}
}
