package node

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/crawlnode/crawlnode/cluster"
)

// The API serves before a clustered node has joined; the cluster endpoints answer 503
// until then instead of touching the Raft controller that does not exist yet (GET
// /v1/cluster a few ms after the start used to panic on a nil controller). The internal
// routes' twin is cluster's TestInternalRoutesBeforeStart.
func TestClusterEndpointsBeforeStart(t *testing.T) {
	n := &Node{cl: &cluster.Cluster{}}
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		req  *http.Request
	}{
		{"GET /v1/cluster", n.cluster, httptest.NewRequest("GET", "/v1/cluster", nil)},
		{"POST /v1/node/leave", n.leaveHandler, httptest.NewRequest("POST", "/v1/node/leave", nil)},
	} {
		rec := httptest.NewRecorder()
		tc.h(rec, tc.req)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s before start: %d %s, want 503", tc.name, rec.Code, rec.Body)
		}
	}
}

// The profiling endpoints are served only with Config.Pprof: a profile costs the node CPU
// while it runs, and they are not for the public. With an API token they need it, though
// they are GETs; a CPU profile comes back as one.
func TestPprofOnlyWhenAsked(t *testing.T) {
	get := func(h http.Handler, path, auth string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	handler := func(cfg Config) http.Handler {
		n := &Node{cfg: cfg, cl: &cluster.Cluster{}}
		n.met = &metrics{reg: prometheus.NewRegistry()}
		return n.handler(false)
	}
	paths := []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol", "/debug/pprof/goroutine?debug=1"}
	off, on := handler(Config{}), handler(Config{Pprof: true})
	for _, path := range paths {
		if rec := get(off, path, ""); rec.Code != http.StatusNotFound {
			t.Errorf("without Pprof: GET %s: %d, want 404", path, rec.Code)
		}
		if rec := get(on, path, ""); rec.Code != http.StatusOK {
			t.Errorf("with Pprof: GET %s: %d %s, want 200", path, rec.Code, rec.Body)
		}
	}
	rec := get(on, "/debug/pprof/profile?seconds=1", "")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/octet-stream" || rec.Body.Len() == 0 {
		t.Errorf("CPU profile: %d %q, %d bytes", rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
	}
	guarded := handler(Config{Pprof: true, APIToken: "s3cret"})
	for _, path := range paths {
		if rec := get(guarded, path, ""); rec.Code != http.StatusUnauthorized {
			t.Errorf("with a token, no Authorization: GET %s: %d, want 401", path, rec.Code)
		}
		if rec := get(guarded, path, "Bearer wrong"); rec.Code != http.StatusUnauthorized {
			t.Errorf("with a token, a wrong one: GET %s: %d, want 401", path, rec.Code)
		}
		if rec := get(guarded, path, "Bearer s3cret"); rec.Code != http.StatusOK {
			t.Errorf("with the token: GET %s: %d, want 200", path, rec.Code)
		}
	}
	if rec := get(guarded, "/no-such-route", ""); rec.Code != http.StatusNotFound {
		t.Errorf("with a token, another GET without one: %d, want 404 (other reads stay open)", rec.Code)
	}
}
