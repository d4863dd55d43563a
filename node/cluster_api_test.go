package node

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/crawlnode/crawlnode/control"
)

// The API serves before a clustered node has joined; the cluster endpoints answer 503
// until then instead of touching the Raft controller that does not exist yet (GET
// /v1/cluster a few ms after the start used to panic on a nil controller).
func TestClusterEndpointsBeforeStart(t *testing.T) {
	n := &Node{cl: &cluster{}}
	cmd, err := control.Encode(control.RemoveMember{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		req  *http.Request
	}{
		{"GET /v1/cluster", n.cluster, httptest.NewRequest("GET", "/v1/cluster", nil)},
		{"POST /v1/node/leave", n.leaveHandler, httptest.NewRequest("POST", "/v1/node/leave", nil)},
		{"POST /internal/v1/raft/apply", n.cl.applyHandler, httptest.NewRequest("POST", "/internal/v1/raft/apply", bytes.NewReader(cmd))},
	} {
		rec := httptest.NewRecorder()
		tc.h(rec, tc.req)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s before start: %d %s, want 503", tc.name, rec.Code, rec.Body)
		}
	}
}

// The profiling endpoints are served only with Config.Pprof: a profile costs the node CPU
// while it runs, and they are not for the public.
func TestPprofOnlyWhenAsked(t *testing.T) {
	for _, on := range []bool{false, true} {
		n := &Node{cfg: Config{Pprof: on}, cl: &cluster{}}
		n.met = &metrics{reg: prometheus.NewRegistry()}
		h := n.handler(false)
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			if want := map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[on]; rec.Code != want {
				t.Errorf("Pprof %v: GET %s: %d, want %d", on, path, rec.Code, want)
			}
		}
	}
}
